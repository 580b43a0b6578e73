"""What an output file already holds, for `--resume`: the keys of points already recorded.

A point counts as done once any record with its key is in the file, failed ones included (a point
that hung is not retried forever; delete its line to retry it). A last line torn by a kill is cut
off before appending, so the next record does not merge with it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from commbench.errors import CommbenchError
from commbench.files import repair_torn_tail, whole_size
from commbench.results.records import Measurement, RunHeader, iter_records
from commbench.sweep.plan import keys_known_before_launch, plan_sweep


def recorded_keys(path: str | os.PathLike[str], on_bad_line=None) -> set[str]:
    """Point keys of every measurement in the file (missing file: none)."""
    if not Path(path).exists():
        return set()
    return {rec.point_key for rec in iter_records(path, on_bad_line=on_bad_line)
            if isinstance(rec, Measurement) and rec.point_key}


def earlier_problems(path: str | os.PathLike[str], points, *, failed: bool = True) -> tuple[str, ...]:
    """Of the sweep's `points` (SweepPoint) recorded in the file, those whose record failed (unless not
    `failed`) or found wrong data, as 'label: why' (the last record of a point counts). --resume measures
    none of them again, so without this a resumed sweep ended 'done', exit 0, over a file holding failed points."""
    wanted = {point.key: point.label for point in points}
    last: dict[str, Measurement] = {}
    if Path(path).exists():
        for rec in iter_records(path):
            if isinstance(rec, Measurement) and rec.point_key in wanted:
                last[rec.point_key] = rec
    out = []
    for key, rec in last.items():
        if rec.status == "failed":
            if failed:
                out.append(f"{wanted[key]}: failed ({rec.error})")
        elif rec.num_wrong:
            out.append(f"{wanted[key]}: {rec.num_wrong} wrong element(s)")
    return tuple(out)


def finished_before_launch(path: str | os.PathLike[str], sweep, world_size: int, backend: str) -> int | None:
    """For --resume before any rank starts: the number of points when the file already holds every one,
    else None (then the launch decides, as it does when the keys are known only on the ranks)."""
    if not keys_known_before_launch(sweep):
        return None
    repair_torn_tail(path)  # as rank 0 does before it reads the keys
    done = recorded_keys(path)
    if not done:
        return None
    try:
        points = plan_sweep(sweep, world_size, backend=backend)
    except CommbenchError:  # a world the sweep cannot run: the launch's checks say so, in their words
        return None
    return len(points) if all(point.key in done for point in points) else None


def holds_every_planned_point(path: str | os.PathLike[str]) -> int | None:
    """The number of points the file's sweep plans when it holds a record of every one (its last sweep header's
    `planned_points`, counted over the launches of the same sweep identity: a --resume's headers), else None. After
    the run, when the ranks' keys are in the file: so a stopped sweep says it is complete (nothing for --resume) only
    when it is."""
    if not Path(path).exists():
        return None
    headers: list[RunHeader] = []
    keys: dict[str, set[str]] = {}
    identity = None
    try:
        for rec in iter_records(path, on_bad_line=lambda *_: None, drop_samples=True):
            if isinstance(rec, RunHeader):
                headers.append(rec)
                identity = rec.sweep_identity
            elif isinstance(rec, Measurement) and rec.point_key and identity is not None:
                keys.setdefault(identity, set()).add(rec.point_key)
    except CommbenchError:   # not a results file (any more): nothing said complete
        return None
    last = next((h for h in reversed(headers) if h.sweep_identity is not None), None)
    if last is None or last.planned_points is None:
        return None
    return last.planned_points if len(keys.get(last.sweep_identity, ())) >= last.planned_points else None


def has_records(path: str | os.PathLike[str]) -> bool:
    """Whether the file holds anything but a torn last line (files.whole_size): one whose only line is a header cut
    off by a kill or a full disk holds no record, and the launch cuts it (repair_torn_tail) as `bench -O` does, with
    or without --resume."""
    return whole_size(path) > 0


def sweep_identity(sweep, world_size: int, backend: str, *, ordered: bool = False) -> str:
    """What makes two runs the same sweep: its normalised entries (after defaults), the world size and
    the backend, hashed. The file's name, path and description do not count, nor the entries' order or names (a
    point's key names what it measures, not where its entry sits or what it is called: plan.py; an entry's default
    name is its index). `ordered`: the identity commbench wrote before order and names stopped counting (entries in
    order, names included), so files of earlier sweeps still resume, in their entries' order."""
    left_out = ("index",) if ordered else ("index", "name")
    entries = [json.dumps({k: v for k, v in dataclasses.asdict(e).items() if k not in left_out}, sort_keys=True,
                          default=str) for e in sweep.entries]
    blob = json.dumps({"entries": [json.loads(e) for e in (entries if ordered else sorted(entries))],
                       "world_size": world_size, "backend": backend}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def resume_identities(sweep, world_size: int, backend: str) -> tuple[str, str]:
    """(this sweep's identity, the one an earlier commbench wrote for it): check_resume_identity accepts either."""
    return (sweep_identity(sweep, world_size, backend), sweep_identity(sweep, world_size, backend, ordered=True))


def check_resume_identity(path: str | os.PathLike[str], identity: str | tuple[str, ...], what: str) -> None:
    """Refuse to --resume into a file whose runs were another sweep (or not a sweep at all). `identity`: this
    sweep's, or a tuple of the ones that count as it (resume_identities), the first named in the refusal."""
    if not has_records(path):
        return
    accepted = (identity,) if isinstance(identity, str) else tuple(identity)
    identity = accepted[0]
    for record in iter_records(path):
        if isinstance(record, RunHeader) and record.sweep_identity not in accepted:
            theirs = (f"sweep identity {record.sweep_identity}" if record.sweep_identity
                      else f"a run of `{' '.join(record.argv[1:3]) or 'another command'}`, not this sweep")
            raise CommbenchError(f"--resume into {str(path)!r} is refused: it holds {theirs}; {what} is {identity} "
                                 f"(entries, world size and backend must match): choose another -O/--out")
