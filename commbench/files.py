"""Files commbench writes: checking an output path before anything launches, cutting a torn last
line before appending, and one writer at a time per output file."""

from __future__ import annotations

import os
from pathlib import Path


def repair_torn_tail(path: str | os.PathLike[str]) -> int:
    """Cut an unterminated last line (a write interrupted by a kill); return the bytes removed."""
    target = Path(path)
    if not target.exists():
        return 0
    with target.open("rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return 0
        chunk = min(size, 1 << 20)
        handle.seek(size - chunk)
        tail = handle.read(chunk)
        cut = tail.rfind(b"\n")
        keep = size - chunk + cut + 1 if cut >= 0 else 0
        handle.truncate(keep)
        return size - keep
