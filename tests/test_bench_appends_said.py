"""bench -O FILE appends (nccl-tests -J's letter): into a file that already holds results, the new run went after
the earlier ones with no word, so a file meant as one run silently held two (compare and report count both). Now a
note says so before the run starts; a new file gets none."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app


@pytest.mark.timeout(120)
def test_bench_into_a_file_with_results_says_it_appends(tmp_path):
    out = tmp_path / "ar.jsonl"
    args = ["bench", "all_reduce", "--nproc", "1", "-b", "8", "-e", "64", "-n", "2", "-w", "1", "-O", str(out)]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0 and "appended after" not in first.output, first.output
    second = CliRunner().invoke(app, args)
    assert second.exit_code == 0, second.output
    assert "already holds results: this run is appended after them" in second.output, second.output
