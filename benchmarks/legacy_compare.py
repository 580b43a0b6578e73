"""THE OLD GATE, kept only so benchmarks/gate_accuracy.py can show its false-alarm rate beside the new
one (commbench/results/compare.py at commit 5bc9aa2, unchanged below this paragraph). Not used by commbench.

Compare two results files point by point: a CI gate for NCCL / driver / config changes.

Points match on what was measured (collective, dtype, op, placement, size, world, group size and
layout, workload params), not on run ids. Per point, one named time statistic on both sides:
`median` (over iterations, slowest rank each) when both files measured it, else nccl-tests' time
(`nccl-avg`: loop time / iters averaged over ranks; what records imported from nccl-tests hold).
ratio = new / base (> 1 is slower); per collective the geometric mean of the ratios.

The noise is the uncertainty of each side's statistic, from the per-iteration samples the records
keep: for the median, the distribution-free order-statistic 95% confidence interval (the j-th and
(n+1-j)-th smallest samples, j the largest with P(Binomial(n, 1/2) < j) <= 2.5%; e.g. Hollander &
Wolfe, Nonparametric Statistical Methods, ch. 3); for nccl-tests' time, which is a mean, mean ±
1.96 standard errors. Several runs of a point in one file widen it to the range of their values. The
two sides combine in log space (half-widths added in quadrature) into a 95% interval of the ratio.

A point REGRESSES when its slowdown exceeds the threshold AND the ratio's interval lies above 1
(the slowdown is larger than the recorded noise can explain). A collective regresses as a whole when
the geometric mean of its ratios does the same (its interval from the points' noise taken as
independent): a slowdown at every size that each noisy point alone cannot resolve. Without samples (old files, imported
nccl-tests rows) the noise is unknown and printed so: the threshold alone decides. A point that was
ok in the base and failed or returned wrong data (#wrong > 0) in the new file always fails the gate.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from commbench.errors import CommbenchError
from commbench.results.compare import parse_threshold  # noqa: F401 (unchanged by the new gate)
from commbench.results.noise import CONFIDENCE, median_interval, mean_interval  # noqa: F401 (unchanged)
from commbench.results.records import TIME_STATISTICS, Measurement, time_us

AUTO = "auto"


@dataclass(frozen=True, kw_only=True)
class SideStats:
    """One file's value of a statistic at a point, with its 95% interval (None: unknown)."""

    center_us: float
    low_us: float | None
    high_us: float | None
    num_runs: int
    num_samples: int


@dataclass(frozen=True, kw_only=True)
class PointComparison:
    key: tuple
    collective: str
    label: str
    statistic: str
    verdict: str  # ok, faster, slower (within noise), REGRESSED, newly failed, newly wrong
    base_us: float | None = None
    new_us: float | None = None
    ratio: float | None = None
    ratio_low: float | None = None  # 95% interval of the ratio; None when the noise is unknown
    ratio_high: float | None = None
    detail: str = ""

    @property
    def regressed(self) -> bool:
        return self.verdict in ("REGRESSED", "newly failed", "newly wrong")

    def noise_text(self) -> str:
        """The noise used for this point, relative to the ratio: -x%/+y% (95%), or why there is none."""
        if self.ratio is None:
            return self.detail
        if self.ratio_low is None or self.ratio_high is None:
            return "unknown (no samples)"
        return f"-{1 - self.ratio_low / self.ratio:.1%}/+{self.ratio_high / self.ratio - 1:.1%}"


@dataclass(frozen=True, kw_only=True)
class Comparison:
    points: list[PointComparison]
    geomean_by_collective: dict[str, float]
    only_in_base: int
    only_in_new: int
    max_regression: float
    # 95% interval of each collective's geometric mean ratio (points' noise taken as independent)
    geomean_interval_by_collective: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)

    @property
    def regressions(self) -> list[PointComparison]:
        return [p for p in self.points if p.regressed]

    @property
    def regressed_collectives(self) -> list[str]:
        """Collectives slower as a whole: geomean beyond the threshold and its interval above 1 (a
        slowdown at every size that no single noisy point resolves)."""
        return sorted(c for c, g in self.geomean_by_collective.items()
                      if g - 1 > self.max_regression + 1e-9 and self.geomean_interval_by_collective.get(c, (g, g))[0] > 1)


def match_key(m: Measurement) -> tuple:
    params = json.dumps(m.params, sort_keys=True, default=str)
    return (m.collective, m.dtype, m.op, m.in_place, m.size_bytes, m.world_size, m.group_size, m.group_layout,
            m.num_groups, params)


def point_label(m: Measurement) -> str:
    from commbench.units import format_size

    group = f" {m.group_layout} {m.group_size}/{m.world_size}" if m.group_layout != "world" else f" n={m.world_size}"
    return f"{m.collective} {m.dtype} {format_size(m.size_bytes)}{group}"


def is_bad(m: Measurement) -> bool:
    return m.status != "ok" or bool(m.num_wrong)


def side_stats(runs: list[Measurement], statistic: str) -> SideStats | None:
    """The statistic over a file's good runs of one point, with its interval from their samples."""
    values = [v for v in (time_us(m, statistic) for m in runs) if v is not None and v > 0]
    if not values:
        return None
    center = float(np.median(values))
    low = high = None
    samples = np.concatenate([np.asarray(m.iter_times_us, dtype=float) for m in runs]) if runs else np.array([])
    samples = samples[samples > 0]
    if len(samples) >= 2:
        if statistic == "median":
            lo, hi = median_interval(samples)
            mid = float(np.median(samples))
        else:
            lo, hi = mean_interval(samples)
            mid = float(np.mean(samples))
        # widths relative to the samples' own statistic, applied to the recorded value
        low, high = center * max(lo, 1e-12) / mid, center * hi / mid
    if len(values) > 1:
        low = min(low if low is not None else center, min(values))
        high = max(high if high is not None else center, max(values))
    return SideStats(center_us=center, low_us=low, high_us=high, num_runs=len(values), num_samples=len(samples))


def choose_statistic(base: list[Measurement], new: list[Measurement], requested: str) -> str | None:
    if requested != AUTO:
        return requested
    for statistic in TIME_STATISTICS:  # median first, then nccl-tests' time (avg, rank0, min, max)
        if any(time_us(m, statistic) for m in base) and any(time_us(m, statistic) for m in new):
            return statistic
    return None


def check_statistic(name: str) -> str:
    if name != AUTO and name not in TIME_STATISTICS:
        raise CommbenchError(f"--statistic={name!r} is invalid: allowed {AUTO}, {', '.join(TIME_STATISTICS)}")
    return name


def _group(records: Iterable[Measurement]) -> dict[tuple, list[Measurement]]:
    grouped: dict[tuple, list[Measurement]] = {}
    for m in records:
        grouped.setdefault(match_key(m), []).append(m)
    return grouped


def compare_point(key: tuple, base_runs: list[Measurement], new_runs: list[Measurement], *,
                  max_regression: float, statistic: str = AUTO) -> PointComparison:
    first = base_runs[0]
    ident = dict(key=key, collective=first.collective, label=point_label(first))
    base_ok = [m for m in base_runs if not is_bad(m)]
    new_ok = [m for m in new_runs if not is_bad(m)]
    if base_ok and not new_ok:
        failed = any(m.status != "ok" for m in new_runs)
        reason = next((m.error for m in new_runs if m.error), None) if failed else \
            f"#wrong {max(m.num_wrong or 0 for m in new_runs)}"
        return PointComparison(**ident, statistic="-", verdict="newly failed" if failed else "newly wrong",
                               detail=str(reason or "")[:60])
    if not base_ok:
        return PointComparison(**ident, statistic="-", verdict="not ok in base", detail="base failed or wrong")
    chosen = choose_statistic(base_ok, new_ok, statistic)
    b = side_stats(base_ok, chosen) if chosen else None
    n = side_stats(new_ok, chosen) if chosen else None
    if b is None or n is None:
        return PointComparison(**ident, statistic=chosen or "-", verdict="not comparable",
                               detail="no statistic in both files")
    ratio = n.center_us / b.center_us
    low = high = None
    if None not in (b.low_us, b.high_us, n.low_us, n.high_us):
        down = math.hypot(math.log(b.high_us / b.center_us), math.log(n.center_us / n.low_us))
        up = math.hypot(math.log(b.center_us / b.low_us), math.log(n.high_us / n.center_us))
        low, high = ratio * math.exp(-down), ratio * math.exp(up)
    significant_slower = low is None or low > 1
    beyond = ratio - 1 > max_regression + 1e-9  # a slowdown of exactly the threshold is allowed
    if beyond and significant_slower:
        verdict = "REGRESSED"
    elif beyond:
        verdict = "slower (within noise)"
    elif ratio < 1 and (high is not None and high < 1):
        verdict = "faster"
    else:
        verdict = "ok"
    return PointComparison(**ident, statistic=chosen, verdict=verdict, base_us=b.center_us, new_us=n.center_us,
                           ratio=ratio, ratio_low=low, ratio_high=high)


def compare(base: Iterable[Measurement], new: Iterable[Measurement], *, max_regression: float,
            statistic: str = AUTO) -> Comparison:
    base_runs, new_runs = _group(base), _group(new)
    common = [k for k in base_runs if k in new_runs]
    if not common:
        raise CommbenchError("no point is in both files (points match on collective, dtype, op, size, world, "
                             "group size/layout and params): nothing to compare")
    points = [compare_point(k, base_runs[k], new_runs[k], max_regression=max_regression, statistic=statistic)
              for k in common]
    logs: dict[str, list[tuple[float, float, float]]] = {}
    for p in points:
        if p.ratio is not None:
            down = math.log(p.ratio / p.ratio_low) if p.ratio_low else 0.0
            up = math.log(p.ratio_high / p.ratio) if p.ratio_high else 0.0
            logs.setdefault(p.collective, []).append((math.log(p.ratio), down, up))
    geomeans = {c: math.exp(sum(x for x, _, _ in v) / len(v)) for c, v in logs.items()}
    intervals = {c: (geomeans[c] * math.exp(-math.sqrt(sum(d * d for _, d, _ in v)) / len(v)),
                     geomeans[c] * math.exp(math.sqrt(sum(u * u for _, _, u in v)) / len(v))) for c, v in logs.items()}
    return Comparison(points=points, geomean_by_collective=geomeans, geomean_interval_by_collective=intervals,
                      only_in_base=len(set(base_runs) - set(new_runs)), only_in_new=len(set(new_runs) - set(base_runs)),
                      max_regression=max_regression)
