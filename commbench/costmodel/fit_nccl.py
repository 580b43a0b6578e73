"""Learn a preset's NCCL parameters (nccl_model.NcclSystem) from measured NCCL sweeps.

Only sweeps that forced an algorithm (NCCL_ALGO, see fit_records.forced_nccl) say which algorithm
they measured, so only they set parameters, each from the bandwidth of its last (largest-size)
segment and the latency of its fit:
- ring (Simple or NCCL's protocol) inside one domain: ring_efficiency = busbw / NVLink rate;
- NVLS all-reduce: nvls_efficiency = algbw x 6/5 / NVLink rate (NCCL's busBw -> algbw ratio 5/6);
- ring across domains: net_efficiency = busbw / (m NICs' rate), m the ranks per domain (a ring's
  channels use the NICs of its ranks in each domain together: nccl_model.GroupTerms), where those
  NICs, not the in-domain ring, bound it;
- launch_us: the median of (fitted latency - NCCL's table latency for that algorithm, protocol and
  group) over those sweeps, at least 0.
The rest stays the preset's. Parameters learned are listed in the notes, with the curve they came from.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from commbench.costmodel.fit_records import CurveFit
from commbench.costmodel.nccl_model import NcclSystem, GroupTerms
from commbench.costmodel.nccl_tables import NVLS_ALGBW_RATIO

_NCCL = ("all_reduce", "reduce_scatter", "all_gather")


def _pair(fit: CurveFit) -> tuple[str, str] | None:
    algorithm, _, protocol = (fit.key.algorithm or "").partition("/")
    if algorithm not in ("ring", "nvls") or protocol not in ("Simple", "*"):
        return None
    return algorithm, "Simple"


def _ring_nics(n: int, d: int, system: NcclSystem) -> int:
    """NICs a ring of n ranks over d domains crosses on per domain: its ranks' there, one per channel."""
    return min(-(-n // d), system.channels)


def learn_nccl_parameters(fits: list[CurveFit], fabric) -> tuple[NcclSystem, list[str]]:
    """(the fabric's NcclSystem with what the forced NCCL sweeps measured, notes saying what)."""
    system: NcclSystem = fabric.nccl
    up_gbps = fabric.tiers["scale_up"].link_gbps_per_gpu
    out_gbps = fabric.tiers["scale_out"].link_gbps_per_gpu if "scale_out" in fabric.tiers else None
    learned: dict[str, tuple[float, str]] = {}
    launches: list[float] = []
    usable = [f for f in fits if f.key.backend == "nccl" and f.key.for_prediction and f.key.collective in _NCCL
              and _pair(f) is not None]
    for fit in sorted(usable, key=lambda f: f.key.group_size):  # the largest group wins
        algorithm, protocol = _pair(fit)
        n, d = fit.key.group_size, fit.key.num_domains
        busbw_gbps = fit.fit.busbw_bytes_per_s[-1] / 1e9
        if algorithm == "ring" and d == 1:
            learned["ring_efficiency"] = (busbw_gbps / up_gbps, fit.key.label)
        elif algorithm == "ring" and out_gbps and _ring_nics(n, d, system) * out_gbps < system.ring_efficiency * up_gbps:
            # NIC-bound (the ring's NICs together below the in-domain ring): it measures the NICs
            learned["net_efficiency"] = (busbw_gbps / (_ring_nics(n, d, system) * out_gbps), fit.key.label)
        elif algorithm == "nvls" and d == 1 and fit.key.collective == "all_reduce":
            algbw = busbw_gbps * n / (2 * (n - 1))
            learned["nvls_efficiency"] = (algbw / NVLS_ALGBW_RATIO / up_gbps, fit.key.label)
        else:
            continue
        group = GroupTerms(fabric, system, fit.key.collective, np.array([float(n)]), np.array([float(d)]))
        launches.append(fit.fit.latency_s * 1e6 - float(group.latency_us(algorithm, protocol)[0]))
    changes = {name: value for name, (value, _) in learned.items()}
    notes = [f"NCCL {name} = {value:.3g} learned from {label}" for name, (value, label) in learned.items()]
    if launches:
        changes["launch_us"] = max(float(np.median(launches)), 0.0)
        notes.append(f"NCCL launch_us = {changes['launch_us']:.3g} learned from {len(launches)} forced sweep(s)")
    return (dataclasses.replace(system, **changes) if changes else system), notes
