"""`report` streams its results files: records are read a line at a time without their per-iteration
samples, a damaged giant line is skipped unread, and past a bound the report says what it left out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from typer.testing import CliRunner

from commbench.cli.app import app

DATA = Path(__file__).resolve().parent / "data" / "compare" / "gloo_all_reduce_a.jsonl"
runner = CliRunner()


def test_a_report_past_its_bound_says_what_it_left_out(tmp_path, monkeypatch):
    import commbench.cli.report as report_cli

    lines = DATA.read_text().splitlines()
    num_points = sum(1 for line in lines if json.loads(line).get("record_type") == "measurement")
    monkeypatch.setattr(report_cli, "MAX_REPORT_MEASUREMENTS", num_points - 2)
    result = runner.invoke(app, ["report", str(DATA), str(DATA), "--out", str(tmp_path / "rep")],
                           env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    summary = [line for line in result.output.splitlines() if line.startswith("summarised:")]
    assert len(summary) == 1, result.output
    assert f"first {num_points - 2:,} measurements" in summary[0] and f"and {DATA}" in summary[0]
    assert (tmp_path / "rep" / "README.md").exists()


def test_a_report_within_its_bound_says_nothing_was_left_out(tmp_path):
    result = runner.invoke(app, ["report", str(DATA), "--out", str(tmp_path / "rep")], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "summarised:" not in result.output


def test_a_giant_line_is_skipped_without_reading_it_whole(tmp_path, monkeypatch):
    import commbench.results.records as records

    monkeypatch.setattr(records, "MAX_LINE_BYTES", 4096)
    path = tmp_path / "r.jsonl"
    text = DATA.read_text()
    first, rest = text.split("\n", 1)
    path.write_text(first + "\n" + '{"record_type": "' + "x" * 20000 + '"}\n' + rest)
    bad: list[tuple[int, str]] = []
    kept = list(records.iter_records(path, on_bad_line=lambda n, why: bad.append((n, why))))
    assert bad == [(2, "longer than 4,096 bytes: not a record")]
    assert len(kept) == len(text.splitlines())


def test_dropped_samples_leave_every_other_field(tmp_path):
    from commbench.results.records import Measurement, iter_records

    whole = [r for r in iter_records(DATA) if isinstance(r, Measurement)]
    light = [r for r in iter_records(DATA, drop_samples=True) if isinstance(r, Measurement)]
    assert any(r.iter_times_us for r in whole) and not any(r.iter_times_us for r in light)
    assert [r.time_us_median for r in whole] == [r.time_us_median for r in light]


def test_a_tuning_combination_counts_only_the_records_it_appended(tmp_path):
    from commbench.sweep.combos import _new_records

    path = tmp_path / "r.jsonl"
    text = DATA.read_text()
    path.write_text("")
    offset = 0
    path.write_text(text + "not json\n[1, 2]\n")
    run_id, count = _new_records(str(path), offset)
    lines = [json.loads(line) for line in text.splitlines()]
    assert run_id == lines[0]["run_id"]
    assert count == sum(1 for line in lines if line.get("record_type") == "measurement")
    assert _new_records(str(path), len(text.encode())) == (None, 0)
    assert _new_records(str(tmp_path / "missing.jsonl"), 0) == (None, 0)


@pytest.mark.parametrize("command", [("report",), ("fit",), ("compare", str(DATA)), ("nccl-tuner",)])
@pytest.mark.parametrize("content", ['{\n "format": "commbench-plan"\n}\n', "#" * 5000 + "\n" * 3000, "[1, 2]\n"])
def test_a_file_that_is_not_results_is_one_line_not_a_warning_per_line(tmp_path, command, content):
    path = tmp_path / "plan.json"
    path.write_text(content)
    result = runner.invoke(app, [*command, str(path), *(["-O", str(tmp_path / "out")] if command[0] in ("fit", "nccl-tuner")
                                                       else ["--out", str(tmp_path / "rep")] if command[0] == "report" else [])])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output[-2000:]
    assert "is not a commbench results file" in result.output


def test_a_wrong_fabric_is_refused_before_any_table(tmp_path):
    not_a_fabric = tmp_path / "plan.json"
    not_a_fabric.write_text('{"format": "commbench-plan"}\n')
    result = runner.invoke(app, ["report", str(DATA), "--fabric", str(not_a_fabric), "--out", str(tmp_path / "rep")])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and "commbench-fabric" in result.output
