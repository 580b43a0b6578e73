"""Fabric cost models: NCCL's algorithm x protocol structure and tiered alpha-beta curves, presets, fitting.

    from commbench.costmodel import load_preset, collective_time_s
    fabric = load_preset("gb300-nvl72", num_gpus=256)
    collective_time_s(fabric, "all_reduce", size_bytes, group_size, num_domains)  # seconds, predicted

On preset fabrics (and profiles fitted from one) the NCCL collectives (all_reduce, reduce_scatter,
all_gather, broadcast) follow NCCL's own cost structure (nccl_model.py, after src/graph/tuning.cc):
per algorithm and protocol a base latency plus per-hop latencies of the links crossed, a bandwidth
from the link rate, protocol efficiency and per-channel caps, and NCCL's choice, the fastest pair
it offers there. For the NCCL tuner (predicted rules), vectorised over sizes:

    algorithm_protocol_times_s(fabric, collective, size_bytes: np.ndarray, group_size, num_domains)
        -> dict[tuple[str, str], np.ndarray]   # (algorithm, protocol) -> predicted seconds; only
                                               # the pairs NCCL offers (inf where a pair is offered
                                               # for some of the queries only)
    best_algorithm_protocol(fabric, collective, size_bytes, group_size, num_domains,
                            *, algorithm=None, protocol=None)
        -> Choice(algorithm: np.ndarray[str], protocol: np.ndarray[str], time_s: np.ndarray)

Algorithms: ring, tree, nvls, nvls_tree, collnet_direct, collnet_chain, pat; protocols: LL, LL128,
Simple (`nccl_tables.NCCL_ALGO_NAMES` gives NCCL_ALGO's spelling). All-to-all, send/recv and the
MoE dispatch/combine stay on the alpha-beta curves.
"""

from commbench.costmodel.choice import Choice, algorithm_protocol_times_s, best_algorithm_protocol
from commbench.costmodel.fabric import AlgorithmCurve, Fabric, Tier
from commbench.costmodel.nccl_model import NcclSystem
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
    "Choice",
    "NcclSystem",
    "algorithm_protocol_times_s",
    "best_algorithm_protocol",
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
