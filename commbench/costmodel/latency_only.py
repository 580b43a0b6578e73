"""Latency-only curves: a measured curve whose time does not grow with size.

Such points determine no bandwidth (fit_records.bandwidth_undetermined: their growth is within their own noise), but
they do measure the time the collective takes at those sizes: its latency. `fit` keeps such a curve in the profile as
latency-only (Fabric.latency_only): the median over its sizes of each size's median time, with the sizes, group size
and domains it was measured at. A prediction inside that range is that measured latency (and says so); outside it
(larger sizes, another group size or number of domains) it would need a bandwidth, which was never measured, so it
is refused in one line naming the curve, its range and how to measure more. No bandwidth is ever stored for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from commbench.errors import CommbenchError, invalid

_TIERS = ("scale_up", "scale_out")   # fabric.TIERS (fabric.py imports this module)
MEASURE_MORE = "-e 16M"   # what to add to the bench that measured it for sizes where the time grows


@dataclass(frozen=True, kw_only=True)
class LatencyOnlyCurve:
    """The measured latency of one collective at one group size and tier, over the sizes it was measured at."""

    collective: str
    tier: str
    group_size: int
    num_domains: int
    latency_us: float  # the median over its sizes of each size's median time
    min_size_bytes: int
    max_size_bytes: int
    why: str  # the fit's verdict on its bandwidth (fit_records.fit_curve's warning)
    source: str = ""

    def __post_init__(self) -> None:
        if self.tier not in _TIERS:
            raise invalid("latency_only.tier", self.tier, f"one of {', '.join(_TIERS)}")
        if self.group_size < 2 or self.num_domains < 1:
            raise invalid("latency_only.group_size", (self.group_size, self.num_domains),
                          "a group of >= 2 ranks over >= 1 domain")
        if not (math.isfinite(self.latency_us) and self.latency_us >= 0):
            raise invalid("latency_only.latency_us", self.latency_us, "a measured latency >= 0 us")
        if not 0 < self.min_size_bytes <= self.max_size_bytes:
            raise invalid("latency_only.min_size_bytes", (self.min_size_bytes, self.max_size_bytes),
                          "0 < smallest <= largest measured size")

    @property
    def label(self) -> str:
        where = "1 domain" if self.num_domains == 1 else f"{self.num_domains} domains"
        return f"{self.collective} n={self.group_size} ({where})"

    @property
    def range_text(self) -> str:
        from commbench.units import format_size
        return f"{format_size(self.min_size_bytes)}..{format_size(self.max_size_bytes)}"

    def holds(self, size_bytes: np.ndarray, group_size: np.ndarray, num_domains: np.ndarray) -> np.ndarray:
        """Per query: at the group size and domains measured, and no larger than the largest size measured (a smaller
        size than measured needs the latency alone: extrapolated, `below`)."""
        return (group_size == self.group_size) & (num_domains == self.num_domains) & (size_bytes <= self.max_size_bytes)

    def below(self, size_bytes: np.ndarray) -> np.ndarray:
        """Per size: smaller than every measured size, so predicted at the latency measured above it (extrapolated:
        a time that did not grow from the smallest size to the largest is taken not to fall below it either)."""
        return np.asarray(size_bytes) < self.min_size_bytes

    def describe(self, fabric_name: str) -> str:
        return (f"the {self.label} curve of fabric {fabric_name!r} is latency-only ({self.latency_us:,.1f} us measured "
                f"at {self.range_text}; bandwidth undetermined: time does not grow with size)")


def latency_only_curves(fabric, collective: str) -> tuple[LatencyOnlyCurve, ...]:
    return tuple(c for c in getattr(fabric, "latency_only", ()) if c.collective == collective)


def refusal(fabric, collective: str, size_bytes: float, group_size: int, num_domains: int) -> str:
    """One line: the query that lies beyond a latency-only curve, the curve, its range, and how to measure more."""
    from commbench.units import format_size

    curves = latency_only_curves(fabric, collective)
    where = "1 domain" if num_domains == 1 else f"{num_domains} domains"
    measured = "; ".join(c.describe(fabric.name) for c in curves)
    return (f"collective={collective!r} at {format_size(int(size_bytes))} over {group_size} ranks ({where}) lies beyond "
            f"what was measured: {measured}; predicting it needs a bandwidth, which no measurement gave: measure "
            f"larger sizes (e.g. `commbench bench {collective} {MEASURE_MORE} --nproc {curves[0].group_size} -O FILE`) "
            "and fit again")


def latency_only_time_s(fabric, collective: str, size_bytes: np.ndarray, group_size: np.ndarray,
                        num_domains: np.ndarray) -> np.ndarray | None:
    """The measured latency (s) per query where every query lies inside a latency-only curve of `collective` (groups
    of one rank: 0 s); None where the fabric has no such curve; CommbenchError (refusal) where a query lies beyond."""
    curves = latency_only_curves(fabric, collective)
    if not curves:
        return None
    time_s = np.full(np.shape(size_bytes), np.nan)
    for curve in curves:
        time_s = np.where(curve.holds(size_bytes, group_size, num_domains), curve.latency_us * 1e-6, time_s)
    time_s = np.where(group_size <= 1, 0.0, time_s)
    off = np.isnan(time_s)
    if off.any():
        i = int(np.flatnonzero(off.ravel())[0])
        raise CommbenchError(refusal(fabric, collective, float(np.ravel(size_bytes)[i]),
                                     int(np.ravel(group_size)[i]), int(np.ravel(num_domains)[i])))
    return time_s


def fit_note(curves: tuple[LatencyOnlyCurve, ...]) -> str | None:
    """`fit`'s one line on the curves it kept latency-only; None where none."""
    if not curves:
        return None
    each = "; ".join(f"{c.label} {c.latency_us:,.1f} us at {c.range_text}" for c in curves)
    return (f"kept latency-only (time does not grow with size, so no bandwidth): {each}; predictions hold inside "
            f"those sizes and group sizes only: for a bandwidth, measure larger sizes (bench {MEASURE_MORE}) and fit "
            "again")


def predicting_curves(fabric, collective: str) -> tuple[LatencyOnlyCurve, ...]:
    """The latency-only curves a prediction of `collective` reads (formulas._algorithm_times): those of a collective
    the fabric has no alpha-beta curve for (moe_all_to_all without curves of its own reads all_to_all's)."""
    if collective == "moe_all_to_all" and "moe_all_to_all" not in fabric.collectives \
            and not latency_only_curves(fabric, collective):
        collective = "all_to_all"
    return () if collective in fabric.collectives else latency_only_curves(fabric, collective)


def prediction_line(curves: tuple[LatencyOnlyCurve, ...], fabric_name: str) -> str:
    """What a prediction read from latency-only curves is, in one line (predict, report)."""
    return (f"{'; '.join(c.describe(fabric_name) for c in curves)}: every time is that measured latency (sizes below "
            f"the smallest measured are extrapolated at it); algbw and busbw are size / that time, not a measured link "
            f"rate; larger sizes and other group sizes are refused (measure larger sizes: bench {MEASURE_MORE})")
