"""`bench --format nccl-tests` (and `--format markdown`) never said where the JSONL went, where the table format says
"results → PATH" and "records in PATH" (probe AX finding 7): a user who wants to compare or fit that run had to find
results/<collective>-<time>.jsonl. Every format now names it: those whose stdout is a text to keep or import (nccl-tests'
text, a Markdown table) in one line on stderr, so stdout stays that text alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("fmt,extra", [("nccl-tests", []), ("nccl-tests", ["-N", "2"]), ("markdown", [])])
def test_a_text_format_names_the_results_file_on_stderr(tmp_path, fmt, extra):
    done = subprocess.run([sys.executable, "-m", "commbench", "bench", "broadcast", "--nproc", "1", "-b", "1K", "-e",
                           "2K", "-n", "3", "-w", "1", "--format", fmt, *extra], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "300"})
    assert done.returncode == 0, done.stdout + done.stderr
    (written,) = (tmp_path / "results").glob("broadcast-*.jsonl")   # the default: results/<collective>-<time>.jsonl
    said = [line for line in done.stderr.splitlines() if "records in" in line]
    assert len(said) == 1 and said[0].endswith(f"records in {written.relative_to(tmp_path)}"), done.stderr
    assert "records in" not in done.stdout and "results →" not in done.stdout


def test_the_table_format_still_says_it_on_stdout(tmp_path):
    out = tmp_path / "t.jsonl"
    done = subprocess.run([sys.executable, "-m", "commbench", "bench", "broadcast", "--nproc", "1", "-b", "1K", "-e",
                           "2K", "-n", "3", "-w", "1", "-O", str(out)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "300"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"records in {out}" in " ".join(done.stdout.split()) and "records in" not in done.stderr
