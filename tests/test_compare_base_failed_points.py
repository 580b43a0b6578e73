"""A point BASE failed (or measured wrong) in every run left NEW's point there judged on nothing: "not ok in base",
and the gate passed, a x10 slowdown there unseen (probe P2: base_nan.jsonl vs new_10x.jsonl, 18 points "compared";
a BASE failed at every point against a good NEW: passed, num_tests 0). compare now refuses that as it refuses a BASE
cut short (exit 2, one line naming the points and why) unless --allow-cut-short, with which the pass line counts only
the judged points. A point failed in BOTH files passed as "no change": a failed NEW run now fails (exit 1). --json
wrote `"quantile": NaN` where no point was judged (no JSON parser reads it): now null."""

from __future__ import annotations

import dataclasses
import json

import jsonschema

from tests.test_compare import write
from tests.test_compare_base_whole import POINTS, _run
from tests.test_compare_runs import run_cli
from tests.test_json_output import schema


def _failed(m, error="rank 1 timed out"):
    return dataclasses.replace(m, status="failed", error=error, time_us_median=None, time_us_mean=None,
                               time_us_min=None, time_us_max=None, iter_times_us=[], loop_time_us={},
                               algbw_gbps=None, busbw_gbps=None, num_wrong=None)


def _with_failed(records, points):
    """The run's records, those of `points` (collective, size) failed."""
    return [_failed(r) if getattr(r, "size_bytes", None) is not None and (r.collective, r.size_bytes) in points else r
            for r in records]


def _strict_json(text: str) -> dict:
    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def test_a_point_base_failed_is_refused_where_new_measured_it(tmp_path):
    lost = {POINTS[-1]}   # all_gather 64 KiB failed in BASE, measured good in NEW (a x10 there was never seen)
    base = write(tmp_path / "base.jsonl", _with_failed(_run("b", POINTS, 1), lost))
    new = write(tmp_path / "new.jsonl", _run("n", POINTS, 9))
    refused = run_cli(base, new)
    assert refused.exit_code == 2, refused.output
    line = [x for x in refused.output.splitlines() if x.startswith("error:")]
    assert len(line) == 1, refused.output
    assert "all_gather float32 64 KiB" in line[0] and "rank 1 timed out" in line[0] and "--allow-cut-short" in line[0]
    allowed = run_cli(base, new, "--allow-cut-short")
    assert allowed.exit_code == 0, allowed.output
    text = " ".join(allowed.output.split())
    assert "pass: 7 point(s) in 1 run(s) compared (1 not ok in base: not judged)" in text, text
    document = _strict_json(run_cli(base, new, "--allow-cut-short", "--json").stdout)
    assert any("all_gather float32 64 KiB" in line for line in document["base_incomplete"])


def test_a_base_failed_everywhere_against_a_good_new_is_refused(tmp_path):
    base = write(tmp_path / "base.jsonl", _with_failed(_run("b", POINTS, 1), set(POINTS)))
    new = write(tmp_path / "new.jsonl", _run("n", POINTS, 9))
    for extra in ((), ("--json",)):
        refused = run_cli(base, new, *extra)
        assert refused.exit_code == 2 and "no good record of 8 point(s)" in refused.output, refused.output


def test_a_point_failed_in_both_files_fails_the_gate(tmp_path):
    lost = {POINTS[0]}
    base = write(tmp_path / "base.jsonl", _with_failed(_run("b", POINTS, 1), lost))
    new = write(tmp_path / "new.jsonl", _with_failed(_run("n", POINTS, 2), lost))
    result = run_cli(base, new)
    assert result.exit_code == 1, result.output
    assert "failed in the new file" in result.output and "failed in the base too" in result.output


def test_json_with_no_point_judged_is_valid_json_null_quantile(tmp_path):
    base = write(tmp_path / "base.jsonl", _run("b", POINTS, 1))
    new = write(tmp_path / "new.jsonl", _with_failed(_run("n", POINTS, 2), set(POINTS)))   # every point failed
    result = run_cli(base, new, "--json")
    assert result.exit_code == 1, result.output
    document = _strict_json(result.stdout)
    assert document["noise"]["quantile"] is None and not document["passed"]
    jsonschema.validate(document, schema("compare"), cls=jsonschema.Draft202012Validator)
