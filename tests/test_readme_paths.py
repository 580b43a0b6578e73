"""The README's paths end to end through the CLI: fit then report --fabric on a multi-rack run, tune's
fabric.json re-planned by plan --system, and --resume on a finished sweep."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

runner = CliRunner()
ENV = {"COLUMNS": "250"}


@pytest.fixture(scope="module")
def two_racks(tmp_path_factory):
    """4 gloo ranks in 2 racks of 2: the fitted fabric's domain holds 2 ranks, the world group 4. Sizes 128 KiB to
    64 MiB: at 1..64 KiB gloo's time is latency alone, which on a loaded host need not grow with size, and fit then
    refuses a curve without a bandwidth (exit 2; seen in a loaded full-suite run); beside busy jobs (load average 10
    on 2 cores) even 4 MiB's fastest iteration stayed within its noise (49 ms of it). The sweep once read "-b 1K -e
    16M -f 8", which stops at 4 MiB (1K x 8^4; 32 MiB is past -e): it now reaches 64 MiB, where the bandwidth term is
    well above the latency and the load's noise."""
    folder = tmp_path_factory.mktemp("racks")
    results = folder / "ci.jsonl"
    made = runner.invoke(app, ["bench", "all_reduce", "--nproc", "4", "--ranks-per-rack", "2", "-b", "128K", "-e",
                               "64M", "-f", "8", "-n", "5", "-w", "1", "--backend", "gloo", "-J", str(results)], env=ENV)
    assert made.exit_code == 0, made.output
    return folder, results


@pytest.mark.timeout(300)
def test_fit_then_report_with_the_fitted_fabric(two_racks):
    folder, results = two_racks
    fitted = runner.invoke(app, ["fit", str(results), "-O", str(folder / "fab.json")], env=ENV)
    assert fitted.exit_code == 0, fitted.output
    report = runner.invoke(app, ["report", str(results), "--fabric", str(folder / "fab.json"), "-O",
                                 str(folder / "report")], env=ENV)
    assert report.exit_code == 0, report.output
    assert "predicted from" in (folder / "report" / "README.md").read_text()


def _plan_line(output: str) -> str:
    return re.search(r"Plan \(predicted\): [^\n]*", output).group(0)


@pytest.mark.timeout(300)
def test_tunes_fabric_is_replanned_by_plan_system(two_racks):
    folder, results = two_racks
    out = folder / "tune"
    tuned = runner.invoke(app, ["tune", "--results", str(results), "--out", str(out), "--gpus", "64", "--gbs", "512"],
                          env=ENV)
    assert tuned.exit_code == 0, tuned.output
    assert (out / "fabric.json").exists() and (out / "fabric-measured.json").exists()
    again = runner.invoke(app, ["plan", "--system", str(out / "fabric.json"), "--model", "deepseek-v3", "--gpus", "64",
                                "--gbs", "512", "--precision", "mxfp8"], env=ENV)
    assert again.exit_code == 0, again.output
    assert _plan_line(again.output) == _plan_line(tuned.output)


def _no_ranks(*args, **kwargs):
    raise AssertionError("ranks were started")


@pytest.mark.timeout(300)
def test_resume_on_a_finished_sweep_has_nothing_to_do(tmp_path, monkeypatch):
    """Without starting a rank: their rendezvous is what failed on a loaded machine."""
    sweep = tmp_path / "s.toml"
    sweep.write_text('[sweep]\nname = "s"\nnproc = 2\nbackend = "gloo"\n[[run]]\ncollective = "all_reduce"\n'
                     'sizes = ["1K", "4K"]\niters = 2\n')
    output = tmp_path / "s.jsonl"
    first = runner.invoke(app, ["sweep", str(sweep), "-O", str(output)], env=ENV)
    assert first.exit_code == 0, first.output
    before = output.read_bytes()
    monkeypatch.setattr("commbench.comm.job.run_job", _no_ranks)
    again = runner.invoke(app, ["sweep", str(sweep), "-O", str(output), "--resume"], env=ENV)
    assert again.exit_code == 0 and "nothing to do" in again.output, (again.output, again.exception)
    assert output.read_bytes() == before
