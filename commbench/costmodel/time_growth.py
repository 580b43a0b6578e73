"""Does a curve's time grow with size by more than its points' own noise?

A fit always finds some slope: medians that merely wobble upward (gloo at 1 KiB..64 KiB on a loaded 2-core host:
141, 350, 435 us, each size's iterations spread over 110..7,157 us) gave busbw 0.2-2 GB/s that `fit` stored, while
the next run of the same command fell or stayed flat and was refused: one data-generating process, two verdicts.
So growth is judged against the spread the repeated iterations of each end show, not against a fixed bound.

The rule compares the curve's two ends, the smallest and the largest size. On a host, timing noise only adds time
(preemption, interrupts, cache and frequency effects never make an iteration faster than the work takes), so the
fastest iteration is the estimate least disturbed by it (Chen & Revels, "Robust benchmarking in noisy environments",
arXiv:1608.04295, 2016; the BenchmarkTools.jl manual, "Which estimator should I use?": "the minimum is a robust
estimator for the location parameter of the time distribution", noise being positive), and how far the
time the fit uses (the median, or nccl-tests' loop time) lies above it is how much noise that point carries. Growth is
resolved where the fastest iteration rose from the smallest size to the largest by more than the two ends' noise
together:

    (fastest_largest - fastest_smallest) > (time_largest - fastest_largest) + (time_smallest - fastest_smallest)

i.e. the intervals [fastest, time + (time - fastest)] of the two ends (the fitted time give or take its distance to
the fastest iteration) do not overlap. A load burst that lifts one size's whole loop lifts its median further than
its fastest iteration, so it widens that end's interval as much as it moves it; a curve that grows (gloo 1 KiB..16 MiB:
fastest 95 us -> 15.3 ms, median 28.5 ms on the same loaded host; GPU curves, whose iterations agree within a few %)
passes by orders of magnitude. Points without a fastest iteration (nccl-tests text logs, stage times) carry no noise
to judge by: the curve is then judged by the plausibility bound alone (fit_records.bandwidth_undetermined).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class CurvePoint(NamedTuple):
    """One measured point of a curve: bus bytes, the time fitted (s), its size, and its fastest iteration (s; None
    where the record has none)."""

    x_bytes: float
    time_s: float
    size_bytes: int
    fastest_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class TimeGrowth:
    """A curve's smallest and largest size: the time fitted at each (median over runs) and its fastest iteration
    (over runs)."""

    smallest_bytes: int
    largest_bytes: int
    smallest_s: float
    smallest_fastest_s: float
    largest_s: float
    largest_fastest_s: float

    @property
    def rise_s(self) -> float:
        """How much the fastest iteration grew from the smallest size to the largest."""
        return self.largest_fastest_s - self.smallest_fastest_s

    @property
    def noise_s(self) -> float:
        """How far the two ends' fitted times lie above their fastest iterations, together."""
        return max(self.largest_s - self.largest_fastest_s, 0.0) + max(self.smallest_s - self.smallest_fastest_s, 0.0)

    @property
    def resolved(self) -> bool:
        return self.rise_s > self.noise_s


def time_growth(points: list[CurvePoint]) -> TimeGrowth | None:
    """The growth between a curve's smallest and largest size, or None where either lacks a fastest iteration (or
    there is one size). Repeated sizes (several runs, -N cycles): the median of their times (as the fit takes), the
    fastest of their iterations."""
    import statistics

    by_size: dict[int, list[CurvePoint]] = {}
    for point in map(lambda p: CurvePoint(*p), points):
        by_size.setdefault(point.size_bytes, []).append(point)
    if len(by_size) < 2:
        return None
    ends = []
    for size in (min(by_size), max(by_size)):
        fastest = [p.fastest_s for p in by_size[size] if p.fastest_s is not None and p.fastest_s > 0]
        if not fastest:
            return None
        ends.append((statistics.median(p.time_s for p in by_size[size]), min(fastest)))
    (small_s, small_fast_s), (large_s, large_fast_s) = ends
    return TimeGrowth(smallest_bytes=min(by_size), largest_bytes=max(by_size), smallest_s=small_s,
                      smallest_fastest_s=small_fast_s, largest_s=large_s, largest_fastest_s=large_fast_s)
