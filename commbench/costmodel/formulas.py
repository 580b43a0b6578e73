"""Predicted time of a collective on a tiered fabric: pure, numpy-vectorised functions.

Per tier, each algorithm is one alpha-beta line (Hockney, "The communication challenge for MPP",
Parallel Computing 1994; Thakur, Rabenseifner & Gropp, "Optimization of collective communication
operations in MPICH", IJHPCA 2005), written in nccl-tests' bus-bandwidth form
(nccl-tests doc/PERFORMANCE.md): time = latency + bus_factor(n) * size / busbw, with
bus_factor = 2(n-1)/n for all_reduce, (n-1)/n for reduce_scatter, all_gather and all_to_all, 1 for
sendrecv and broadcast. As NCCL's tuner does (src/graph/tuning.cc), the prediction is the fastest
algorithm available; the minimum of non-decreasing lines is non-decreasing in size.

Groups spanning several scale-up domains (num_domains > 1) are composed from the tiers:
- rings and trees run in lock-step, so each step waits for the slowest link and the pipeline's
  bandwidth is that of its slowest edge; its channels leave each domain through the NICs of its m
  ranks there together (NCCL spreads channels over NICs, nccl-tests issue 160), so the edge between
  domains carries m NICs' rate: min(scale-up, m x scale-out) busbw (one NIC when every rank is in
  its own domain);
- all-to-all sends concurrently on both tiers; the time is the longer of the bytes leaving the
  domain over the NIC and the bytes staying inside over NVLink. With m ranks per domain in a group
  of n, busbw tends to NIC * (n-1)/(n-m), i.e. N/(N-1) x the NIC rate on N domains, as the NCCL
  maintainers describe for inter-node alltoall (NVIDIA/nccl-tests issue 130);
- in-switch reduction (NVLS) exists only inside an NVLink domain.
On fabrics with NCCL parameters (the presets) the NCCL collectives (all-reduce, reduce-scatter,
all-gather, broadcast) are predicted by NCCL's algorithm x protocol structure instead (choice.py,
nccl_model.py), which includes NCCL's tree and NVLS-tree (on few nodes they beat the NIC rate by
reducing inside the node first, NVIDIA/nccl-tests issue 196); these curves then predict the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from commbench.costmodel.choice import nccl_time_s, uses_nccl_model
from commbench.costmodel.fabric import AlgorithmCurve, Fabric
from commbench.costmodel.latency_only import latency_only_curves, latency_only_time_s
from commbench.costmodel.nccl_model import check_group
from commbench.costmodel.nccl_tables import canonical_name
from commbench.errors import CommbenchError, invalid

ArrayLike = float | int | np.ndarray


@dataclass(frozen=True)
class CollectiveShape:
    """How a collective's traffic scales with group size n."""

    bus_factor: Callable[[np.ndarray], np.ndarray]
    step_multiplier: int  # all_reduce = reduce-scatter + all-gather: twice the steps
    spread: bool  # every rank sends to every other at once (all-to-all), not along a ring/tree
    # the algorithm whose steps a fitted curve ("fitted") of this collective scales by across group sizes
    fitted_steps: str = "fitted"


def _ring_factor(n: np.ndarray) -> np.ndarray:
    return (n - 1) / n


COLLECTIVES: dict[str, CollectiveShape] = {
    "all_reduce": CollectiveShape(lambda n: 2 * (n - 1) / n, 2, False),
    "reduce_scatter": CollectiveShape(_ring_factor, 1, False),
    "all_gather": CollectiveShape(_ring_factor, 1, False),
    "all_to_all": CollectiveShape(_ring_factor, 1, True),
    "moe_all_to_all": CollectiveShape(_ring_factor, 1, True),
    # nccl-tests sendrecv: each rank one send to rank+1 and one recv from rank-1 at any n (src/sendrecv.cu
    # SendRecvRunColl), so a fitted curve keeps its latency at every group size, as the presets' p2p
    "sendrecv": CollectiveShape(lambda n: np.ones_like(n), 1, False, fitted_steps="p2p"),
    "broadcast": CollectiveShape(lambda n: np.ones_like(n), 1, False),
}

# Sequential steps of one pass of each algorithm over n ranks; ring and tree passes are repeated
# `step_multiplier` times (all_reduce = reduce-scatter + all-gather). NVLS: NCCL's in-switch
# reduction, one pass; its measured effective latency grows ~linearly with the group (8x H200 and
# 72x GB200 figures in hardware.toml), so it is counted per rank. MoE dispatch/combine are one
# fused kernel each (DeepEP), so one step.
ALGORITHM_STEPS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "ring": lambda n: n - 1,
    "ring_ll": lambda n: n - 1,
    "tree": lambda n: np.ceil(np.log2(np.maximum(n, 1))),
    "nvls": lambda n: n,
    "pairwise": lambda n: n - 1,
    "p2p": lambda n: np.ones_like(n),
    "dispatch": lambda n: np.ones_like(n),
    "combine": lambda n: np.ones_like(n),
    "fitted": lambda n: n - 1,
}
MULTIPASS = frozenset({"ring", "ring_ll", "tree", "fitted"})
SCALE_UP_ONLY = frozenset({"nvls"})


def bus_factor(collective: str, group_size: ArrayLike) -> np.ndarray:
    return _shape(collective).bus_factor(np.asarray(group_size, dtype=np.float64))


def steps(collective: str, algorithm: str, group_size: ArrayLike) -> np.ndarray:
    n = np.asarray(group_size, dtype=np.float64)
    if algorithm == "fitted":   # a measured curve scales by its collective's own steps (sendrecv: one)
        algorithm = _shape(collective).fitted_steps
    step_fn = ALGORITHM_STEPS.get(algorithm, ALGORITHM_STEPS["ring"])
    passes = _shape(collective).step_multiplier if algorithm in MULTIPASS or algorithm not in ALGORITHM_STEPS else 1
    return np.maximum(step_fn(n), 1.0) * passes


def _shape(collective: str) -> CollectiveShape:
    shape = COLLECTIVES.get(collective)
    if shape is None:
        raise invalid("collective", collective, f"one of {', '.join(COLLECTIVES)}")
    return shape


def _columns(c: AlgorithmCurve) -> list[float]:
    """A curve's numbers in SI units: latency s, per-step latency s, busbw bytes/s, and a scale-out curve's own
    per in-domain step latency s and demonstrated in-domain busbw bytes/s (NaN: none, the scale-up curve's)."""
    return [c.latency_us * 1e-6, c.latency_per_step_us * 1e-6, c.busbw_gbps * 1e9,
            np.nan if c.latency_per_intra_step_us is None else c.latency_per_intra_step_us * 1e-6,
            np.nan if c.intra_busbw_gbps is None else c.intra_busbw_gbps * 1e9]


def _curve_arrays(curves: tuple[AlgorithmCurve, ...], n: np.ndarray, bus_bytes: np.ndarray) -> tuple[np.ndarray, ...]:
    """(latency_s, per-step latency_s, busbw bytes/s, per in-domain step latency_s or NaN, in-domain busbw floor
    bytes/s or NaN) per query (_columns). Fitted curves: those of the nearest measured group size (in log), and of
    the size segment the query's bus bytes fall in."""
    if len(curves) == 1:
        return tuple(np.float64(v) for v in _columns(curves[0]))
    by_group: dict[float, list[AlgorithmCurve]] = {}
    for c in sorted(curves, key=lambda c: c.min_bus_bytes):
        by_group.setdefault(float(c.group_size or 1), []).append(c)
    groups = sorted(by_group)
    num_segments = max(len(v) for v in by_group.values())
    # table[g, k]: segment k of group g (the last segment repeated to fill), starts[g, k] likewise
    rows = [by_group[g] + [by_group[g][-1]] * (num_segments - len(by_group[g])) for g in groups]
    table = np.array([[_columns(c) for c in row] for row in rows])
    starts = np.array([[c.min_bus_bytes for c in row] for row in rows])
    log_groups = np.log(groups)
    group_index = np.searchsorted((log_groups[1:] + log_groups[:-1]) / 2, np.log(n)) if len(groups) > 1 \
        else np.zeros(np.shape(n), dtype=np.intp)
    segment = np.zeros(np.shape(n), dtype=np.intp)
    for k in range(1, num_segments):
        segment += starts[group_index, k] <= bus_bytes
    picked = table[group_index, segment]
    return tuple(picked[..., k] for k in range(picked.shape[-1]))


def _by_algorithm(curves: tuple[AlgorithmCurve, ...]) -> dict[str, tuple[AlgorithmCurve, ...]]:
    grouped: dict[str, list[AlgorithmCurve]] = {}
    for curve in curves:
        grouped.setdefault(curve.algorithm, []).append(curve)
    return {key: tuple(value) for key, value in grouped.items()}


def _check_group(fabric: Fabric, n: np.ndarray, d: np.ndarray, ranks_per_domain: np.ndarray) -> None:
    check_group(fabric.num_gpus, fabric.num_domains, fabric.domain_size, fabric.name, n, d)


def _min_into(best: np.ndarray | float, new: np.ndarray | float) -> np.ndarray | float:
    """min(best, new), in place when `best` is a full array (a fresh one owned by the caller)."""
    if isinstance(best, np.ndarray) and best.ndim > 0 and best.shape == np.shape(new):
        return np.minimum(best, new, out=best)
    return np.minimum(best, new)


def collective_time_s(fabric: Fabric, collective: str, size_bytes: ArrayLike, group_size: ArrayLike,
                      num_domains: ArrayLike = 1, *, algorithm: str | None = None,
                      imbalance: ArrayLike = 1.0, protocol: str | None = None,
                      fewest_per_domain: ArrayLike | None = None) -> np.ndarray:
    """Predicted seconds for `collective` of `size_bytes` (nccl-tests' size) over `group_size` ranks
    spread over `num_domains` scale-up domains. Arguments broadcast; the fastest algorithm wins
    unless `algorithm` names one. `imbalance` (>= 1) scales the busiest rank's bytes (all-to-all).
    `fewest_per_domain`: the group's ranks in its least-populated domain where the domains do not hold it evenly
    (a group of 64 split 8 + 56 over two racks; default ceil(group / domains)): the all-to-all bytes leaving that
    side and a ring's edge between domains go through its NICs alone (alpha-beta curves; the NCCL-structure
    collectives take the even split).
    On fabrics with NCCL parameters the NCCL collectives use NCCL's algorithm x protocol structure
    (choice.py; `protocol` forces one of LL, LL128, Simple); elsewhere the alpha-beta curves."""
    if uses_nccl_model(fabric, collective):
        if algorithm is not None and algorithm.casefold() == "ring_ll":  # the v1 presets' name for ring with LL
            algorithm, protocol = "ring", protocol or "LL"
        skew = np.asarray(imbalance, dtype=np.float64)
        sizes = size_bytes if skew.max() == 1.0 and skew.min() == 1.0 else np.multiply(size_bytes, skew)
        return nccl_time_s(fabric, collective, sizes, group_size, num_domains, algorithm=algorithm, protocol=protocol)
    if protocol is not None:
        raise invalid("protocol", protocol, f"{collective} on {fabric.name} is predicted from alpha-beta curves, "
                      "which have no protocols")
    if algorithm:   # any case, as NCCL_ALGO (nccl_tables.canonical_name): the curve's own spelling
        algorithm = canonical_name(algorithm, {c.algorithm for c in fabric.curves if c.collective == collective})
    (time_s,) = _algorithm_times(fabric, collective, size_bytes, group_size, num_domains, imbalance,
                                 [algorithm] if algorithm else None, fewest_per_domain)
    return time_s


def _algorithm_times(fabric: Fabric, collective: str, size_bytes: ArrayLike, group_size: ArrayLike,
                     num_domains: ArrayLike, imbalance: ArrayLike, groups: list[str] | None,
                     fewest_per_domain: ArrayLike | None = None) -> list[np.ndarray]:
    """One time array per entry of `groups` (an algorithm name, or None: the fastest of all); `fewest_per_domain`
    as collective_time_s."""
    shape = _shape(collective)
    size, n, d, skew = np.broadcast_arrays(np.asarray(size_bytes, dtype=np.float64),
                                           np.asarray(group_size, dtype=np.float64),
                                           np.asarray(num_domains, dtype=np.float64),
                                           np.asarray(imbalance, dtype=np.float64))
    groups = groups or [None]
    if n.size == 0:
        return [np.zeros(n.shape) for _ in groups]
    ranks_per_domain = np.ceil(n / d)
    _check_group(fabric, n, d, ranks_per_domain)
    if size.min() < 0:
        raise invalid("size_bytes", float(size.min()), "sizes must be >= 0")
    up = _by_algorithm(fabric.curves_for(collective, "scale_up"))
    out = _by_algorithm(fabric.curves_for(collective, "scale_out"))
    if not up and not out:
        # a latency-only curve (time did not grow with size): its measured latency inside what it measured, else a
        # one-line refusal (latency_only.py); never a bandwidth it did not measure
        measured = latency_only_time_s(fabric, collective, size, n, d)
        if measured is not None:
            if any(groups):
                raise invalid("algorithm", next(g for g in groups if g), f"no algorithm: fabric {fabric.name!r} "
                              f"measured {collective}'s latency alone (a latency-only curve), leave it out")
            return [measured for _ in groups]
        # a curve fitted but kept from prediction (its bandwidth undetermined: fit_records.fit_curve) says why
        kept = next((w for c in fabric.fit_report or () if c.get("collective") == collective and not
                     c.get("for_prediction", True) for w in c.get("warnings", ()) if "undetermined" in w), None)
        raise CommbenchError(f"collective={collective!r} is not covered by fabric {fabric.name!r}"
                             + (f": its measured curve's {kept}; measure larger sizes" if kept else "")
                             + f"; it covers: {', '.join(fabric.collectives) or 'nothing'}"
                             + (f" (latency only, up to the sizes measured: "
                                f"{', '.join(f'{c.label} at {c.range_text}' for c in fabric.latency_only)})"
                                if fabric.latency_only else "")
                             + (f" (measure {collective} too, e.g. `commbench bench {collective} -e 16M -O FILE`, and "
                                "fit every results file together; or `fit --system PRESET` on NCCL results, which "
                                "takes the preset's curve for what was not measured)"
                                if fabric.source.startswith("fitted") and not kept else ""))
    for name in groups:
        if name is not None and name not in up and name not in out:
            raise invalid("algorithm", name, f"one of the algorithms fabric {fabric.name!r} has for {collective}: "
                                           f"{', '.join(sorted(set(up) | set(out)))}")
    crosses = d > 1
    any_cross, all_cross = bool(crosses.any()), bool(crosses.all())
    bus_bytes = shape.bus_factor(n) * size
    skewed_bus_bytes = bus_bytes * skew if skew.max() != 1.0 or skew.min() != 1.0 else bus_bytes
    # the side of the group with the fewest ranks in one domain: its NICs carry the most per rank (an even split
    # unless the placement says otherwise); the fullest side's ranks exchange the most over NVLink
    fewest = ranks_per_domain if fewest_per_domain is None else np.clip(
        np.broadcast_to(np.asarray(fewest_per_domain, dtype=np.float64), n.shape), 1, ranks_per_domain)
    if any_cross and shape.spread:
        sent = skew * size / n
        bytes_out, bytes_in = sent * (n - fewest), sent * (ranks_per_domain - 1)
    shares_domain = fewest > 1 if any_cross and not shape.spread else None
    step_cache: dict[tuple[str, str], np.ndarray] = {}

    def cached_steps(name: str, which: str) -> np.ndarray:
        if (name, which) not in step_cache:
            if which == "intra":  # steps inside domains: all but the inter-domain ones
                step_cache[name, which] = np.maximum(cached_steps(name, "n") - cached_steps(name, "d"), 0)
            else:
                step_cache[name, which] = steps(collective, name, n if which == "n" else d)
        return step_cache[name, which]

    fastest_up: list = []

    def fastest_in_domain_busbw() -> np.ndarray | float:
        """The fastest in-domain rate of any algorithm the fabric has inside a domain (inf: none)."""
        if not fastest_up:
            fastest_up.append(np.max(np.broadcast_arrays(*(_curve_arrays(c, n, bus_bytes)[2] for c in up.values())),
                                     axis=0) if up else np.inf)
        return fastest_up[0]

    # Written with in-place updates: at a million queries, fresh temporaries cost more than the math.
    def one_algorithm(name: str) -> tuple[np.ndarray | float, np.ndarray | float]:
        """(time inside one domain, time across domains) of algorithm `name` (inf where it has no curve). An
        algorithm with a scale-out curve but none inside a domain (a preset's ring / tree beside a profile's
        measured 'fitted' in-domain curve) is bounded inside the domains by the fastest in-domain rate there is:
        the preset's 47 GB/s per NIC x 8 ranks was predicted at 375 GB/s busbw over a node measured at 100."""
        time_up = time_out = np.inf
        per_step, busbw = 0.0, np.inf
        if name not in up and any_cross:
            busbw = fastest_in_domain_busbw()
        if name in up:
            lat, per_step, busbw, _, _ = _curve_arrays(up[name], n, bus_bytes)
            if not all_cross:
                time_up = np.multiply(cached_steps(name, "n"), per_step)
                time_up += lat
                time_up += skewed_bus_bytes / busbw
        if any_cross and name in out and name not in SCALE_UP_ONLY:
            lat_o, per_step_o, busbw_o, intra_o, floor_in = _curve_arrays(out[name], n, bus_bytes)
            # the in-domain rate bounds a cross-domain group only below what its own measurement demonstrated
            # (a measured 2-node busbw above the node's: NCCL's tree / NVLS-tree; profile.scale_out_curves)
            busbw_in = np.fmax(busbw, floor_in) if np.any(~np.isnan(floor_in)) else busbw
            # NCCL's tuning model: the steps between domains pay the scale-out hop, the rest scale-up (a fitted
            # cross-domain curve carries its own in-domain step latency: profile.split_latency)
            time_out = np.multiply(cached_steps(name, "d"), per_step_o)
            time_out += lat_o
            intra_step = np.where(np.isnan(intra_o), per_step, intra_o) if np.any(~np.isnan(intra_o)) else per_step
            if np.any(intra_step):
                time_out += cached_steps(name, "intra") * intra_step
            if shape.spread:
                wire = np.maximum(bytes_out / busbw_o, bytes_in / busbw_in)
            else:
                wire = skewed_bus_bytes / np.where(shares_domain, np.minimum(fewest * busbw_o, busbw_in), busbw_o)
            time_out += wire
        return time_up, time_out

    results = []
    for group in groups:
        best_up = best_out = np.inf
        for name in (sorted(set(up) | set(out)) if group is None else [group]):
            time_up, time_out = one_algorithm(name)
            best_up, best_out = _min_into(best_up, time_up), _min_into(best_out, time_out)
        best = best_out if all_cross else (np.where(crosses, best_out, best_up) if any_cross else best_up)
        best = np.broadcast_to(best, n.shape)
        # a group of one rank moves nothing (0 s below) and needs no curve: a fabric of one GPU per domain has none
        # inside a domain, and its DP = 1 rows stopped the plan
        unpriced = np.isinf(best) & (n > 1)
        if unpriced.any():
            tier = "scale_out" if np.any(crosses & unpriced) else "scale_up"
            has = sorted({c.tier for c in fabric.curves if c.collective == collective})
            where = "inside one scale-up domain" if tier == "scale_up" else "across scale-up domains"
            raise CommbenchError(f"collective={collective!r} has no {tier} curve in fabric {fabric.name!r}"
                                 + (f" for algorithm={group!r}" if group else "")
                                 + f" (it has {collective} on {' and '.join(has) or 'no tier'}): measure {collective} "
                                 f"{where} and fit again, or use a preset or `commbench tune`'s fabric.json, which "
                                 "takes the preset's curves for what was not measured")
        results.append(np.where(n <= 1, 0.0, best))
    return results


MOE_PHASES = ("dispatch", "combine")


def moe_all_to_all_time_s(fabric: Fabric, bytes_per_rank: ArrayLike, ep_size: ArrayLike,
                          num_domains: ArrayLike = 1, imbalance: ArrayLike = 1.0, *,
                          phase: str | None = None, fewest_per_domain: ArrayLike | None = None) -> np.ndarray:
    """One MoE dispatch (or combine): each rank sends `bytes_per_rank` (its tokens x top-k x hidden
    x bytes per element, the local share included) spread over the `ep_size` ranks; the busiest
    receiver gets `imbalance` x the mean, and sets the time (DeepEP's "bottleneck bandwidth",
    deepseek-ai/DeepEP README). `phase` picks the dispatch or combine curve where the fabric has
    both; by default their mean, so twice it is one dispatch plus one combine. Falls back to the
    plain all_to_all curves when the fabric has no MoE-specific ones. `fewest_per_domain` as collective_time_s."""
    if np.any(np.asarray(imbalance, dtype=np.float64) < 1.0):
        raise invalid("imbalance", float(np.min(imbalance)), "max/mean bytes per rank, so >= 1")
    if phase is not None and phase not in MOE_PHASES:
        raise invalid("phase", phase, f"one of {', '.join(MOE_PHASES)} (or none for their mean)")
    collective = ("moe_all_to_all" if "moe_all_to_all" in fabric.collectives
                  or latency_only_curves(fabric, "moe_all_to_all") else "all_to_all")
    algorithms = {c.algorithm for c in fabric.curves if c.collective == collective}
    args = (fabric, collective, bytes_per_rank, ep_size, num_domains, imbalance)
    if phase is not None and phase in algorithms:
        return _algorithm_times(*args, [phase], fewest_per_domain)[0]
    if phase is None and set(MOE_PHASES) <= algorithms:
        dispatch, combine = _algorithm_times(*args, list(MOE_PHASES), fewest_per_domain)
        return 0.5 * (dispatch + combine)
    return _algorithm_times(*args, None, fewest_per_domain)[0]


def hierarchical_reduce_scatter_time_s(fabric: Fabric, size_bytes: ArrayLike, group_size: ArrayLike,
                                       ranks_per_domain: ArrayLike) -> np.ndarray:
    """Two-stage reduce-scatter of a `size_bytes` buffer over `group_size` ranks, `ranks_per_domain`
    of them in each scale-up domain: reduce-scatter inside each domain over the full buffer, then
    reduce-scatter of the 1/m shard across domains among the ranks with the same local index (one
    per domain). The time is the sum of the stages (the 2D/hierarchical scheme of Jia et al.,
    "Highly scalable deep learning training system with mixed-precision", arXiv 1807.11205; also
    PyTorch HSDP and Megatron's distributed optimizer over DP groups that span nodes)."""
    size, n, m = np.broadcast_arrays(np.asarray(size_bytes, dtype=np.float64),
                                     np.asarray(group_size, dtype=np.float64),
                                     np.asarray(ranks_per_domain, dtype=np.float64))
    if np.any(m < 1) or np.any(n % m != 0):
        raise invalid("ranks_per_domain", float(m.flat[0]), "a divisor of the group size, >= 1")
    d = n / m
    intra = collective_time_s(fabric, "reduce_scatter", size, m, 1)
    inter = np.where(d > 1, collective_time_s(fabric, "reduce_scatter", size / m, np.maximum(d, 1),
                                              np.maximum(d, 1)), 0.0)
    return intra + inter
