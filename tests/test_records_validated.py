"""Records are validated on write and on read: garbage in an import is an unparsed line (never a
measured point), and a results file's bad lines never count as measurements. Through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

LOG_HEAD = """# nThread 1 nGpus 2 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""
GOOD = "        1024           256   float     sum    33.94    0.03    0.05  0e+00    33.44    0.03    0.05  0e+00"
runner = CliRunner()


@pytest.mark.parametrize("row,field", [
    # a nan time is a failed point, kept as one (test_import_nan_time.py); a negative or zero one is garbage
    ("        1024           256   float     sum     -1.0    0.03    0.05  0e+00     -1.0    0.03    0.05  0e+00", "loop_time_us"),
    ("        1024           256   float     sum      0.0    0.03    0.05  0e+00      0.0    0.03    0.05  0e+00", "loop_time_us"),
    ("100000000000000000000000000   256   float  sum  33.9  0.03  0.05  0e+00  33.4  0.03  0.05  0e+00", "size_bytes"),
    ("        1024           256   fl0at     sum    33.94    0.03    0.05  0e+00    33.44    0.03    0.05  0e+00", "dtype"),
    ("        1024           256   float     s*m    33.94    0.03    0.05  0e+00    33.44    0.03    0.05  0e+00", "op"),
    ("        1024           256   float     sum    33.94     inf    0.05  0e+00    33.44     inf    0.05  0e+00", "algbw_gbps"),
])
def test_import_refuses_garbage_rows_as_unparsed(tmp_path, row, field):
    log = tmp_path / "all_reduce.log"
    log.write_text(LOG_HEAD + GOOD + "\n" + row + "\n")
    out = tmp_path / "r.jsonl"
    result = runner.invoke(app, ["import", "nccl-tests", str(log), "-O", str(out), "--collective", "all_reduce",
                                 "--strict"])
    assert result.exit_code == 1, result.output
    assert "unparsed" in result.output and field in result.output, result.output
    points = [json.loads(x) for x in out.read_text().splitlines() if '"measurement"' in x]
    assert [p["size_bytes"] for p in points] == [1024, 1024]  # the good row, out-of-place and in-place


def test_bad_lines_in_a_results_file_are_skipped_on_read_and_said(tmp_path):
    from tests.test_writers_guarded import DATA

    lines = DATA.read_text().splitlines()
    bad = []
    for line in lines:
        record = json.loads(line)
        if record["record_type"] == "measurement":
            record["time_us_median"] = float("nan")
        bad.append(json.dumps(record))
    path = tmp_path / "nan.jsonl"
    path.write_text("\n".join(bad) + "\n")
    result = runner.invoke(app, ["report", str(path), "-O", str(tmp_path / "rep")], env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert "time_us_median=nan is invalid" in result.output and "no measurements in" in result.output


def test_calibrate_refuses_a_run_with_nan_throughput_and_writes_nothing(tmp_path):
    source = Path(__file__).resolve().parents[1] / "commbench" / "data" / "calibration-runs.json"
    runs = json.loads(source.read_text())
    runs[0]["tokens_per_s_per_gpu"] = float("nan")
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(runs))
    result = runner.invoke(app, ["calibrate", str(path), "-O", str(tmp_path / "cal.json")])
    assert result.exit_code == 2 and "row 1: tokens_per_s_per_gpu=nan is invalid" in result.output, result.output
    assert not (tmp_path / "cal.json").exists()
