"""Stale and narrowed data audit: results files reused after a change, cut short or resumed, read by the gate and
the fits as what they are."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from commbench.cli.app import app

COMPARE = Path(__file__).parent / "data" / "compare"


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path: Path, records: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_a_sweep_resumed_after_its_first_points_is_no_empty_run(tmp_path):
    # sweep, killed after 2 points, then `sweep --resume` (a new header, the other points under its run id): the gate
    # said '1 run(s) of the new file hold a header and no measurement (first: run resumed): stopped before their
    # first point', exit 1, on an unchanged, complete sweep (the continuation's points are joined to the first run)
    base = _records(COMPARE / "gloo_all_reduce_a.jsonl")
    new = [dict(r, sweep_identity="s1") if r["record_type"] == "header" else r
           for r in _records(COMPARE / "gloo_all_reduce_b.jsonl")]
    header, points = new[0], new[1:]
    resumed = [header, *points[:2], dict(header, run_id="resumed"),
               *[dict(p, run_id="resumed") for p in points[2:]]]
    base_path = _write(tmp_path / "base.jsonl", base)
    result = _invoke("compare", base_path, _write(tmp_path / "resumed.jsonl", resumed))
    assert result.exit_code == 0, result.output
    assert "header and no measurement" not in result.output
    # a resumed sweep whose continuation wrote its header and nothing is still empty where nothing resumes it
    stopped = [header, *points[:2], dict(header, run_id="resumed")]
    result = _invoke("compare", base_path, _write(tmp_path / "stopped.jsonl", stopped), "--json")
    assert result.exit_code == 1 and json.loads(result.stdout)["empty_runs"] == ["resumed"]
