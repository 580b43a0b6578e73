"""NCCL's own time for an (algorithm, protocol), and so NCCL's own default pick (predicted).

NCCL picks the pair of least `ncclTopoGetAlgoTime` (NVIDIA/nccl v2.27.7-1 src/graph/tuning.cc:561-577):

    time_us = latency x (1.4 for an inter-node Simple ring all-reduce once bytes / (channels x ranks) >= 64)
            + bytes / (1000 x bandwidth x (treeCorrectionFactor[protocol][log2(bytes / 64)] for an all-reduce tree))

with ncclTopoTuneModel's latency and bandwidth tables: nccl_model.GroupTerms, from nccl_tables (one release). Nothing
of commbench's own terms (launch_us, the pipeline ramp) is in it: this is what NCCL itself computes, the yardstick a
tuner rule must not lose to (workflows/nccl_tuner.py drops a predicted rule this rates slower than NCCL's pick), and
the pair `predict` names (choice.best_algorithm_protocol: own_pick, timed by commbench's model).
Bandwidths are the fabric's link rates x the preset's efficiencies, as in nccl_model: NCCL's graph search would set
them, so this is NCCL's model on commbench's estimate of its graphs.
"""

from __future__ import annotations

import math

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


def own_times_us(fabric, collective: str, size_bytes, ranks: int, domains: int, *,
                 channels: int | None = None) -> dict[Combo, np.ndarray]:
    """{pair NCCL offers: NCCL's own predicted microseconds per size} for one group (`ranks` over `domains`
    scale-up domains, NCCL's nNodes). Sizes are whole bytes. `channels`: the count a tuner rule forces on the call
    (nccl_model.call_channels; None: NCCL's own), by which ring, tree and PAT are priced (nccl_model.GroupTerms);
    NVLS, NVLS tree and CollNet stay at NCCL's own count (nccl_model.CHANNEL_SCALED). The ring plateau's step stays
    at the communicator's count (comm->nChannels, tuning.cc:571)."""
    system = fabric.nccl
    n, d = np.array([float(ranks)]), np.array([float(domains)])
    check_group(fabric.num_gpus, fabric.num_domains, fabric.domain_size, fabric.name, n, d)
    size = np.asarray(size_bytes, dtype=np.float64)   # a rule's sizes may reach 2^64 - 1
    group = GroupTerms(fabric, system, collective, n, d, channels=channels, nccl_own=True)
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


def _steps(channels: int, ranks: int) -> list[int]:
    """Sizes where NCCL's own time of a pair may change slope or jump: each step of treeCorrectionFactor (64 B x 2^k,
    its table's end included) and the ring plateau (64 B x channels x ranks). Between two of them every pair's time
    is one straight line in the size."""
    steps = [64 << k for k in range(len(T.TREE_CORRECTION["Simple"]) + 1)]
    steps.append(T.RING_PLATEAU_BYTES_PER_CHANNEL_RANK * channels * ranks)
    return sorted(set(steps))


def check_sizes(min_bytes: int, max_bytes: int, channels: int, ranks: int) -> np.ndarray:
    """Sizes in [min_bytes, max_bytes] at which NCCL's own time of every pair is one straight line between two
    neighbours: the ends and both sides of each step of treeCorrectionFactor (64 B x 2^k) and of the ring plateau.
    Between them a rule's time minus the least over the pairs is convex, so it is largest at one of these sizes."""
    sizes = {min_bytes, max_bytes}
    for step in _steps(channels, ranks):
        if min_bytes < step <= max_bytes:
            sizes.update((step - 1, step))
    return np.array(sorted(sizes), dtype=np.float64)


def slower_than_nccl_pick(fabric, collective: str, pair: Combo, min_bytes: int, max_bytes: int, ranks: int,
                          domains: int, *, excluded=(), channels: int | None = None,
                          rtol: float = 1e-9) -> tuple[int, float, Combo, float] | None:
    """None where NCCL's own model rates `pair` no slower than its own pick at every size of [min_bytes, max_bytes];
    else (a size, the pair's us there, NCCL's pick there, its us). A pair NCCL does not offer there is slower.
    `excluded`: pairs the call leaves out (NCCL_ALGO_PROTO_IGNORE: a FALLBACK rule is reached only where NCCL left
    the pairs of the rules before it out), so NCCL picks among the others. `channels`: the count the rule forces on
    `pair` (None or 0: NCCL's own), at which `pair` is priced (own_times_us); NCCL's pick runs on its own count."""
    sizes = check_sizes(min_bytes, max_bytes, fabric.nccl.channels, ranks)
    times = own_times_us(fabric, collective, sizes, ranks, domains)
    names = [name for name in times if name not in set(excluded)]
    if not names:
        return None
    stacked = np.stack([times[name] for name in names])
    best = np.argmin(stacked, axis=0)
    best_us = stacked[best, np.arange(len(sizes))]
    if channels:
        times = own_times_us(fabric, collective, sizes, ranks, domains, channels=channels)
    mine = times.get(pair, np.full(len(sizes), np.inf))
    worse = mine > best_us * (1 + rtol)
    if not worse.any():
        return None
    i = int(np.argmax(mine / best_us))
    return int(sizes[i]), float(mine[i]), names[best[i]], float(best_us[i])


def own_rankings(fabric, collective: str, min_bytes: int, max_bytes: int, ranks: int,
                 domains: int) -> list[tuple[int, int, tuple[Combo, ...]]]:
    """[(lo, hi, the pairs NCCL offers, fastest first by its own model)]: [min_bytes, max_bytes] cut, without gaps, into
    ranges of whole bytes over which that order is one (NCCL's pick, and its next pick where a call leaves the first
    out, do not change inside a range). Between two steps (_steps) every pair's time is a straight line, so the order
    changes only where two lines cross: both sides of every crossing are cut points. Ties go by the pairs' order."""
    channels = fabric.nccl.channels
    steps = [s for s in _steps(channels, ranks) if min_bytes < s <= max_bytes]
    starts = {min_bytes, *steps}
    for lo, hi in zip([min_bytes, *steps], [s - 1 for s in steps] + [max_bytes]):
        if hi <= lo:
            continue
        ends = own_times_us(fabric, collective, np.array([lo, hi], dtype=np.float64), ranks, domains)
        lines = list(ends.values())
        for i, a in enumerate(lines):
            for b in lines[i + 1:]:
                at_lo, at_hi = a[0] - b[0], a[1] - b[1]
                if at_lo == at_hi or (at_lo > 0) == (at_hi > 0) and at_lo != 0 and at_hi != 0:
                    continue   # parallel, or one above the other over the whole range
                cross = lo + (hi - lo) * (at_lo / (at_lo - at_hi))
                base = math.floor(cross) if math.isfinite(cross) else lo
                starts.update(c for c in range(base - 1, base + 3) if lo < c <= hi)
    points = sorted(starts)
    times = own_times_us(fabric, collective, np.array(points, dtype=np.float64), ranks, domains)
    names = list(times)
    if not names:
        return [(min_bytes, max_bytes, ())]
    order = np.argsort(np.stack([times[name] for name in names]), axis=0, kind="stable")
    out: list[tuple[int, int, tuple[Combo, ...]]] = []
    for k, start in enumerate(points):
        ranking = tuple(names[i] for i in order[:, k])
        end = points[k + 1] - 1 if k + 1 < len(points) else max_bytes
        if out and out[-1][2] == ranking:
            out[-1] = (out[-1][0], end, ranking)
        else:
            out.append((start, end, ranking))
    return out


def own_pick(fabric, collective: str, size_bytes, group_size, num_domains, pairs) -> np.ndarray:
    """Per query, the index in `pairs` of NCCL's own pick by its own model (own_times_us: its tables, tree correction
    and ring plateau) among `pairs` (NCCL_ALGO / NCCL_PROTO narrow them); -1 where NCCL offers none of them. Arguments
    broadcast; NCCL's choice, whichever pair commbench's own terms (launch, pipeline ramp) make fastest."""
    size, n, d = np.broadcast_arrays(np.asarray(size_bytes, dtype=np.float64), np.asarray(group_size, dtype=np.float64),
                                     np.asarray(num_domains, dtype=np.float64))
    out = np.full(size.shape, -1, dtype=np.intp)
    if size.size == 0:
        return out
    for ranks, domains in np.unique(np.stack([n.ravel(), d.ravel()], axis=1), axis=0):
        where = (n == ranks) & (d == domains)
        times = own_times_us(fabric, collective, size[where], int(ranks), int(domains))
        offered = [i for i, pair in enumerate(pairs) if pair in times]
        if not offered:
            continue
        stacked = np.stack([times[pairs[i]] for i in offered])
        out[where] = np.asarray(offered)[np.argmin(stacked, axis=0)]
    return out
