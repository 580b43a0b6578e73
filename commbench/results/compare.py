"""Compare results files point by point: a CI gate for NCCL / driver / config changes.

Points match on what was measured: backend, collective, dtype, op, placement (in/out of place,
group layout), size, world and group size, workload params; never on run ids. Per point one named
time statistic, ratio = new / base (> 1 is slower), in log space. `auto`: the fastest of the
per-iteration times where both files have >= 20 of them, else the median, else nccl-tests' time. On a
busy host preemption sets the median, not the fastest iterations (Chen & Revels 2016, "Robust
benchmarking in noisy environments", arXiv:1608.04295, who argue for the minimum): over 20 runs beside
2 CPU hogs the run-to-run log sd (run shift / point) was median 0.63 / 0.72, p10 0.13 / 0.15, min 0.11 /
0.10. On a second set of 20 runs the min met the detection goals at 97.4% A/A where p10 saw x1.3 at
every point 30% of the time (benchmarks/gate_accuracy.py; `--statistic p10` keeps p10). Where a point's
records hold different numbers of iterations, min and p10 are taken over the first n of each, n the fewest
(the fastest of more iterations is faster by chance; compare_judge._same_sample_counts). A file may hold
several runs (appended): BASE's runs are averaged (geometric mean) into the reference; every run of NEW
is judged on its own, and their mean too.

Noise (see `noise.py` for the model): the larger of the within-run noise (from the per-iteration
samples, widened for their autocorrelation) and the run-to-run noise: the run shift from repeated
runs in BASE and in `--history DIR` (never NEW's: a slow run there is the news), the points' own
scatter from those and from NEW's repeated runs (or, with no repeated run at all, from the pair's
points' pairwise distances within their collective: noise.pair_scale). Without repeated baseline runs the run shift's sd is
assumed (noise.ASSUMED_SHIFT_PER_POINT_SD x the points' scatter, said in the output) and a point is
judged against its run only (a point of a collective too small for that, against BASE with the assumed shift and
the points' scatter). Where the scatter came from the pair's own points, each test's quantile is at that
estimate's df whichever noise is larger (compare_judge._df). Three tests per judged run, each one-sided at its share of
5% (alpha_split.py: half to the collective tests, half to the point tests; Bonferroni: the whole
comparison of unchanged code fails at most 5% of the time under the model), q being Student's t
quantile with the degrees of freedom of the noise estimate used (a point's own runs, or the run
shifts; normal for within-run noise); a point test's, where the points' scatter was measured on repeated runs,
that of a heavy-tailed noise (a unit-variance t with 4 df: noise.point_quantile):
- a point: its slowdown beyond `max_regression` and beyond q * sqrt(sigma_run^2 + sigma_k^2) * sqrt(1/Rn + 1/Rb);
- a point against its own run: its slowdown beyond the threshold both against BASE and against the
  median shift of its collective's points in that run, beyond q * sigma_k * ... (>= 3 points);
- a collective as a whole (the run-level shift all its points share is ONE effect, not K independent
  points): the mean log ratio beyond the threshold and q * sqrt(sigma_run^2 + mean sigma_k^2 / K) * ...
A failed, wrong (#wrong > 0), time-less or missing point in any run of NEW fails the gate
(`allow_missing` permits missing points, named); a point is missing where NEW holds it in fewer runs than
BASE does (runs of different sizes, as in BASE, are no loss: a file against itself, --allow-same-run, passes; a resumed
sweep's runs are one run: results/resumed.py, joined where the CLI reads a file). A point a run
of NEW measured without the data check (num_wrong None: bench/sweep -c 0, nccl-tests' "N/A") where BASE
checked it fails the gate too (unchecked data never counts as wrong: it is unverified, not right);
`allow_unchecked` permits it, named. A run of NEW that measured a point over fewer iterations (`iters`, which points do
not match on) than BASE's records there is refused unless `allow_fewer_iters` (compare_iters.py says why).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from commbench.errors import CommbenchError
from commbench.results.noise import (RunToRun, mean_interval, median_interval, t_quantile,  # noqa: F401 (re-exported)
                                     within_run_sd)
from commbench.results.print_rounding import printed_half_unit_us
from commbench.results.records import TIME_STATISTICS, Measurement, time_us

AUTO = "auto"
MIN_SAMPLES_FOR_TAIL = 20
# the gate's low-tail statistics of the per-iteration samples (>= MIN_SAMPLES_FOR_TAIL iterations): on a
# shared host preemption moves the median between runs far more than the fastest iterations
TAIL_STATISTICS = {
    "min": "fastest iteration (of the slowest rank's times, from iter_times_us)",
    "p10": "10th percentile over iterations of the slowest rank's time (from iter_times_us)",
}
AUTO_TAIL = "min"  # what --statistic auto judges when both files have samples (see choose_statistic)
GATE_STATISTICS = {**TIME_STATISTICS, **TAIL_STATISTICS}


def gate_time_us(m: Measurement, statistic: str) -> float | None:
    """The statistic of a record the gate compares (None when the record lacks it)."""
    if statistic in TAIL_STATISTICS:
        samples = np.asarray(m.iter_times_us, dtype=float)
        if len(samples) < MIN_SAMPLES_FOR_TAIL:
            return None
        return float(samples.min()) if statistic == "min" else float(np.percentile(samples, 10))
    return time_us(m, statistic)


ALPHA = 0.05
_BAD = ("failed", "wrong", "newly failed", "newly wrong", "missing")
IDENTITY_FIELDS = ("backend", "collective", "dtype", "op", "in_place", "world_size", "group_size", "group_layout",
                   "num_groups", "params")


@dataclass(frozen=True, kw_only=True)
class PointComparison:
    key: tuple
    collective: str
    label: str
    statistic: str
    verdict: str  # ok, faster, slower (within noise), REGRESSED, failed, wrong, newly ..., missing, not ok in base
    base_us: float | None = None
    new_us: float | None = None
    ratio: float | None = None
    ratio_low: float | None = None  # interval of the ratio at the comparison's quantile; None: noise unknown
    ratio_high: float | None = None
    detail: str = ""
    noise_source: str = ""  # "within run" or "run to run": the larger, which decided
    median_ratio: float | None = None  # new/base of the medians, shown beside a tail statistic (not judged)

    @property
    def regressed(self) -> bool:
        return self.verdict == "REGRESSED" or self.verdict in _BAD

    def noise_text(self) -> str:
        if self.ratio is None:
            return self.detail
        if self.ratio_low is None or self.ratio_high is None:
            return "unknown (no samples, one run)"
        return f"-{1 - self.ratio_low / self.ratio:.1%}/+{self.ratio_high / self.ratio - 1:.1%} {self.noise_source}"


@dataclass(frozen=True, kw_only=True)
class CollectiveShift:
    """One collective's mean log ratio in one scope (a run of NEW, or all its runs)."""

    collective: str
    scope: str
    num_points: int
    geomean: float
    low: float | None
    high: float | None
    regressed: bool


@dataclass(frozen=True, kw_only=True)
class Comparison:
    points: list[PointComparison]
    shifts: list[CollectiveShift]
    max_regression: float
    run_to_run: RunToRun | None
    quantile: float  # a point test's quantile (all runs; pooled df): half of alpha over the point tests
    num_tests: int
    quantile_collective: float = math.nan  # the collective test's (all runs): half of alpha over collectives
    runs: dict = field(default_factory=dict)  # number of runs: base, new, history
    missing: list[str] = field(default_factory=list)  # "label (run i)" of points NEW lacks
    # those of `missing` whose run of NEW holds every point it plans (results.resumed.runs_holding_their_plan): not
    # in its plan, which differs from BASE's; lost points (a run cut short, a header without planned_points) are not
    not_planned: list[str] = field(default_factory=list)
    allow_missing: bool = False
    only_in_new: int = 0
    unchecked: list[str] = field(default_factory=list)  # "label (run i)": measured without the data check, BASE checked
    allow_unchecked: bool = False
    trimmed: dict = field(default_factory=dict)  # key -> n: a tail statistic over each record's first n iterations
    # labels: skipped in NEW (NCCL refused the combination) no more often than in BASE; a failed point is never here
    known_failed: list[str] = field(default_factory=list)
    repeated_runs: dict = field(default_factory=dict)  # side -> runs left out: an earlier run's records repeated
    failed_only_in_new: list[str] = field(default_factory=list)  # "label (run i/n: why)": failed/wrong, no BASE point
    num_new_compared: int | None = None  # runs of NEW holding a point of BASE (the others are judged on nothing)
    empty_runs: list[str] = field(default_factory=list)  # run ids of NEW with a header and no record: stopped at once
    # "run ID, i/n: what differs" per run of NEW holding no point of BASE, not its last (that is refused): every point
    # of BASE is missing there (the gate fails unless --allow-missing)
    unmatched_runs: list[str] = field(default_factory=list)
    history_of_new: int = 0  # history runs holding NEW's own records (a copy of NEW in --history): left out
    # "label (run i/n)" of points a run of NEW cut short planned and never reached (the CLI fails the run unless
    # --allow-cut-short): not missing
    cut_short_lost: list[str] = field(default_factory=list)
    # why a statistic other than the low tail was judged where a side's records hold too few per-iteration samples
    # for it (compare_samples.fallback_text; "" where none)
    statistic_fallback: str = ""
    # why each judged statistic was judged (compare_samples.statistic_reason): compare --json's statistic_reason
    statistic_reason: str = ""
    # "label (run i/n): iters N, base M" per record of NEW measured over fewer iterations than BASE's, judged as
    # --allow-fewer-iters permits (compare_iters; without it compare refuses them)
    fewer_iters: list[str] = field(default_factory=list)
    # "label (why)" per point of BASE with no good record (failed, wrong, skipped in every run) that NEW holds good:
    # NEW's point is judged on nothing, as beyond a BASE cut short (the CLI refuses it unless --allow-cut-short)
    base_not_ok: list[str] = field(default_factory=list)
    allow_cut_short: bool = False   # base_not_ok judged on the points BASE holds, as compare --allow-cut-short

    @property
    def lost(self) -> list[str]:
        """Those of `missing` that NEW's run planned (or may have: a header without planned_points) and does not
        hold: points lost, not left out of a narrower plan (not_planned)."""
        not_planned = set(self.not_planned)
        return [m for m in self.missing if m not in not_planned]

    @property
    def only_in_base(self) -> int:
        return sum(p.verdict == "missing" for p in self.points)

    @property
    def detectable(self) -> dict:
        """The smallest slowdowns (ratios) this comparison could have failed on: per point the larger of 1 +
        max_regression and its judged test's interval factor exp(q * sd) (= ratio_high / ratio), the median over the
        judged points; per collective (all runs) the same of its shift test (high / geomean), the largest over the
        collectives. With one run a side the noise is read from the pair's few points at a few degrees of freedom, so
        these can be x100 and more: a pass then says little. None where nothing was judged."""
        floor = 1 + self.max_regression
        points = sorted(max(floor, p.ratio_high / p.ratio) if p.ratio_high is not None else floor
                        for p in self.points if p.ratio is not None and p.ratio > 0)
        shifts = [max(floor, s.high / s.geomean) if s.high is not None else floor
                  for s in self.shifts if s.scope == "all runs" and s.geomean > 0]
        return {"point_ratio_median": points[len(points) // 2] if points else None,
                "collective_ratio_max": max(shifts) if shifts else None}

    @property
    def regressions(self) -> list[PointComparison]:
        return [p for p in self.points if p.regressed and not (self.allow_missing and p.verdict == "missing")]

    @property
    def regressed_collectives(self) -> list[str]:
        return sorted({s.collective for s in self.shifts if s.regressed})

    @property
    def geomean_by_collective(self) -> dict[str, float]:
        return {s.collective: s.geomean for s in self.shifts if s.scope == "all runs"}

    @property
    def geomean_interval_by_collective(self) -> dict[str, tuple[float, float]]:
        return {s.collective: (s.low if s.low is not None else s.geomean, s.high if s.high is not None else s.geomean)
                for s in self.shifts if s.scope == "all runs"}

    @property
    def passed(self) -> bool:
        """The gate as `compare` judges it: a point BASE holds no good record of where NEW measured it good
        (base_not_ok) fails it unless allow_cut_short (the CLI refuses it, exit 2; session 45: this said passed)."""
        return not (self.regressions or self.regressed_collectives or (self.unchecked and not self.allow_unchecked)
                    or self.failed_only_in_new or ((self.empty_runs or self.unmatched_runs) and not self.allow_missing)
                    or (self.base_not_ok and not self.allow_cut_short))


def match_key(m: Measurement) -> tuple:
    params = json.dumps(identity_params(m.params), sort_keys=True, default=str)
    return (m.backend, m.collective, m.dtype, m.op, m.in_place, m.size_bytes, m.world_size, m.group_size,
            m.group_layout, m.num_groups, params)


def identity_params(params: dict) -> dict:
    """A point's params as its identity: a routing trace's by its bytes' digest (trace_sha256) where the record holds
    one, not by the path it was typed as ('trace:tr3.npy' names two traces saved under one name alike, and one trace
    from two folders apart), its routing then 'trace'; a record without the digest (commbench before it) by its path,
    as before."""
    if params.get("trace_sha256") is not None and str(params.get("routing", "")).startswith("trace:"):
        return {**params, "routing": "trace"}
    return params


def point_label(m: Measurement) -> str:
    from commbench.units import format_size

    group = f" {m.group_layout} {m.group_size}/{m.world_size}" if m.group_layout != "world" else f" n={m.world_size}"
    place = "" if m.in_place else " oop"
    return f"{m.collective} {m.dtype} {format_size(m.size_bytes)}{group}{place}"


def bad_reason(m: Measurement, statistic: str | None = None) -> str | None:
    """Why a record cannot count as a good measurement (None when it can)."""
    if m.status != "ok":
        return m.status if m.status == "skipped" else "failed"
    if m.num_wrong:
        return "wrong"
    if statistic is not None:
        value = gate_time_us(m, statistic)
        if value is None or not math.isfinite(value) or value <= 0:
            return "failed"
    return None


def is_bad(m: Measurement) -> bool:
    return bad_reason(m) is not None


def is_unchecked(m: Measurement) -> bool:
    """A good record measured without the data check (bench/sweep -c 0; nccl-tests -c 0 prints #wrong N/A). Old
    nccl-tests logs print a max error instead of #wrong: a nonzero one is imported as num_wrong None beside
    metrics.max_abs_error, checked all the same."""
    return m.num_wrong is None and m.metrics.get("max_abs_error") is None and not is_bad(m)


def unchecked_on_both_sides(base: Iterable[Measurement], new: Iterable[Measurement]) -> list[str]:
    """Labels of the points both files hold where every good record, BASE's and NEW's, was measured without the data
    check (-c 0 on both sides): the gate's "none wrong" would be a claim nobody checked."""
    def unchecked_keys(records):
        good = {}
        for m in records:
            if not is_bad(m):
                good.setdefault(match_key(m), []).append(m)
        return {k: ms[0] for k, ms in good.items() if all(is_unchecked(m) for m in ms)}
    b, n = unchecked_keys(base), unchecked_keys(new)
    return [point_label(m) for k, m in b.items() if k in n]


def choose_statistic(base: list[Measurement], new: list[Measurement], requested: str) -> str | None:
    if requested != AUTO:
        return requested
    # the low tail when both files have samples, else the median, else nccl-tests' time (avg, rank0, min, max)
    for statistic in (AUTO_TAIL, *TIME_STATISTICS):
        if all(gate_time_us(m, statistic) for m in base) and all(gate_time_us(m, statistic) for m in new) and base and new:
            return statistic
    return None


def parse_threshold(text: str) -> float:
    """'10%' or '0.1' -> 0.1."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):   # 'inf' is no fraction to call ambiguous
        raise CommbenchError(f"--max-regression={text!r} is invalid: a fraction like 0.1 or a percentage like 10%")
    if value >= 1 and not raw.endswith("%"):   # '5' is 500% as a fraction: almost surely 5% meant ('10': 10%)
        raise CommbenchError(f"--max-regression={text!r} is ambiguous: a fraction like 0.05 or a percentage like "
                             f"5%; a bare number of 1 or more would be {value:.0%}, write it with % if meant")
    if not 0 <= value < 10:
        raise CommbenchError(f"--max-regression={text!r} is invalid: from 0% up to (not including) 1000%")
    return value


def threshold_text(value: float) -> str:
    """A --max-regression as a percentage, as given: 0.0999 -> '9.99%', 1e-9 -> '1e-07%' (not '10%', '0%')."""
    return f"{100 * value:g}%"


def check_statistic(name: str) -> str:
    if name != AUTO and name not in GATE_STATISTICS:
        raise CommbenchError(f"--statistic={name!r} is invalid: allowed {AUTO}, {', '.join(GATE_STATISTICS)}")
    return name


def check_present(statistic: str, records: list[Measurement], side: str) -> None:
    """A forced statistic must be in every good record of a file (else nothing would be judged there)."""
    lacking = [m for m in records if not is_bad(m) and gate_time_us(m, statistic) is None]
    if lacking:
        fewest = min(len(m.iter_times_us or ()) for m in lacking)
        need = (f" (it needs >= {MIN_SAMPLES_FOR_TAIL} per-iteration samples, iter_times_us, and "
                + (f"a record there holds {fewest}: measure it with -n >= {MIN_SAMPLES_FOR_TAIL}, or judge "
                   "--statistic median" if fewest else
                   "they hold none: nccl-tests imports have them only from the -J file of an -I 1 run")
                + ")" if statistic in TAIL_STATISTICS else f"; --statistic {AUTO} picks what both files hold")
        raise CommbenchError(f"--statistic={statistic} is invalid for the {side} file: {len(lacking)} point(s) lack it, "
                             f"first {point_label(lacking[0])}{need}")


def split_runs(records: Iterable[Measurement], side: str = "") -> list[dict[tuple, Measurement]]:
    """The runs of a file in order of appearance (by run_id), each {point key: record}. A run holding a point
    twice keeps its first record, or the first failed or wrong one: a failure of the point in that run is never
    hidden behind a good copy (a file concatenated with its own run's records, say). Two good copies that differ
    (commbench never measures a point twice in a run; a hand-concatenated file does) are refused in one line
    naming `side`: which one the gate judged would decide its verdict."""
    runs: dict[str, dict[tuple, Measurement]] = {}
    for m in records:
        run, key = runs.setdefault(m.run_id, {}), match_key(m)
        if key in run and copies_differ(run[key], m):
            raise twice_refusal(m, "judge", f"{side or 'a'} file's ")
        if key not in run or (is_bad(m) and not is_bad(run[key])):
            run[key] = m
    return list(runs.values())


def copies_differ(first: Measurement, again: Measurement) -> bool:
    """Whether two records of one point (match_key) in one run are two good measurements that differ: commbench
    measures a point once a run, so a reader cannot know which to use (a file concatenated by hand with an edited
    copy of itself). The one rule of compare (split_runs), fit and tune --results (check_points_once); identical
    copies are read once, and a failed or wrong copy beside a good one is the point's failure, no such doubt."""
    return (not is_bad(first) and not is_bad(again)
            and _fingerprint({None: first}) != _fingerprint({None: again}))


def twice_refusal(m: Measurement, use: str, where: str = "", elsewhere: str = "") -> CommbenchError:
    """The one line refusing a run that holds `m`'s point twice with different measurements (copies_differ); `use`:
    what the reader would do with it (judge, fit); `elsewhere`: the other file that holds a copy, where two do."""
    held = f", in this file and in {elsewhere}," if elsewhere else ""
    return CommbenchError(f"{where}run {m.run_id} holds {point_label(m)} twice{held} with different measurements "
                          "(commbench measures a point once a run; a file concatenated by hand?): which to "
                          f"{use} is unknown; keep one copy, or give each its own run")


def check_points_once(files: Iterable[tuple[str, Iterable]], use: str) -> None:
    """Refuse (copies_differ, twice_refusal: one line naming the file or files) results in which a run holds a point
    twice with different measurements: `files` are (path, records) read by fit or tune --results, whose runs may
    span files (one run in a file and its copy)."""
    seen: dict[tuple, tuple[str, Measurement]] = {}
    for path, records in files:
        for m in records:
            if not isinstance(m, Measurement):
                continue
            key = (m.run_id, match_key(m))
            if key in seen and copies_differ(seen[key][1], m):
                first = seen[key][0]
                raise twice_refusal(m, use, f"{path}: ", "" if first == path else first)
            if key not in seen or (is_bad(m) and not is_bad(seen[key][1])):
                seen[key] = (path, m)


def _fingerprint(run: dict[tuple, Measurement]) -> frozenset:
    return frozenset((key, json.dumps({**m.__dict__, "run_id": None}, sort_keys=True, default=str))
                     for key, m in run.items())


def without_repeated_runs(runs: list[dict[tuple, Measurement]], earlier: list[dict[tuple, Measurement]] = ()
                          ) -> tuple[list[dict[tuple, Measurement]], int]:
    """The runs less those that repeat an earlier run (or one of `earlier`: BASE's, for the history) record for
    record under another run id (an nccl-tests log imported twice into one file, the baseline copied into
    --history): one measurement counted twice would be two runs with no scatter between them, a run-to-run noise
    of zero. Also the number of runs left out."""
    seen, kept = {_fingerprint(run) for run in earlier}, []
    for run in runs:
        fingerprint = _fingerprint(run)
        if fingerprint not in seen:
            seen.add(fingerprint)
            kept.append(run)
    return kept, len(runs) - len(kept)


def repeated_runs(records: Iterable[Measurement]) -> dict[str, str]:
    """{run id: the earlier run id it repeats} for each run of `records` (one file, in order) holding the same
    records as an earlier run under another run id (an nccl-tests log imported again into the same file): compare
    counts such a run once (without_repeated_runs), and report and import say so. Only runs holding an ok point: two
    runs that failed alike (the same error at the same point) are two failures, not one copied."""
    first: dict[frozenset, str] = {}
    out = {}
    for run in split_runs(records):
        run_id = next(iter(run.values())).run_id
        if not any(m.status == "ok" for m in run.values()):
            continue
        earlier = first.setdefault(_fingerprint(run), run_id)
        if earlier != run_id:
            out[run_id] = earlier
    return out


def without_runs_of(runs: list[dict[tuple, Measurement]], others: list[dict[tuple, Measurement]]
                    ) -> tuple[list[dict[tuple, Measurement]], int]:
    """The history runs less those holding one of NEW's runs record for record (any run id: NEW copied into the
    --history folder, the CI layout `-O baselines/NEW.jsonl` then `--history baselines/`), and how many were left
    out. The run shift is measured from baseline runs only: NEW's own run there made its slowdown the noise (a x3
    slowdown passed as "run shift sd 53%")."""
    theirs = {_fingerprint(run) for run in others}
    kept = [run for run in runs if _fingerprint(run) not in theirs]
    return kept, len(runs) - len(kept)


def runs_of_base(base: Iterable[Measurement], new: Iterable[Measurement]) -> dict[str, str]:
    """{run id of NEW: why it is a run of BASE} for each run of NEW that BASE holds: the same run id with the same
    measurements at every point NEW holds, or the same records under another run id (a log imported twice, a copied
    file re-imported). A NEW made only of such runs is no new measurement: a CI step that wrote nothing, or the wrong
    path, would pass the gate on BASE compared with itself. A run id alone does not decide (a file edited by hand
    keeps its run ids and is another measurement)."""
    base_runs = split_runs(base, "base")
    by_id = {next(iter(run.values())).run_id: run for run in base_runs}
    prints = {_fingerprint(run) for run in base_runs}
    out = {}
    for run in split_runs(new, "new"):
        run_id = next(iter(run.values())).run_id
        same = by_id.get(run_id)
        if same is not None and all(key in same and _fingerprint({key: m}) == _fingerprint({key: same[key]})
                                    for key, m in run.items()):
            out[run_id] = "the same run id and measurements"
        elif _fingerprint(run) in prints:
            out[run_id] = "the same records under another run id"
        elif any(_same_within_print_rounding(run, other) for other in base_runs):
            out[run_id] = ("the same records within nccl-tests' printed rounding (a -J file and its text log, or "
                           "commbench's JSONL and its --format nccl-tests text, say)")
    return out


def records_of_base_in_new(base: Iterable[Measurement], new: Iterable[Measurement]) -> dict[str, list[Measurement]]:
    """{run id of NEW: its records that are BASE's own} for the runs of NEW that are not wholly BASE's (runs_of_base):
    a record of the same run id and point as one of BASE's, with the same measurement (every field). A partial sweep
    file copied and resumed in two places (BASE's and NEW's runs share its first launch's points) held three of BASE's
    records in NEW, judged as NEW's at ratio 1.000: a comparison of the change that passed points it never measured."""
    theirs = {(m.run_id, match_key(m)): _fingerprint({None: m}) for m in base}
    out: dict[str, list[Measurement]] = {}
    for m in new:
        if theirs.get((m.run_id, match_key(m))) == _fingerprint({None: m}):
            out.setdefault(m.run_id, []).append(m)
    return out


# the record fields nccl-tests prints rounded in its text table; every other field must be equal
_PRINTED_TIMES = ("time_us_median", "time_us_mean", "time_us_min", "time_us_max", "time_us_p99")
_PRINTED_BANDWIDTHS = ("algbw_gbps", "busbw_gbps")


def _alike(a: float | None, b: float | None, half_unit: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= half_unit


def _times_alike(pairs: list[tuple[float | None, float | None]]) -> bool:
    return all(_alike(a, b, printed_half_unit_us(max(a or 0.0, b or 0.0))) for a, b in pairs)


# what a text table row says of a point beyond its identity (match_key) and its time: compared where one side of a
# pair is commbench's own record (per-iteration times) and the other the import of a text table
_PRINTED_FIELDS = ("count", "status", "num_wrong")


def _same_as_printed(fine: Measurement, coarse: Measurement) -> bool:
    """Whether `coarse`, a record holding only what a text table prints (no per-iteration times), is `fine` printed
    and read back, compared at the text's precision: the fields a row prints equal, and every time `coarse` holds
    (nccl-tests' time under the -a mode the text printed, loop_time_us) within half a printed digit of `fine`'s; at
    least one time shared. What the text does not print (the other -a modes, the median, stages, metrics, notes) is
    not compared: the coarser side cannot say it."""
    if any(getattr(fine, name) != getattr(coarse, name) for name in _PRINTED_FIELDS):
        return False
    shared = sorted(set(fine.loop_time_us) & set(coarse.loop_time_us))
    pairs = [(fine.loop_time_us[k], coarse.loop_time_us[k]) for k in shared]
    pairs += [(getattr(fine, n), getattr(coarse, n)) for n in _PRINTED_TIMES
              if getattr(fine, n) is not None and getattr(coarse, n) is not None]
    if not pairs:
        return fine.status != "ok" and coarse.status != "ok"   # a failed point prints no time on either side
    return _times_alike(pairs)


def _unprinted(metrics: dict) -> dict:
    """A record's metrics less the bandwidths an import read as printed (importers/nccl_tests.derived_bandwidths: the
    -J file's full digits, the text's 2 decimals)."""
    return {k: v for k, v in metrics.items() if not k.startswith("nccl_tests_printed_")}


def _has_samples(run: dict[tuple, Measurement]) -> bool:
    return any(m.iter_times_us for m in run.values())


def _same_within_print_rounding(run: dict[tuple, Measurement], other: dict[tuple, Measurement]) -> bool:
    """Whether two runs hold the same points, compared at the precision of the coarser side: one run read twice,
    once exactly and once from a text table that rounds its times (nccl-tests' -J JSON and its text log; commbench's
    JSONL and its own --format nccl-tests text, imported). Where neither side has per-iteration times (two imports)
    every field but the times and bandwidths must be equal and the times equal within the half digit the text
    rounds them to (printed_half_unit_us). Where one side has them (commbench's own record) and the other not (an
    import of its text), the point is compared at the text's precision (_same_as_printed). Where both have them,
    both are commbench's own records, never rounded: exact copies are caught by their fingerprints, not here.
    Bandwidths are never compared: they follow from size and time (busbw = algbw x the collective's factor), and a
    text prints them to 2 decimals. Two separate measurements differ by more at some point (run-to-run noise is far
    above half a printed digit at every size). A point the fine side failed is no row of the text (nccl-tests prints
    N/A, import keeps no record): the coarse side may lack it."""
    if set(run) != set(other):
        fine, coarse = (run, other) if _has_samples(run) else (other, run)
        if _has_samples(coarse) or not _has_samples(fine) or set(coarse) - set(fine) or \
                any(fine[key].status == "ok" for key in set(fine) - set(coarse)):
            return False
        run, other = {key: fine[key] for key in coarse}, coarse
    for key, m in run.items():
        o = other[key]
        if m.iter_times_us and o.iter_times_us:
            return False
        if m.iter_times_us or o.iter_times_us:
            fine, coarse = (m, o) if m.iter_times_us else (o, m)
            if not _same_as_printed(fine, coarse):
                return False
            continue
        rest = {name for name in m.__dict__ if name not in (*_PRINTED_TIMES, *_PRINTED_BANDWIDTHS, "loop_time_us",
                                                             "run_id", "metrics")}
        if any(getattr(m, name) != getattr(o, name) for name in rest) or _unprinted(m.metrics) != _unprinted(o.metrics):
            return False
        times = [(getattr(m, n), getattr(o, n)) for n in _PRINTED_TIMES]
        times += [(m.loop_time_us.get(k), o.loop_time_us.get(k)) for k in set(m.loop_time_us) | set(o.loop_time_us)]
        if not _times_alike(times):
            return False
    return True


def mismatch_message(base: list[Measurement], new: list[Measurement]) -> str:
    """One line saying which identity fields differ between two files with no point in common."""
    differ = []
    for name in (*IDENTITY_FIELDS, "size_bytes"):
        def values(records):
            return sorted({json.dumps(getattr(m, name), sort_keys=True, default=str) for m in records})
        b, n = values(base), values(new)
        if not set(b) & set(n) or (name not in ("size_bytes",) and set(b) != set(n)):
            differ.append(f"{name} {', '.join(b[:4]) or '-'} vs {', '.join(n[:4]) or '-'}")
    what = "; ".join(differ) if differ else "no combination of their fields matches"
    return (f"no point is in both files (points match on {', '.join(IDENTITY_FIELDS)} and size): "
            f"base vs new: {what}")


def compare(base: Iterable[Measurement], new: Iterable[Measurement], *, max_regression: float,
            statistic: str = AUTO, history: Iterable[Measurement] = (), allow_missing: bool = False,
            allow_unchecked: bool = False, alpha: float = ALPHA, empty_runs: Iterable[str] = (),
            complete_runs: Iterable[str] = (), cut_short_runs: Iterable[str] = (),
            new_started: dict[str, datetime.datetime] | None = None, allow_fewer_iters: bool = False,
            allow_cut_short: bool = False) -> Comparison:
    """Judge every run of `new` against `base` (+ `history` runs for the run-to-run noise). `empty_runs`: run ids of
    NEW's file with a header and no record (empty_runs_of): each misses every point of BASE. `complete_runs`: run
    ids of NEW whose records hold every point their header plans (results.resumed.runs_holding_their_plan): a point
    of BASE they lack was not planned (Comparison.not_planned), still missing for the gate. `cut_short_runs`: run
    ids of NEW cut short (results.resumed.runs_cut_short): the points of BASE they lack are Comparison.cut_short_lost
    (verdict "not reached"), not missing; the caller fails such a run unless --allow-cut-short, which judges it on the
    points it holds. `new_started`: {run id of NEW: when its header says it started} (run_start_times), which tells NEW's
    newest run (newest_run); without it, or where a run has none, the file's last run is taken as the newest.
    A run of NEW that measured a point of BASE over fewer iterations than BASE did is refused unless
    `allow_fewer_iters` (compare_iters). `allow_cut_short`: a point BASE holds no good record of (base_not_ok) does not
    fail `passed` (the CLI refuses it without --allow-cut-short)."""
    from commbench.results.compare_judge import judge

    base, new, history = list(base), list(new), list(history)
    if not base or not new:
        raise CommbenchError(f"{'base' if not base else 'new'} file has no measurement: nothing to compare")
    if statistic != AUTO:
        check_present(statistic, base, "base")
        check_present(statistic, new, "new")
    (base_runs, base_repeats), (new_runs, new_repeats) = (without_repeated_runs(split_runs(records, side))
                                                          for records, side in ((base, "base"), (new, "new")))
    hist_runs, hist_repeats = without_repeated_runs(split_runs(history, "a --history"), earlier=base_runs)
    hist_runs, history_of_new = without_runs_of(hist_runs, new_runs)
    base_keys = list(dict.fromkeys(k for run in base_runs for k in run))
    new_keys = set(k for run in new_runs for k in run)
    if not any(k in new_keys for k in base_keys):
        raise CommbenchError(mismatch_message(base, new))
    unmatched = unmatched_runs(base, base_keys, new_runs)
    newest, how = newest_run(new_runs, new_started or {})
    for number, where, why in unmatched:
        if number == newest:   # what `bench -O` or `sweep` appended last, by its start time
            raise CommbenchError(f"the new file's {how[0]} run ({where}{how[1]}) holds no point of the base: nothing "
                                 "of it can be judged (a new file holding only it is refused so), and an earlier run "
                                 f"of the file does not stand in for it; {why}")
    from commbench.results.compare_iters import check_new_iters
    fewer = check_new_iters(base_runs, new_runs, base_keys, allow=allow_fewer_iters)
    if statistic == AUTO:   # a run of NEW too short for the low tail would put every run on the median
        from commbench.results.compare_samples import check_new_samples
        check_new_samples(base_runs, new_runs, base_keys)
    complete = set(complete_runs)
    planned_whole = {i for i, run in enumerate(new_runs, start=1) if next(iter(run.values())).run_id in complete}
    cut = set(cut_short_runs)
    cut_allowed = {i for i, run in enumerate(new_runs, start=1) if next(iter(run.values())).run_id in cut}
    result = judge(base_runs, new_runs, hist_runs, base_keys, max_regression=max_regression,
                   statistic=statistic, allow_missing=allow_missing, allow_unchecked=allow_unchecked, alpha=alpha,
                   only_in_new=len(new_keys - set(base_keys)), planned_whole=planned_whole,
                   cut_allowed=cut_allowed)
    from commbench.results.compare_samples import fallback_text, statistic_reason
    if statistic not in TAIL_STATISTICS:
        result = dataclasses.replace(result, statistic_fallback=fallback_text(base_runs, new_runs, result.points,
                                                                              statistic))
    result = dataclasses.replace(result, statistic_reason=statistic_reason(base_runs, new_runs, result.points, statistic))
    repeated = {side: n for side, n in (("base", base_repeats), ("new", new_repeats), ("history", hist_repeats)) if n}
    return dataclasses.replace(result, repeated_runs=repeated, failed_only_in_new=failed_only_in_new(new_runs, base_keys),
                               empty_runs=list(empty_runs), history_of_new=history_of_new,
                               unmatched_runs=[f"{where}: {why}" for _, where, why in unmatched],
                               fewer_iters=fewer, allow_cut_short=allow_cut_short)


def run_start_times(records) -> dict[str, datetime.datetime]:
    """{run id: when it started} for one file's runs as compare joins them (a resumed sweep's launches one run, at its
    latest launch's start: results.resumed), the header records' started_at parsed (staleness.started); runs without
    a start time absent."""
    from commbench.results.records import RunHeader
    from commbench.results.resumed import continued_run_ids
    from commbench.results.staleness import started

    continued = continued_run_ids(records)
    out: dict[str, datetime.datetime] = {}
    for h in records:
        when = started(h.started_at) if isinstance(h, RunHeader) else None
        if when is not None:
            run = continued.get(h.run_id, h.run_id)
            if run not in out or _later(when, out[run]):
                out[run] = when
    return out


def _later(a, b) -> bool:
    """a after b (times with a zone on one side only: by the clock read, as the launches of one sweep share a zone)."""
    return (a > b) if (a.tzinfo is None) == (b.tzinfo is None) else a.replace(tzinfo=None) > b.replace(tzinfo=None)


def newest_run(new_runs: list[dict[tuple, Measurement]],
               started_at: dict[str, datetime.datetime]) -> tuple[int, tuple[str, str]]:
    """(number from 1 of NEW's newest run, how the refusal names it): the run that started last by its header's
    started_at (ties: the later in the file), as compare's stale check (results.staleness) orders runs; the file's last
    run (what `bench -O` or `sweep` appended last) where a run has no start time or their zones disagree (a time with
    a zone against one without: an nccl-tests import's), so that the order is not known.
    `started_at`: run_start_times."""
    times = [started_at.get(next(iter(run.values())).run_id) for run in new_runs]
    if not times or any(t is None for t in times) or len({t.tzinfo is None for t in times}) > 1:
        return len(new_runs), ("last", "")
    i = max(range(len(times)), key=lambda k: (times[k], k))
    return i + 1, ("newest", f"; started {times[i].isoformat(sep=' ')}, the latest start of its runs")


def unmatched_runs(base: list[Measurement], base_keys: list, new_runs: list[dict[tuple, Measurement]]
                   ) -> list[tuple[int, str, str]]:
    """(number from 1, "run ID, i/n", what differs from BASE: mismatch_message) per run of NEW holding no point of BASE
    (another dtype, world size, backend or collective): judged on nothing. NEW's newest run (newest_run) is refused so
    (compare), as a NEW holding no point is; another one misses every point of BASE (the gate fails unless
    --allow-missing)."""
    keys = set(base_keys)
    return [(i, f"run {next(iter(run.values())).run_id}, {i}/{len(new_runs)}", mismatch_message(base, list(run.values())))
            for i, run in enumerate(new_runs, start=1) if not keys & set(run)]


def empty_runs_of(records) -> list[str]:
    """The run ids of a file's runs that have a header and no measurement: a launch that stopped before its first
    point was written (a crash at start-up, a kill), whose file holds an earlier run's records (bench -O appends), so
    the gate would judge that earlier run alone. A sweep launch is no run of its own where another launch of the same
    sweep (its sweep identity) holds points: a later one (its resume) measures what it did not, and an earlier one is
    the run it continues (`sweep --resume` stopped before its first point), which counts as that run (README; as
    results.resumed joins them), judged as it stands: cut short, say, for --allow-cut-short."""
    from commbench.results.records import RunHeader

    measured = {r.run_id for r in records if isinstance(r, Measurement)}
    headers = [r for r in records if isinstance(r, RunHeader)]
    empty = []
    for index, header in enumerate(headers):
        resumed = header.sweep_identity is not None and any(
            later.sweep_identity == header.sweep_identity for later in headers[index + 1:])
        continues = header.sweep_identity is not None and any(
            earlier.sweep_identity == header.sweep_identity and earlier.run_id in measured
            for earlier in headers[:index])
        if header.run_id not in measured and not resumed and not continues:
            empty.append(header.run_id)
    return empty


def failed_only_in_new(new_runs: list[dict[tuple, Measurement]], base_keys) -> list[str]:
    """"label (run i/n: why)" per failed or wrong record of NEW at a point no run of BASE holds: not judged as a point
    (nothing to compare it with), but a failed run all the same, so the gate fails on it. A failed record can also miss
    its BASE point by its params alone (a point that failed before the collective said its parameters), where the
    BASE point is then missing, which --allow-missing would permit."""
    known, out = set(base_keys), []
    for index, run in enumerate(new_runs, start=1):
        for key, m in run.items():
            reason = bad_reason(m)
            if key not in known and reason in ("failed", "wrong"):
                why = m.error or (f"#wrong {m.num_wrong}" if reason == "wrong" else "failed")
                out.append(f"{point_label(m)} (run {index}/{len(new_runs)}: {reason}: {why})"[:160])
    return out


def log_table(runs: list[dict[tuple, Measurement]], stats: dict[tuple, str]) -> list[dict[tuple, float]]:
    """Per run {key: log time} of its good records at the compared keys."""
    table = []
    for run in runs:
        row = {}
        for key, m in run.items():
            if key in stats and bad_reason(m, stats[key]) is None:
                row[key] = math.log(gate_time_us(m, stats[key]))
        table.append(row)
    return table


def record_within_sd(m: Measurement, statistic: str) -> float | None:
    return within_run_sd(np.asarray(m.iter_times_us, dtype=float), statistic) if m.iter_times_us else None
