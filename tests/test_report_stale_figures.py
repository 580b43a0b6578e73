"""report into a folder an earlier report wrote: the earlier report's figures that this one does not draw (a
collective no longer in the data, SVGs from an earlier --svg) were left beside the new README, stale plots in what
looks like one report. They are removed, and said; any other file in the folder is left alone."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app
from tests.test_report import DATA


def _report(tmp_path, log: str, *extra: str):
    results = tmp_path / f"{log}.jsonl"
    if not results.exists():
        assert CliRunner().invoke(app, ["import", "nccl-tests", str(DATA / log), "-O", str(results)]).exit_code == 0
    return CliRunner().invoke(app, ["report", str(results), "-O", str(tmp_path / "rep"), *extra])


def test_a_second_report_removes_the_figures_only_the_first_drew(tmp_path):
    first = _report(tmp_path, "multi-collective-2.14.log", "--svg")
    assert first.exit_code == 0, first.output
    (tmp_path / "rep" / "notes.txt").write_text("mine")
    (tmp_path / "rep" / "mine.png").write_bytes(b"not a report's")
    second = _report(tmp_path, "all_reduce_perf-2018.log")
    assert second.exit_code == 0, second.output
    names = sorted(p.name for p in (tmp_path / "rep").iterdir())
    assert names == ["README.md", "all_reduce-busbw.png", "all_reduce-latency.png", "mine.png", "notes.txt"], names
    assert "removed 8 figure(s) of the earlier report" in second.output, second.output
