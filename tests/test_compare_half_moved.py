"""Probe O-1: with one run a side and no --history the points' scatter is read from the pair's own log ratios;
the median absolute deviation used for it broke down at exactly half the points, so a regression of any size at
half of them (the top 4 of 8 sizes x1000, every out-of-place point x100) became the noise and passed. The pair
scale (noise.pair_scale: Qn's pairwise distances, h = ceil(n/2)) is at most the scatter of the points a change
left alone: x2 at any half of the points fails, unchanged pairs still pass."""

from __future__ import annotations

import dataclasses
import math
import zlib

import numpy as np
import pytest

from commbench.results.compare import compare
from commbench.results.noise import PAIR_SCALE_ASYMPTOTIC, pair_scale, pair_scale_constants, pair_scatter
from tests.test_compare import record

SIZES = tuple(1 << k for k in range(10, 18))  # 8 sizes, in and out of place: 16 points


def _run(rng, run_id, *, point_sd=0.03, factor=1.0, moved=(), samples=False):
    """One run, nccl-tests-like (no per-iteration samples unless `samples`): in- and out-of-place points; the points
    in `moved` ((size, in_place) pairs) x factor."""
    out = []
    for in_place in (True, False):
        for size in SIZES:
            f = factor if (size, in_place) in moved else 1.0
            center = (10 + size / 5e4) * math.exp(rng.normal(0, point_sd)) * f
            m = record(size, center * np.exp(rng.normal(0, 0.01, 30)), run_id=run_id)
            m = dataclasses.replace(m, in_place=in_place)
            out.append(m if samples else dataclasses.replace(m, iter_times_us=[]))
    return out


POINTS = [(s, p) for p in (True, False) for s in SIZES]
HALVES = {
    "top 4 sizes in and out of place": {(s, p) for s, p in POINTS if s >= SIZES[4]},
    "every out-of-place point": {(s, p) for s, p in POINTS if not p},
    "every other size": {(s, p) for s, p in POINTS if SIZES.index(s) % 2 == 0},
    "a random half": set(map(tuple, np.random.default_rng(5).permutation(np.array(POINTS, dtype=object))[:8])),
    "a quarter (top 2 sizes)": {(s, p) for s, p in POINTS if s >= SIZES[6]},
}


def test_pair_scale_is_not_inflated_by_half_the_points_moving():
    rng = np.random.default_rng(0)
    keys = [("k", i) for i in range(16)]
    sigma = 0.05
    diffs = {k: 0.3 + rng.normal(0, sigma * math.sqrt(2)) for k in keys}  # 0.3: the run shift, free to the pairs
    collective_of, inverse = {k: "all_reduce" for k in keys}, {k: 2.0 for k in keys}
    clean = pair_scatter(diffs, collective_of, inverse)
    assert 0.5 * sigma < clean.sigma_pooled < 1.6 * sigma and clean.scatter_from == "the pair" and clean.df > 3
    for moved in (keys[8:], keys[::2]):
        for factor in (2.0, 1000.0):
            slow = {k: v + (math.log(factor) if k in moved else 0.0) for k, v in diffs.items()}
            # at most the untouched half's own scatter: read from 8 points it can only come out lower than from 16
            untouched = pair_scale([v / math.sqrt(2) for k, v in diffs.items() if k not in moved])[0]
            assert pair_scatter(slow, collective_of, inverse).sigma_pooled <= 1.8 * max(untouched, clean.sigma_pooled)
    # each moved point by its own factor (a slowdown growing with size): at most the untouched half's largest
    # distance (their range), however large the factors
    untouched = [v / math.sqrt(2) for v in list(diffs.values())[:8]]
    bound = pair_scale_constants(16)[0] * PAIR_SCALE_ASYMPTOTIC * float(np.ptp(untouched))
    for step in (0.7, 70.0):
        spread = {k: v + (step * (i - 7) if i >= 8 else 0.0) for i, (k, v) in enumerate(diffs.items())}
        assert pair_scatter(spread, collective_of, inverse).sigma_pooled <= bound + 1e-12 < 6 * clean.sigma_pooled


@pytest.mark.parametrize("samples", [False, True], ids=["nccl-tests-like", "with samples"])
@pytest.mark.parametrize("name", list(HALVES))
@pytest.mark.parametrize("factor", [2.0, 1000.0])
def test_a_slowdown_at_up_to_half_the_points_fails_one_run_a_side(name, factor, samples):
    rng = np.random.default_rng(zlib.crc32(f"{name} {factor} {samples}".encode()))
    base = _run(rng, "b", samples=samples)
    new = _run(rng, "n", factor=factor, moved=HALVES[name], samples=samples)
    result = compare(base, new, max_regression=0.1)
    assert result.run_to_run.scatter_from == "the pair" and result.runs == {"base": 1, "new": 1, "history": 0}
    assert not result.passed, (name, factor, result.run_to_run.sigma_pooled)
    slowed = {(p.key[5], p.key[4]): p.detail for p in result.regressions}
    assert set(slowed) & HALVES[name], slowed
    # a point not moved fails only as part of its collective (its median point slower than the threshold)
    assert all(why.startswith("with its collective") for point, why in slowed.items() if point not in HALVES[name])


@pytest.mark.parametrize("samples", [False, True], ids=["nccl-tests-like", "with samples"])
def test_unchanged_pairs_and_half_the_points_faster_still_pass(samples):
    passed = []
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        base, new = _run(rng, "b", samples=samples), _run(rng, "n", samples=samples)
        passed.append(compare(base, new, max_regression=0.1).passed)
    assert sum(passed) >= 19, passed
    rng = np.random.default_rng(7)
    faster = compare(_run(rng, "b", samples=samples),
                     _run(rng, "n", factor=0.5, moved=HALVES["top 4 sizes in and out of place"], samples=samples),
                     max_regression=0.1)
    assert faster.passed, [(p.label, p.verdict) for p in faster.regressions]
