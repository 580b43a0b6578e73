"""Fabric cost models: tiered alpha-beta curves per collective and algorithm, presets, fitting.

    from commbench.costmodel import load_preset, collective_time_s
    fabric = load_preset("gb300-nvl72", num_gpus=256)
    collective_time_s(fabric, "all_reduce", size_bytes, group_size, num_domains)  # seconds, predicted
"""

from commbench.costmodel.fabric import AlgorithmCurve, Fabric, Tier
from commbench.costmodel.formulas import (
    COLLECTIVES,
    bus_factor,
    collective_time_s,
    hierarchical_reduce_scatter_time_s,
    moe_all_to_all_time_s,
)
from commbench.costmodel.presets import load_preset, preset_names


def load_fabric(path: str) -> Fabric:
    """A fabric profile saved by `commbench fit` (or `Fabric.to_json`)."""
    return Fabric.from_json(path)


__all__ = [
    "AlgorithmCurve",
    "COLLECTIVES",
    "Fabric",
    "Tier",
    "bus_factor",
    "collective_time_s",
    "hierarchical_reduce_scatter_time_s",
    "load_fabric",
    "load_preset",
    "moe_all_to_all_time_s",
    "preset_names",
]
