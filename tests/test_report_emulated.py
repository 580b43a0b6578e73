"""`commbench report` of runs measured on `commbench emulate`: the plots' captions said EMULATED, but README.md
("All numbers are measured."), its tables and the printed tables did not; a reader of the report took the
emulator's loopback and tbf links for a real network. Now every place the numbers appear says so."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.records import JsonlWriter, Measurement, RunHeader

EMULATED = {"emulated": True, "tool": "commbench emulate", "num_racks": 2, "ranks_per_rack": 1,
            "scale_out_rate_bits_per_s": 2e8}


def _write(path, run_id: str, emulated: dict | None, host: str) -> None:
    with JsonlWriter(path) as writer:
        writer.write(RunHeader(run_id=run_id, started_at="2026-12-03T00:00:00+00:00", argv=[], commbench_version="0",
                               python_version="3", torch_version=None, nccl_version=None, cuda_version=None,
                               cupy_version=None, backend="gloo", world_size=2, hostnames=[host, host],
                               devices=["cpu"] * 2, nccl_env={}, launcher="torchrun", emulated=emulated))
        for p in (20, 21):
            writer.write(Measurement(run_id=run_id, collective="sendrecv", backend="gloo", size_bytes=1 << p,
                                     count=(1 << p) // 4, dtype="float32", op=None, in_place=False, world_size=2,
                                     group_size=2, iters=3, warmup_iters=1, time_us_median=80000.0 * (p - 19),
                                     algbw_gbps=(1 << p) / (80000.0 * (p - 19)) / 1e3,
                                     busbw_gbps=(1 << p) / (80000.0 * (p - 19)) / 1e3, num_wrong=0))


def test_emulated_runs_are_said_in_readme_and_tables(tmp_path):
    results = tmp_path / "em.jsonl"
    _write(results, "emu", EMULATED, "vm")
    result = CliRunner().invoke(app, ["report", str(results), "-O", str(tmp_path / "report")],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    title = next(line for line in result.output.splitlines() if line.startswith("sendrecv"))
    assert "EMULATED" in title
    readme = (tmp_path / "report" / "README.md").read_text()
    assert "All numbers are measured." not in readme
    assert "EMULATED" in readme.split("##", 1)[0]                       # the summary line says it
    assert "### gloo float32 n=2 (EMULATED fabric" in readme            # and the table's heading


def test_real_runs_stay_unmarked_beside_emulated_ones(tmp_path):
    real, emulated = tmp_path / "real.jsonl", tmp_path / "em.jsonl"
    _write(real, "real", None, "vm")
    _write(emulated, "emu", EMULATED, "vm")
    result = CliRunner().invoke(app, ["report", str(real), str(emulated), "-O", str(tmp_path / "report")],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    titles = [line for line in result.output.splitlines() if line.startswith("sendrecv")]
    assert len(titles) == 2 and sum("emulated" in t.lower() for t in titles) == 1
    headings = [line for line in (tmp_path / "report" / "README.md").read_text().splitlines()
                if line.startswith("### ")]
    assert len(headings) == 2 and sum("emulated" in h.lower() for h in headings) == 1


def test_emulated_curve_is_said_in_the_plot_legend(tmp_path, monkeypatch):
    """The legend of an emulated run's curve read 'measured (median time): gloo float32 n=2' like a real network's,
    only the caption saying 'EMULATED fabric' of a run, not of which curve; now the legend entry says it."""
    from commbench.results.plots import Series
    from commbench.results import report as report_mod

    results = tmp_path / "em.jsonl"
    _write(results, "emu", EMULATED, "vm")
    drawn: list[Series] = []
    real_busbw = report_mod.busbw_figure

    def spy(collective, series, note=""):
        drawn.extend(series)
        return real_busbw(collective, series, note)

    monkeypatch.setattr(report_mod, "busbw_figure", spy)
    result = CliRunner().invoke(app, ["report", str(results), "-O", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    assert [s.label for s in drawn] == ["gloo float32 n=2 (EMULATED fabric: 2 racks x 1 ranks, 0.2 Gbit/s per rack uplink)"]


def _emulated_profile(tmp_path, name: str, num_racks: int, ranks_per_rack: int):
    """A fabric profile fitted on a 2-rank gloo all_reduce run that `commbench emulate` measured (its header's
    `emulated`), written to tmp_path/name."""
    results, fabric = tmp_path / "em.jsonl", tmp_path / name
    with JsonlWriter(results) as writer:
        writer.write(RunHeader(run_id="emu", started_at="2026-12-03T00:00:00+00:00", argv=[], commbench_version="0",
                               python_version="3", torch_version=None, nccl_version=None, cuda_version=None,
                               cupy_version=None, backend="gloo", world_size=2, hostnames=["vm", "vm"],
                               devices=["cpu"] * 2, nccl_env={}, launcher="torchrun",
                               emulated=dict(EMULATED, num_racks=num_racks, ranks_per_rack=ranks_per_rack)))
        for p in range(10, 22):
            writer.write(Measurement(run_id="emu", collective="all_reduce", backend="gloo", size_bytes=1 << p,
                                     count=(1 << p) // 4, dtype="float32", op="sum", in_place=False, world_size=2,
                                     group_size=2, iters=3, warmup_iters=1,
                                     time_us_median=100.0 + (1 << p) / 2e3))
    assert CliRunner().invoke(app, ["fit", str(results), "-O", str(fabric)]).exit_code == 0
    return results, fabric


def test_predict_on_a_profile_fitted_on_emulated_runs_says_so_in_its_title(tmp_path):
    """predict's title read 'all_reduce (predicted, 2 ranks, ..., fitted from fitted:em.jsonl; ...)' for a profile
    fitted on `commbench emulate` runs: only a fit warning further down said the links were the emulator's."""
    results, fabric = _emulated_profile(tmp_path, "fabric.json", 1, 2)
    result = CliRunner().invoke(app, ["predict", "--fabric", str(fabric), "-c", "all_reduce", "-g", "2",
                                      "-b", "1K", "-e", "1M"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    title = " ".join(result.output.split()).split("all_reduce (predicted", 1)[1].split(")", 1)[0]
    assert "EMULATED" in title, result.output


def test_report_with_a_profile_fitted_on_an_emulated_fabric_says_its_dashed_lines_are_the_emulators(tmp_path):
    """`report real.jsonl --fabric fab_emu.json` drew the emulator's curve under a real run as 'predicted: gloo
    float32 n=2' with 'dashed lines are predicted from fab_emu.json': nothing said the profile was fitted on
    `commbench emulate` (predict and plan say it; found from outside, probe AM F5). Now the terminal, README.md and the
    figures' caption say it."""
    results, fabric = _emulated_profile(tmp_path, "fab_emu.json", 2, 1)
    from tests.test_compare import A   # a real 2-rank gloo all_reduce run
    out = tmp_path / "rep"
    result = CliRunner().invoke(app, ["report", str(A), "--fabric", str(fabric), "-O", str(out)],
                                env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    said = [line for line in result.output.splitlines() if line.startswith("warning: --fabric")]
    assert len(said) == 1 and "fab_emu.json" in said[0] and "EMULATED" in said[0], result.output
    readme = (out / "README.md").read_text()
    dashed = next(line for line in readme.splitlines() if "dashed lines are predicted from" in line)
    assert "EMULATED" in dashed.split("dashed lines are predicted from", 1)[1], dashed
