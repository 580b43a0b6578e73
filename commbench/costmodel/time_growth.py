"""Does a curve's time grow with size by more than its points' own noise?

A fit always finds some slope: medians that merely wobble upward (gloo at 1 KiB..64 KiB on a loaded 2-core host:
141, 350, 435 us, each size's iterations spread over 110..7,157 us) gave busbw 0.2-2 GB/s that `fit` stored, while
the next run of the same command fell or stayed flat and was refused: one data-generating process, two verdicts.
So growth is judged against the spread each point's own iterations show, not against a fixed bound.

On a host, timing noise only adds time (preemption, interrupts, cache and frequency effects never make an iteration
faster than its work), so the fastest iteration is the estimate least disturbed by it (Chen & Revels, "Robust
benchmarking in noisy environments", arXiv:1608.04295, 2016; the BenchmarkTools.jl manual, "Which estimator should I
use?": "the minimum is a robust estimator for the location parameter of the time distribution", noise being
positive), and how far the time the fit uses (the median, or nccl-tests' loop time) lies above it is how much noise
that point carries. A size resolves growth over the smallest size where its fastest iteration rose by more than the
two points' noise together:

    (fastest_size - fastest_smallest) > (time_size - fastest_size) + (time_smallest - fastest_smallest)

i.e. the intervals [fastest, time + (time - fastest)] (the fitted time give or take its distance to the fastest
iteration) of the two sizes do not overlap. A load burst that lifts one size's whole loop lifts its median further
than its fastest iteration, so it widens that size's interval as much as it moves it (64 KiB: fastest 389 us, median
3,614 us, beside 1 KiB's 106 / 140 us). The curve's bandwidth is determined where some larger size resolves growth
(the largest first: its bandwidth term is the largest; another where load hit the largest one). A growing curve
passes by far (gloo 1 KiB..16 MiB on the same loaded host: fastest 95 us -> 15.3 ms, median 28.5 ms; GPU curves,
whose iterations agree within a few %). Points without a fastest iteration (nccl-tests text logs, stage times) carry
no noise to judge by: the curve is then judged by the plausibility bound alone (fit_records.bandwidth_undetermined).

The fastest iteration is least disturbed, not undisturbed: where every iteration of a size was lifted (gloo
sendrecv at 1 KiB..4 MiB on the loaded host: fastest 161, 3,747, 3,072, 65, 3,741, 759, 3,275 us), a smaller size's
fastest lies above a larger one's. If time grew with size, the smaller size's true time would be at most the larger
one's, so its fastest was lifted by at least the difference: the curve's own inversions (the most any size's
fastest exceeds a larger size's) are a lower bound on how far noise lifts a fastest iteration, and a rise must
clear that as well (`inversion_s`). A growing curve on a quiet device has none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


# a size whose fastest iteration is this many times the smallest size's spends >= 3/4 of it in the bandwidth term
# (latency <= 1/4): the regime a fit reads a bandwidth from (fit_records' "largest size is latency-bound" test)
BANDWIDTH_REGIME_RATIO = 4.0


class CurvePoint(NamedTuple):
    """One measured point of a curve: bus bytes, the time fitted (s), its size, and its fastest iteration (s; None
    where the record has none)."""

    x_bytes: float
    time_s: float
    size_bytes: int
    fastest_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class TimeGrowth:
    """A curve's smallest size and the size judged against it (the largest that resolves growth, else the largest):
    the time fitted at each (median over runs) and its fastest iteration (over runs)."""

    smallest_bytes: int
    judged_bytes: int
    smallest_s: float
    smallest_fastest_s: float
    judged_s: float
    judged_fastest_s: float
    inversion_s: float = 0.0

    @property
    def rise_s(self) -> float:
        """How much the fastest iteration grew from the smallest size to the judged one."""
        return self.judged_fastest_s - self.smallest_fastest_s

    @property
    def noise_s(self) -> float:
        """How far the two sizes' fitted times lie above their fastest iterations, together, plus the most noise the
        curve shows lifting a fastest iteration (`inversion_s`)."""
        return (max(self.judged_s - self.judged_fastest_s, 0.0) + max(self.smallest_s - self.smallest_fastest_s, 0.0)
                + self.inversion_s)

    @property
    def resolved(self) -> bool:
        """The rise clears the two sizes' noise (and the inversions), or the judged size reached the bandwidth
        regime: its fastest iteration at least BANDWIDTH_REGIME_RATIO x the smallest size's, with the rise clearing
        the curve's own inversions. Under heavy load a large size's median sits far above its fastest iteration
        (a 4-rank gloo all_reduce at 4 MiB beside busy jobs: fastest 12.2 ms, median ~27 ms, beside 1 KiB's 1.3 ms),
        so the median-to-fastest spread alone would call a 9x rise noise; yet under no growth every iteration of
        that size would have been lifted by more than three times the work itself, while the smallest size ran
        one undisturbed, and no smaller size's fastest shows such a lift (the inversions)."""
        if self.rise_s > self.noise_s:
            return True
        return (self.judged_fastest_s >= BANDWIDTH_REGIME_RATIO * self.smallest_fastest_s
                and self.rise_s > self.inversion_s)


def time_growth(points: list[CurvePoint]) -> TimeGrowth | None:
    """The growth from a curve's smallest size to the largest size that resolves it (else to the largest), or None
    where the smallest size lacks a fastest iteration, no larger size has one, or there is one size. Repeated sizes
    (several runs, -N cycles): the median of their times (as the fit takes), the fastest of their iterations."""
    import statistics

    by_size: dict[int, list[CurvePoint]] = {}
    for point in (CurvePoint(*p) for p in points):
        by_size.setdefault(point.size_bytes, []).append(point)
    ends: dict[int, tuple[float, float]] = {}
    for size, repeats in by_size.items():
        fastest = [p.fastest_s for p in repeats if p.fastest_s is not None and p.fastest_s > 0]
        if fastest:
            ends[size] = (statistics.median(p.time_s for p in repeats), min(fastest))
    smallest = min(by_size)
    if smallest not in ends or len(ends) < 2:
        return None
    fastest_by_size = [ends[size][1] for size in sorted(ends)]
    inversion = max((fastest_by_size[i] - min(fastest_by_size[i + 1:]) for i in range(len(fastest_by_size) - 1)),
                    default=0.0)
    judged = [TimeGrowth(smallest_bytes=smallest, judged_bytes=size, smallest_s=ends[smallest][0],
                         smallest_fastest_s=ends[smallest][1], judged_s=ends[size][0], judged_fastest_s=ends[size][1],
                         inversion_s=max(inversion, 0.0))
              for size in sorted(ends, reverse=True) if size != smallest]
    return next((growth for growth in judged if growth.resolved), judged[0])
