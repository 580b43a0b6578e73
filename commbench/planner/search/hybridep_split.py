"""HybridEP needs every EP group split evenly over the NVLink domains it spans.

DeepEP's hybrid-ep buffer counts the group's ranks whose fabric memory handle it can import (the group's ranks in
its own NVLink domain: csrc/hybrid_ep/allocator/allocator.cu `detect_accessible_ranks`), asserts
`group_size % ranks_per_domain == 0` and takes `node_rank = rank // ranks_per_domain` (deep_ep/hybrid_ep_buffer.py
:63,76,82 at eb9cee7, the commit Megatron-LM core_v0.16.1's docker/Dockerfile.ci.dev:73 builds; :62,75,81 at 34152ae,
Megatron-Bridge v0.6.0's docker/Dockerfile.ci:45). An EP32 group placed 8 + 24 over two racks fails the assert on
the 24 side (32 % 24); one placed 8 + 16 + 8 passes it and then numbers its domains wrongly. So with the flex
dispatcher on the HybridEP backend the search keeps only layouts whose EP groups hold the same number of ranks in
every domain they touch (one domain included), given the plan's own placement (placement.gpus_per_rack, Megatron-
Core's etp-ep-edp-pp rank order); DeepEP's normal kernels (deepep) and Megatron's alltoall have no such rule.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from commbench.errors import invalid

SOURCE = "DeepEP hybrid-ep asserts group_size % ranks_per_domain == 0: deep_ep/hybrid_ep_buffer.py:76 at eb9cee7"


def _members_below(offset: int, etp: int) -> int:
    """Members of a block's EP group (every etp-th rank from the block's first) below `offset` into the block."""
    return -(-offset // etp)


@functools.lru_cache(maxsize=4096)
def uneven_split(ep: int, etp: int, per_rack: int, num_gpus: int) -> tuple[int, ...] | None:
    """The ranks per domain of the first EP group that is split unevenly over the domains it touches, or None.

    Expert ranks run etp-ep-edp-pp (innermost first), so an EP group is every etp-th rank of a block of etp * ep
    consecutive ranks, the blocks laid end to end; a domain holds `per_rack` consecutive ranks (the last one may be
    partial)."""
    span = ep * etp
    if ep <= 1 or span <= 0:
        return None
    num_blocks = num_gpus // span
    # the blocks' offsets into the racks repeat every per_rack / gcd(span, per_rack) blocks; the last rack may be short
    period = per_rack // math.gcd(span, per_rack)
    tail = range(max(period, num_blocks - (-(-span // per_rack) + 1)), num_blocks)
    for k in [*range(min(period, num_blocks)), *tail]:
        start, end = k * span, (k + 1) * span
        counts = tuple(_members_below(min(end, (rack + 1) * per_rack) - start, etp)
                       - _members_below(max(start, rack * per_rack) - start, etp)
                       for rack in range(start // per_rack, (end - 1) // per_rack + 1))
        if len(set(counts)) > 1:
            return counts
    return None


def uneven_rows(ep: np.ndarray, etp: np.ndarray, per_rack: int, num_gpus: int) -> np.ndarray:
    """Per row: True where some EP group is split unevenly over NVLink domains (uneven_split)."""
    ep, etp = np.asarray(ep, dtype=np.int64), np.asarray(etp, dtype=np.int64)
    out = np.zeros(ep.shape, dtype=bool)
    for e, t in {(int(a), int(b)) for a, b in zip(ep.ravel(), etp.ravel())}:
        if uneven_split(e, max(t, 1), int(per_rack), int(num_gpus)) is not None:
            out |= (ep == e) & (etp == t)
    return out


def refusal(ep: int, etp: int, per_rack: int, num_gpus: int, pins: dict) -> Exception:
    """One line for a pin that leaves only HybridEP layouts with an uneven EP split: the split, the source, the way
    out."""
    split = uneven_split(int(ep), int(max(etp, 1)), int(per_rack), int(num_gpus))
    parts = " + ".join(str(c) for c in split or ())
    others = ", ".join(f"{k}={v}" for k, v in pins.items() if k != "ep") or "nothing else pinned"
    return invalid("ep", int(ep),
                   f"with {others} on {num_gpus} GPUs placed {per_rack} per NVLink domain, an EP{ep} group holds "
                   f"{parts} ranks in the domains it spans, and the flex dispatcher's HybridEP backend needs the "
                   f"same count in each ({SOURCE}); pin an ep whose groups split evenly (or stay in one domain), "
                   f"or dispatcher=alltoall")
