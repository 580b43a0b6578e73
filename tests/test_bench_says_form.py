"""bench says what its times are in every output format: the form measured (an out-of-place reduce was headed
'reduce on gloo ... (measured)' and titled 'all_reduce (measured, 2 ranks)', naming no form) and the records' notes
once each (the out-of-place time includes a device copy: only `report` said so), and the closing average busbw names
the time it is at (table mode said 'measured' only, beside a busbw column at the median). nccl-tests' text keeps its
notes as '#' lines, which the import skips."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

from commbench.measure.bench import BenchConfig
from commbench.measure.harness import LoopOptions
from commbench.measure.view import BenchView
from commbench.results import nccl_tests_text as text
from commbench.results.importers.nccl_tests import parse_text
from commbench.results.records import measurements
from tests.test_nccl_tests_text import _header, record

REPO = Path(__file__).resolve().parents[1]
COPY = "out-of-place all_reduce: a device copy into the output, then the in-place call; the time includes the copy"


def _noted(m):
    return dataclasses.replace(m, notes=[COPY]) if not m.in_place else m


def _render(capsys, config, records, forms_per_size=1, last=True):
    capsys.readouterr()
    view = BenchView(config, _header(8), len(records), forms_per_size=forms_per_size)
    for m in records:
        view.add(m)
    view.close(last=last)
    return capsys.readouterr().out, view


def test_table_and_markdown_name_the_form_the_notes_once_and_the_footers_time(capsys):
    rows = [_noted(record(size, 10.0 + size / 1e3, in_place=False)) for size in (64, 1024, 65536)]
    for output_format in ("table", "markdown"):
        config = BenchConfig(collective="all_reduce", sizes_bytes=(64, 1024, 65536), out_of_place=True,
                             output_format=output_format, loop=LoopOptions(iters=20, warmup_iters=5))
        out, _ = _render(capsys, config, rows)
        assert out.count(COPY) == 1, (output_format, out)   # once per distinct note, not per row
        assert "all_reduce on gloo, out-of-place, 8 rank(s)" in out, out
        if output_format == "table":
            assert "all_reduce (measured, 8 ranks, out-of-place)" in out, out
        footer = next(line for line in out.splitlines() if "Avg bus bandwidth" in line)
        assert text.footer_statistic(1) in footer and "median" in footer, footer
    # the default form is named too, and a run whose records carry no note prints none
    config = BenchConfig(collective="all_reduce", sizes_bytes=(64,), loop=LoopOptions(iters=20, warmup_iters=5))
    out, _ = _render(capsys, config, [record(64, 10.0, in_place=True)])
    assert "all_reduce (measured, 8 ranks, in-place)" in out and "note:" not in out.lower(), out


def test_nccl_tests_text_notes_once_over_cycles_and_still_imports(capsys):
    cycle = [_noted(record(64, 10.0, in_place=False)), record(64, 9.0, in_place=True),
             _noted(record(1024, 12.0, in_place=False)), record(1024, 11.0, in_place=True)]
    config = BenchConfig(collective="all_reduce", sizes_bytes=(64, 1024), output_format="nccl-tests",
                         loop=LoopOptions(iters=20, warmup_iters=5), text_cycle=text.TextCycle(num_cycles=2))
    first, view = _render(capsys, config, cycle, forms_per_size=2, last=False)
    second, _ = _render(capsys, dataclasses.replace(config, text_cycle=view.carried().next_cycle()), cycle,
                        forms_per_size=2)
    lines = (first + second).splitlines()
    assert lines.count(f"# note: {COPY}") == 1, lines
    assert lines.index(f"# note: {COPY}") < next(i for i, line in enumerate(lines) if line[:12].strip().isdigit())
    imported = parse_text(first + second, "log.txt")
    assert imported.problems == [] and len(measurements(imported.records)) == 8


def test_bench_cli_out_of_place_markdown_says_the_copy(tmp_path):
    """Through the CLI: the records of a gloo out-of-place reduce carry torch's copy note, and it is printed."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    result = subprocess.run([sys.executable, "-m", "commbench", "bench", "reduce", "--nproc", "2", "-b", "1K", "-e",
                             "4K", "-n", "2", "-w", "0", "--out-of-place", "--format", "markdown", "-O",
                             str(tmp_path / "x.jsonl")], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("**commbench ") and "reduce on gloo, out-of-place," in result.stdout.splitlines()[0]
    assert result.stdout.count("the time includes the copy") == 1, result.stdout


def test_piped_table_rows_name_their_statistic_before_the_first_row(tmp_path):
    """With no terminal, bench streams nccl-tests' rows (the timed loop's time / iters) before its table (median
    first): the rows' 'time' column is said to be nccl-tests' figure, not the table's median (found from outside)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    result = subprocess.run([sys.executable, "-m", "commbench", "bench", "all_reduce", "--nproc", "2", "-b", "1K", "-e",
                             "2K", "-n", "2", "-w", "0", "-O", str(tmp_path / "x.jsonl")], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    first_row = next(i for i, line in enumerate(lines) if line.strip().startswith("1024"))
    said = [line for line in lines[:first_row] if line.startswith("# time:")]
    assert len(said) == 1 and "timed loop's time / iters, avg over ranks (-a 1)" in said[0] and "median" in said[0]
