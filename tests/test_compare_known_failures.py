"""compare: a point that failed in NEW fails the gate, whether BASE failed it too (the same file twice, or the same runs
appended: named "failed in the base too"; it passed as no change until a failed NEW run was seen to pass a gate, probe
P2) or not ("newly failed"); a wrong point (#wrong > 0) fails always. A point NCCL refused (status skipped) as often in
NEW as in BASE is no change: named skipped in the base too, not judged."""

from __future__ import annotations

import dataclasses

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.compare import compare
from commbench.results.records import measurements, read_records
from tests.test_compare import A, B, write


def _failed(m, run_id=None):
    return dataclasses.replace(m, status="failed", error="timed out", time_us_median=None, time_us_mean=None,
                               time_us_min=None, time_us_max=None, iter_times_us=[], loop_time_us={},
                               algbw_gbps=None, busbw_gbps=None, num_wrong=None, run_id=run_id or m.run_id)


def _with_failed(path, index: int, run_id: str):
    return [_failed(m) if i == index else m
            for i, m in enumerate(dataclasses.replace(m, run_id=run_id) for m in measurements(read_records([path])))]


def test_a_file_with_a_failed_point_against_itself_fails_and_says_the_base_failed_it_too(tmp_path):
    one = write(tmp_path / "one.jsonl", _with_failed(A, 1, "a"))
    out = CliRunner().invoke(app, ["compare", one, one, "--allow-same-run"])
    assert out.exit_code == 1, out.output
    assert "1 point(s) failed in the new file" in out.output and "failed in the base too" in out.output


def test_two_runs_one_with_a_failed_point_against_themselves_fail():
    runs = _with_failed(A, 1, "a") + [dataclasses.replace(m, run_id="b") for m in measurements(read_records([B]))]
    result = compare(runs, runs, max_regression=0.1)
    assert [(p.verdict, p.detail.endswith("failed in the base too")) for p in result.regressions] == [("failed", True)]


def test_a_point_new_fails_is_newly_failed_where_base_never_failed_it():
    good_b = [dataclasses.replace(m, run_id="b") for m in measurements(read_records([B]))]
    base = _with_failed(A, 1, "a") + good_b  # failed in one run of two
    assert [p.verdict for p in compare(base, _with_failed(A, 1, "a"), max_regression=0.1).regressions] == ["failed"]
    single = measurements(read_records([A]))
    assert [p.verdict for p in compare(single, _with_failed(A, 1, "a"), max_regression=0.1).regressions] == [
        "newly failed"]


def test_a_point_skipped_in_both_files_passes_named():
    """NCCL refused the tuning combination in both (status skipped): no change, not a failed run."""
    skipped = [dataclasses.replace(m, status="skipped", error="NCCL refused ring/LL") if m.status == "failed" else m
               for m in _with_failed(A, 1, "a")]
    result = compare(skipped, skipped, max_regression=0.1)
    assert result.passed and len(result.known_failed) == 1 and not result.base_not_ok


def test_a_wrong_point_in_both_files_still_fails():
    wrong = [dataclasses.replace(m, num_wrong=3) if i == 2 else m for i, m in enumerate(measurements(read_records([A])))]
    result = compare(wrong, wrong, max_regression=0.1)
    assert [p.verdict for p in result.regressions] == ["wrong"]


def test_the_library_fails_a_point_base_never_measured_good_as_the_cli_refuses_it(tmp_path):
    """Session 45: `compare` refuses (exit 2) a BASE with no good record of a point NEW measured good unless
    --allow-cut-short, but the library's Comparison.passed said True: it now says what the CLI says."""
    base = _with_failed(A, 1, "a")
    new = [dataclasses.replace(m, run_id="n") for m in measurements(read_records([B]))]
    refused = compare(base, new, max_regression=0.1)
    assert len(refused.base_not_ok) == 1 and not refused.passed
    allowed = compare(base, new, max_regression=0.1, allow_cut_short=True)
    assert allowed.base_not_ok == refused.base_not_ok and allowed.passed
    paths = [write(tmp_path / "base.jsonl", base), write(tmp_path / "new.jsonl", new)]
    assert CliRunner().invoke(app, ["compare", *paths]).exit_code == 2
    out = CliRunner().invoke(app, ["compare", *paths, "--allow-cut-short", "--json"])
    assert out.exit_code == 0 and '"passed": true' in out.stdout, out.output
