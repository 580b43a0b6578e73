"""compare: a point that failed in BASE as often as in NEW (the same file twice, or the same runs appended) is
no change: it passes, named as failed in the base too and not judged. A point NEW fails more often than BASE
(a newly failed run, one more failed run) still fails, and a wrong point (#wrong > 0) fails always."""

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


def test_a_file_with_a_failed_point_against_itself_passes_and_names_it(tmp_path):
    one = write(tmp_path / "one.jsonl", _with_failed(A, 1, "a"))
    out = CliRunner().invoke(app, ["compare", one, one, "--allow-same-run"])
    assert out.exit_code == 0, out.output
    assert "failed in the base too" in out.output and "1 point(s) failed in both files" in out.output


def test_two_runs_one_with_a_failed_point_against_themselves_pass(tmp_path):
    """It was 'newly failed' (the other run of BASE held it good): the same data failed the gate."""
    runs = _with_failed(A, 1, "a") + [dataclasses.replace(m, run_id="b") for m in measurements(read_records([B]))]
    assert compare(runs, runs, max_regression=0.1).passed
    path = write(tmp_path / "runs.jsonl", runs)
    assert CliRunner().invoke(app, ["compare", path, path, "--allow-same-run"]).exit_code == 0


def test_a_point_new_fails_more_often_than_base_fails():
    good_b = [dataclasses.replace(m, run_id="b") for m in measurements(read_records([B]))]
    base = _with_failed(A, 1, "a") + good_b  # failed in one run of two
    new_one = _with_failed(A, 1, "a")  # failed in its only run: every run
    result = compare(base, new_one, max_regression=0.1)
    assert [p.verdict for p in result.regressions] == ["newly failed"]
    both_failed = _with_failed(A, 1, "a") + [_failed(m) if i == 1 else m for i, m in enumerate(good_b)]
    assert [p.verdict for p in compare(base, both_failed, max_regression=0.1).regressions] == ["newly failed"]
    single = measurements(read_records([A]))
    assert not compare(single, _with_failed(A, 1, "a"), max_regression=0.1).passed


def test_a_wrong_point_in_both_files_still_fails():
    wrong = [dataclasses.replace(m, num_wrong=3) if i == 2 else m for i, m in enumerate(measurements(read_records([A])))]
    result = compare(wrong, wrong, max_regression=0.1)
    assert [p.verdict for p in result.regressions] == ["wrong"]
