"""report: points of one run that differ only in reduction op or in timed iterations (a sweep with an
all_reduce sum entry and a max entry, or one size at two `iters`) are separate curves and tables, never
one zig-zag line holding each size twice."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from commbench.results.report import by_collective, series_labels, write_report  # noqa: E402
from commbench.results.records import Measurement  # noqa: E402


def record(size: int, op: str = "sum", iters: int = 5, busbw: float = 1.0) -> Measurement:
    return Measurement(run_id="r1", collective="all_reduce", backend="gloo", size_bytes=size, count=size // 4,
                       dtype="float32", op=op, in_place=True, world_size=2, group_size=2, iters=iters,
                       warmup_iters=1, time_us_median=size / busbw / 1e3, algbw_gbps=busbw, busbw_gbps=busbw,
                       num_wrong=0)


def test_sum_and_max_are_two_curves_named_by_op(tmp_path):
    rows = [record(1024, "sum", busbw=1.0), record(1024, "max", busbw=2.0),
            record(8192, "sum", busbw=3.0), record(8192, "max", busbw=4.0)]
    series = by_collective(rows)["all_reduce"]
    assert len(series) == 2 and all(len(r) == 2 for r in series.values())
    labels = sorted(series_labels(series).values())
    assert labels == ["gloo float32 n=2 in-place", "gloo float32 n=2 in-place op=max"]

    import matplotlib.pyplot as plt
    from commbench.results import report as report_module

    drawn = {}
    real = report_module.busbw_figure

    def spy(collective, curves, note=""):
        fig = real(collective, curves, note)
        drawn.update({line.get_label(): list(line.get_ydata()) for line in fig.axes[0].get_lines()})
        return fig

    report_module.busbw_figure = spy
    try:
        write_report(rows, tmp_path, sources=["x"])
    finally:
        report_module.busbw_figure = real
        plt.close("all")
    assert drawn == {"measured (median time): gloo float32 n=2 in-place": [1.0, 3.0],
                     "measured (median time): gloo float32 n=2 in-place op=max": [2.0, 4.0]}
    md = (tmp_path / "README.md").read_text()
    assert "### gloo float32 n=2 in-place op=max" in md and md.count("| 1 KiB |") == 2


def test_two_iteration_counts_are_two_curves_told_apart():
    rows = [record(1024, iters=5), record(1024, iters=50), record(8192, iters=5), record(8192, iters=50)]
    series = by_collective(rows)["all_reduce"]
    assert sorted(series_labels(series).values()) == ["gloo float32 n=2 in-place iters=5",
                                                      "gloo float32 n=2 in-place iters=50"]
    assert all([m.size_bytes for m in r] == [1024, 8192] for r in series.values())


def test_failed_and_wrong_points_are_named_by_curve_on_the_terminal_and_in_the_markdown(tmp_path):
    import dataclasses

    from typer.testing import CliRunner

    from commbench.cli.app import app
    from commbench.results.records import JsonlWriter

    def bcast(size: int, root: int, **changes) -> Measurement:
        m = dataclasses.replace(record(size), collective="broadcast", op=None, params={"root": root})
        return dataclasses.replace(m, **changes)

    failed = dict(status="failed", error="RuntimeError: boom", time_us_median=None, algbw_gbps=None, busbw_gbps=None,
                  num_wrong=None)
    path = tmp_path / "r.jsonl"
    with JsonlWriter(path) as writer:
        for m in (bcast(1024, 0), bcast(8192, 0), bcast(1024, 1), bcast(8192, 1, num_wrong=3), bcast(4096, 1, **failed)):
            writer.write(m)
    result = CliRunner().invoke(app, ["report", str(path), "-O", str(tmp_path / "rep")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert ("no measurement (not drawn, not in the tables): broadcast gloo float32 n=2 in-place root=1 4 KiB: failed "
            "(RuntimeError: boom) (run r1)") in text
    assert "wrong data (not drawn, not in the tables): broadcast gloo float32 n=2 in-place root=1 8 KiB: #wrong 3" in text
    md = (tmp_path / "rep" / "README.md").read_text()
    assert "- broadcast gloo float32 n=2 in-place root=1 4 KiB: failed (RuntimeError: boom) (run r1)" in md


def test_a_curve_measured_without_the_data_check_is_marked_unchecked(tmp_path):
    """-c 0 points (num_wrong None: never verified) were drawn and tabled like checked data; the curve's label, its
    Markdown heading and a note now say they are unchecked, and a checked curve says nothing."""
    import dataclasses

    from commbench.results.report import curve_label, unchecked_mark

    checked = [record(1024), record(8192)]
    unchecked = [dataclasses.replace(m, op="max", num_wrong=None) for m in checked]
    assert unchecked_mark(checked) == "" and unchecked_mark(unchecked) == " (unchecked: -c 0)"
    assert unchecked_mark([checked[0], unchecked[1]]) == " (1 of 2 points unchecked: -c 0)"
    assert curve_label("gloo", "", unchecked).endswith("(unchecked: -c 0)")
    files = write_report(checked + unchecked, tmp_path / "out", sources=["r.jsonl"])
    text = files.markdown.read_text()
    assert "### gloo float32 n=2 in-place op=max (unchecked: -c 0)" in text
    assert "### gloo float32 n=2 in-place\n" in text and "## Unchecked points" in text
    only_checked = write_report(checked, tmp_path / "checked", sources=["r.jsonl"]).markdown.read_text()
    assert "Unchecked" not in only_checked and "unchecked" not in only_checked
