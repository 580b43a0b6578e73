"""The gate's tests, run by `compare.compare` (the model and the tests are described there)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from commbench.errors import CommbenchError
from commbench.results.compare import (GATE_STATISTICS, MIN_SAMPLES_FOR_TAIL, TAIL_STATISTICS, Comparison,
                                       CollectiveShift, PointComparison, bad_reason, choose_statistic, gate_time_us,
                                       is_bad, is_unchecked, log_table, point_label, record_within_sd)
from commbench.results.alpha_split import AlphaSplit
from commbench.results.noise import (RunToRun, assumed_scatter, estimate_run_to_run, pair_scatter, point_quantile,
                                     t_quantile)

_MEDIAN_EFFICIENCY = math.pi / 2  # var(median of K normals) ~ (pi/2) sigma^2 / K


@dataclass(frozen=True)
class _Test:
    scope: str
    kind: str  # "point", "vs its run"
    log_ratio: float  # what the test judged: vs BASE ("point") or vs the run's shift ("vs its run")
    vs_base: float  # log ratio against BASE
    sd: float | None
    source: str
    regressed: bool
    quantile: float  # the test's one-sided t quantile
    judged: bool = True  # False: kept for its ratio only (against BASE while the run shift is unknown)


def _sd(within_var: float | None, between_var: float | None) -> tuple[float | None, str]:
    """The larger of the two noises (None when neither is known) and which one it was."""
    if between_var is None and within_var is None:
        return None, ""
    if between_var is None or (within_var is not None and within_var >= between_var):
        return math.sqrt(within_var), "within run"
    return math.sqrt(between_var), "run to run"


def _df(r2r: RunToRun | None, source: str, run_to_run_df: float) -> float:
    """Degrees of freedom of a test's noise: the run-to-run estimate's where it is the larger noise; the within-run
    interval's (normal) otherwise, unless the run-to-run noise came from the pair's own few points (one run a side,
    no history): then that estimate's df whichever is larger, since a run-to-run scatter read from three points can
    fall far below its true value (a point's min moved 12% sd between runs where the pair's points said 0.5% and
    its within-run interval 5%: a third of unchanged 5-point sweeps failed; found from outside)."""
    if source == "run to run" or (r2r is not None and r2r.scatter_from in ("the pair", "assumed")):
        return run_to_run_df
    return math.inf


def _mean_sq(values: list) -> float | None:
    return None if not values or any(v is None for v in values) else float(np.mean(np.square(values)))


def _beyond(log_ratio: float, sd: float | None, q: float, threshold: float) -> bool:
    """Slower than the threshold and than the noise allows (sd None: the threshold alone decides)."""
    return math.exp(log_ratio) - 1 > threshold + 1e-9 and (sd is None or log_ratio - q * sd > 0)


def _scope_tests(keys, base, new, scope, run_indices, r2r: RunToRun | None, q, threshold, collective_of, split):
    """Per key the tests of one scope (a run of NEW or all of them), and the collectives' shifts.
    `q(df, kind, key)`: the one-sided quantile of a test of that kind ("point", "vs its run", "collective");
    `split` (AlphaSplit) says which point tests are judged (a test not judged is kept for its ratio)."""
    (bt, bw), (nt, nw) = base, new
    per_key, diffs, within_vars, rn_rb = {}, {}, {}, {}
    for key in keys:
        xn = [nt[i][key] for i in run_indices if key in nt[i]]
        xb = [row[key] for row in bt if key in row]
        if not xn or not xb:
            continue
        inv = 1 / len(xn) + 1 / len(xb)
        wn = _mean_sq([nw[i].get(key) for i in run_indices if key in nt[i]])
        wb = _mean_sq([w.get(key) for row, w in zip(bt, bw) if key in row])
        within = None if wn is None or wb is None else wb / len(xb) + wn / len(xn)
        # against BASE a point carries the run shift: measured, or (no repeated baseline run) assumed from the
        # points' scatter (RunToRun.shift_sd); within-run intervals alone say nothing of how a point moves between
        # runs (the min of 20 iterations moved 12% sd run to run where its interval said 5%: found from outside)
        between = None if r2r is None else (r2r.shift_sd(r2r.sigma_point(key) ** 2) ** 2 + r2r.sigma_point(key) ** 2) * inv
        diff = float(np.mean(xn) - np.mean(xb))
        sd, source = _sd(within, between)
        qk = q(_df(r2r, source, r2r.shift_and_scatter_df(r2r.sigma_point(key) ** 2, r2r.point_df(key))
                   if r2r else math.inf), "point", key)
        judged = split.vs_base_judged(key)
        per_key[key] = [_Test(scope, "point", diff, diff, sd, source, judged and _beyond(diff, sd, qk, threshold), qk,
                              judged)]
        diffs[key], within_vars[key], rn_rb[key] = diff, within, inv
    shifts = []
    for collective in sorted({collective_of[k] for k in diffs}):
        mine = [k for k in diffs if collective_of[k] == collective]
        count = len(mine)
        mean_diff = float(np.mean([diffs[k] for k in mine]))
        inv = float(np.mean([rn_rb[k] for k in mine]))
        within = None if any(within_vars[k] is None for k in mine) else sum(within_vars[k] for k in mine) / count ** 2
        between = None
        if r2r is not None:
            point_var = float(np.mean([r2r.sigma_point(k) ** 2 for k in mine]))
            between = (r2r.shift_sd(point_var) ** 2 + point_var / count) * inv
        sd, source = _sd(within, between)
        # the shift's and the points' parts at their own df (an assumed shift: the points' scatter's df)
        qc = q(_df(r2r, source, r2r.shift_and_scatter_df(point_var, r2r.df, count) if r2r else math.inf),
               "collective", collective)
        low, high = (None, None) if sd is None else (math.exp(mean_diff - qc * sd), math.exp(mean_diff + qc * sd))
        shifts.append(CollectiveShift(collective=collective, scope=scope, num_points=count, geomean=math.exp(mean_diff),
                                      low=low, high=high, regressed=_beyond(mean_diff, sd, qc, threshold)))
        if not all(split.vs_run_judged(k) for k in mine):
            continue  # a point against its own run's shift needs the points' scatter and >= 3 points
        run_shift = float(np.median([diffs[k] for k in mine]))
        for k in mine:
            rel = diffs[k] - run_shift
            between = r2r.sigma_point(k) ** 2 * rn_rb[k] * (1 + _MEDIAN_EFFICIENCY / count)
            sd, source = _sd(within_vars[k], between)
            qk = q(_df(r2r, source, r2r.point_df(k)), "vs its run", k)
            slower = _beyond(rel, sd, qk, threshold) and math.exp(diffs[k]) - 1 > threshold + 1e-9
            per_key[k].append(_Test(scope, "vs its run", rel, diffs[k], sd, source, slower, qk))
    return per_key, shifts


def _pair_scatter(bt, nt, collective_of) -> RunToRun | None:
    """noise.pair_scatter of the mean log ratios new/base (over the runs) at the keys both sides have."""
    diffs, inverse = {}, {}
    for key in set().union(*bt, *nt):
        xn, xb = [row[key] for row in nt if key in row], [row[key] for row in bt if key in row]
        if xn and xb:
            diffs[key], inverse[key] = float(np.mean(xn) - np.mean(xb)), 1 / len(xn) + 1 / len(xb)
    return pair_scatter(diffs, collective_of, inverse)


def _bad_verdict(key, base_runs, new_runs, stat, comparable=frozenset(), shared=False, collectives=None
                 ) -> tuple[str, str, list[int]] | None:
    """(verdict, detail, missing run numbers) for failed/wrong/missing records of a key in NEW. A point is
    missing where NEW holds it in fewer runs than BASE does (at most NEW's run count): a run that stopped
    short; or where a run of NEW in `comparable` (its numbers from 1: the runs holding a point of BASE) lacks a
    point every run of BASE holds. Runs that measured different sizes, as BASE's own runs did, are no loss (a
    file against itself passes). A failed or wrong record of NEW is a verdict whatever BASE held there ("newly"
    where BASE never failed it so; "failed in the base too" said in the detail): a failed run never passes a gate.
    `shared`: NEW skips the point (NCCL refused the combination) no more often than BASE (_skips_base_shares), so its
    skipped records are no verdict. `collectives`: per run of NEW the collectives it holds; where
    NEW holds the point in too few runs, the runs blamed are those that measured its collective (a complete
    all_gather run beside a cut all_reduce run did not lose all_reduce points), all of them where none did."""
    base_ok = any(key in run and not is_bad(run[key]) for run in base_runs)
    in_base = {"failed" if r == "skipped" else r for r in (bad_reason(run[key]) for run in base_runs if key in run)}
    missing, worst = [], None
    for index, run in enumerate(new_runs, start=1):
        m = run.get(key)
        if m is None:
            missing.append(index)
            continue
        reason = bad_reason(m, stat)
        if reason == "skipped" and (not base_ok or shared):
            continue
        if reason is not None and worst is None:
            reason = "failed" if reason == "skipped" else reason
            detail = m.error or (f"#wrong {m.num_wrong}" if reason == "wrong" else "no time")
            too = f"; {reason} in the base too" if reason in in_base else ""
            worst = (("newly " if base_ok and not too else "") + reason,
                     f"run {index}/{len(new_runs)}: {detail}"[:80] + too)
    expected = min(sum(key in run for run in base_runs), len(new_runs))
    if len(new_runs) - len(missing) >= expected:
        # a run of NEW that compares with BASE (holds one of its points) still misses a point every run of BASE
        # holds: an earlier complete run left in the file must not cover a run that stopped short after it
        every_base_run = all(key in run for run in base_runs)
        missing = [i for i in missing if every_base_run and i in comparable]
    elif collectives is not None:
        measured_it = [i for i in missing if key[1] in collectives[i - 1]]
        missing = measured_it or missing
    if worst:
        return worst[0], worst[1], missing
    if missing:
        where = "every run" if len(missing) == len(new_runs) else "run " + ",".join(map(str, missing))
        return "missing", f"not in {where} of the new file", missing
    return None


def _skipped_share(key, runs) -> float:
    """The share of `runs` whose record of `key` was skipped (status "skipped": NCCL refused a tuning combination)."""
    skipped = sum(1 for run in runs if key in run and bad_reason(run[key]) == "skipped")
    return skipped / len(runs) if runs else 0.0


def _skips_base_shares(key, base_runs, new_runs) -> bool:
    """NEW's runs skip `key` (NCCL refused the combination: status "skipped") no more often than BASE's: no change, so
    no failure of the gate; the point is named (skipped in the base too). A failed or wrong record never counts as
    shared: the same point failed in both files fails the gate (a failed run must not pass one)."""
    return 0 < _skipped_share(key, new_runs) <= _skipped_share(key, base_runs)


def _base_bad_text(key, base_runs) -> str:
    """Why BASE holds no good record of `key`: its first bad record's reason and error."""
    for index, run in enumerate(base_runs, start=1):
        m = run.get(key)
        if m is not None and (reason := bad_reason(m)) is not None:
            detail = m.error or (f"#wrong {m.num_wrong}" if reason == "wrong" else "no time")
            return f"base run {index}/{len(base_runs)} {reason}: {detail}"[:100]
    return "base failed or wrong"


def _unchecked_runs(key, base_runs, new_runs) -> list[int]:
    """Runs of NEW (numbered from 1) whose good record of `key` was measured without the data check, where
    NEW checked the point in fewer runs than BASE did: unchecked data never counts as wrong, so it must not
    pass as verified. As for missing points, runs checked as in BASE are no loss: a file against itself passes."""
    def checked(runs) -> int:
        return sum(1 for run in runs if key in run and not is_bad(run[key]) and not is_unchecked(run[key]))

    if checked(new_runs) >= checked(base_runs):
        return []
    return [index for index, run in enumerate(new_runs, start=1) if key in run and is_unchecked(run[key])]


def judge(base_runs, new_runs, hist_runs, base_keys, *, max_regression, statistic, allow_missing, alpha,
          only_in_new, allow_unchecked=False, planned_whole=frozenset(), cut_allowed=frozenset()) -> Comparison:
    """`planned_whole`: numbers (from 1) of NEW's runs that hold every point they plan: what they miss of BASE is
    named not planned (Comparison.not_planned) beside missing. `cut_allowed`: numbers of NEW's runs cut short: the
    points of BASE they planned and never reached are named in Comparison.cut_short_lost (verdict "not reached"),
    not missing (the caller fails a run cut short unless --allow-cut-short)."""
    first = {}
    for run in (*base_runs, *new_runs):
        for key, m in run.items():
            first.setdefault(key, m)
    stats, both = {}, []
    for key in base_keys:
        good_b = [run[key] for run in base_runs if key in run and not is_bad(run[key])]
        good_n = [run[key] for run in new_runs if key in run and not is_bad(run[key])]
        chosen = choose_statistic(good_b, good_n, statistic) if good_b and good_n else None
        if chosen:
            stats[key] = chosen
        elif good_b and good_n:
            both.append((good_b, good_n))
    if both and not stats:  # good points on both sides, none judged: a pass would be a pass on nothing
        held = ["; ".join(sorted({s for m in side for s in GATE_STATISTICS if gate_time_us(m, s)})) or "none"
                for side in ([m for b, _ in both for m in b], [m for _, n in both for m in n])]
        raise CommbenchError(f"no point has a time statistic both files hold (base: {held[0]}; new: {held[1]}): "
                             "nothing can be compared; nccl-tests logs need the same -a mode")
    base_runs, new_runs, hist_runs, trimmed = _same_sample_counts(stats, base_runs, new_runs, hist_runs)
    bt, nt, ht = (log_table(runs, stats) for runs in (base_runs, new_runs, hist_runs))
    collective_of = {k: first[k].collective for k in stats}
    # the run shift from baseline runs only (a slow run of NEW is the news); the points' scatter from NEW's too.
    shift_sets = _baseline_sets(bt, ht)
    # nothing to measure the points' scatter with (one run a side, no collective of 3 points): assumed, never the
    # within-run intervals alone (README: such a point "carries that assumed shift and the points' scatter")
    r2r = (estimate_run_to_run(shift_sets, scatter_sets=[nt]) or _pair_scatter(bt, nt, collective_of)
           or (assumed_scatter() if stats else None))
    within = [[{k: record_within_sd(m, stats[k]) for k, m in run.items() if k in stats} for run in runs]
              for runs in (base_runs, new_runs)]
    num_new = len(new_runs)
    scopes = [(f"run {i + 1}/{num_new}", [i]) for i in range(num_new)] if num_new > 1 else []
    scopes.append(("all runs", list(range(num_new))))
    split = AlphaSplit(alpha=alpha, num_new=num_new, collective_of=collective_of, scatter_known=r2r is not None,
                       shift_known=r2r is not None and r2r.shift_known)
    num_tests = split.num_tests
    any_key = next(iter(collective_of), None)
    # a point's noise is heavy-tailed (noise.POINT_TAIL_DF) where measured on repeated runs; a scatter read from the
    # pair's own points already takes few df for that (noise.PAIR_DF_PER_POINT), an assumed one its largest sd
    heavy = r2r is not None and r2r.scatter_from == "repeated runs"

    def point_q(p: float, df: float) -> float:
        return point_quantile(p, df) if heavy else t_quantile(p, df)

    q = point_q(1 - split.alpha_of("point", any_key, True), r2r.df if r2r else math.inf) if any_key else math.nan
    q_collective = t_quantile(1 - split.alpha_of("collective", None, True), r2r.shift_and_scatter_df(
        r2r.sigma_pooled ** 2, r2r.df, len(stats) / max(len(set(collective_of.values())), 1)) if r2r else math.inf)
    tests: dict = {k: [] for k in stats}
    shifts = []
    for scope, indices in scopes:
        def quantile(df: float, kind: str, of, whole=scope == "all runs") -> float:
            p = 1 - split.alpha_of(kind, of, whole)
            return t_quantile(p, df) if kind == "collective" else point_q(p, df)
        per_key, scope_shifts = _scope_tests(list(stats), (bt, within[0]), (nt, within[1]), scope, indices,
                                             r2r, quantile, max_regression, collective_of, split)
        for k, found in per_key.items():
            tests[k].extend(found)
        shifts.extend(scope_shifts)
    points, missing, unchecked, known_failed, not_planned, cut_lost, base_not_ok = [], [], [], [], [], [], []
    comparable = {i for i, run in enumerate(new_runs, start=1) if any(k in run for k in base_keys)}
    collectives = [{k[1] for k in run} for run in new_runs]
    collective_regressed = {s.collective: s for s in shifts if s.scope == "all runs" and s.regressed}
    for key in base_keys:
        m = first[key]
        ident = dict(key=key, collective=m.collective, label=point_label(m))
        shared = _skips_base_shares(key, base_runs, new_runs)
        bad = _bad_verdict(key, base_runs, new_runs, stats.get(key), comparable, shared, collectives)
        not_reached = []
        if bad and bad[2] and set(bad[2]) & set(cut_allowed):   # planned by a run cut short: --allow-cut-short
            not_reached = [f"run {i}/{num_new}" for i in bad[2] if i in cut_allowed]
            cut_lost += [f"{ident['label']} ({run})" for run in not_reached]
            rest = [i for i in bad[2] if i not in cut_allowed]
            bad = None if bad[0] == "missing" and not rest else (bad[0], bad[1], rest)
        if shared:
            known_failed.append(ident["label"])
        unchecked += [f"{ident['label']} (run {i}/{num_new})" for i in _unchecked_runs(key, base_runs, new_runs)]
        if bad and bad[2]:
            missing += [f"{ident['label']} (run {i}/{num_new})" for i in bad[2]]
            not_planned += [f"{ident['label']} (run {i}/{num_new})" for i in bad[2] if i in planned_whole]
            if bad[0] == "missing" and set(bad[2]) <= set(planned_whole):
                where = "every run" if len(bad[2]) == num_new else "run " + ",".join(map(str, bad[2]))
                bad = ("missing", f"not planned by {where} of the new file (its plan differs)", bad[2])
        if bad and bad[0] != "missing":
            points.append(PointComparison(**ident, statistic=stats.get(key, "-"), verdict=bad[0], detail=bad[1]))
            continue
        if key not in stats or not tests[key]:
            if bad:
                points.append(PointComparison(**ident, statistic="-", verdict="missing", detail=bad[1]))
            elif not_reached:
                points.append(PointComparison(**ident, statistic="-", verdict="not reached",
                                              detail=f"{', '.join(not_reached)} cut short before it"))
            elif not any(key in run and not is_bad(run[key]) for run in base_runs):
                why = "skipped in the base too" if ident["label"] in known_failed else _base_bad_text(key, base_runs)
                if any(key in run and not is_bad(run[key]) for run in new_runs):   # a point of NEW judged on nothing
                    base_not_ok.append(f"{ident['label']} ({why})")
                points.append(PointComparison(**ident, statistic="-", verdict="not ok in base", detail=why))
            else:
                points.append(PointComparison(**ident, statistic="-", verdict="not comparable",
                                              detail="no statistic in both files"))
            continue
        point = _point(ident, key, stats[key], tests[key], bt, nt, max_regression, bad)
        points.append(dataclasses.replace(point, median_ratio=_median_ratio(key, base_runs, new_runs))
                      if stats[key] != "median" else point)
    points = _with_their_collective(points, collective_regressed, max_regression)
    return Comparison(points=points, shifts=shifts, max_regression=max_regression, run_to_run=r2r, quantile=q,
                      quantile_collective=q_collective,
                      num_tests=num_tests, runs={"base": len(base_runs), "new": num_new, "history": len(hist_runs)},
                      missing=missing, not_planned=not_planned, allow_missing=allow_missing, only_in_new=only_in_new,
                      unchecked=unchecked, allow_unchecked=allow_unchecked, trimmed=trimmed,
                      known_failed=known_failed, num_new_compared=len(comparable), cut_short_lost=cut_lost,
                      base_not_ok=base_not_ok)


def _baseline_sets(base_table: list[dict], hist_table: list[dict]) -> list[list[dict]]:
    """The sets of baseline runs the run shift is measured within (each centred on its own point means): BASE's
    runs and the --history runs apart where each side has two runs or more, so that an offset between BASE and
    its history is no shift within either. A side of one run measures no shift alone: it joins the other side
    (one BASE run and two history runs are three baseline runs, two shifts; apart, BASE's run counted for
    nothing), unless it lacks a point the other side's runs share, which would shrink the block the shift is
    measured on (a set's runs are compared on the points they all hold)."""
    base, hist = [r for r in base_table if r], [r for r in hist_table if r]
    if len(base) >= 2 and len(hist) >= 2:
        return [base, hist]
    lone, others = (base, hist) if len(base) < 2 else (hist, base)
    shared = set.intersection(*(set(r) for r in others)) if len(others) >= 2 else set()
    if lone and shared - set(lone[0]):
        return [base, hist]
    return [base + hist]


def _same_sample_counts(stats: dict, base_runs, new_runs, hist_runs):
    """The runs with a tail statistic (the fastest / 10th percentile of the iterations) taken over the same
    number of iterations on every side: the fastest of 200 iterations is faster by chance than the fastest of
    20, so a NEW measured with fewer iterations looked slower (and one with more hid a slowdown). Where the
    records of a point hold different numbers of samples, each keeps its first n (loop order: what a run of n
    iterations measures), n the fewest any of them holds. Returns the runs and {key: n} of the points trimmed."""
    counts: dict = {}
    for runs in (base_runs, new_runs, hist_runs):
        for run in runs:
            for key, m in run.items():
                if stats.get(key) in TAIL_STATISTICS and len(m.iter_times_us) >= MIN_SAMPLES_FOR_TAIL:
                    counts.setdefault(key, set()).add(len(m.iter_times_us))
    common = {key: min(found) for key, found in counts.items() if len(found) > 1}
    if not common:
        return base_runs, new_runs, hist_runs, {}

    def trim(runs):
        return [{key: dataclasses.replace(m, iter_times_us=list(m.iter_times_us[:common[key]]))
                 if key in common and len(m.iter_times_us) > common[key] else m for key, m in run.items()}
                for run in runs]

    return trim(base_runs), trim(new_runs), trim(hist_runs), common


def _with_their_collective(points, collective_regressed, threshold) -> list[PointComparison]:
    """Points "slower (within noise)" of a regressed collective whose median point is slower than the
    threshold too are REGRESSED with it (the slowdown is the collective's; not when a few points of
    their own drive its mean)."""
    ratios: dict = {}
    for p in points:
        if p.ratio is not None:
            ratios.setdefault(p.collective, []).append(p.ratio)
    out = []
    for p in points:
        whole = collective_regressed.get(p.collective)
        if whole is not None and p.verdict == "slower (within noise)" and \
                float(np.median(ratios[p.collective])) - 1 > threshold + 1e-9:
            p = dataclasses.replace(p, verdict="REGRESSED",
                                    detail=f"with its collective: x{whole.geomean:.2f} over its {whole.num_points} points")
        out.append(p)
    return out


def _median_ratio(key, base_runs, new_runs) -> float | None:
    """new/base of the good runs' medians (geometric means), shown beside a tail statistic."""
    sides = [[math.log(run[key].time_us_median) for run in runs if key in run and not is_bad(run[key])
              and (run[key].time_us_median or 0) > 0] for runs in (base_runs, new_runs)]
    return math.exp(float(np.mean(sides[1])) - float(np.mean(sides[0]))) if all(sides) else None


def _point(ident, key, statistic, tests, bt, nt, threshold, bad) -> PointComparison:
    # "all runs" comes last; the test that judged the point (against its run while the run shift is unknown)
    summary = next((t for t in reversed(tests) if t.judged), tests[-1])
    failing = next((t for t in tests if t.regressed), None)
    shown = failing or summary
    base_us = math.exp(float(np.mean([row[key] for row in bt if key in row])))
    new_us = math.exp(float(np.mean([row[key] for row in nt if key in row])))
    ratio = math.exp(shown.vs_base)
    low = high = None
    if shown.sd is not None:
        low, high = ratio * math.exp(-shown.quantile * shown.sd), ratio * math.exp(shown.quantile * shown.sd)
    if failing:  # also where some run lacks the point: --allow-missing permits the gap, never the slowdown
        verdict = "REGRESSED"
        detail = failing.scope + (f", x{math.exp(failing.log_ratio):.2f} against its run's other points"
                                  if failing.kind == "vs its run" else "") + (f"; {bad[1]}" if bad else "")
    elif bad:  # some run lacks the point: the timings of the others are still shown
        verdict, detail = "missing", bad[1]
    elif ratio - 1 > threshold + 1e-9:
        verdict, detail = "slower (within noise)", ""
        if shown.kind == "vs its run":
            detail = f"x{math.exp(shown.log_ratio):.2f} against its run's other points (the run's shift: collective test)"
    elif ratio < 1 and high is not None and high < 1:
        verdict, detail = "faster", ""
    else:
        verdict, detail = "ok", ""
    return PointComparison(**ident, statistic=statistic, verdict=verdict, base_us=base_us, new_us=new_us, ratio=ratio,
                           ratio_low=low, ratio_high=high, detail=detail, noise_source=shown.source)
