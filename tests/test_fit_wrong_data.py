"""fit and tune --results on results where a point failed its data check (#wrong > 0): they fitted and planned with a
note ("1 point(s) skipped: wrong data"), exit 0, though a path that returns wrong data at one size is no fabric to plan
on (compare fails it). Refused now (exit 1, one line naming the points) unless --leave-out-wrong says to leave them
out; a failed point (no time) is left out with a note, as before."""

from __future__ import annotations

import dataclasses

import numpy as np
from typer.testing import CliRunner

from commbench.cli.app import app
from tests.test_compare import record, write

SIZES = (1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24)


def _results(tmp_path, **bad):
    rng = np.random.default_rng(2)
    points = [record(size, (20 + size / 2e4) * np.exp(rng.normal(0, 0.01, 30))) for size in SIZES]
    points[2] = dataclasses.replace(points[2], **bad)
    return write(tmp_path / "results.jsonl", points)


def test_fit_and_tune_refuse_wrong_data_unless_left_out(tmp_path):
    path = _results(tmp_path, num_wrong=5)
    refused = CliRunner().invoke(app, ["fit", path, "-O", str(tmp_path / "fab.json")])
    errors = [line for line in refused.output.splitlines() if line.startswith("error:")]
    assert refused.exit_code == 1 and len(errors) == 1, refused.output
    assert "1 point(s)" in errors[0] and "all_reduce float32 1 MiB n=2 (#wrong 5)" in errors[0], errors
    assert "--leave-out-wrong" in errors[0] and not (tmp_path / "fab.json").exists()
    allowed = CliRunner().invoke(app, ["fit", path, "-O", str(tmp_path / "fab.json"), "--leave-out-wrong"])
    assert allowed.exit_code == 0 and "1 point(s) skipped: wrong data" in allowed.output, allowed.output
    tuned = CliRunner().invoke(app, ["tune", "--results", path, "-O", str(tmp_path / "tune")])
    assert tuned.exit_code == 1 and "failed their data check" in tuned.output, tuned.output
    assert not (tmp_path / "tune" / "plan.json").exists()


def test_a_failed_point_is_left_out_and_said(tmp_path):
    path = _results(tmp_path, status="failed", error="timeout", time_us_median=None, time_us_mean=None,
                    time_us_min=None, time_us_max=None, iter_times_us=[], loop_time_us={}, num_wrong=None)
    fitted = CliRunner().invoke(app, ["fit", path])
    assert fitted.exit_code == 0 and "1 point(s) skipped: failed or without a time" in fitted.output, fitted.output
