"""report: PNG per collective (non-trivial), Markdown linking them, predicted overlay labelled."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.importers.nccl_tests import import_file
from commbench.results.report import write_report
from commbench.results.records import JsonlWriter, Measurement
from commbench.units import format_size

DATA = Path(__file__).parent / "data" / "nccl-tests"


def imported(tmp_path):
    out = tmp_path / "imported.jsonl"
    with JsonlWriter(out) as writer:
        for name in ("all_reduce_perf-2018.log", "multi-collective-2.14.log"):
            for rec in import_file(str(DATA / name)).records:
                writer.write(rec)
    return out


def test_cli_writes_pngs_and_markdown(tmp_path):
    results = imported(tmp_path)
    result = CliRunner().invoke(app, ["report", str(results), "--out", str(tmp_path / "rep")])
    assert result.exit_code == 0, result.output
    pngs = sorted((tmp_path / "rep").glob("*.png"))
    assert [p.name for p in pngs] == [f"{c}-{kind}.png" for c in ("all_gather", "all_reduce", "all_to_all")
                                      for kind in ("busbw", "latency")]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000 for p in pngs)
    md = (tmp_path / "rep" / "README.md").read_text()
    assert "![all_reduce busbw](all_reduce-busbw.png)" in md and "![all_reduce latency](all_reduce-latency.png)" in md
    assert "164.092" in md   # busbw from size and time (128 MiB in 1431.4 us, 8 ranks), printed 164.09
    assert "predicted" not in md


def test_predicted_overlay_is_labelled(tmp_path):
    records = [m for m in import_file(str(DATA / "all_reduce_perf-2018.log")).records if isinstance(m, Measurement)]
    calls = []

    def predict(collective, sizes, group_size, row, header):
        calls.append((collective, group_size))
        return 20e-6 + np.asarray(sizes) / 100e9

    files = write_report(records, tmp_path, sources=["x"], predict=predict, predicted_from="fabric.json")
    assert calls == [("all_reduce", 8), ("all_reduce", 8)] and files.plots[0].stat().st_size > 10_000
    assert [p.name for p in files.plots] == ["all_reduce-busbw.png", "all_reduce-latency.png"]
    assert "dashed lines are predicted from fabric.json" in files.markdown.read_text()


def test_repeated_runs_of_one_setup_are_separate_lines(tmp_path, monkeypatch):
    import dataclasses

    import commbench.results.report as report

    rows = [m for m in import_file(str(DATA / "all_reduce_perf-2018.log")).records
            if isinstance(m, Measurement) and not m.in_place]
    again = [dataclasses.replace(m, run_id="second") for m in rows]
    drawn = {}
    monkeypatch.setattr(report, "busbw_figure", lambda collective, curves, note: drawn.setdefault("curves", curves))
    monkeypatch.setattr(report, "latency_figure", lambda *args: None)
    monkeypatch.setattr(report, "save", lambda fig, stem, formats: [])
    report.plot_collective("all_reduce", report.by_collective(rows + again)["all_reduce"], tmp_path / "x")
    labels = [c.label for c in drawn["curves"]]
    assert len(labels) == 2 and labels[1].endswith("(run second)") and len(drawn["curves"][0].rows) == len(rows)


def test_wrong_data_is_not_drawn_and_is_listed(tmp_path, monkeypatch):
    import dataclasses

    import commbench.results.report as report
    from commbench.results.records import JsonlWriter

    rows = [m for m in import_file(str(DATA / "all_reduce_perf-2018.log")).records
            if isinstance(m, Measurement) and not m.in_place]
    fast = 999.0 / rows[3].busbw_gbps   # busbw 999 GB/s, its time and algbw with it (readers check all three agree)
    rows[3] = dataclasses.replace(rows[3], num_wrong=5, busbw_gbps=999.0, algbw_gbps=rows[3].algbw_gbps * fast,
                                  loop_time_us={k: v / fast for k, v in rows[3].loop_time_us.items()})
    drawn = {}
    monkeypatch.setattr(report, "busbw_figure", lambda collective, curves, note: drawn.setdefault("curves", curves))
    monkeypatch.setattr(report, "latency_figure", lambda *args: None)
    monkeypatch.setattr(report, "save", lambda fig, stem, formats: [])
    results = tmp_path / "wrong.jsonl"
    with JsonlWriter(results) as writer:
        for m in rows:
            writer.write(m)
    result = CliRunner().invoke(app, ["report", str(results), "--out", str(tmp_path / "rep")])
    assert result.exit_code == 0, result.output
    plotted = [m for curve in drawn["curves"] for m in curve.rows]
    assert len(plotted) == len(rows) - 1 and all(not m.num_wrong for m in plotted)
    md = (tmp_path / "rep" / "README.md").read_text()
    assert "999.000" not in md and "## Wrong data" in md
    assert f"- all_reduce nccl float32 n=8 {format_size(rows[3].size_bytes)}: #wrong 5 (run {rows[3].run_id})" in md
    assert "wrong data" in result.output and "#wrong 5" in result.output


def test_a_report_refused_for_want_of_measurements_leaves_no_empty_folder(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = tmp_path / "rep"
    result = CliRunner().invoke(app, ["report", str(empty), "-O", str(out)])
    assert result.exit_code == 2 and "no measurements in" in result.output, result.output
    assert not out.exists()


def test_runs_without_a_header_record_are_said_to_be_unchecked(tmp_path):
    """A file whose header line is lost (written by hand, by another tool): report drew it with no word, though its
    setup and planned point count are unknown, so a cut-short or mixed-setup run passed as complete; compare warns.
    Said in the console and in README.md; a file with its header says nothing."""
    from tests.test_compare import A

    lines = A.read_text().splitlines()
    headerless = tmp_path / "headerless.jsonl"
    headerless.write_text("\n".join(lines[1:]) + "\n")
    result = CliRunner().invoke(app, ["report", str(headerless), "-O", str(tmp_path / "rep")])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "warning: 1 run(s) without a readable header record" in text and "cannot be checked" in text, result.output
    md = (tmp_path / "rep" / "README.md").read_text()
    assert "## Runs without a header record (setup and completeness unknown)" in md
    whole = CliRunner().invoke(app, ["report", str(A), "-O", str(tmp_path / "rep2")])
    assert whole.exit_code == 0 and "without a header" not in whole.output
    assert "without a header" not in (tmp_path / "rep2" / "README.md").read_text()
