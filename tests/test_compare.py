"""compare: exit 1 on a planted regression, 0 on pure noise, 2 on files with nothing in common."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.compare import compare, parse_threshold
from commbench.results.records import JsonlWriter, Measurement

SIZES = [1 << k for k in range(10, 24, 2)]


def record(collective, size, median_us, *, jitter=0.02, run_id="r"):
    return Measurement(run_id=run_id, collective=collective, backend="nccl", size_bytes=size, count=size // 4,
                       dtype="float32", op="sum", in_place=False, world_size=8, group_size=8, iters=20,
                       warmup_iters=5, time_us_median=median_us, time_us_mean=median_us,
                       time_us_min=median_us * (1 - jitter), time_us_p99=median_us * (1 + jitter),
                       algbw_gbps=size / median_us / 1e3, busbw_gbps=size / median_us / 1e3)


def write(path, records):
    with JsonlWriter(path) as writer:
        for r in records:
            writer.write(r)
    return str(path)


def curve(scale=1.0, noise=0.0, seed=0, slow=None):
    rng = np.random.default_rng(seed)
    out = []
    for collective in ("all_reduce", "all_gather"):
        for size in SIZES:
            base_us = 10 + size / 50e3
            factor = scale * (1 + rng.uniform(-noise, noise))
            if slow and (collective, size) == slow:
                factor *= 1.5
            out.append(record(collective, size, base_us * factor))
    return out


def run(base, new, *args):
    return CliRunner().invoke(app, ["compare", base, new, *args])


def test_planted_regression_fails_the_gate(tmp_path):
    base = write(tmp_path / "base.jsonl", curve())
    new = write(tmp_path / "new.jsonl", curve(noise=0.01, seed=1, slow=("all_gather", SIZES[3])))
    result = run(base, new, "--max-regression", "10%")
    assert result.exit_code == 1, result.output
    assert "1 point(s) regressed" in result.output and "all_gather float32" in result.output


def test_pure_noise_passes(tmp_path):
    base = write(tmp_path / "base.jsonl", curve(noise=0.03, seed=2))
    new = write(tmp_path / "new.jsonl", curve(noise=0.03, seed=3))
    result = run(base, new, "--max-regression", "10%")
    assert result.exit_code == 0, result.output
    assert "pass" in result.output


def test_slowdown_within_the_recorded_spread_is_not_a_regression():
    base = [record("all_reduce", 1024, 100.0, jitter=0.2)]
    new = [record("all_reduce", 1024, 125.0, jitter=0.2)]  # +25% but each run spreads by 40%
    assert compare(base, new, max_regression=0.1).regressions == []
    tight = compare([record("all_reduce", 1024, 100.0, jitter=0.01)], [record("all_reduce", 1024, 125.0, jitter=0.01)],
                    max_regression=0.1)
    assert len(tight.regressions) == 1


def test_repeated_runs_give_the_spread_and_the_geomean():
    base = [record("all_reduce", 1024, t, jitter=0.0, run_id=str(i)) for i, t in enumerate((100.0, 104.0, 98.0))]
    new = [record("all_reduce", 1024, 200.0, jitter=0.0), record("all_reduce", 4096, 1.0)]
    result = compare(base, new, max_regression=0.1)
    (point,) = result.points
    assert point.base_us == pytest.approx(100.0) and point.spread == pytest.approx(0.06)
    assert result.geomean_by_collective["all_reduce"] == pytest.approx(2.0)
    assert result.only_in_new == 1


def test_user_errors_exit_2(tmp_path):
    base = write(tmp_path / "base.jsonl", [record("all_reduce", 1024, 10.0)])
    other = write(tmp_path / "other.jsonl", [record("broadcast", 1024, 10.0)])
    assert run(base, other).exit_code == 2
    assert run(base, base, "--max-regression", "lots").exit_code == 2
    assert parse_threshold("10%") == pytest.approx(0.1) and parse_threshold("0.25") == 0.25
