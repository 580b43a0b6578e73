"""Every rank of a launch must run the same configuration: ranks started with different command lines or sweep files
(a shared file edited mid-launch, node images that differ) plan different points, and then gloo aborts (SIGABRT) on
mismatched sizes, or, with the data check off, a rank records points measured against another rank's dtype as ok.

At start-up each rank hashes what decides its points (`config_digest`) and the ranks all-gather the hashes (one
all_gather of 128 bytes per rank: comm/backend.gather_strings); on a mismatch every rank stops with the same line,
naming the ranks that differ from rank 0."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from commbench.errors import CommbenchError


def config_digest(value: Any) -> str:
    """A short hash of `value` (JSON with sorted keys; anything JSON cannot spell, by its str)."""
    blob = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _ranges(ranks: list[int]) -> str:
    """[1, 2, 3, 7] -> '1-3, 7'."""
    parts: list[str] = []
    start = prev = ranks[0]
    for rank in ranks[1:] + [None]:
        if rank is not None and rank == prev + 1:
            prev = rank
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if rank is not None:
            start = prev = rank
    return ", ".join(parts)


def differing_ranks(digests: list[str]) -> list[int]:
    """The ranks whose digest is not rank 0's."""
    return [rank for rank, digest in enumerate(digests) if digest != digests[0]]


def mismatch_line(digests: list[str], what: str) -> str | None:
    """The one line every rank stops with, or None when all digests agree."""
    differ = differing_ranks(digests)
    if not differ:
        return None
    return (f"the {len(digests)} ranks do not run the same {what}: rank(s) {_ranges(differ)} differ from rank 0 "
            f"(configuration hash {digests[differ[0]]} vs {digests[0]}): start every rank with the same command "
            f"line and files")


def check_same_config(backend, digest: str, what: str) -> None:
    """All-gather `digest` over the world; raise CommbenchError (the same line on every rank) where ranks differ."""
    if backend.world_size < 2:
        return
    from commbench.comm.backend import gather_strings

    line = mismatch_line(gather_strings(backend, digest), what)
    if line:
        raise CommbenchError(line)
