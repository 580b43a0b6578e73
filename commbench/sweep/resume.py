"""What an output file already holds, for `--resume`: the keys of points already recorded.

A point counts as done once a record with its key is in the file's last run of the sweep (a run and the launches
that continued it, results.resumed.continued_run_ids), failed ones included (a point that hung is not retried
forever; delete its line to retry it). An earlier run of the same sweep before it (files appended together) does not
stand in for it: `report` names the last run cut short and says --resume measures its missing points, so --resume
measures them. A last line torn by a kill is cut off before appending, so the next record does not merge with it.
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
from commbench.sweep.identity_changes import identity_changes
from commbench.sweep.plan import keys_known_before_launch, plan_sweep


def last_run_measurements(path: str | os.PathLike[str], on_bad_line=None) -> list[Measurement]:
    """The file's measurements that --resume continues (missing file: none): of each sweep identity, those of its
    last run, joined with the launches that continued it (results.resumed.latest_sweep_runs, as `report` and
    `compare` count runs); measurements of runs without a sweep identity all (nothing tells their runs apart). A
    cut-short run appended after a whole one (probe P3: `cat full.jsonl; head -5 full3.jsonl`) was 'nothing to do:
    all 10 point(s) are already in' by the whole run's keys, while `report` said --resume measures its 6 missing."""
    from commbench.results.resumed import continued_run_ids, latest_sweep_runs

    if not Path(path).exists():
        return []
    records = list(iter_records(path, on_bad_line=on_bad_line, drop_samples=True))
    identity = {}
    for record in records:
        if isinstance(record, RunHeader) and record.sweep_identity:
            identity.setdefault(record.run_id, record.sweep_identity)
    continues, latest = continued_run_ids(records), latest_sweep_runs(records)
    return [rec for rec in records if isinstance(rec, Measurement)
            and (rec.run_id not in identity
                 or continues.get(rec.run_id, rec.run_id) == latest.get(identity[rec.run_id]))]


def recorded_keys(path: str | os.PathLike[str], on_bad_line=None) -> set[str]:
    """Point keys of the measurements --resume continues (last_run_measurements; missing file: none)."""
    return {rec.point_key for rec in last_run_measurements(path, on_bad_line=on_bad_line) if rec.point_key}


def earlier_problems(path: str | os.PathLike[str], points, *, failed: bool = True) -> tuple[str, ...]:
    """Of the sweep's `points` (SweepPoint) recorded in the file, those whose record failed (unless not
    `failed`) or found wrong data, as 'label: why' (the last record of a point counts). --resume measures
    none of them again, so without this a resumed sweep ended 'done', exit 0, over a file holding failed points."""
    wanted = {point.key: point.label for point in points}
    last: dict[str, Measurement] = {}
    for rec in last_run_measurements(path):
        if rec.point_key in wanted:
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
    `planned_points`, counted over its last run and the launches that continued it, as --resume counts them), else
    None. After the run, when the ranks' keys are in the file: so a stopped sweep says it is complete (nothing for
    --resume) only when it is."""
    if not Path(path).exists():
        return None
    try:
        headers = [rec for rec in iter_records(path, on_bad_line=lambda *_: None, drop_samples=True)
                   if isinstance(rec, RunHeader)]
        last = next((h for h in reversed(headers) if h.sweep_identity is not None), None)
        if last is None or last.planned_points is None:
            return None
        runs = {h.run_id for h in headers if h.sweep_identity == last.sweep_identity}
        keys = {rec.point_key for rec in last_run_measurements(path, on_bad_line=lambda *_: None)
                if rec.run_id in runs and rec.point_key}   # the run --resume continues, not an earlier whole one
    except CommbenchError:   # not a results file (any more): nothing said complete
        return None
    return last.planned_points if len(keys) >= last.planned_points else None


def has_records(path: str | os.PathLike[str]) -> bool:
    """Whether the file holds anything but a torn last line (files.whole_size): one whose only line is a header cut
    off by a kill or a full disk holds no record, and the launch cuts it (repair_torn_tail) as `bench -O` does, with
    or without --resume."""
    return whole_size(path) > 0


# what a sweep's identity leaves out of an entry: where it sits and what it is called (a point's key names what it
# measures: plan.py), and its timeout_s, which bounds how long a point may take, never what a measured point measured
IDENTITY_LEFT_OUT = ("index", "name", "timeout_s")


def _trace_digest(path: str) -> str:
    """The trace's digest (moe/routing.trace_sha256), or why there is none: every rank hashes the identity before
    they compare it (runner.check_same_config), so one rank's unreadable file must not raise there alone."""
    from commbench.moe.routing import trace_sha256

    try:
        return trace_sha256(path)
    except CommbenchError as exc:
        return f"unreadable ({exc})"


def trace_path_of(entry) -> str | None:
    """The file an entry routes by (its routing `trace:<file>`, as typed), else None."""
    routing = str(entry.params.get("routing", ""))
    return routing.partition(":")[2] if routing.startswith("trace:") and routing.partition(":")[2] else None


def identity_entries(sweep, placement: str = "measured", *, keep_defaults: bool = False) -> list[dict]:
    """The entries as the sweep's identity hashes them (sorted, JSON values; params with the collective's defaults, a
    default given or not being one sweep, as the point keys; in_place/out_of_place as measured,
    schema.measured_placement: all_reduce's `in_place = true` is its default): IDENTITY_LEFT_OUT left out and, for an
    entry routed by a trace file, the digest of its bytes (`trace_sha256`): the path names what was typed, not the
    routing (another file saved under the name, or the same name read from another folder). Runs' headers record
    these (`sweep_entries`), so a refused --resume names what changed. `placement`: "measured"; "typed", the flags as
    written, or "default", a both-form collective's in-place form as (false, false): what commbench recorded before
    the measured placement (2026-12-07), for the identities of the files it wrote. A MoE setting written out at its
    default (`seed = 0` for zipf routing) is left out, as one not written (moe_defaults_left_out): it is no change;
    `keep_defaults` keeps it, as commbench hashed before (2026-12-07), for the identities of those files."""
    from collectives import get_collective
    from commbench.sweep.schema import measured_placement

    entries = []
    for entry in sweep.entries:
        values = {k: v for k, v in dataclasses.asdict(entry).items() if k not in IDENTITY_LEFT_OUT}
        values["params"] = {**get_collective(entry.collective).default_params, **entry.params}  # as plan.py measures
        if not keep_defaults:
            values["params"] = moe_defaults_left_out(entry.collective, values["params"])
        if placement != "typed":
            in_place, out_of_place = measured_placement(entry.collective, entry.in_place, entry.out_of_place)
            both_forms = get_collective(entry.collective).in_place_mode == "both"
            in_place = in_place and not (placement == "default" and both_forms)
            values.update(in_place=in_place, out_of_place=out_of_place)
        values = json.loads(json.dumps(values, sort_keys=True, default=str))
        if (trace := trace_path_of(entry)) is not None:
            values["trace_sha256"] = _trace_digest(trace)
        entries.append(values)
    return sorted(entries, key=lambda values: json.dumps(values, sort_keys=True))


def moe_defaults_left_out(collective: str, params: dict) -> dict:
    """`params` less the MoE settings written at their default (moe.params.DEFAULTS; under no preset, whose shape
    has its own): `seed = 0` beside zipf routing plans the same points (their keys hold every setting, as_params)
    as no seed, so a --resume of a file written without it was refused as 'seed default -> 0'."""
    if collective != "moe_all_to_all" or params.get("preset") not in (None, "None", ""):
        return params
    from commbench.moe.params import DEFAULTS

    return {k: v for k, v in params.items() if not (k in DEFAULTS and k != "preset" and v == DEFAULTS[k]
                                                    and type(v) is type(DEFAULTS[k]))}


def sweep_identity(sweep, world_size: int, backend: str, *, ordered: bool = False, before_traces: bool = False,
                   placement: str = "measured", keep_defaults: bool = False) -> str:
    """What makes two runs the same sweep: its normalised entries (identity_entries: after defaults, trace files by
    their digest), the world size and the backend, hashed. The file's name, path and description do not count, nor
    the entries' order, names or timeouts (identity_entries). Two identities commbench wrote before, so files of
    earlier sweeps still resume: `before_traces`, the one before trace digests and timeout_s's leaving
    (2026-12-07: the entries sorted, timeout_s in, the trace by its path alone; check_resume_traces then checks the
    records' digests); `ordered`, the one before that (entries in order, names included). `placement`: as
    identity_entries takes it ("typed" or "default": the identities before the measured placement)."""
    if not (ordered or before_traces):
        blob = json.dumps({"entries": identity_entries(sweep, placement, keep_defaults=keep_defaults),
                           "world_size": world_size, "backend": backend},
                          sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]
    left_out = ("index",) if ordered else ("index", "name")
    entries = [json.dumps({k: v for k, v in dataclasses.asdict(e).items() if k not in left_out}, sort_keys=True,
                          default=str) for e in sweep.entries]
    blob = json.dumps({"entries": [json.loads(e) for e in (entries if ordered else sorted(entries))],
                       "world_size": world_size, "backend": backend}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def resume_identities(sweep, world_size: int, backend: str) -> tuple[str, ...]:
    """(this sweep's identity, those an earlier commbench wrote for it): check_resume_identity accepts any. Before the
    measured placement the flags were hashed as typed: a file of the sweep typed now, or with a both-form
    collective's in-place default left out (the usual file) or written out (which hashes as the measured placement)."""
    return tuple(dict.fromkeys((sweep_identity(sweep, world_size, backend),
                                # before MoE settings at their default were left out (seed = 0 written out)
                                sweep_identity(sweep, world_size, backend, keep_defaults=True),
                                sweep_identity(sweep, world_size, backend, placement="typed", keep_defaults=True),
                                sweep_identity(sweep, world_size, backend, placement="default", keep_defaults=True),
                                sweep_identity(sweep, world_size, backend, before_traces=True),
                                sweep_identity(sweep, world_size, backend, ordered=True))))


def continued_identity(path: str | os.PathLike[str], accepted: tuple[str, ...]) -> str | None:
    """The sweep identity of the file's last sweep run when --resume accepts it (one an earlier commbench wrote, say):
    the resumed run's header carries it, so its runs stay one sweep to `compare`, `report` and the cut-short count
    (holds_every_planned_point), which join runs by identity. None where the file holds no such run."""
    if not Path(path).exists():
        return None
    last = None
    for record in iter_records(path, on_bad_line=lambda *_: None, drop_samples=True):
        if isinstance(record, RunHeader) and record.sweep_identity is not None:
            last = record.sweep_identity
    return last if last in accepted else None


def check_resume_identity(path: str | os.PathLike[str], identity: str | tuple[str, ...], what: str,
                          launched: list[tuple[list[dict], int, str]] | None = None) -> None:
    """Refuse to --resume into a file whose runs were another sweep (or not a sweep at all). `identity`: this
    sweep's, or a tuple of the ones that count as it (resume_identities), the first named in the refusal.
    `launched`: what this launch runs, (identity_entries, world size, backend) per pass (one per NCCL tuning
    combination), so the refusal names what changed (identity_changes) where the file's header says it."""
    if not has_records(path):
        return
    accepted = (identity,) if isinstance(identity, str) else tuple(identity)
    identity = accepted[0]
    for record in iter_records(path):
        if isinstance(record, RunHeader) and record.sweep_identity not in accepted:
            if record.sweep_identity is None and record.argv[1:2] in (["sweep"], ["tune"]):
                raise CommbenchError(predates_identity_text(path, record))
            theirs = (f"sweep identity {record.sweep_identity}" if record.sweep_identity
                      else f"a run of `{' '.join(record.argv[1:3]) or 'another command'}`, not this sweep")
            changed = identity_changes(record, launched) if record.sweep_identity and launched else ""
            raise CommbenchError(f"--resume into {str(path)!r} is refused: it holds {theirs}; {what} is {identity} "
                                 f"(entries, world size and backend must match){changed}: choose another -O/--out")


# when RunHeader.sweep_identity was first recorded (commit 792d209e, 2026-11-30): commbench_version stayed 0.1.0
IDENTITY_RECORDED_SINCE = "2026-11-30"


def predates_identity_text(path: str | os.PathLike[str], header: RunHeader) -> str:
    """The refusal of a --resume into a file whose sweep run has no `sweep_identity` (probe P3: it read 'holds a run of
    `sweep s1.toml`, not this sweep', of the very sweep): written before commbench recorded one, so which sweep it
    ran (entries, world size, backend) cannot be checked, and what to do instead."""
    started = f", started {header.started_at}" if header.started_at else ""
    return (f"--resume into {str(path)!r} is refused: its run {header.run_id} (`{' '.join(header.argv[1:3])}`, "
            f"commbench {header.commbench_version or 'unknown'}{started}) predates sweep identities: its header has no "
            f"`sweep_identity` field (commbench builds before {IDENTITY_RECORDED_SINCE} did not record it), so whether "
            "it ran this sweep (entries, world size, backend) cannot be checked and its points cannot be continued; "
            "sweep into another -O/--out (report, compare and fit still read this file)")


def check_resume_traces(path: str | os.PathLike[str], points) -> None:
    """Refuse to --resume into a file whose points of a trace-routed entry were measured on another trace: the
    records' `trace_sha256` (the digest of the bytes replayed) against the trace file's bytes now. The point key and
    the identity an earlier commbench wrote name the trace by its path only, so a trace replaced under its name, or
    the same relative path read from another folder, resumed as the same sweep: the file then held one routing's
    points and another's, exit 0. A record with data (ok) and no digest was written before commbench recorded one:
    which trace it replayed cannot be told, and it is refused too (a failed record holds no data and carries no
    digest: its failure is reported as any). `points`: the launch's SweepPoints (every pass's)."""
    from commbench.moe.routing import trace_sha256

    traced = {point.key: point for point in points if trace_path_of(point.entry) is not None}
    if not traced or not has_records(path):
        return
    last: dict[str, Measurement] = {}
    for record in iter_records(path, drop_samples=True):
        if isinstance(record, Measurement) and record.point_key in traced:
            last[record.point_key] = record
    now: dict[str, str] = {}
    for key, record in last.items():
        entry = traced[key].entry
        trace = trace_path_of(entry)
        if trace not in now:
            now[trace] = trace_sha256(trace)
        recorded = record.params.get("trace_sha256")
        if recorded == now[trace] or (recorded is None and record.status != "ok"):
            continue
        where = (f"run[{entry.index}] ({entry.collective}) routes by trace:{trace}"
                 + ("" if Path(trace).is_absolute() else f" (read as {Path(trace).resolve()})"))
        held = sum(traced[k].entry.index == entry.index for k in last)
        if recorded is None:
            raise CommbenchError(
                f"--resume into {str(path)!r} is refused: {where}, trace_sha256 {now[trace]}, but the file's {held} "
                f"point(s) of it carry no trace digest (written before commbench recorded trace_sha256): which trace "
                f"they replayed cannot be told; sweep into another -O/--out")
        raise CommbenchError(
            f"--resume into {str(path)!r} is refused: {where}, whose bytes now have trace_sha256 {now[trace]}, but the "
            f"file's {held} point(s) of it were measured on trace_sha256 {recorded}: restore that trace file (or run "
            f"from the folder it was read from), or sweep into another -O/--out")
