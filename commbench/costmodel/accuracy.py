"""Predicted vs published busbw, summarised per size regime (latency, middle, bandwidth).

Regimes follow where the issue-20 curves change character: below 512 KiB the launch and per-hop
latencies dominate, from 64 MiB up the bandwidth ceiling does, between the protocols switch. The
relative error is predicted / published - 1 on busbw (positive: the model is optimistic).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from commbench.errors import invalid

KiB, MiB = 1 << 10, 1 << 20
REGIMES = (("latency", 0, 512 * KiB), ("middle", 512 * KiB, 64 * MiB), ("bandwidth", 64 * MiB, float("inf")))


def regime_of(size_bytes: float) -> str:
    return next(name for name, lo, hi in REGIMES if lo <= size_bytes < hi)


@dataclass(frozen=True, kw_only=True)
class Summary:
    """Errors of one group of points: count, median |error|, worst |error| (signed), median signed error."""

    count: int
    median_abs: float
    worst: float
    bias: float


def summarize(errors) -> Summary | None:
    values = np.asarray(list(errors), dtype=np.float64)
    if values.size == 0:
        return None
    return Summary(count=int(values.size), median_abs=float(np.median(np.abs(values))),
                   worst=float(values[np.argmax(np.abs(values))]), bias=float(np.median(values)))


def by_regime(points: list[tuple[float, float]]) -> dict[str, Summary]:
    """{"all", "from 1 MiB", and each regime: Summary} of (size_bytes, relative error) points."""
    groups = {"all": [e for _, e in points], "from 1 MiB": [e for s, e in points if s >= MiB]}
    for name, lo, hi in REGIMES:
        groups[name] = [e for s, e in points if lo <= s < hi]
    return {name: summary for name, values in groups.items() if (summary := summarize(values)) is not None}


def format_summary(name: str, summary: Summary) -> str:
    return (f"{name:>10}: {summary.count:3d} points  median |err| {summary.median_abs:6.1%}  "
            f"worst {summary.worst:+7.1%}  bias {summary.bias:+6.1%}")


@dataclass(frozen=True, kw_only=True)
class CurvePoint:
    size_bytes: float
    published_busbw_gbps: float
    predicted_busbw_gbps: float
    algorithm: str
    protocol: str

    @property
    def relative_error(self) -> float:
        return self.predicted_busbw_gbps / self.published_busbw_gbps - 1.0


# NCCL settings a published run exported that take algorithms away from NCCL's choice, and what the model turns off
# for each: NVLS and NVLS tree need multicast (nvls_efficiency > 0), CollNet needs SHARP
RUN_SETTINGS = {("NCCL_NVLS_ENABLE", "0"): {"nvls_efficiency": 0.0}, ("NCCL_COLLNET_ENABLE", "0"): {"sharp": False}}


def as_run(fabric, nccl_env: dict[str, str] | None):
    """`fabric` with the algorithms a run's NCCL environment disabled turned off (RUN_SETTINGS)."""
    changes = {}
    for name, value in (nccl_env or {}).items():
        if (name, str(value)) not in RUN_SETTINGS:
            raise invalid("nccl_env", f"{name}={value}", ", ".join(f"{k}={v}" for k, v in RUN_SETTINGS))
        changes.update(RUN_SETTINGS[name, str(value)])
    return dataclasses.replace(fabric, nccl=dataclasses.replace(fabric.nccl, **changes)) if changes else fabric


def curve_points(curve: dict) -> list[CurvePoint]:
    """Predict every point of one published curve (a dict of benchmarks/data/published-curves.json)
    on its preset, with the algorithm it was run with when the publication names one, and without the algorithms
    its NCCL environment (`nccl_env`) disabled."""
    from commbench.costmodel.choice import best_algorithm_protocol
    from commbench.costmodel.formulas import bus_factor
    from commbench.costmodel.presets import load_preset

    fabric = as_run(load_preset(curve["preset"], num_gpus=curve.get("num_gpus")), curve.get("nccl_env"))
    sizes = np.array([p[0] for p in curve["points"]], dtype=np.float64)
    choice = best_algorithm_protocol(fabric, curve["collective"], sizes, curve["group_size"], curve["num_domains"],
                                     algorithm=curve.get("algorithm"))
    busbw = bus_factor(curve["collective"], curve["group_size"]) * sizes / choice.time_s / 1e9
    return [CurvePoint(size_bytes=s, published_busbw_gbps=float(p[1]), predicted_busbw_gbps=float(b), algorithm=str(a),
                       protocol=str(q)) for s, p, b, a, q in zip(sizes, curve["points"], busbw, choice.algorithm, choice.protocol)]
