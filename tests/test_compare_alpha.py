"""compare's statistic and alpha split: auto judges the 10th percentile where both files have >= 20
per-iteration samples (else the median, else nccl-tests' time) and says so; the 5% false-alarm budget
goes half to the collective tests, half to the point tests, so a x1.3 shift on every point inside a
known run-to-run noise is flagged where the even split (alpha / number of tests) missed it, while A/A
pairs drawn from the same model stay within 5%."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from commbench.errors import CommbenchError
from commbench.results.alpha_split import AlphaSplit
from commbench.results.compare import compare
from commbench.results.noise import t_quantile
from tests.test_compare import record, write
from tests.test_compare_runs import SIZES, run_cli, runs


def test_auto_judges_the_min_with_samples_the_median_without_and_nccl_time_for_imported_files(tmp_path):
    rng = np.random.default_rng(11)
    base, new = runs(rng, 1, prefix="b"), runs(rng, 1, prefix="n")
    result = compare(base, new, max_regression=0.1)
    assert {p.statistic for p in result.points} == {"min"}
    assert all(p.median_ratio is not None and p.median_ratio > 0 for p in result.points)
    few = [dataclasses.replace(m, iter_times_us=m.iter_times_us[:19]) for m in new]  # < 20 samples: no tail
    with pytest.raises(CommbenchError, match="holds 19 per-iteration sample"):   # auto: refused, not the median
        compare(base, few, max_regression=0.1)                                    # unsaid (test_compare_short_new)
    assert {p.statistic for p in compare(base, few, max_regression=0.1, statistic="median").points} == {"median"}
    assert all(p.median_ratio is None for p in compare(base, few, max_regression=0.1, statistic="median").points)
    imported = [dataclasses.replace(m, time_us_median=None, time_us_mean=None, time_us_min=None, time_us_max=None,
                                    iter_times_us=[]) for m in base]
    assert {p.statistic for p in compare(imported, new, max_regression=0.1).points} == {"nccl-avg"}
    assert {p.statistic for p in compare(base, new, max_regression=0.1, statistic="median").points} == {"median"}
    assert {p.statistic for p in compare(base, new, max_regression=0.1, statistic="p10").points} == {"p10"}
    b, n = write(tmp_path / "b.jsonl", base), write(tmp_path / "n.jsonl", new)
    shown = run_cli(b, n)
    assert shown.exit_code == 0 and "statistic judged: min" in shown.output and "median ratio" in shown.output
    doc = json.loads(run_cli(b, n, "--json").stdout)
    assert doc["noise"]["statistics"] == ["min"] and doc["points"][0]["median_ratio"] is not None
    assert doc["noise"]["quantile_collective"] < doc["noise"]["quantile"]
    median = json.loads(run_cli(b, n, "--json", "--statistic", "median").stdout)
    assert median["noise"]["statistics"] == ["median"] and median["points"][0]["median_ratio"] is None


@pytest.mark.parametrize("num_new", [1, 3])
@pytest.mark.parametrize("scatter_known, shift_known", [(True, True), (True, False), (False, False)])
def test_the_shares_sum_to_alpha(num_new, scatter_known, shift_known):
    collective_of = {("a", k): "all_reduce" for k in range(9)} | {("b", 0): "broadcast", ("b", 1): "broadcast"}
    split = AlphaSplit(alpha=0.05, num_new=num_new, collective_of=collective_of, scatter_known=scatter_known,
                       shift_known=shift_known)
    total = 0.0
    for whole in ([True] if num_new == 1 else [True] + [False] * num_new):
        total += sum(split.alpha_of("collective", c, whole) for c in ("all_reduce", "broadcast"))
        for key in collective_of:
            kinds = (["point"] if split.vs_base_judged(key) else []) + (["vs its run"] if split.vs_run_judged(key) else [])
            assert len(kinds) == split.kinds_of(key) >= 1
            total += sum(split.alpha_of(kind, key, whole) for kind in kinds)
    assert total == pytest.approx(0.05)
    assert split.kinds_of(("b", 0)) == 1 and split.vs_base_judged(("b", 0))  # 2 points: no test against its run
    # the run shift unknown: a point of 9 is judged against its run only (its ratio to BASE carries the shift)
    assert split.vs_base_judged(("a", 0)) == (shift_known or not scatter_known)
    assert split.alpha_of("collective", "all_reduce", True) == pytest.approx(0.025 / 2 / (1 if num_new == 1 else 2))


def _with_history(shift_new, seed=12):
    """One run per file and 10 history runs whose run shifts alternate +-0.065 (sigma_run ~0.068 known)."""
    rng = np.random.default_rng(seed)
    base = runs(rng, 1, prefix="b", shifts=[0.0], point_sd=0.01, within_sd=0.01)
    history = runs(rng, 10, prefix="h", shifts=[0.065 * (-1) ** r for r in range(10)], point_sd=0.01, within_sd=0.01)
    new = runs(rng, 1, prefix="n", shifts=[shift_new], point_sd=0.01, within_sd=0.01)
    return base, new, history


def test_a_shift_on_every_point_the_even_split_missed_is_flagged_and_a_a_passes():
    base, new, history = _with_history(math.log(1.3))
    result = compare(base, new, max_regression=0.1, history=history)
    assert result.regressed_collectives == ["all_reduce"], result.shifts
    (shift,) = result.shifts
    sd = math.log(shift.geomean / shift.low) / result.quantile_collective
    even = t_quantile(1 - 0.05 / result.num_tests, result.run_to_run.df_run)  # alpha / tests for every test
    assert result.num_tests == 2 * len(SIZES) + 1 and even > result.quantile_collective + 1
    assert shift.geomean * math.exp(-even * sd) < 1.1  # the even split's interval held 1.1: it passed this
    for same in (0.0, 0.065, -0.065):
        base, new, history = _with_history(same)
        assert compare(base, new, max_regression=0.1, history=history).passed


def test_a_a_false_alarms_stay_within_5_percent_under_the_model():
    """150 A/A comparisons drawn from the gate's own model (run shift sd 0.1, point sd 0.05): one run per
    file, 6 history runs; the budget is 5% for the whole comparison (Bonferroni: at most)."""
    rng = np.random.default_rng(13)
    alarms = 0
    for trial in range(150):
        model = dict(shift_sd=0.1, point_sd=0.05, within_sd=0.05)
        base, new = runs(rng, 1, prefix=f"b{trial}", **model), runs(rng, 1, prefix=f"n{trial}", **model)
        alarms += not compare(base, new, max_regression=0.05, history=runs(rng, 6, prefix="h", **model)).passed
    assert alarms <= 0.05 * 150 + 3, alarms


def test_the_min_has_an_upper_within_run_interval_and_p10_a_two_sided_one():
    from commbench.results.noise import quantile_interval, within_run_sd

    samples = np.array([100.0, 101, 104, 110, 120] + [130] * 35)  # 40 iterations, the fastest few spread out
    assert within_run_sd(samples[np.random.default_rng(0).permutation(40)], "min") >= np.log(104 / 100) / 1.96
    low, high = quantile_interval(samples, 0.1)  # n q = 4 -+ 1.96 sqrt(3.6): the 1st..8th smallest
    assert (low, high) == (100.0, 130.0)
    few = samples[:19]
    assert within_run_sd(few, "p10") is not None  # the interval exists; the gate only needs >= 20 to judge it
    base = [record(1024, samples)]
    assert compare(base, [record(1024, few)], max_regression=0.1, statistic="median",
                   allow_fewer_iters=True).points[0].statistic == "median"
    with pytest.raises(CommbenchError, match="needs >= 20"):   # auto: the low tail it cannot judge is refused
        compare(base, [record(1024, few)], max_regression=0.1, allow_fewer_iters=True)


def test_a_forced_statistic_a_file_lacks_is_refused_in_one_line(tmp_path):
    rng = np.random.default_rng(14)
    base = runs(rng, 1, prefix="b")
    imported = [dataclasses.replace(m, time_us_median=None, time_us_mean=None, iter_times_us=[]) for m in base]
    b, i = write(tmp_path / "b.jsonl", base), write(tmp_path / "i.jsonl", imported)
    # `imported` is the base's own run stripped to what an nccl-tests import holds: the same run (refused as such
    # since the text-export check, fix-Q1), so --allow-same-run lets the statistic check speak
    assert run_cli(b, i).exit_code == 2 and "holds no run of its own" in run_cli(b, i).output
    for args in ((b, i, "--statistic", "p10"), (i, b, "--statistic", "min"), (i, b, "--statistic", "median")):
        result = run_cli(*args, "--allow-same-run")
        assert result.exit_code == 2 and f"--statistic={args[3]} is invalid" in result.output, result.output
        assert "Traceback" not in result.output and "lack it" in result.output
    assert run_cli(b, i, "--allow-same-run").exit_code == 0  # auto: nccl-tests' time, which both hold
