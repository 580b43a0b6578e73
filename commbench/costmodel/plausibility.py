"""Is a fitted curve faster than the hardware it claims to be measured on? One warning line if so.

A results file from another fabric, a mislabeled one, or a timing fault (times in the wrong unit) fits a curve as
readily as a true one, and every plan on it is then wrong (found from outside: a sendrecv fitted at 756 GB/s per GPU
planned on a 50 GB/s NIC, with no word). The check compares each fitted curve's bus bandwidth with its tier's link
rate per GPU, one direction: the --system preset's tiers, else the row of hardware.toml whose GPU the results'
headers name (nvlink_gbps_per_dir; scale_out_gbit_per_gpu / 8). It warns, never refuses: a new fabric can be faster
than a preset.

The margin. Bus bandwidth (nccl-tests' busbw) is normalised so that a ring moving its bytes over the link reaches at
most the link rate; in-network reduction breaks that for all_reduce alone: with NVLS (NVSwitch) or SHARP (the IB
switch) each GPU sends its buffer once and receives the result once, so algbw reaches the link rate and busbw =
algbw * 2(n-1)/n up to twice it. The cost model prices NVLS all_reduce on 8x H100 at 475/450 = 1.06x the NVLink rate
(costmodel/presets.py HOPPER_UP, nccl-tests #212); reduce-scatter and all-gather still move (n-1)/n of the buffer over
each GPU's link, so stay at 1x. On top of that a fit's own noise: FIT_MARGIN (10%, the held-out error fit_records
calls a poor fit).
"""

from __future__ import annotations

from dataclasses import dataclass

from commbench.costmodel.fabric import AlgorithmCurve, Fabric

ABOVE_HARDWARE = "WARNING: fitted faster than the hardware"
FIT_MARGIN = 1.10
# busbw over the link rate that in-network reduction (NVLS, SHARP) can reach: 2(n-1)/n -> 2 for all_reduce
IN_NETWORK_FACTOR = {"all_reduce": 2.0}


@dataclass(frozen=True, kw_only=True)
class TierPeak:
    """A tier's physical rate per GPU, one direction, and what names it (the preset's tier, or hardware.toml's GPU)."""

    link_gbps_per_gpu: float
    what: str


def peak_gbps(collective: str, link_gbps: float) -> float:
    """The highest busbw a curve of `collective` may be fitted at on a link of `link_gbps` (module docstring)."""
    return link_gbps * IN_NETWORK_FACTOR.get(collective, 1.0) * FIT_MARGIN


def preset_peaks(base: Fabric, system: str) -> dict[str, TierPeak]:
    return {tier: TierPeak(link_gbps_per_gpu=t.link_gbps_per_gpu, what=f"{system} {tier} ({t.name})")
            for tier, t in base.tiers.items()}


def header_peaks(devices: list[str]) -> dict[str, TierPeak]:
    """The tiers' rates of the one hardware.toml GPU every device of the results' headers is; {} when the devices
    name none of them, or several (nothing to check against)."""
    from commbench.costmodel.profile import device_is_gpu
    from commbench.data.reference import gpu_names, gpu_spec

    if not devices:
        return {}
    named = [g for g in gpu_names() if all(device_is_gpu(d, g) for d in set(devices))]
    if len(named) != 1:
        return {}
    spec = gpu_spec(named[0])
    return {"scale_up": TierPeak(link_gbps_per_gpu=spec.nvlink_gbps_per_dir,
                                 what=f"{named[0]} NVLink (hardware.toml; the results' headers name {named[0]})"),
            "scale_out": TierPeak(link_gbps_per_gpu=spec.scale_out_gbit_per_gpu / 8,
                                  what=f"{named[0]} {spec.scale_out_gbit_per_gpu:g} Gb/s NIC (hardware.toml; "
                                       f"the results' headers name {named[0]})")}


def above_hardware_warning(curves: list[AlgorithmCurve] | tuple[AlgorithmCurve, ...],
                           peaks: dict[str, TierPeak]) -> str | None:
    """One line naming every fitted curve whose busbw is above its tier's peak (peak_gbps), with the fitted GB/s and
    the rate it exceeds; None when every fitted curve is within it."""
    over: dict[str, tuple[float, TierPeak]] = {}
    for c in curves:
        peak = peaks.get(c.tier)
        if not c.source.startswith("fitted") or peak is None:
            continue
        key = f"{c.collective}/{c.tier}"
        if c.busbw_gbps > peak_gbps(c.collective, peak.link_gbps_per_gpu) and c.busbw_gbps > over.get(key, (0.0,))[0]:
            over[key] = (c.busbw_gbps, peak)   # a piecewise fit's fastest segment
    if not over:
        return None
    return (f"{ABOVE_HARDWARE}: " + "; ".join(
                f"{key} at {gbps:.4g} GB/s busbw, {gbps / peak.link_gbps_per_gpu:.1f}x the "
                f"{peak.link_gbps_per_gpu:g} GB/s per GPU of {peak.what}" for key, (gbps, peak) in over.items())
            + f" (allowed: {FIT_MARGIN:g}x the link rate, all_reduce {IN_NETWORK_FACTOR['all_reduce'] * FIT_MARGIN:g}x "
            "for in-network reduction, NVLS/SHARP): results from another fabric, a mislabeled file or a timing fault? "
            "every prediction from these curves is that much too fast; check the results before planning on them")


def above_hardware_lines(fabric: Fabric | None) -> list[str]:
    """The profile's above-hardware warning (fit put it in its warnings), for plan assumptions and verify-plan."""
    return [w for w in (fabric.warnings if fabric is not None else ()) if w.startswith(ABOVE_HARDWARE)]
