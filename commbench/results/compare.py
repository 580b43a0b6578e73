"""Compare two results files point by point: a CI gate for NCCL / driver / config changes.

Points match on what was measured (collective, dtype, op, placement, size, world, group size and
layout, workload params), not on run ids. Per point: ratio = new median time / base median time
(> 1 is slower). Per collective: the geometric mean of the ratios.

A point regresses when its slowdown (ratio - 1) exceeds BOTH the threshold and the run-to-run
spread the files record for it: spread = base spread + new spread, where a file's spread for a point
is (max - min) / median of its medians when the file holds the point more than once (repeated
runs), else that run's own iteration spread (p99 - min) / median. Noise the files themselves show
cannot fail the gate.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from commbench.errors import CommbenchError
from commbench.results.records import Measurement


@dataclass(frozen=True, kw_only=True)
class PointStats:
    median_us: float
    spread: float  # relative
    num_runs: int


@dataclass(frozen=True, kw_only=True)
class PointComparison:
    key: tuple
    collective: str
    label: str
    base_us: float
    new_us: float
    ratio: float
    spread: float
    regressed: bool


@dataclass(frozen=True, kw_only=True)
class Comparison:
    points: list[PointComparison]
    geomean_by_collective: dict[str, float]
    only_in_base: int
    only_in_new: int
    max_regression: float

    @property
    def regressions(self) -> list[PointComparison]:
        return [p for p in self.points if p.regressed]


def match_key(m: Measurement) -> tuple:
    params = json.dumps(m.params, sort_keys=True, default=str)
    return (m.collective, m.dtype, m.op, m.in_place, m.size_bytes, m.world_size, m.group_size, m.group_layout,
            m.num_groups, params)


def point_label(m: Measurement) -> str:
    from commbench.units import format_size

    group = f" {m.group_layout} {m.group_size}/{m.world_size}" if m.group_layout != "world" else f" n={m.world_size}"
    return f"{m.collective} {m.dtype} {format_size(m.size_bytes)}{group}"


def point_stats(records: Iterable[Measurement]) -> dict[tuple, tuple[PointStats, Measurement]]:
    """Per matched point: median of the medians and the relative spread (see module docstring)."""
    grouped: dict[tuple, list[Measurement]] = {}
    for m in records:
        if m.status == "ok" and m.time_us_median and m.time_us_median > 0:
            grouped.setdefault(match_key(m), []).append(m)
    out = {}
    for key, ms in grouped.items():
        medians = np.array([m.time_us_median for m in ms])
        center = float(np.median(medians))
        if len(ms) > 1:
            spread = float((medians.max() - medians.min()) / center)
        else:
            m = ms[0]
            high = m.time_us_p99 if m.time_us_p99 is not None else m.time_us_median
            low = m.time_us_min if m.time_us_min is not None else m.time_us_median
            spread = float((high - low) / center)
        out[key] = (PointStats(median_us=center, spread=spread, num_runs=len(ms)), ms[0])
    return out


def parse_threshold(text: str) -> float:
    """'10%' or '0.1' -> 0.1."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise CommbenchError(f"--max-regression={text!r} is invalid: a fraction like 0.1 or a percentage like 10%") from None
    if not 0 <= value < 10:
        raise CommbenchError(f"--max-regression={text!r} is invalid: between 0% and 1000%")
    return value


def compare(base: Iterable[Measurement], new: Iterable[Measurement], *, max_regression: float) -> Comparison:
    base_stats, new_stats = point_stats(base), point_stats(new)
    common = [k for k in base_stats if k in new_stats]
    if not common:
        raise CommbenchError("no point is in both files (points match on collective, dtype, op, size, world, "
                             "group size/layout and params): nothing to compare")
    points = []
    for key in common:
        (b, m), (n, _) = base_stats[key], new_stats[key]
        ratio = n.median_us / b.median_us
        spread = b.spread + n.spread
        slowdown = ratio - 1
        points.append(PointComparison(key=key, collective=m.collective, label=point_label(m), base_us=b.median_us,
                                      new_us=n.median_us, ratio=ratio, spread=spread,
                                      regressed=slowdown > max_regression and slowdown > spread))
    geomeans: dict[str, list[float]] = {}
    for p in points:
        geomeans.setdefault(p.collective, []).append(math.log(p.ratio))
    return Comparison(points=points, geomean_by_collective={c: math.exp(sum(v) / len(v)) for c, v in geomeans.items()},
                      only_in_base=len(set(base_stats) - set(new_stats)), only_in_new=len(set(new_stats) - set(base_stats)),
                      max_regression=max_regression)
