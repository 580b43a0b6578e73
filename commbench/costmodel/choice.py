"""Per (algorithm, protocol) predicted times and NCCL's choice among them (the tuner-facing API).

    algorithm_protocol_times_s(fabric, collective, size_bytes, group_size, num_domains)
        -> {(algorithm, protocol): seconds}   only the pairs NCCL offers there
    best_algorithm_protocol(fabric, collective, size_bytes, group_size, num_domains)
        -> Choice(algorithm, protocol, time_s)   NCCL's pick per size by its own model (nccl_own), timed by ours

Names are commbench's ("ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain",
"pat"; "LL", "LL128", "Simple"); `nccl_tables.NCCL_ALGO_NAMES` maps them to NCCL_ALGO spellings.
Both need a fabric with NCCL parameters (`Fabric.nccl`: the presets; a fitted profile keeps
the preset's). Everything is predicted, never measured.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commbench.costmodel.nccl_eval import fastest_time_s, pair_times_s
from commbench.costmodel.nccl_model import ArrayLike, Combo, combos
from commbench.errors import CommbenchError

NCCL_COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast")


@dataclass(frozen=True)
class Choice:
    """NCCL's pick (algorithm, protocol) per query, by its own model (best_algorithm_protocol), and its predicted seconds."""

    algorithm: np.ndarray  # str per query
    protocol: np.ndarray
    time_s: np.ndarray


def _require_nccl(fabric, collective: str) -> None:
    if getattr(fabric, "nccl", None) is None:
        raise CommbenchError(f"fabric {fabric.name!r} has no NCCL parameters (nccl_model); "
                             "use a preset (commbench systems) or a profile fitted from one (--system)")
    if collective not in NCCL_COLLECTIVES:
        raise CommbenchError(f"collective={collective!r} is not an NCCL-tuned collective; "
                             f"one of {', '.join(NCCL_COLLECTIVES)}")


def uses_nccl_model(fabric, collective: str) -> bool:
    """Whether `collective_time_s` predicts `collective` on `fabric` with the NCCL structure:
    the fabric has NCCL parameters and no measured (fitted) curve replaced them."""
    if getattr(fabric, "nccl", None) is None or collective not in NCCL_COLLECTIVES:
        return False
    return not any(c.group_size is not None for tier in ("scale_up", "scale_out")
                   for c in fabric.curves_for(collective, tier))


def algorithm_protocol_times_s(fabric, collective: str, size_bytes: ArrayLike, group_size: ArrayLike,
                               num_domains: ArrayLike = 1, *, channels: int | None = None) -> dict[Combo, np.ndarray]:
    """Predicted seconds per (algorithm, protocol) NCCL offers for these queries (arguments
    broadcast). A pair offered for some queries only (e.g. NVLS where the group stays in one
    domain) is inf where NCCL would not run it. `channels`: the count a tuner rule forces on the call (None: NCCL's
    own), which prices ring, tree and PAT (nccl_model.GroupTerms; NVLS and CollNet stay at NCCL's own count)."""
    _require_nccl(fabric, collective)
    times, _ = pair_times_s(fabric, collective, size_bytes, group_size, num_domains, combos(collective),
                            channels=channels)
    return times


def best_algorithm_protocol(fabric, collective: str, size_bytes: ArrayLike, group_size: ArrayLike,
                            num_domains: ArrayLike = 1, *, algorithm: str | None = None,
                            protocol: str | None = None) -> Choice:
    """NCCL's pick per query, optionally among one algorithm's protocols or one protocol's algorithms (NCCL_ALGO /
    NCCL_PROTO): the pair NCCL's own model rates fastest (nccl_own.own_pick: its tables, tree correction factor and
    ring plateau, as ncclTopoGetAlgoTime, src/graph/tuning.cc -- the one model of NCCL's pick, which nccl-tuner checks
    its rules against), with that pair's predicted time by commbench's model (launch and pipeline terms included)."""
    from commbench.costmodel.nccl_own import own_pick

    _require_nccl(fabric, collective)
    times, n = pair_times_s(fabric, collective, size_bytes, group_size, num_domains,
                            combos(collective, algorithm, protocol))
    if not times:
        raise CommbenchError(f"NCCL offers no {algorithm or 'algorithm'}/{protocol or 'protocol'} for "
                             f"{collective} on {fabric.name} with this group")
    names = list(times)
    stacked = np.stack([np.broadcast_to(times[name], n.shape) for name in names])
    sizes = np.broadcast_to(np.asarray(size_bytes, dtype=np.float64), n.shape)
    best = own_pick(fabric, collective, sizes, n, np.broadcast_to(np.asarray(num_domains, dtype=np.float64), n.shape),
                    names)
    # n <= 1 (no communication) or a pair NCCL's own model does not price: the fastest by commbench's model
    best = np.where(best >= 0, best, np.argmin(stacked, axis=0))
    time_s = np.take_along_axis(stacked, best[None], axis=0)[0]
    if np.isinf(time_s).any():
        raise CommbenchError(f"NCCL offers no {algorithm or 'algorithm'}/{protocol or 'protocol'} for "
                             f"{collective} on {fabric.name} for some of these groups")
    algorithms = np.array([a for a, _ in names])[best]
    protocols = np.array([p for _, p in names])[best]
    return Choice(algorithm=algorithms, protocol=protocols, time_s=np.where(n <= 1, 0.0, time_s))


def nccl_time_s(fabric, collective: str, size_bytes: ArrayLike, group_size: ArrayLike, num_domains: ArrayLike,
                *, algorithm: str | None = None, protocol: str | None = None) -> np.ndarray:
    """The least time over the offered pairs (what collective_time_s returns on NCCL fabrics)."""
    best, n = fastest_time_s(fabric, collective, size_bytes, group_size, num_domains,
                             combos(collective, algorithm, protocol))
    if np.isinf(best).any():
        raise CommbenchError(f"NCCL offers no {algorithm or 'algorithm'}/{protocol or 'protocol'} for "
                             f"{collective} on {fabric.name} for some of these groups")
    return np.where(n <= 1, 0.0, best)
