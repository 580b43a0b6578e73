"""NCCL's own time for an (algorithm, protocol), and so NCCL's own default pick (predicted).

NCCL picks the pair of least `ncclTopoGetAlgoTime` (NVIDIA/nccl v2.27.7-1 src/graph/tuning.cc:561-577):

    time_us = latency x (1.4 for an inter-node Simple ring all-reduce once bytes / (channels x ranks) >= 64)
            + bytes / (1000 x bandwidth x (treeCorrectionFactor[protocol][log2(bytes / 64)] for an all-reduce tree))

with ncclTopoTuneModel's latency and bandwidth tables: nccl_model.GroupTerms, from nccl_tables (one release). Nothing
of commbench's own terms (launch_us, the pipeline ramp) is in it: this is what NCCL itself computes, the yardstick a
tuner rule must not lose to (workflows/nccl_tuner.py drops a predicted rule this rates slower than NCCL's pick).
Bandwidths are the fabric's link rates x the preset's efficiencies, as in nccl_model: NCCL's graph search would set
them, so this is NCCL's model on commbench's estimate of its graphs.
"""

from __future__ import annotations

import numpy as np

from commbench.costmodel import nccl_tables as T
from commbench.costmodel.nccl_model import Combo, GroupTerms, check_group, combos


def tree_correction(size_bytes: np.ndarray, protocol: str) -> np.ndarray:
    """treeCorrectionFactor at these sizes: log2i(bytes >> 6) in [0, 23), else 1 (tuning.cc:568-569)."""
    size = np.asarray(size_bytes, dtype=np.float64)   # exact for the sizes the table covers (< 2^29)
    log_size = np.where(size >= 64, np.floor(np.log2(np.maximum(size, 64) / 64)), -1)
    log_size = np.minimum(log_size, 1 << 20).astype(np.intp)
    table = np.asarray(T.TREE_CORRECTION[protocol])
    inside = (log_size >= 0) & (log_size < len(table))
    return np.where(inside, table[np.clip(log_size, 0, len(table) - 1)], 1.0)


def own_times_us(fabric, collective: str, size_bytes, ranks: int, domains: int) -> dict[Combo, np.ndarray]:
    """{pair NCCL offers: NCCL's own predicted microseconds per size} for one group (`ranks` over `domains`
    scale-up domains, NCCL's nNodes). Sizes are whole bytes."""
    system = fabric.nccl
    n, d = np.array([float(ranks)]), np.array([float(domains)])
    check_group(fabric.num_gpus, fabric.num_domains, fabric.domain_size, fabric.name, n, d)
    size = np.asarray(size_bytes, dtype=np.float64)   # a rule's sizes may reach 2^64 - 1
    group = GroupTerms(fabric, system, collective, n, d)
    out: dict[Combo, np.ndarray] = {}
    for algorithm, protocol in combos(collective):
        if not np.broadcast_to(group.allowed(algorithm), n.shape)[0]:
            continue
        latency_us = float(np.broadcast_to(group.latency_us(algorithm, protocol), n.shape)[0])
        algbw_gbps = float(np.broadcast_to(group.algbw_gbps(algorithm, protocol), n.shape)[0])
        if not algbw_gbps > 0 or not np.isfinite(latency_us):
            continue
        bandwidth = np.full(size.shape, algbw_gbps)
        if algorithm == "tree" and collective == "all_reduce":
            bandwidth = bandwidth * tree_correction(size, protocol)
        latency = np.full(size.shape, latency_us)
        if algorithm == "ring" and protocol == "Simple" and collective == "all_reduce" and domains > 1:
            plateau = size >= T.RING_PLATEAU_BYTES_PER_CHANNEL_RANK * system.channels * ranks  # bytes/(ch x n) >= 64
            latency = np.where(plateau, latency * T.RING_PLATEAU_FACTOR, latency)
        out[algorithm, protocol] = latency + size / (1000.0 * bandwidth)
    return out


def check_sizes(min_bytes: int, max_bytes: int, channels: int, ranks: int) -> np.ndarray:
    """Sizes in [min_bytes, max_bytes] at which NCCL's own time of every pair is one straight line between two
    neighbours: the ends and both sides of each step of treeCorrectionFactor (64 B x 2^k) and of the ring plateau.
    Between them a rule's time minus the least over the pairs is convex, so it is largest at one of these sizes."""
    steps = [64 << k for k in range(len(T.TREE_CORRECTION["Simple"]) + 1)]
    steps.append(T.RING_PLATEAU_BYTES_PER_CHANNEL_RANK * channels * ranks)
    sizes = {min_bytes, max_bytes}
    for step in steps:
        if min_bytes < step <= max_bytes:
            sizes.update((step - 1, step))
    return np.array(sorted(sizes), dtype=np.float64)


def slower_than_nccl_pick(fabric, collective: str, pair: Combo, min_bytes: int, max_bytes: int, ranks: int,
                          domains: int, *, rtol: float = 1e-9) -> tuple[int, float, Combo, float] | None:
    """None where NCCL's own model rates `pair` no slower than its own pick at every size of [min_bytes, max_bytes];
    else (a size, the pair's us there, NCCL's pick there, its us). A pair NCCL does not offer there is slower."""
    sizes = check_sizes(min_bytes, max_bytes, fabric.nccl.channels, ranks)
    times = own_times_us(fabric, collective, sizes, ranks, domains)
    names = list(times)
    stacked = np.stack([times[name] for name in names])
    best = np.argmin(stacked, axis=0)
    best_us = stacked[best, np.arange(len(sizes))]
    mine = times.get(pair, np.full(len(sizes), np.inf))
    worse = mine > best_us * (1 + rtol)
    if not worse.any():
        return None
    i = int(np.argmax(mine / best_us))
    return int(sizes[i]), float(mine[i]), names[best[i]], float(best_us[i])
