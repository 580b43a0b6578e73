"""Stages of composite workloads that are themselves collectives the cost model knows.

A staged record (Measurement.stages_us_median) is split into points of plain collectives, so the
fit learns tier curves from them:
- moe_all_to_all (collectives/moe_all_to_all.py): `dispatch` is an all-to-all of the busiest rank's
  dispatch bytes (size_bytes), `combine` of metrics["combine_bytes_max"]; they become the
  moe_all_to_all curves' "dispatch" and "combine" algorithms (`count_exchange` stays report-only);
- grad_reduce_scatter (collectives/grad_reduce_scatter.py): `rack_rs` is a reduce-scatter of S
  bytes over the R ranks of a rack, `cross_rack_rs` one of S/R bytes over K racks (one rank per
  rack), `reduce_scatter` (flat) one of S bytes over all N ranks spanning K racks.
Stages not listed here are fitted and reported under their own name, not used for prediction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from commbench.results.records import Measurement


@dataclass(frozen=True, kw_only=True)
class StagePoint:
    """One stage seen as a plain collective."""

    collective: str
    algorithm: str | None
    group_size: int
    num_domains: int
    size_bytes: float


def _moe(record: Measurement, num_domains: int) -> dict[str, StagePoint]:
    n = record.group_size
    points = {"dispatch": StagePoint(collective="moe_all_to_all", algorithm="dispatch", group_size=n,
                                     num_domains=num_domains, size_bytes=float(record.size_bytes))}
    combine_bytes = record.metrics.get("combine_bytes_max")
    if isinstance(combine_bytes, (int, float)) and combine_bytes > 0:
        points["combine"] = StagePoint(collective="moe_all_to_all", algorithm="combine", group_size=n,
                                       num_domains=num_domains, size_bytes=float(combine_bytes))
    return points


def _grad_reduce_scatter(record: Measurement, num_domains: int) -> dict[str, StagePoint]:
    n, size = record.group_size, float(record.size_bytes)
    per_rack = int(record.metrics.get("ranks_per_rack_in_group") or 0)
    num_racks = int(record.metrics.get("num_racks_in_group") or num_domains)
    points = {"reduce_scatter": StagePoint(collective="reduce_scatter", algorithm=None, group_size=n,
                                           num_domains=num_racks, size_bytes=size)}
    if per_rack >= 1:
        points["rack_rs"] = StagePoint(collective="reduce_scatter", algorithm=None, group_size=per_rack,
                                       num_domains=1, size_bytes=size)
        points["cross_rack_rs"] = StagePoint(collective="reduce_scatter", algorithm=None, group_size=num_racks,
                                             num_domains=num_racks, size_bytes=size / per_rack)
    if record.params.get("algorithm") == "flat":
        points["total"] = points["reduce_scatter"]  # a one-stage run records only its total
    return points


STAGE_MAPS: dict[str, Callable[[Measurement, int], dict[str, StagePoint]]] = {
    "moe_all_to_all": _moe,
    "grad_reduce_scatter": _grad_reduce_scatter,
}


def stage_points(record: Measurement, num_domains: int) -> dict[str, tuple[StagePoint, float]]:
    """{stage name: (the stage as a plain collective, its median seconds)} for the mapped stages;
    "total" maps the whole record when a one-stage workload is itself a plain collective."""
    mapper = STAGE_MAPS.get(record.collective)
    if mapper is None:
        return {}
    times_us = dict(record.stages_us_median or {})
    times_us.setdefault("total", record.time_us_median or 0.0)
    return {name: (point, times_us[name] * 1e-6) for name, point in mapper(record, num_domains).items()
            if times_us.get(name, 0) > 0 and point.group_size >= 2 and point.size_bytes > 0}
