"""A measurement line without `status` read as ok (a hand-written or foreign file's failed point passed as measured),
and a header of a newer schema_version was read as this one's. Both are unreadable lines now, said where read
(compare fails on such a line of NEW)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.records import read_records
from tests.test_compare import A, B


def _rewritten(tmp_path, name, source, edit):
    rows = [json.loads(line) for line in source.read_text().splitlines()]
    for row in rows:
        edit(row)
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_measurement_without_status_and_a_newer_header_are_unreadable(tmp_path):
    bare = _rewritten(tmp_path, "bare.jsonl", A, lambda row: row.pop("status", None))
    bad: list = []
    records = read_records([bare], on_bad_line=lambda line, why: bad.append(why))
    assert len(bad) == 5 and "field 'status' is missing" in bad[0] and len(records) == 1
    newer = _rewritten(tmp_path, "newer.jsonl", A,
                       lambda row: row.update(schema_version=2) if row["record_type"] == "header" else None)
    bad.clear()
    read_records([newer], on_bad_line=lambda line, why: bad.append(why))
    assert bad == ["schema_version=2 is newer than this commbench reads (1): its fields may mean something else; "
                   "read it with a newer commbench"]
    new = _rewritten(tmp_path, "new.jsonl", B, lambda row: row.pop("status", None))
    gate = CliRunner().invoke(app, ["compare", str(A), str(new)])
    assert gate.exit_code != 0 and "status" in gate.output, gate.output
