"""Every command that writes a file refuses, in one line and exit 2, --force or not, an output that is one of the files
it reads: the same path, a symlink to it or a hard link (files.refuse_writing_inputs). Probe P4/P5 (session 46):
`fit b.jsonl -O b.jsonl --force` exited 0 having replaced the measurements with a fabric profile naming the file it
destroyed, and `report D/README.md -O D --force` wrote over its input; only nccl-tuner refused. A walk over the
app's commands makes sure each option that names a written file has a case here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from commbench.cli.app import app
from tests.cli_commands import leaf_commands

SWEEP = Path(__file__).resolve().parents[1] / "sweeps" / "ci-small.toml"
runner = CliRunner()
DATA = b'{"record_type":"header","note":"the measurements: must survive"}\n'


def _input(tmp_path: Path, name: str, data: bytes = DATA) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


# (command, output option) -> args writing over an input; each gets tmp_path and returns (args, the input file)
def _bench(tmp):
    trace = _input(tmp, "routing.npy")
    return ["bench", "moe_all_to_all", "--nproc", "2", "--tokens", "8", "--routing", f"trace:{trace}", "-O",
            str(trace)], trace


def _sweep(tmp):
    sweep = _input(tmp, "s.toml", SWEEP.read_bytes())
    return ["sweep", str(sweep), "-O", str(sweep), "--resume"], sweep


def _fit(tmp):
    results = _input(tmp, "b.jsonl")
    return ["fit", str(results), "-O", str(results), "--force"], results


def _report(tmp):
    readme = _input(tmp, "D/README.md")
    return ["report", str(readme), "-O", str(readme.parent), "--force"], readme


def _plan(tmp):
    fabric = _input(tmp, "D/plan.json", b'{"a fabric": "profile"}\n')
    return ["plan", "--model", "deepseek-v3", "--system", str(fabric), "--gpus", "256", "-O", str(fabric.parent),
            "--force"], fabric


def _tune(tmp):
    results = _input(tmp, "D/fabric.json")
    return ["tune", "--results", str(results), "-O", str(results.parent), "--force"], results


def _import(tmp):
    log = _input(tmp, "log.txt", b"# nccl-tests log\n")
    return ["import", "nccl-tests", str(log), "-O", str(log)], log


def _calibrate(tmp):
    runs = _input(tmp, "runs.json", b"[]\n")
    return ["calibrate", str(runs), "-O", str(runs), "--force"], runs


def _nccl_tuner_out(tmp):
    results = _input(tmp, "b.jsonl")
    return ["nccl-tuner", str(results), "-O", str(results), "--force"], results


def _nccl_tuner_csv(tmp):
    results = _input(tmp, "b.jsonl")
    return ["nccl-tuner", str(results), "-O", str(tmp / "t.conf"), "--csv", str(results), "--force"], results


def _emulate(tmp):
    sweep = _input(tmp, "s.toml", SWEEP.read_bytes())
    return ["emulate", "--counters-out", str(sweep), "--", "sweep", str(sweep)], sweep


WRITERS = {("bench", "--out"): _bench, ("sweep", "--out"): _sweep, ("fit", "--out"): _fit,
           ("report", "--out"): _report, ("plan", "--out"): _plan, ("tune", "--out"): _tune,
           ("import nccl-tests", "--out"): _import, ("calibrate", "--out"): _calibrate,
           ("nccl-tuner", "--out"): _nccl_tuner_out, ("nccl-tuner", "--csv"): _nccl_tuner_csv,
           ("emulate", "--counters-out"): _emulate}
WRITING_OPTIONS = {"--out", "--csv", "--counters-out"}


def test_every_option_that_names_a_written_file_has_a_case_here():
    found = {(name, option) for name, cmd in leaf_commands(typer.main.get_command(app)) for param in cmd.params
             for option in param.opts if option in WRITING_OPTIONS}
    assert found == set(WRITERS), found ^ set(WRITERS)


def _refused(args: list[str], read: Path, before: bytes) -> str:
    result = runner.invoke(app, args, env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "would overwrite what the command reads (refused even with --force)" in lines[0], lines[0]
    assert read.read_bytes() == before
    return lines[0]


@pytest.mark.parametrize("writer", list(WRITERS), ids=[" ".join(key) for key in WRITERS])
def test_an_output_that_is_an_input_is_refused_and_the_input_kept(writer, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args, read = WRITERS[writer](tmp_path)
    line = _refused(args, read, read.read_bytes())
    assert f"{writer[1]}=" in line and "input" in line, line


@pytest.mark.parametrize("link", ["symlink", "hard link"])
def test_a_link_to_an_input_is_the_input(link, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results = _input(tmp_path, "b.jsonl")
    other = tmp_path / "other.jsonl"
    other.symlink_to(results) if link == "symlink" else os.link(results, other)
    line = _refused(["fit", str(results), "-O", str(other), "--force"], results, DATA)
    assert f"is the input {str(results)!r}" in line, line


def test_a_folder_writer_names_the_file_it_would_write(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args, readme = _report(tmp_path)
    line = _refused(args, readme, DATA)
    assert f"would write {str(readme)!r}, an input" in line, line
