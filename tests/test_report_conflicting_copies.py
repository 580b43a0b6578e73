"""Minor findings of an outside probe: `report A B` with one run in both kept A's copy of a point where B's differed
(its #wrong 5 dropped, the table said #wrong 0; compare refuses such a conflict); a file whose ok points hold no
busbw made an empty report with no word; `--max-regression 10` (1000%, the bound itself) was called out of range
instead of ambiguous."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.results.compare import parse_threshold
from tests.test_compare import A


def _edited(tmp_path, name, edit):
    rows = [json.loads(line) for line in A.read_text().splitlines()]
    for row in rows:
        if row["record_type"] == "measurement":
            edit(row)
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_one_run_in_two_files_with_different_measurements_is_refused(tmp_path):
    wrong = _edited(tmp_path, "wrong.jsonl", lambda row: row.update(num_wrong=5))
    result = CliRunner().invoke(app, ["report", str(A), wrong, "-O", str(tmp_path / "rep")])
    assert result.exit_code == 2 and "with different measurements" in " ".join(result.output.split()), result.output
    same = CliRunner().invoke(app, ["report", str(A), str(A), "-O", str(tmp_path / "rep2")])
    assert same.exit_code == 0 and "read from" in same.output, same.output


def test_ok_points_without_busbw_are_said(tmp_path):
    bare = _edited(tmp_path, "bare.jsonl", lambda row: row.update(busbw_gbps=None))
    result = CliRunner().invoke(app, ["report", bare, "-O", str(tmp_path / "rep")])
    assert result.exit_code == 0 and "5 ok point(s) hold no busbw_gbps" in " ".join(result.output.split())


def test_a_bare_ten_is_ambiguous_not_out_of_range():
    with pytest.raises(CommbenchError, match="ambiguous.*1000%"):
        parse_threshold("10")
    with pytest.raises(CommbenchError, match="up to \\(not including\\) 1000%"):
        parse_threshold("1000%")
    assert parse_threshold("10%") == pytest.approx(0.1)
