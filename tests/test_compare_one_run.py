"""compare with no repeated baseline run: the points' scatter from NEW's repeated runs or from the pair
itself (robust to a few slow points), the run shift assumed from it (said so), each point judged
against its run's other points."""

from __future__ import annotations

import math

import numpy as np
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.compare import compare
from commbench.results.noise import ASSUMED_SHIFT_PER_POINT_SD, estimate_run_to_run, pair_scatter
from tests.test_compare import write
from tests.test_compare_runs import SIZES, runs


def test_pair_scatter_is_the_points_sd_and_a_few_slow_points_do_not_inflate_it():
    rng = np.random.default_rng(0)
    keys = [("k", i) for i in range(24)]
    sigma = 0.05  # each side's point scatter: the pair's log ratio has sd sigma * sqrt(2)
    diffs = {k: 0.3 + rng.normal(0, sigma * math.sqrt(2)) for k in keys}  # 0.3: the run shift, removed
    collective_of = {k: "all_reduce" for k in keys}
    inverse = {k: 2.0 for k in keys}
    clean = pair_scatter(diffs, collective_of, inverse)
    assert 0.6 * sigma < clean.sigma_pooled < 1.5 * sigma and not clean.shift_known
    assert clean.scatter_from == "the pair" and 1 <= clean.df < 24
    slow = {**diffs, keys[0]: diffs[keys[0]] + math.log(2), keys[1]: diffs[keys[1]] + math.log(2)}
    # the pairwise scale (noise.pair_scale) loses a little more than the MAD to 2 of 24 points (x1.2 at the normal:
    # 45 of 276 pairs gone), but no more for x1000 than for x2: the slowdown's size never enters it
    assert pair_scatter(slow, collective_of, inverse).sigma_pooled < 1.5 * clean.sigma_pooled
    far = {**slow, keys[0]: diffs[keys[0]] + math.log(1000), keys[1]: diffs[keys[1]] + math.log(1000)}
    assert pair_scatter(far, collective_of, inverse).sigma_pooled == pair_scatter(slow, collective_of, inverse).sigma_pooled
    assert pair_scatter({k: diffs[k] for k in keys[:2]}, collective_of, inverse) is None  # < 3 points


def test_new_runs_give_the_points_scatter_but_never_the_run_shift():
    rng = np.random.default_rng(1)
    new = [{k: 0.4 * r + rng.normal(0, 0.03) for k in range(12)} for r in range(3)]  # big shifts between runs
    r2r = estimate_run_to_run([], scatter_sets=[new])
    assert not r2r.shift_known and 0.015 < r2r.sigma_pooled < 0.05  # the shifts do not leak into the scatter
    assert r2r.shift_sd(r2r.sigma_pooled ** 2) == ASSUMED_SHIFT_PER_POINT_SD * r2r.sigma_pooled
    base = [{k: rng.normal(0, 0.03) for k in range(12)} for _ in range(2)]
    assert estimate_run_to_run([base], scatter_sets=[new]).shift_known


def test_one_run_each_a_shift_within_the_assumed_noise_passes_and_one_slow_point_stands_out(tmp_path):
    rng = np.random.default_rng(2)
    base = runs(rng, 1, prefix="b", shifts=[0.0], point_sd=0.06, within_sd=0.005)
    same = runs(rng, 1, prefix="n", shifts=[0.04], point_sd=0.06, within_sd=0.005)
    result = compare(base, same, max_regression=0.1)
    # within-run intervals alone (0.5% samples) flag points 10-25% apart (40 of 40 seeds); the pair's scatter not
    assert result.passed, [(p.label, p.ratio, p.verdict) for p in result.points]
    assert result.run_to_run.scatter_from == "the pair" and not result.run_to_run.shift_known
    slow = runs(rng, 1, prefix="n", shifts=[0.04], point_sd=0.06, within_sd=0.005, factors={SIZES[5]: 3.0})
    judged = compare(base, slow, max_regression=0.1)
    assert [p.key[5] for p in judged.regressions] == [SIZES[5]]
    assert "against its run's other points" in judged.regressions[0].detail
    b, n = write(tmp_path / "b.jsonl", base), write(tmp_path / "n.jsonl", slow)
    out = CliRunner().invoke(app, ["compare", str(b), str(n)])
    assert out.exit_code == 1 and "run shift is not measured" in out.output and "assumed" in out.output
    doc = CliRunner().invoke(app, ["compare", str(b), str(n), "--json"]).output
    assert '"run_shift_measured": false' in doc and '"point_scatter_from": "the pair"' in doc


def test_one_run_each_a_whole_run_x1_3_slower_fails_as_its_collective():
    rng = np.random.default_rng(3)
    base = runs(rng, 1, prefix="b", shifts=[0.0], point_sd=0.03, within_sd=0.01)
    slow = runs(rng, 1, prefix="n", shifts=[math.log(1.3)], point_sd=0.03, within_sd=0.01)
    result = compare(base, slow, max_regression=0.1)
    assert result.regressed_collectives == ["all_reduce"]
    assert all(p.detail.startswith("with its collective") for p in result.regressions) and result.regressions
