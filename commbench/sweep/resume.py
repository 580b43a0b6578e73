"""What an output file already holds, for `--resume`: the keys of points already recorded.

A point counts as done once any record with its key is in the file, failed ones included (a point
that hung is not retried forever; delete its line to retry it). A last line torn by a kill is cut
off before appending, so the next record does not merge with it.
"""

from __future__ import annotations

import os
from pathlib import Path

from commbench.results.records import Measurement, iter_records


def recorded_keys(path: str | os.PathLike[str], on_bad_line=None) -> set[str]:
    """Point keys of every measurement in the file (missing file: none)."""
    if not Path(path).exists():
        return set()
    return {rec.point_key for rec in iter_records(path, on_bad_line=on_bad_line)
            if isinstance(rec, Measurement) and rec.point_key}


def has_records(path: str | os.PathLike[str]) -> bool:
    target = Path(path)
    return target.exists() and target.stat().st_size > 0
