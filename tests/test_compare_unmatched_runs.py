"""A run of NEW that holds no point of BASE (another dtype, world size, backend or collective) is judged on nothing.
The gate passed on an older run of the same file (probe CG F3: `bench -O` appended a 3-rank run to a file holding a
2-rank run; 'pass: 4 point(s) in 1 run(s) compared ... 1 other run(s) of the new file hold no point of the base: not
judged', exit 0), though the same run alone is refused (exit 2, 'no point is in both files'): an earlier run left in
the file does not stand in for a later one (README, compare). Now NEW's last run (what `bench -O` or `sweep` appended
last) holding no point of BASE is refused as a NEW holding none is (exit 2, --allow-missing or not), and another
run holding none misses every point of BASE: the gate fails unless --allow-missing, naming the run and what differs."""

from __future__ import annotations

import json

from tests.results_files import COMPARE, invoke as _invoke, records as _records, write as _write


def _other_dtype(records: list[dict], run_id: str, started_at: str) -> list[dict]:
    """The run again under `run_id`, its points measured in bfloat16: none of them a point of the float32 base."""
    return [dict(r, run_id=run_id, started_at=started_at) if r["record_type"] == "header"
            else dict(r, run_id=run_id, dtype="bfloat16", count=r["count"] * 2) for r in records]   # 2-byte elements


def test_the_last_run_of_new_holding_no_point_of_base_is_refused(tmp_path):
    base, new = _records(COMPARE / "gloo_all_reduce_a.jsonl"), _records(COMPARE / "gloo_all_reduce_b.jsonl")
    base_path = _write(tmp_path / "base.jsonl", base)
    appended = _write(tmp_path / "new.jsonl", new + _other_dtype(new, "tonight", "2026-11-30T15:00:00+00:00"))
    for extra in ((), ("--allow-missing",)):
        result = _invoke("compare", base_path, appended, *extra)
        said = " ".join(result.output.split())
        assert result.exit_code == 2, said
        assert "the new file's newest run (run tonight, 2/2; started 2026-11-30 15:00:00+00:00" in said, said
        assert "dtype \"float32\" vs \"bfloat16\"" in said and "Traceback" not in said, said
    assert _invoke("compare", base_path, _write(tmp_path / "ok.jsonl", new)).exit_code == 0


def test_an_earlier_run_of_new_holding_no_point_of_base_fails_unless_allowed(tmp_path):
    base, new = _records(COMPARE / "gloo_all_reduce_a.jsonl"), _records(COMPARE / "gloo_all_reduce_b.jsonl")
    base_path = _write(tmp_path / "base.jsonl", base)
    earlier = _write(tmp_path / "new.jsonl", _other_dtype(new, "earlier", "2026-11-30T14:19:20+00:00") + new)
    result = _invoke("compare", base_path, earlier)
    said = " ".join(result.output.split())
    assert result.exit_code == 1, said
    assert "1 run(s) of the new file hold no point of the base (first: run earlier, 1/2" in said, said
    assert "--allow-missing" in said and "dtype" in said
    doc = json.loads(_invoke("compare", base_path, earlier, "--json").stdout)
    assert [entry.split(",")[0] for entry in doc["unmatched_runs"]] == ["run earlier"] and not doc["passed"]
    allowed = _invoke("compare", base_path, earlier, "--allow-missing")
    said = " ".join(allowed.output.split())
    assert allowed.exit_code == 0 and "allowed: 1 run(s) of the new file hold no point of the base" in said, said
