"""Runs of a file that continue an earlier run of the same sweep (`sweep --resume`, or fresh ranks after a
hang), counted as that run: one logical run of the sweep, as `compare` counts runs.

A resumed sweep writes a new header and run id and measures only the points its file does not hold
(sweep/resume.py: by point key), so its records say which run they continue only through their header's
`sweep_identity` (the sweep's entries, world size and backend, hashed), the run their header says they resumed
(`resumes_run_id`) and the points themselves. A run continues the run its header names when it holds none of that
run's points: a resumed run never measures a point twice, while two separate runs of a sweep (files appended or
concatenated together) are two runs, whatever points they hold, and a point one of them lacks is still missing.
A header written before `resumes_run_id` continues the latest earlier run of its sweep only where its argv holds
`--resume` (a launch restarted with fresh ranks after a hang then counts as a run of its own, cut short).
Runs without a sweep identity (`bench`, imports) stay apart.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Iterable

from commbench.results.records import Measurement, Record, RunHeader


def continued_run_ids(records: Iterable[Record]) -> dict[str, str]:
    """{run id: the run id it continues} for the runs of one file (in file order) that continue an earlier
    run of the same sweep; points are told apart as `compare` matches them (compare.match_key). A run continues only
    the run its header says it resumed (resumes_run_id, followed through launches that measured nothing), or, in a
    header written before that field, the latest earlier run of its sweep when its argv holds `--resume`."""
    return _joined_runs(records)[0]


def latest_sweep_runs(records: Iterable[Record]) -> dict[str, str]:
    """{sweep identity: its last run in the file (the first run id of it and the launches that continued it)}: the run
    `sweep --resume` continues (sweep.resume.last_run_measurements), an earlier run of the sweep (files appended
    together) not."""
    return _joined_runs(records)[1]


def _joined_runs(records: Iterable[Record]) -> tuple[dict[str, str], dict[str, str]]:
    """(continued_run_ids, latest_sweep_runs) of one file."""
    continues, latest, _ = _runs_and_forks(records)
    return continues, latest


def forked_runs(records: Iterable[Record]) -> dict[str, tuple[str, list[str], list[str]]]:
    """{run id: (the run it resumed, the runs up to it whose points it continues, the other launches that continued
    that run)} for each launch whose header names a run it resumed (resumes_run_id) that another launch had already
    continued, at points this one measured too: one partial sweep file copied and resumed in two places, the copies
    read together (`fit A.jsonl C2.jsonl`). Each continuation is a run of its own holding the points it continues
    (the resumed run's and its launches' before it), so neither reads as cut short."""
    return _runs_and_forks(records)[2]


def _runs_and_forks(records: Iterable[Record]):
    from commbench.results.compare import match_key

    headers: dict[str, RunHeader] = {}
    points: dict[str, set] = {}
    order: list[str] = []
    for record in records:
        if isinstance(record, RunHeader):
            if record.sweep_identity and record.run_id not in headers:
                headers[record.run_id] = record
        elif isinstance(record, Measurement):
            if record.run_id not in points:
                points[record.run_id] = set()
                order.append(record.run_id)
            points[record.run_id].add(match_key(record))
    continues: dict[str, str] = {}
    latest: dict[str, str] = {}  # sweep identity -> the logical run (its first run id) now being continued
    held: dict[str, set] = {}  # logical run -> the points its runs hold
    members: dict[str, list[str]] = {}   # logical run -> its launches in order
    forks: dict[str, tuple[str, list[str], list[str]]] = {}
    for run_id in order:
        header = headers.get(run_id)
        if header is None:
            continue
        sweep = header.sweep_identity
        resumed = _resumed_run(header, headers, points)
        logical = latest.get(sweep) if resumed is _LATEST else continues.get(resumed, resumed) if resumed else None
        if logical in held and not (points[run_id] & held[logical]):
            continues[run_id] = logical
            held[logical] |= points[run_id]
            members[logical].append(run_id)
            continue
        latest[sweep] = run_id
        held[run_id] = set(points[run_id])
        members[run_id] = [run_id]
        if isinstance(resumed, str) and resumed in members.get(logical, ()):   # resumed again, in another copy
            runs = members[logical]
            upto, others = runs[:runs.index(resumed) + 1], runs[runs.index(resumed) + 1:]
            shared = set().union(*(points[r] for r in upto))
            if others and not (points[run_id] & shared):
                forks[run_id] = (resumed, upto, others)
                held[run_id] |= shared
    return continues, latest, forks


_LATEST = object()   # a header written before resumes_run_id whose argv says --resume: the latest run of its sweep


def _resumed_run(header: RunHeader, headers: dict[str, RunHeader], points: dict[str, set]):
    """The run id `header`'s launch resumed (a launch of the same sweep that measured nothing is followed to the one it
    resumed in turn), _LATEST for a header written before resumes_run_id whose argv holds `--resume`, else None: a
    launch that resumed nothing, or that resumed a run this file does not hold (its own file's, concatenated here)."""
    if header.resumes_run_id is None:
        return _LATEST if "--resume" in (header.argv or ()) else None
    seen = {header.run_id}
    resumed = headers.get(header.resumes_run_id)
    while resumed is not None and resumed.sweep_identity == header.sweep_identity and resumed.run_id not in seen:
        if resumed.run_id in points:
            return resumed.run_id
        seen.add(resumed.run_id)
        if resumed.resumes_run_id is None:
            return _LATEST if "--resume" in (resumed.argv or ()) else None
        resumed = headers.get(resumed.resumes_run_id)
    return None


def with_resumed_runs_joined(records: list[Record]) -> list[Measurement]:
    """The measurements of one file, a run that continues an earlier one carrying that run's id."""
    return [r for r in resumed_runs_joined(records) if isinstance(r, Measurement)]


def resumed_runs_joined(records: list[Record], *, joinable=None) -> list[Record]:
    """The records of one file (headers kept, under their own run ids), the measurements of a run that continues
    an earlier one carrying that run's id. `joinable(header, continued run's header) -> bool` (either may be
    None) keeps a continuation that returns False a run of its own (`report`: one measured on other hosts, an
    NCCL version or devices is another curve)."""
    continues = continued_run_ids(records)
    if joinable is not None:
        header = {r.run_id: r for r in records if isinstance(r, RunHeader)}
        continues = {run_id: first for run_id, first in continues.items()
                     if joinable(header.get(run_id), header.get(first))}
    return [dataclasses.replace(r, run_id=continues[r.run_id]) if isinstance(r, Measurement) and r.run_id in continues
            else r for r in records]


def sweeps_cut_short(records: Iterable[Record]) -> list[str]:
    """One line per run, or sweep, whose records in `records` hold fewer distinct points than its header plans
    (`planned_points`; every launch of one sweep, resumed ones included, shares the sweep's identity and count): a
    bench or sweep stopped part-way (a crash, a failed point that ends a bench, a kill, a time limit) and not
    resumed, whose missing points a report or a fit would otherwise pass over without a word. Headers written
    before `planned_points` was recorded say nothing here. An NCCL tuning launch cut short before some of its
    combinations started is said too (combinations_not_started)."""
    records = list(records)
    out = combinations_not_started(records) + cycles_not_run(records)
    latest = latest_sweep_runs(records)
    headers = [r for r in records if isinstance(r, RunHeader)]
    collectives = collectives_by_run(records)
    for (group, logical), g in _planned_groups(records).items():
        have, count = len(g.held), g.planned
        if have < count:
            last_run = latest.get(group.removeprefix("sweep "), logical) if group.startswith("sweep") else logical
            # --resume refuses a file holding a run of anything else (resume.check_resume_identity)
            other = next((h for h in headers if group.startswith("sweep")
                          and h.sweep_identity != group.removeprefix("sweep ")), None)
            again = ("tune's built-in sweep has no file for `sweep --resume`: `commbench tune` again measures it "
                     "anew" if g.builtin else
                     f"`commbench sweep ... --resume` refuses a file that also holds another run "
                     f"(`{launch_name(other.argv, collectives.get(other.run_id, ()))}`, run {other.run_id}): put this "
                     "run's lines (its header and records) in a file of their own and `commbench sweep ... --resume` "
                     "into that file to measure them" if other is not None else
                     # --resume continues the file's last run of a sweep (sweep.resume.last_run_measurements)
                     f"`commbench sweep ... --resume` continues the file's later run {last_run} of this sweep, not "
                     "this one: put this run's lines (its header and records) in a file of their own and "
                     "`commbench sweep ... --resume` into that file to measure them" if last_run != logical else
                     "`commbench sweep ... --resume` into the same file measures them" if group.startswith("sweep")
                     else "run it again to measure them")
            out.append(f"`{g.named}` (run {', '.join(dict.fromkeys(g.runs))}) holds {have} of the {count} "
                       f"point(s) it plans: it was cut short, {count - have} not in the file ({again})")
    return out


def runs_holding_their_plan(records: Iterable[Record]) -> dict[str, str]:
    """Run id -> what it planned ("`sweep FILE`: N point(s), sweep IDENTITY"), for each run (a resumed sweep's
    launches together) whose records hold every point its header plans (`planned_points`): a point of another file
    that such a run lacks was not in its plan (its plan differs), not lost. A run cut short (sweeps_cut_short) or
    whose header predates `planned_points` is not here: what it lacks may be lost."""
    out = {}
    for g in _planned_groups(records).values():
        group = g.label
        if len(g.held) >= g.planned:
            what = f"`{g.named}`: {g.planned} point(s)" + (f", {group}" if group.startswith("sweep") else "")
            out.update({run_id: what for run_id in g.runs})
    return out


def runs_cut_short(records: Iterable[Record]) -> set[str]:
    """The run ids (every launch of a resumed sweep) of the runs sweeps_cut_short names for their planned points:
    those whose records hold fewer distinct points than their header plans."""
    return {run_id for g in _planned_groups(records).values() if len(g.held) < g.planned for run_id in g.runs}


@dataclass
class _PlannedGroup:
    planned: int = 0                                   # the most points a header of the group plans
    runs: list[str] = field(default_factory=list)      # its launches' run ids (a resumed sweep's several)
    named: str = "run"                                 # its command, for the lines that name it
    builtin: bool = False                              # tune's built-in sweep
    held: set = field(default_factory=set)             # the distinct points its records hold
    label: str = ""                                    # "sweep IDENTITY" or "run ID"


def _planned_groups(records: Iterable[Record]) -> dict[tuple, _PlannedGroup]:
    """The runs whose headers plan a point count (`planned_points`), grouped as compare counts runs: a sweep's launches
    that continue one another (continued_run_ids: `sweep --resume`) are one group ("sweep IDENTITY"), two separate runs
    of one sweep (files appended together, sharing the points both reached) are two, each held to its own plan, so a
    complete run beside a cut-short one no longer made the pair read as one complete run; else "run ID". A launch of a
    sweep with no record at all beside launches of it that hold some (it died at start-up and was resumed, or a resume
    found nothing left) plans nothing of its own (compare.empty_runs_of says the one that was not resumed). A run's
    points count wherever its header sits in the file (points written before it: a file reordered or concatenated)."""
    records = list(records)
    continues = continued_run_ids(records)
    collectives = collectives_by_run(records)
    measured = set(collectives)
    sweeps_measured = {r.sweep_identity for r in records
                       if isinstance(r, RunHeader) and r.sweep_identity and r.run_id in measured}
    groups: dict[tuple, _PlannedGroup] = {}
    group_of: dict[str, tuple] = {}
    for record in records:
        if isinstance(record, RunHeader) and record.planned_points:
            if record.sweep_identity:
                if record.run_id not in measured and record.sweep_identity in sweeps_measured:
                    continue
                key = (f"sweep {record.sweep_identity}", continues.get(record.run_id, record.run_id))
            else:
                key = (f"run {record.run_id}", record.run_id)
            g = groups.get(key)
            if g is None:
                g = groups[key] = _PlannedGroup(named=launch_name(record.argv, collectives.get(record.run_id, ())), builtin=_tune_builtin_sweep(record.argv),
                                                label=key[0])
            g.planned = max(g.planned, record.planned_points)
            g.runs.append(record.run_id)
            group_of[record.run_id] = key
    shared_by: dict[str, list[tuple]] = {}   # run id -> the groups of the forks that continue its points
    for run_id, (_, upto, _) in forked_runs(records).items():
        if run_id in group_of:
            for earlier in upto:
                shared_by.setdefault(earlier, []).append(group_of[run_id])
    for record in records:   # after every header: a run's points count wherever its header sits in the file
        if isinstance(record, Measurement) and record.run_id in group_of:
            groups[group_of[record.run_id]].held.add(record.point_key or id(record))
        if isinstance(record, Measurement):
            for key in shared_by.get(record.run_id, ()):
                groups[key].held.add(record.point_key or id(record))
    return groups


def continued_twice(records: Iterable[Record]) -> list[str]:
    """One line per run resumed in two copies of its file read together (forked_runs), naming both continuations:
    each is counted as a run of its own with the points it continues, not as a run cut short."""
    out = []
    for run_id, (resumed, upto, others) in forked_runs(records).items():
        out.append(f"run {resumed} was resumed twice: by run {', '.join(others)} and by run {run_id} (one partial "
                   "sweep file copied and resumed in two places, the copies read together): two runs of the sweep, "
                   f"each holding the point(s) of run {', '.join(upto)} it continues")
    return out


def launch_name(argv, collectives: Iterable[str] = ()) -> str:
    """A header's launch as the lines that name a run say it: the command and its first argument ('sweep FILE',
    'tune --model'), an imported nccl-tests run's binary ('all_reduce_perf', not its first option), or 'run' where
    the header records no argv. `bench` takes its collective anywhere among its options ('bench --nproc 2 -b 8
    all_reduce'): it is named by `collectives`, those its records hold ('bench all_reduce'), else 'bench' alone where
    its first argument is an option."""
    argv = [str(a) for a in argv or ()]
    perf = next((a.rsplit("/", 1)[-1] for a in argv if a.rsplit("/", 1)[-1].endswith(("_perf", "_perf_mpi"))), None)
    if not perf and argv[1:2] == ["bench"] and (collectives or argv[2:3] and argv[2].startswith("-")):
        return " ".join(["bench", *sorted(set(collectives))])
    return perf or " ".join(argv[1:3]) or "run"


def collectives_by_run(records: Iterable[Record]) -> dict[str, set[str]]:
    """Run id -> the collectives its measurements hold (launch_name names a `bench` run by them)."""
    out: dict[str, set[str]] = {}
    for r in records:
        if isinstance(r, Measurement):
            out.setdefault(r.run_id, set()).add(r.collective)
    return out


def _tune_builtin_sweep(argv) -> bool:
    """Whether a header's launch is `commbench tune` on its built-in sweep (no --sweep FILE to resume)."""
    argv = list(argv or ())
    return len(argv) > 1 and argv[1] == "tune" and not any(a == "--sweep" or a.startswith("--sweep=") for a in argv)


def cycles_not_run(records: Iterable[Record]) -> list[str]:
    """One line per `bench -N` launch (RunHeader.run_cycles) of which the file holds no header of some planned cycle:
    stopped between two cycles (a kill, a time limit), the cycles it ran are complete runs and their own
    planned_points cannot tell the launch was cut. Headers written before run_cycles was recorded say nothing."""
    launches: dict[str, dict] = {}
    records = list(records)
    collectives = collectives_by_run(records)
    for record in records:
        cycles = record.run_cycles if isinstance(record, RunHeader) else None
        if not isinstance(cycles, dict) or not isinstance(cycles.get("cycles"), int) or not cycles.get("launch"):
            continue
        launch = launches.setdefault(cycles["launch"], {"runs": [], "held": set(), "cycles": cycles["cycles"],
                                                        "named": launch_name(record.argv, collectives.get(record.run_id, ()))})
        launch["runs"].append(record.run_id)
        launch["held"].add(cycles.get("cycle"))
    out = []
    for launch in launches.values():
        missing = [c for c in range(1, launch["cycles"] + 1) if c not in launch["held"]]
        if missing:
            out.append(f"`{launch['named']}` (run {', '.join(launch['runs'])}) plans {launch['cycles']} cycle(s) (-N "
                       f"{launch['cycles']}) and holds {launch['cycles'] - len(missing)}: it was cut short before cycle(s) "
                       f"{', '.join(map(str, missing))} ran (run it again to measure them)")
    return out


def combinations_not_started(records: Iterable[Record]) -> list[str]:
    """One line per NCCL tuning launch (bench/sweep --nccl-*, RunHeader.nccl_tuning; a sweep's --resume continues
    its plan) of which the file holds no header of some planned combination: the launch was stopped (a kill, a time
    limit, a crash of the launcher) before they started, and they leave no record at all, so their runs' own
    `planned_points` cannot tell. A combination NCCL refused has a header and skipped records: not counted here.
    Headers written before `nccl_tuning` was recorded say nothing."""
    plans: dict[tuple, dict] = {}
    records = list(records)
    collectives = collectives_by_run(records)
    for record in records:
        tuning = record.nccl_tuning if isinstance(record, RunHeader) else None
        if not isinstance(tuning, dict) or not tuning.get("combinations"):
            continue
        key = (tuning.get("plan"), tuple(tuning["combinations"]))
        plan = plans.setdefault(key, {"runs": [], "started": set(),
                                      "named": launch_name(record.argv, collectives.get(record.run_id, ()))})
        plan["runs"].append(record.run_id)
        plan["started"].add(tuning.get("combination"))
    out = []
    for (_, combinations), plan in plans.items():
        missing = [c for c in combinations if c not in plan["started"]]
        if missing:
            out.append(f"`{plan['named']}` (run {', '.join(dict.fromkeys(plan['runs']))}) plans {len(combinations)} NCCL "
                       f"tuning combination(s) and holds {len(combinations) - len(missing)}: it was cut short before "
                       f"{', '.join(missing)} started: never measured (not refused, not beaten; "
                       + ("`commbench sweep ... --resume` into the same file measures them)"
                          if plan["named"].startswith("sweep") else "run it again to measure them)"))
    return out
