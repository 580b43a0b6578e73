"""Huge inputs are streamed or summarised: an nccl-tests log is imported line by line (memory stays
flat as the log grows), a flood of unparsable lines prints 20 and a count, and report's tables are
bounded with a note saying so. Through the CLI."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from commbench.cli.app import app

REPO = Path(__file__).resolve().parents[1]
HEAD = "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
ROW = "        1024           256   float     sum    33.94    0.03    0.05  0e+00    33.44    0.03    0.05  0e+00\n"


def import_peak_kb(tmp_path: Path, num_rows: int) -> tuple[int, str]:
    log = tmp_path / f"all_reduce_{num_rows}.log"
    log.write_text(HEAD + ROW * num_rows)
    out = tmp_path / f"r{num_rows}.jsonl"
    code = ("import resource, runpy, sys; sys.argv = ['commbench'] + sys.argv[1:]\n"
            "try:\n    runpy.run_module('commbench', run_name='__main__')\n"
            "finally:\n    print('PEAK_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code, "import", "nccl-tests", str(log), "-O", str(out),
                             "--collective", "all_reduce"], env={**os.environ, "PYTHONPATH": str(REPO)},
                            capture_output=True, text=True, timeout=300)
    peak = int(result.stderr.split("PEAK_KB")[-1].split()[0])
    # one size repeated is nccl-tests' -N layout: each repeat is a run of its own (a header each); every row
    # is still two measured points (out-of-place and in-place)
    assert sum('"measurement"' in line for line in out.open()) == 2 * num_rows, result.stderr[-500:]
    return peak, result.stdout


def test_import_memory_does_not_grow_with_the_log(tmp_path):
    """A reference measured in the same test: 20x the rows must not cost 20x the memory (before: 1 GB per 20 MB)."""
    small_kb, _ = import_peak_kb(tmp_path, 1_000)
    large_kb, out = import_peak_kb(tmp_path, 20_000)
    assert "imported 40000 measured point(s)" in out
    assert large_kb < small_kb * 1.25, (small_kb, large_kb)


def test_a_flood_of_unparsable_lines_prints_twenty_and_a_count(tmp_path):
    log = tmp_path / "all_reduce.log"
    log.write_text(HEAD + ROW + "garbage line\n" * 5000)
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "-O", str(tmp_path / "r.jsonl"),
                                      "--collective", "all_reduce"])
    assert result.exit_code == 0, result.output
    assert result.output.count("unparsed ") == 20 and "4,980 more line(s) not shown" in result.output
    assert "5000 line(s) not parsed" in result.output


def test_report_tables_are_bounded_and_say_so(tmp_path):
    from tests.test_writers_guarded import DATA

    header, *points = [json.loads(line) for line in DATA.read_text().splitlines()]
    point = next(p for p in points if p["record_type"] == "measurement" and p["status"] == "ok")
    many = tmp_path / "many.jsonl"
    # 500 distinct points (a point repeated in one run is read once, as compare reads it)
    copies = [{**point, "size_bytes": 64 * (i + 1), "count": 16 * (i + 1),   # algbw = size / median, as bench writes
               "algbw_gbps": 64 * (i + 1) / point["time_us_median"] / 1e3,
               "busbw_gbps": 64 * (i + 1) / point["time_us_median"] / 1e3} for i in range(500)]
    many.write_text("\n".join(json.dumps(r) for r in [header] + copies) + "\n")
    out = tmp_path / "rep"
    result = CliRunner().invoke(app, ["report", str(many), "-O", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "first 60 of 500 rows shown" in result.output
    readme = (out / "README.md").read_text()
    rows = re.findall(r"\n\| [\d.]+ (?:B|KiB|MiB) \|", readme)
    assert "first 60 of 500 rows shown" in readme and 0 < len(rows) <= 60
