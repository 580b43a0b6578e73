"""`commbench compare BASE.jsonl NEW.jsonl [--history DIR]`: ratio per point with its interval, geometric
mean per collective and run, and exit 1 when a run of NEW regresses beyond the threshold and the noise
(within-run or run-to-run, the larger), or has a failed, wrong, missing or unchecked point."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from commbench.cli.base import command, console, err_console, fail, print_json
from commbench.results.render import styled
from commbench.errors import CommbenchError
from commbench.results.noise import ASSUMED_POINT_SD, ASSUMED_SHIFT_PER_POINT_SD, SHIFT_PRIOR_RATIO
from commbench.results.compare import (AUTO, AUTO_TAIL, GATE_STATISTICS, MIN_SAMPLES_FOR_TAIL, TAIL_STATISTICS,
                                       check_statistic, compare, empty_runs_of, parse_threshold,
                                       threshold_text, unchecked_on_both_sides)
from commbench.results.records import RunHeader, read_records
from commbench.results.run_setup import setup_changes
from commbench.results.resumed import with_resumed_runs_joined
from commbench.results.tables import Col, print_table

_STYLE = {"REGRESSED": "bold red", "newly failed": "bold red", "newly wrong": "bold red", "failed": "bold red",
          "wrong": "bold red", "missing": "bold red", "faster": "green",
          "slower (within noise)": "yellow"}


def plan_change_text(base_headers: list, plans: dict[str, str], base_records: list = ()) -> str:
    """How the plans differ, from the headers: each side's launches (a `bench` run by the collectives its records
    hold), their planned point counts per run and sweep identities, and BASE's runs and points in all (a BASE header
    written before planned_points was recorded: its count unknown)."""
    from collections import Counter

    from commbench.results.resumed import collectives_by_run, launch_name

    def side(texts) -> str:
        counted = Counter(texts)
        return "; ".join(text + (f" (each of {n} runs)" if n > 1 else "") for text, n in counted.items()) or "unknown"

    collectives = collectives_by_run(base_records)
    base = [f"`{launch_name(h.argv, collectives.get(h.run_id, ()))}`: "
            + (f"{h.planned_points} point(s) a run" if h.planned_points else "points not recorded")
            + (f", sweep {h.sweep_identity}" if h.sweep_identity else "") for h in base_headers]
    counts = [h.planned_points for h in base_headers]
    total = (f"{len(base_headers)} runs, {sum(counts)} points planned: " if len(base_headers) > 1 and all(counts)
             else "")
    new = [text.replace(" point(s)", " point(s) a run", 1) for text in dict.fromkeys(plans.values())]
    return f"the plan differs: base {total}{side(base)}; new {side(new)}, every point held"


def read_measurements(path: str, unreadable: list | None = None, headers: list | None = None,
                      headerless: list | None = None, continuations: set | None = None,
                      cut_short: list | None = None, plans: dict | None = None, cut_short_runs: set | None = None,
                      started: dict | None = None):
    """The file's measurements, resumed runs joined; each line that cannot be read is warned about (and, with
    `unreadable`, appended to it as "line N (reason)"); with `headers`, its run headers are appended to it; runs
    without a header are said in one line (their setup cannot be checked) and, with `headerless`, appended to it
    as "PATH: run ID"; with `continuations`, the run ids that continue an earlier run of the file are added to it;
    with `cut_short`, a line per run (a resumed sweep's launches together) holding fewer points than its header
    plans (results.resumed.sweeps_cut_short, on the file as written); with `started`, each run's start time
    (results.compare.run_start_times: which run of NEW is the newest)."""
    def bad_line(number: int, reason: str) -> None:
        err_console.print(styled("[yellow]warning:[/] {}:{}: skipped unreadable line ({})", path, number, reason),
                          highlight=False)
        if unreadable is not None:
            unreadable.append(f"line {number} ({reason})")

    records = read_records([path], on_bad_line=bad_line)
    if headers is not None:
        headers += [r for r in records if isinstance(r, RunHeader)]
    note_setup_unknown(path, records, headerless)
    note_resumed_elsewhere(path, records)
    if continuations is not None:
        from commbench.results.resumed import continued_run_ids
        continuations.update(continued_run_ids(records))
    if cut_short is not None:
        from commbench.results.resumed import sweeps_cut_short
        cut_short += sweeps_cut_short(records)
    if cut_short_runs is not None:
        from commbench.results.resumed import runs_cut_short
        cut_short_runs.update(runs_cut_short(records))
    if plans is not None:   # runs holding every point they plan: what they lack of BASE was not planned
        from commbench.results.resumed import runs_holding_their_plan
        plans.update(runs_holding_their_plan(records))
    if started is not None:
        from commbench.results.compare import run_start_times
        started.update(run_start_times(records))
    # a resumed sweep's runs (sweep --resume: a new run id per launch) are one run of the sweep
    return with_resumed_runs_joined(records)


def check_not_being_written(*files: tuple[str, str]) -> None:
    """Refuse (one line, exit 2) to judge a file a commbench run is still writing (it holds the file's lock): its
    points not yet written would read as a run cut short, a failure of a run that has not ended."""
    from commbench.files import refuse_being_written

    for name, path in files:
        paths = sorted(Path(path).glob("*.jsonl")) if Path(path).is_dir() else [Path(path)]
        for one in paths:
            refuse_being_written(one, f"{name}={str(one)!r}", "compare it")


def note_setup_unknown(path: str, records, headerless: list | None) -> None:
    """One line where runs of the file have no header record: their setup (NCCL version, devices, emulated fabric)
    is unknown, so the setup check cannot refuse them; they are still judged (a warning, not a refusal: what bench,
    sweep and import write always starts with a header, an imported log's unknown fields included, so such a file
    was written elsewhere or lost its header line, and refusing it would fail a gate on no change)."""
    from commbench.results.run_setup import runs_without_header, setup_unknown_text

    runs = runs_without_header(records)
    if not runs:
        return
    if headerless is not None:
        headerless += [f"{path}: run {run_id}" for run_id in runs]
    err_console.print(styled("[yellow]warning:[/] {} against the other file's; judged as measured",
                             setup_unknown_text(runs, path)),
                      highlight=False)  # wrapped to the terminal, as the tables are


def note_resumed_elsewhere(path: str, records) -> None:
    """A resumed sweep is compared as one run; where a continuation ran on another setup (hosts, NCCL version,
    devices, fabric, NCCL_* environment) its points are still that run's, and the user is told, naming both
    (report keeps such a continuation a curve of its own: results.run_setup)."""
    from commbench.results.records import RunHeader
    from commbench.results.resumed import continued_run_ids
    from commbench.results.run_setup import mixed_setup_texts, same_setup

    header = {r.run_id: r for r in records if isinstance(r, RunHeader)}
    for run_id, first in continued_run_ids(records).items():
        a, b = header.get(first), header.get(run_id)
        if a is None or b is None or same_setup(a, b):
            continue
        differs = "; ".join(mixed_setup_texts({first: a, run_id: b})) or "NCCL_* environment"
        err_console.print(styled("[yellow]note:[/] {}: run {} resumes run {} (sweep --resume) on another setup, "
                                 "{}; compared as one run, its points measured on either", path, run_id, first,
                                 differs), highlight=False)


def check_history_folder(folder: str) -> Path:
    path = Path(folder)
    if not folder.strip() or not path.is_dir():
        problem = "no such folder" if folder.strip() and not path.exists() else "not a folder"
        raise CommbenchError(f"--history={folder!r} is invalid: {problem} (a folder of earlier baseline results, "
                             "*.jsonl)")
    return path


def read_history(folder: str, headers: list | None = None, headerless: list | None = None,
                 leave_out: set | None = None, left_out: list | None = None) -> list:
    """Every run of every *.jsonl in a baseline-history folder (one run or several per file); with `headers`, their
    run headers are appended to it (and `headerless`: as read_measurements). Runs whose run id is in `leave_out` (NEW's
    own runs: the history file is NEW, or a copy of it) are left out, each named in `left_out` as "FILE: run ID"."""
    path = check_history_folder(folder)
    files = sorted(path.glob("*.jsonl"))
    if not files:
        below = next(path.glob("*/**/*.jsonl"), None)   # only the folder's own files are read: say so
        where = f" (only in its sub-folders, e.g. {str(below.relative_to(path))!r}: --history reads the folder's own " \
                "files, not its sub-folders)" if below is not None else ""
        raise CommbenchError(f"--history={folder!r} is invalid: the folder holds no *.jsonl results file{where}")
    records = []
    for index, file in enumerate(files):
        # run ids are unique per run; a copied file must not merge with another's runs
        for m in read_measurements(str(file), headers=headers, headerless=headerless):
            if leave_out and m.run_id in leave_out:
                if left_out is not None and f"{file.name}: run {m.run_id}" not in left_out:
                    left_out.append(f"{file.name}: run {m.run_id}")
                continue
            records.append(dataclasses.replace(m, run_id=f"{index}:{m.run_id}"))
    return records


def check_base_whole(base: str, cut_short: list[str], unreadable: list[str], *, allow_cut_short: bool) -> list[str]:
    """A BASE cut short (its header plans more points than it holds) or with unreadable lines is refused in one line
    (exit 2) unless --allow-cut-short: NEW's points beyond BASE's cut would be "only in NEW (not judged)", so a
    regression there (a whole collective x10 slower) passed. With the option, each is said on a line of its own and
    returned ("base: ..." per run or line) for the pass line and --json."""
    said = [f"base cut short: {line}" for line in cut_short]
    said += [f"base line unreadable: {line}" for line in unreadable]
    if said and not allow_cut_short:
        what = (f"{len(cut_short)} run(s) cut short (first: {cut_short[0]})" if cut_short else
                f"{len(unreadable)} unreadable line(s) (first: {unreadable[0]})")
        raise CommbenchError(f"the base file {base} holds {what}: the new file's points beyond it would go unjudged; "
                             "measure BASE again, or --allow-cut-short to judge on the points BASE holds")
    for line in said:
        err_console.print(styled("allowed (--allow-cut-short): {}", line), highlight=False, soft_wrap=True)
    return said


def check_base_points_good(base: str, result, *, allow_cut_short: bool) -> list[str]:
    """Points of BASE with no good record (failed, wrong or skipped in every run) that NEW holds good
    (Comparison.base_not_ok) leave NEW's point judged on nothing, as NEW's points beyond a BASE cut short are: refused
    in one line naming them (exit 2) unless --allow-cut-short; with it each is said on a line of its own and returned
    ("base point not ok: ...") for the pass line and --json (base_incomplete). A 10x slowdown at a point BASE failed
    passed as "not ok in base" (probe P2)."""
    found = result.base_not_ok
    if found and not allow_cut_short:
        more = f"; {len(found) - 3} more" if len(found) > 3 else ""
        raise CommbenchError(f"the base file {base} holds no good record of {len(found)} point(s) the new file "
                             f"measured ({'; '.join(found[:3])}{more}): the new file's points there would go unjudged; "
                             "measure BASE again, or --allow-cut-short to judge on the points BASE holds")
    said = [f"base point not ok: {text}" for text in found]
    for line in said:
        err_console.print(styled("allowed (--allow-cut-short): {}", line), highlight=False, soft_wrap=True)
    return said


def check_when_measured(new: str, new_headers: list, base_headers: list, history_headers: list, *,
                        allow_stale: bool, age_unknown: list | None = None) -> list[str]:
    """Runs of NEW that started before the newest run of BASE or of the --history folder (headers' started_at;
    results.staleness) are refused in one line naming both start times (exit 2) unless --allow-stale (then said): a
    stale file (a CI step that failed to overwrite NEW, BASE and NEW swapped) judged as this change's measurement
    passes on no new measurement. So is a run of NEW whose started_at is set but no time (an edited header), where the
    baseline has one: its age cannot be checked, as a header without started_at cannot be read. What cannot be told
    (NEW imported from a text log, a time with no zone within 14 h of the baseline's) is said in one line and, with
    `age_unknown`, appended to it. Returns the texts, for --json."""
    from commbench.results.staleness import new_age_unknown, runs_older_than_baseline, started, unreadable_start

    # a run both files hold (NEW a copy of BASE with a run appended, a resumed sweep's launches: --allow-same-run's
    # business) is no stale measurement of NEW, nor the baseline's newest against NEW's own run
    shared = {h.run_id for h in base_headers} & {h.run_id for h in new_headers}
    new_own = [h for h in new_headers if h.run_id not in shared]
    baseline = {"base": [h for h in base_headers if h.run_id not in shared], "history": history_headers}
    stale = runs_older_than_baseline(new_own, baseline)
    stale_by_time = bool(stale)
    what = "was measured before the baseline" if stale else "has a start time that cannot be read"
    if any(started(h.started_at) for headers in baseline.values() for h in headers):
        stale += [f"{text}: its age cannot be checked (commbench writes 2026-12-05T13:28:21+00:00)"
                  for h in new_own if (text := unreadable_start(h))]
    more = f"; {len(stale) - 1} more" if len(stale) > 1 else ""
    if stale and not allow_stale:
        why = ("a stale file (NEW not written by this change's run, or BASE and NEW swapped?)" if stale_by_time else
               "an edited or corrupted header")
        raise CommbenchError(f"the new file {new} {what}: {stale[0]}{more}: {why}; measure NEW again, or --allow-stale "
                             "to judge it all the same (a baseline measured again after the change)")
    if stale:
        err_console.print(styled("allowed (--allow-stale): {}: {} run(s) measured before the baseline ({}{})", new,
                                 len(stale), stale[0], more), highlight=False, soft_wrap=True)
    unknown = new_age_unknown(new_own, baseline)
    if unknown:
        err_console.print(styled("[yellow]note:[/] the new file's age against the baseline cannot be checked: {}{}",
                                 unknown[0], f"; {len(unknown) - 1} more" if len(unknown) > 1 else ""),
                          highlight=False, soft_wrap=True)
    if age_unknown is not None:
        age_unknown += unknown
    return stale


def check_new_is_not_base(base: str, new: str, base_records: list, new_records: list, *,
                          allow_same_run: bool) -> set[str]:
    """NEW whose every run is a run of BASE (results.compare.runs_of_base: by run id or records, not by path) is
    refused in one line unless --allow-same-run (then said): the gate would pass on no new measurement. Where only
    some runs of NEW are BASE's (`cp baseline.jsonl out.jsonl; bench -O out.jsonl`), their run ids are returned, to
    be left out of NEW, and a note names them: judged as NEW runs they passed as BASE against itself and diluted the
    new runs' mean (3 runs x2.7 beside 3 copies of BASE passed at x1.6 "all runs"), as a history run that is NEW's
    own is left out of the baseline."""
    from commbench.results.compare import runs_of_base

    same = runs_of_base(base_records, new_records)
    runs = len({m.run_id for m in new_records})
    if not same:
        return set()
    named = ", ".join(f"run {run_id} ({why})" for run_id, why in list(same.items())[:3]) + (" ..." if len(same) > 3 else "")
    if len(same) == runs and not allow_same_run:
        raise CommbenchError(f"the new file {new} holds no run of its own: its {runs} run(s) are the base's ({named}; "
                             f"base {base}): the gate would pass on no new measurement; give NEW this change's "
                             "results, or --allow-same-run to compare them all the same")
    if len(same) == runs:
        err_console.print(styled("allowed (--allow-same-run): {} of the new file's {} run(s) are the base's ({}): "
                                 "judged, as the base against itself", len(same), runs, named),
                          highlight=False, soft_wrap=True)
        return set()
    err_console.print(styled("[yellow]note[/]: {} of the new file's {} run(s) are the base's ({}): left out of the new "
                             "file, its other {} run(s) judged (a run of the base against the base says nothing of the "
                             "change)", len(same), runs, named, runs - len(same)), highlight=False, soft_wrap=True)
    return set(same)


def without_records_of_base(base_records: list, new_records: list, plans: dict) -> list:
    """NEW's records less those that are BASE's own (results.compare.records_of_base_in_new: the same run id, point
    and measurement in a run of NEW that is not wholly BASE's: a partial sweep file copied and resumed in both), said
    in one note: judged as NEW's they passed at ratio 1.000 as BASE against itself. The run then lacks those points,
    missing (never 'not planned': `plans` loses it) unless --allow-missing: the change never measured them."""
    from commbench.results.compare import point_label, records_of_base_in_new

    held: dict[str, int] = {}
    for m in new_records:
        held[m.run_id] = held.get(m.run_id, 0) + 1
    # a run wholly BASE's is check_new_is_not_base's (judged only with --allow-same-run, as BASE against itself)
    shared = {run_id: records for run_id, records in records_of_base_in_new(base_records, new_records).items()
              if len(records) < held[run_id]}
    if not shared:
        return new_records
    left_out = {id(m) for records in shared.values() for m in records}
    for run_id in shared:
        plans.pop(run_id, None)
    named = "; ".join(f"run {run_id}: {len(records)} point(s), first {point_label(records[0])}"
                      for run_id, records in shared.items())
    err_console.print(styled("[yellow]note[/]: the new file holds the base's own records ({}: the same run id and "
                             "measurement, as where one partial sweep file was copied and resumed into both): left out "
                             "of the judgement, so its run lacks those points (missing unless --allow-missing): this "
                             "change never measured them", named), highlight=False, soft_wrap=True)
    return [m for m in new_records if id(m) not in left_out]


def check_one_base_setup(base_headers: list, continuations: set, *, allow_setup_change: bool, base: str) -> None:
    """BASE's runs measured on different setups among themselves (another NCCL version, other devices, a real and an
    emulated fabric, other NCCL_* settings but the tuned ones: a baseline file appended to across an NCCL upgrade, say)
    are refused in one line naming the runs,
    unless --allow-setup-change (then said): their mean is no setup's reference, and the step between the setups
    reads as run-to-run noise, which widens every interval. NEW is held only to being one of BASE's setups, so such
    a BASE passed a run of either. A resumed sweep's continuation on another setup is noted where it is read."""
    from commbench.results.run_setup import GATE_FIELDS, SETUP_FIELDS, _known
    from commbench.results.records import mixed_runs_text

    from commbench.results.run_setup import fabric_env as _fabric_env

    runs = [h for h in base_headers if h.run_id not in continuations]
    texts = [f"{what} ({named})" for what in GATE_FIELDS
             if (named := mixed_runs_text({h.run_id: SETUP_FIELDS[what](h) for h in runs if _known(h, what)}))]
    # NCCL_* settings but the tuned ones (a tuning sweep's records key them in their params) and NCCL_DEBUG*
    if named := mixed_runs_text({h.run_id: _fabric_env(h) for h in runs}):
        texts.append(f"NCCL_* settings ({named})")
    if texts and not allow_setup_change:
        raise CommbenchError(f"the base file {base} holds runs measured on different setups: {'; '.join(texts)}; "
                             "their mean is no setup's baseline and the step between them would read as run-to-run "
                             "noise: keep one setup's runs in BASE (--allow-setup-change judges against them all the "
                             "same)")
    if texts:
        err_console.print(styled("allowed: the base file {} holds runs measured on different setups "
                                 "(--allow-setup-change): {}", base, "; ".join(texts)), highlight=False, soft_wrap=True)


def check_same_setup(base_headers: list, new_headers: list, *, allow_setup_change: bool,
                     side: str = "the new file", side_name: str = "new", allow_layout_change: bool = False) -> None:
    """NEW (or the history: `side`) measured with another NCCL version, on other devices, on an emulated instead
    of a real fabric (or the reverse), or on gloo with another torch (gloo's collectives are torch's own code, as
    NCCL's are its library's) is another measurement: refused in one line naming what differs unless
    --allow-setup-change (then said on a line of its own); so is one on another node layout with the same rank count
    (hosts, ranks per host, racks, which ranks share them: run_setup.layout_changes) unless --allow-layout-change; other hosts with the same
    setup and layout (CI runners), another torch under NCCL runs and another commbench are only noted."""
    from commbench.results.run_setup import layout_changes

    _refuse_unless_allowed(
        layout_changes(base_headers, new_headers, new_name=side_name), allow_layout_change, side,
        "another node layout", "the same ranks on other nodes cross other links (NVLink, the network), so its times "
        "are not the base's measurement repeated; --allow-layout-change judges them all the same",
        "--allow-layout-change")
    _refuse_unless_allowed(
        setup_changes(base_headers, new_headers, new_name=side_name), allow_setup_change, side, "another setup",
        "its times are not the base's measurement repeated; --allow-setup-change judges them all the same (an NCCL "
        "upgrade against the old baseline, say)", "--allow-setup-change")
    envs = [sorted({" ".join(f"{k}={v}" for k, v in sorted(h.nccl_env.items())) or "none" for h in headers})
            for headers in (base_headers, new_headers)]
    if base_headers and new_headers and not set(envs[1]) <= set(envs[0]):
        err_console.print(styled("[yellow]note:[/] {} was measured with other NCCL_* settings (judged as the change "
                                 "under test): base {}; {} {}", side, " | ".join(envs[0]), side_name,
                                 " | ".join(envs[1])),
                          highlight=False, soft_wrap=True)
    for text in setup_changes(base_headers, new_headers, fields=("hosts",), new_name=side_name):
        err_console.print(styled("[yellow]note:[/] {} was measured on other hosts: {}", side, text),
                          highlight=False, soft_wrap=True)
    from commbench.results.run_setup import NOTED_FIELDS
    for text in setup_changes(base_headers, new_headers, fields=tuple(NOTED_FIELDS), new_name=side_name,
                              table=NOTED_FIELDS):   # NCCL runs the collective there; a harness change may move times
        err_console.print(styled("[yellow]note:[/] {} differs from the base in {}: judged as the change under test",
                                 side, text), highlight=False, soft_wrap=True)


def _refuse_unless_allowed(changes: list[str], allowed: bool, side: str, what: str, why: str, flag: str) -> None:
    """Refuse `side` measured on `what` than the base (`changes` name it) in one line saying `why`, unless `flag`
    allowed it: then said on a line of its own."""
    if changes and not allowed:
        raise CommbenchError(f"{side} was measured on {what} than the base: {'; '.join(changes)}; {why}")
    if changes:
        err_console.print(styled("allowed: {} was measured on {} ({}): {}", side, what, flag, "; ".join(changes)),
                          highlight=False, soft_wrap=True)


def noise_summary(result) -> str:
    """One line: what the noise model used and how strict the quantile is."""
    runs = result.runs
    where = f"runs: base {runs['base']}, new {runs['new']}, history {runs['history']}"
    r2r = result.run_to_run
    if r2r is None:
        return (f"noise: run-to-run unknown ({where}; no set of >= 2 runs): within-run intervals only, which "
                f"understate run-to-run noise; append repeated runs to BASE or pass --history DIR; {_quantiles(result)}")
    points = sorted(r2r.sigma_by_point.values()) or [r2r.sigma_pooled]
    point_sd = f"point sd median {points[len(points) // 2]:.1%} (df {r2r.df:.0f})"
    if r2r.scatter_from == "assumed":
        return (f"noise: run-to-run not measured ({where}; no repeated run and no collective of >= 3 points to read "
                f"the points' scatter from): assumed {ASSUMED_POINT_SD:g} log sd a point (the largest measured on "
                f"repeated runs, README) and a run shift of {ASSUMED_SHIFT_PER_POINT_SD:g} x that; append repeated "
                f"runs to BASE or pass --history DIR to measure it; {_quantiles(result)}")
    if not r2r.shift_known:
        source = "this pair's points" if r2r.scatter_from == "the pair" else "the new file's repeated runs"
        return (f"noise: the run shift is not measured (no repeated baseline run; {where}): assumed "
                f"{ASSUMED_SHIFT_PER_POINT_SD:g} x the points' scatter ({point_sd}, from {source}); each point judged "
                f"against its run's other points; append repeated runs to BASE or pass --history DIR to measure "
                f"it; {_quantiles(result)}")
    shift = (f"run shift sd {r2r.sigma_run:.1%} (df {r2r.df_run:.0f}: {r2r.num_shifts:.0f} measured, shrunk towards "
             f"{SHIFT_PRIOR_RATIO:g} x the points' scatter worth {r2r.shift_prior_df:.0f})")
    return (f"noise: run-to-run from {r2r.num_runs} runs ({where}): {shift}, {point_sd}; "
            f"per point the larger of it and the within-run interval; {_quantiles(result)}")


# BASE's runs all started within this span (or are the cycles of one `bench -N` launch): measured back to back, under
# one spell of the host's load, so the run-to-run noise they show may be smaller than between runs taken apart (the
# probe's A/A pairs under heavy load: 3 runs in ~10 s a file failed). A heuristic for a note only, never a verdict.
BACK_TO_BACK_SPAN_S = 15 * 60


def back_to_back_note(base_headers, base_continuations, result) -> str | None:
    """A clause for the pass/fail line where BASE's several runs were measured back to back (their headers'
    started_at within BACK_TO_BACK_SPAN_S, or one `bench -N` launch's cycles) and no --history run entered the noise:
    their run-to-run noise may understate the noise between runs taken apart. None otherwise, and None where BASE's
    runs repeat no point (5 runs of 5 collectives): they measured no run shift, which the noise line says."""
    from commbench.results.compare import run_start_times

    if result.runs.get("base", 0) < 2 or result.runs.get("history", 0):
        return None
    if result.run_to_run is None or not result.run_to_run.shift_known:
        return None
    times = [t for run, t in run_start_times(base_headers).items() if run not in base_continuations]
    launches = {(h.run_cycles or {}).get("launch") for h in base_headers if h.run_id not in base_continuations}
    one_launch = len(launches) == 1 and None not in launches
    if len(times) < 2 or len({t.tzinfo is None for t in times}) > 1:
        return None
    span_s = (max(times) - min(times)).total_seconds()
    if span_s > BACK_TO_BACK_SPAN_S and not one_launch:
        return None
    how = "one `bench -N` launch" if one_launch else f"started within {span_s:.0f} s"
    return (f"note: BASE's {len(times)} runs were measured back to back ({how}): the run-to-run noise they show may "
            "be smaller than between runs taken apart (the README's A/A pass rates), so a verdict here may move with "
            "the host's load; give --history DIR or BASE runs taken apart")


def detectable_line(result) -> str:
    """What a pass could not have seen (Comparison.detectable): the smallest slowdown at a point and of a whole
    collective that would have failed; with no repeated baseline run, how to see less."""
    found = result.detectable
    parts = [f"x{found[name]:.3g} {what}" for name, what in (("point_ratio_median", "at one point (median over the "
                                                                                     "points)"),
                                                              ("collective_ratio_max", "for a whole collective"))
             if found[name] is not None]
    if not parts:
        return "smallest slowdown it could have seen: none (nothing judged)"
    r2r = result.run_to_run
    one_each = result.runs.get("base") == 1 and result.runs.get("new") == 1
    hint = ("" if r2r is not None and r2r.shift_known else
            f" ({'one run a side' if one_each else 'no repeated baseline run'}: smaller changes cannot be seen; give "
            "--history DIR or append repeated runs to BASE)")
    return f"smallest slowdown it could have seen: {' or '.join(parts)}{hint}"


def _quantiles(result) -> str:
    point = "no point test" if math.isnan(result.quantile) else f"q={result.quantile:.2f} per point"
    return (f"{point}, {result.quantile_collective:.2f} per collective (5% for the whole "
            f"comparison over {result.num_tests} tests: half to the collective tests, half to the point tests)")


def statistics_judged(result) -> list[str]:
    return sorted({p.statistic for p in result.points if p.statistic != "-"})


def statistic_line(result) -> str:
    """Which statistic was judged, said once (auto picks the low tail where both files have samples)."""
    names = statistics_judged(result)
    text = f"statistic judged: {', '.join(names) or 'none'}"
    if any(name in TAIL_STATISTICS for name in names):
        text += (" (the low tail of the per-iteration times: on a shared host it moves far less between runs "
                 "than the median, which is shown beside it, not judged)")
    if result.statistic_fallback:
        text += f"; {result.statistic_fallback}"
    if result.trimmed:
        counts = sorted(set(result.trimmed.values()))
        text += (f"; {len(result.trimmed)} point(s) measured with different iteration counts in the files: their "
                 f"tail over the first {', '.join(map(str, counts))} iteration(s) of each record, as many on every "
                 "side (the fastest of more iterations is faster by chance)")
    return text


def _ratio(value):
    return "-" if value is None else f"{value:.3f}"


def _interval(low: float | None, high: float | None) -> str:
    """A ratio interval, 3 decimals; bounds a handful of points leave astronomically wide (df 1: q ~ 19) in 3
    significant digits, not as 21-digit numbers."""
    if low is None or high is None:
        return "-"
    if 1e-3 <= low and high <= 1e3:
        return f"{low:.3f}..{high:.3f}"
    return f"{low:.3g}..{high:.3g}"


def _us(value):
    return "-" if value is None else f"{value:.2f}"


# compare --json: each verdict phrase as an identifier for scripts (the phrase stays beside it)
VERDICT_CODES = {"ok": "ok", "faster": "faster", "slower (within noise)": "slower_within_noise",
                 "REGRESSED": "regressed", "newly failed": "newly_failed", "newly wrong": "newly_wrong",
                 "failed": "failed", "wrong": "wrong", "missing": "missing", "not ok in base": "not_ok_in_base",
                 "not comparable": "not_comparable", "not reached": "not_reached"}


def point_identity(key: tuple) -> dict:
    """A point's match key (results/compare.py match_key) as typed fields."""
    backend, _collective, dtype, op, in_place, size_bytes, world_size, group_size, group_layout, num_groups, params = key
    return {"backend": backend, "dtype": dtype, "op": op, "in_place": in_place, "size_bytes": size_bytes,
            "world_size": world_size, "group_size": group_size, "group_layout": group_layout,
            "num_groups": num_groups, "params": json.loads(params)}


def emulated_fabrics(headers: list) -> list[str]:
    """The `commbench emulate` fabrics the runs of `headers` measured on (results.emulated.fabric_text), empty where
    every run measured its own fabric: the figures of such a file are EMULATED, never a real network's."""
    from commbench.results.emulated import fabric_text

    return sorted({fabric_text(h.emulated) for h in headers if h.emulated})


def measured_title(path: str, headers: list) -> str:
    """A file as compare's title names it: 'measured PATH', or 'EMULATED PATH' for runs on `commbench emulate`."""
    return f"{'EMULATED' if emulated_fabrics(headers) else 'measured'} {path}"


def comparison_document(result, base: str, new: str, *, unreadable: int = 0, setup_unknown: list = (),
                        cut_short: list[str] = (), allow_cut_short: bool = False,
                        base_incomplete: list[str] = (), stale_new: list[str] = (),
                        unchecked_both: list[str] = (), age_unknown: list[str] = (),
                        emulated: dict[str, list[str]] | None = None, allow_setup_change: bool = False,
                        setup_changed: list[str] = ()) -> dict:
    """`compare --json`: every matched point with its verdict; ratios are new/base of measured times.
    `unreadable`: lines of NEW that could not be read (the gate fails on them); `setup_unknown`: "PATH: run ID"
    per run without a header record (its setup was not checked); `base_incomplete`: BASE's runs cut short and
    unreadable lines, judged on what BASE holds (--allow-cut-short; without it compare refuses such a BASE);
    `stale_new`: runs of NEW that started before the newest baseline run, judged by --allow-stale (check_when_measured); `unchecked_both`:
    points measured without the data check in both files (results.compare.unchecked_on_both_sides); `age_unknown`: why
    NEW's age against the baseline could not be checked (check_when_measured); `emulated`: per side ("base", "new")
    the emulated fabrics its runs measured on (emulated_fabrics); `setup_changed`: what differs in NEW's setup from
    BASE's, judged all the same under `allow_setup_change`."""
    r2r = result.run_to_run
    return finite_or_null({"format": "commbench-compare", "version": 2, "base": base, "new": new,
            "max_regression": result.max_regression,
            "emulated": dict(emulated or {"base": [], "new": []}),
            "allow_setup_change": allow_setup_change, "setup_changes": list(setup_changed),
            "passed": result.passed and not unreadable and not (cut_short and not allow_cut_short),
            "points": [{"collective": p.collective, **point_identity(p.key), "point": p.label, "statistic": p.statistic,
                        "base_time_us": p.base_us, "new_time_us": p.new_us, "ratio": p.ratio,
                        "ratio_low": p.ratio_low, "ratio_high": p.ratio_high, "median_ratio": p.median_ratio,
                        "iterations_compared": result.trimmed.get(p.key),
                        "noise": p.noise_text(),
                        "noise_source": p.noise_source or None, "verdict": p.verdict,
                        "verdict_code": VERDICT_CODES[p.verdict], "regressed": p.regressed, "detail": p.detail}
                       for p in sorted(result.points, key=lambda p: p.key)],
            "collectives": [{"collective": s.collective, "scope": s.scope, "points": s.num_points,
                             "geomean_ratio": s.geomean, "geomean_low": s.low, "geomean_high": s.high,
                             "regressed": s.regressed} for s in result.shifts],
            "noise": {"runs": result.runs, "statistics": statistics_judged(result),
                      "statistic_reason": result.statistic_reason or None, "quantile": result.quantile,
                      "quantile_collective": result.quantile_collective, "num_tests": result.num_tests,
                      "run_shift_sd_log": r2r.sigma_run if r2r else None,
                      "run_shift_measured": bool(r2r and r2r.shift_known),
                      "point_scatter_from": r2r.scatter_from if r2r else None,
                      "point_sd_log_pooled": r2r.sigma_pooled if r2r else None, "df": r2r.df if r2r else None},
            "missing": result.missing, "not_planned": result.not_planned, "allow_missing": result.allow_missing,
            "unchecked": result.unchecked, "allow_unchecked": result.allow_unchecked,
            "fewer_iters": result.fewer_iters,
            "known_failed": result.known_failed, "setup_unknown": list(setup_unknown),
            "failed_only_in_new": result.failed_only_in_new, "empty_runs": result.empty_runs,
            "unmatched_runs": result.unmatched_runs,
            "cut_short": list(cut_short), "allow_cut_short": allow_cut_short,
            "base_incomplete": list(base_incomplete), "new_older_than_baseline": list(stale_new),
            "new_age_unchecked": list(age_unknown),
            "unchecked_both_sides": list(unchecked_both), "cut_short_not_reached": result.cut_short_lost,
            "only_in_base": result.only_in_base, "only_in_new": result.only_in_new,
            "detectable": {**result.detectable, "run_shift_measured": bool(r2r and r2r.shift_known)}})


def finite_or_null(value):
    """`value` (a JSON document) with every float that is not finite written null: JSON has no NaN or infinity
    (RFC 8259 section 6; json.dumps writes the bare NaN no parser reads), and compare.schema.json allows null where
    a figure can be undefined (the point test's quantile where no point was judged)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_or_null(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(item) for item in value]
    return value


@command("compare", help="Compare two results files point by point; exit 1 when a point regresses or newly fails (CI gate).")
def compare_cmd(
    base: Annotated[str, typer.Argument(help="Baseline results (JSONL).")],
    new: Annotated[str, typer.Argument(help="New results (JSONL).")],
    max_regression: Annotated[str, typer.Option("--max-regression", help="Allowed slowdown per point, e.g. 10% or 0.1 (a bare number of 1 or more is refused as ambiguous: write 500% for 5x); a point (or a collective's shared shift) fails only beyond this AND beyond the noise: the larger of the run-to-run noise and the within-run interval, at a quantile that keeps the whole comparison of unchanged code to 5% false alarms.")] = "10%",
    statistic: Annotated[str, typer.Option("--statistic", help=f"Time statistic to compare: {AUTO} ({AUTO_TAIL} when both files have >= {MIN_SAMPLES_FOR_TAIL} per-iteration samples per point, else the median, else nccl-tests' time as imported files hold; a run of NEW with 1-{MIN_SAMPLES_FOR_TAIL - 1} samples where BASE has >= {MIN_SAMPLES_FOR_TAIL} is refused: measure it with -n >= {MIN_SAMPLES_FOR_TAIL} or give --statistic median), " + ", ".join(GATE_STATISTICS) + " (p10 / min: the 10th percentile / fastest of the per-iteration times; on a busy host they move far less between runs than the median, which preemption dominates: see README).")] = AUTO,
    history: Annotated[str | None, typer.Option("--history", help="Folder of earlier baseline results (*.jsonl, repeated runs of the same points): with runs appended to BASE, they measure the run-to-run shift (never from NEW: a slow run there is the news). Without repeated baseline runs the shift is assumed (half the points' scatter, said in the noise line) and each point is judged against its own run's other points.")] = None,
    allow_missing: Annotated[bool, typer.Option("--allow-missing", help="Pass when a run of NEW lacks points of BASE (they are still named); without it a missing point fails. A run of NEW holding no point of BASE at all (another dtype, world size, backend or collective) misses every point of BASE: it fails too unless this option is given, except NEW's newest run (the one whose header started last, ties and runs without a start time by file order: what bench -O or sweep appended last), which is refused (exit 2) as a NEW holding no point is, with this option or without. Where NEW's run holds every point its header plans, the points it lacks are named 'not planned' (its plan differs from BASE's: another sweep, or tune's built-in sweep of another version): a narrower plan checks less than BASE did, so it fails too unless --allow-missing accepts it (or compare against a BASE measured with the new plan).")] = False,
    allow_cut_short: Annotated[bool, typer.Option("--allow-cut-short", help="Judge a run of NEW that was cut short (its header plans more points than the file holds: a crash, a kill, a time limit, not resumed) on the points it holds, the points it planned and never reached allowed; without it such a run fails, --allow-missing or not (that option is for points NEW did not plan). A BASE cut short, with unreadable lines or with no good record of a point NEW measured good (failed, wrong or skipped in every run of BASE) is refused (exit 2: NEW's points there would go unjudged) unless this option is given: then NEW is judged on the points BASE holds, said in the pass line and in --json (base_incomplete).")] = False,
    allow_unchecked: Annotated[bool, typer.Option("--allow-unchecked", help="Pass when a run of NEW measured points without the data check (bench/sweep -c 0, nccl-tests -c 0) that BASE checked (they are still named); without it such a point fails: unchecked data never counts as wrong.")] = False,
    allow_fewer_iters: Annotated[bool, typer.Option("--allow-fewer-iters", help="Judge a run of NEW that measured a point over fewer timed iterations (-n: the records' iters) than BASE's records there (named, also in --json: fewer_iters); without it that is refused (exit 2, both counts named): a time over fewer iterations is noisier than the base's, whose run-to-run noise the gate judges it by, so the gate would check less than BASE did. More iterations in NEW are fine.")] = False,
    allow_setup_change: Annotated[bool, typer.Option("--allow-setup-change", help="Judge NEW although its runs were measured with another NCCL version, on other devices, on an emulated instead of a real fabric (or the reverse), or on gloo with another torch version (gloo's collectives are torch's own code) than BASE's (an NCCL upgrade, say; what differs is still named); without it such files are refused. Another torch under NCCL runs, or another commbench version, is noted and judged. A run without a header record cannot be checked: warned in one line, then judged.")] = False,
    allow_layout_change: Annotated[bool, typer.Option("--allow-layout-change", help="Judge NEW (or --history) although its runs sat on another node layout than BASE's at the same world size (other host or rack counts, other ranks per host: 2 nodes x 4 against 1 x 8, say; what differs is named); without it that is refused (exit 2): the same ranks on other nodes cross other links. Other host names alone (CI runners) are only noted.")] = False,
    allow_stale: Annotated[bool, typer.Option("--allow-stale", help="Compare although a run of NEW started before the newest run of BASE or of --history (headers' start times): without it that is refused (exit 2, both times named), as a stale NEW (a CI step that did not overwrite it, BASE and NEW swapped) passes on no new measurement. For a baseline measured again after the change.")] = False,
    allow_same_run: Annotated[bool, typer.Option("--allow-same-run", help="Compare although every run of NEW is a run of BASE (the same run id, or the same records under another: the same file, a copy, a log imported twice): without it that is refused (exit 2), as a gate that compares the baseline with itself passes on no new measurement.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict per point as JSON (schema: docs/json-output.md); the exit code is the same.")] = False,
) -> None:
    """Ratios are new / base of one named statistic (both measured); > 1 is slower. Every run appended to
    NEW is judged on its own and all together: NEW's newest run (by start time) must hold a point of BASE (else
    exit 2, as a NEW holding none), and an earlier run holding none fails the gate unless --allow-missing."""
    from commbench.files import refuse_empty_path
    for option, path, what in (("BASE", base, "a results file"), ("NEW", new, "a results file"),
                               ("--history", history, "a folder of earlier baseline results")):
        if path is not None:   # '' read as the current folder ("Is a directory"): an unset shell variable?
            refuse_empty_path(path, option, what)
    threshold = parse_threshold(max_regression)   # option values before any file is read: a bad one is named first
    statistic = check_statistic(statistic)
    if history is not None:
        check_history_folder(history)
    check_not_being_written(("BASE", base), ("NEW", new), *((("--history", history),) if history else ()))
    unreadable: list[str] = []  # NEW's lines that could not be read: a point of unknown outcome, never a pass
    base_headers: list = []
    new_headers: list = []
    headerless: list[str] = []  # runs whose setup is unknown: warned about, never refused (note_setup_unknown)
    base_continuations: set[str] = set()
    base_unreadable: list[str] = []   # BASE's torn lines: points NEW holds there would go unjudged
    base_cut_short: list[str] = []    # BASE runs holding fewer points than planned: the gate would check less
    base_records = read_measurements(base, base_unreadable, headers=base_headers, headerless=headerless,
                                     continuations=base_continuations, cut_short=base_cut_short)
    base_short = check_base_whole(base, base_cut_short, base_unreadable, allow_cut_short=allow_cut_short)
    new_continuations: set[str] = set()
    cut_short: list[str] = []   # a crash, not a narrower plan: fails unless --allow-cut-short
    plans: dict[str, str] = {}   # run id of NEW -> its plan, for runs holding every point they plan
    cut_runs: set[str] = set()   # run ids of NEW cut short: their unreached points allowed with --allow-cut-short
    new_started: dict = {}   # run id of NEW -> when it started (run_start_times): which run is the newest
    new_records = read_measurements(new, unreadable, headers=new_headers, headerless=headerless,
                                    continuations=new_continuations, cut_short=cut_short, plans=plans,
                                    cut_short_runs=cut_runs, started=new_started)
    from commbench.results.run_headers import one_header_per_run
    one_header_per_run([(base, base_headers), (new, new_headers)])   # a run of both, its header edited in one: refused
    of_base = check_new_is_not_base(base, new, base_records, new_records, allow_same_run=allow_same_run)
    if of_base:   # BASE's own runs copied into NEW (a copy of the baseline with runs appended): not NEW's measurement
        new_records = [m for m in new_records if m.run_id not in of_base]
        new_headers = [h for h in new_headers if h.run_id not in of_base]
    new_records = without_records_of_base(base_records, new_records, plans)
    check_one_base_setup(base_headers, base_continuations, allow_setup_change=allow_setup_change, base=base)
    check_same_setup(base_headers, new_headers, allow_setup_change=allow_setup_change,
                     allow_layout_change=allow_layout_change)
    history_headers: list = []
    history_of_new: list[str] = []   # history runs that are NEW's own (its run ids): never a baseline run
    new_run_ids = {h.run_id for h in new_headers} | {m.run_id for m in new_records} | new_continuations
    history_records = (read_history(history, history_headers, headerless, leave_out=new_run_ids,
                                    left_out=history_of_new) if history is not None else ())
    check_same_setup(base_headers, history_headers, allow_setup_change=allow_setup_change,
                     allow_layout_change=allow_layout_change,
                     side=f"the history {history!r}", side_name="history")
    age_unknown: list[str] = []   # NEW's runs whose start cannot be placed against the baseline's: said, in --json too
    stale = check_when_measured(new, new_headers, base_headers, history_headers, allow_stale=allow_stale,
                                age_unknown=age_unknown)
    unchecked_both = unchecked_on_both_sides(base_records, new_records)
    result = compare(base_records, new_records, max_regression=threshold,
                     statistic=statistic, history=history_records,
                     allow_missing=allow_missing, allow_unchecked=allow_unchecked,
                     # a run empty in BASE too (the same file, a copy) is no change; a run that continues an earlier
                     # one (sweep --resume) holds points, carried under the continued run's id in new_records
                     empty_runs=[run for run in empty_runs_of([*new_headers, *new_records])
                                 if run not in empty_runs_of([*base_headers, *base_records])
                                 and run not in new_continuations],
                     complete_runs=plans, cut_short_runs=cut_runs, new_started=new_started,
                     allow_fewer_iters=allow_fewer_iters, allow_cut_short=allow_cut_short)
    base_short = base_short + check_base_points_good(base, result, allow_cut_short=allow_cut_short)
    plan_change = plan_change_text(base_headers, plans, base_records) if result.not_planned else ""
    if as_json:
        print_json(comparison_document(result, base, new, unreadable=len(unreadable),
                                       setup_unknown=headerless, cut_short=cut_short,
                                       allow_cut_short=allow_cut_short,
                                       base_incomplete=base_short, stale_new=stale,
                                       unchecked_both=unchecked_both, age_unknown=age_unknown,
                                       emulated={"base": emulated_fabrics(base_headers),
                                                 "new": emulated_fabrics(new_headers)},
                                       allow_setup_change=allow_setup_change,
                                       setup_changed=setup_changes(base_headers, new_headers, new_name="new")))
    else:
        rows = []
        with_median = any(p.median_ratio is not None for p in result.points)
        for p in sorted(result.points, key=lambda p: p.key):
            style = _STYLE.get(p.verdict)
            rows.append([escape(p.label), p.statistic, _us(p.base_us), _us(p.new_us), "-" if p.ratio is None else f"{p.ratio:.3f}",
                         _interval(p.ratio_low, p.ratio_high), escape(p.noise_text()),
                         (f"[{style}]{escape(p.verdict)}[/]" if style else escape(p.verdict))
                         + (f" ({escape(p.detail)})" if p.detail and p.verdict != "not ok in base" else "")]
                        + ([_ratio(p.median_ratio)] if with_median else []))
        judged = ", ".join(statistics_judged(result)) or "none"
        print_table(console, f"{measured_title(new, new_headers)} vs {measured_title(base, base_headers)} (ratio "
                             f"new/base of the {judged}; > 1 is slower)",
                    [Col(name="point", numeric=False), Col(name="statistic", numeric=False, keep=2), Col(name="base (µs)"),
                     Col(name="new (µs)"), Col(name="ratio"), Col(name="interval", keep=3),
                     Col(name="noise", numeric=False, keep=1), Col(name="verdict", numeric=False)]
                    + ([Col(name="median ratio", keep=4)] if with_median else []), rows)
        print_table(console, "geometric mean of time ratios per collective and run of the new file (one run-level shift)",
                    [Col(name="collective", numeric=False), Col(name="run", numeric=False), Col(name="points"),
                     Col(name="geomean ratio"), Col(name="interval", keep=1), Col(name="verdict", numeric=False)],
                    [[s.collective, s.scope, str(s.num_points), f"{s.geomean:.3f}",
                      _interval(s.low, s.high),
                      "[bold red]REGRESSED[/]" if s.regressed else "ok"] for s in result.shifts])
        console.print(statistic_line(result), highlight=False)
        console.print(noise_summary(result), highlight=False)
        lost = result.lost
        if lost:
            console.print(styled(("allowed" if allow_missing else "[bold red]missing[/]")
                                 + ": {} point run(s) missing in the new file: {}", len(lost),
                                 ", ".join(lost[:20]) + (" ..." if len(lost) > 20 else "")),
                          highlight=False)
        if result.not_planned:
            console.print(styled(("allowed" if allow_missing else "[bold red]not planned[/]")
                                 + ": {} point run(s) of the base that the new file's run(s) did not plan ({}): {}",
                                 len(result.not_planned), plan_change, ", ".join(result.not_planned[:20])
                                 + (" ..." if len(result.not_planned) > 20 else "")), highlight=False)
        if result.empty_runs:
            console.print(styled(("allowed" if allow_missing else "[bold red]missing[/]")
                                 + ": {} run(s) of the new file hold a header and no measurement (run {}): stopped "
                                 "before their first point; the file's other runs were judged",
                                 len(result.empty_runs), ", ".join(result.empty_runs[:3])), highlight=False)
        if result.unmatched_runs:
            console.print(styled(("allowed" if allow_missing else "[bold red]missing[/]")
                                 + ": {} run(s) of the new file hold no point of the base ({}): judged on nothing; "
                                 "the file's other runs were judged", len(result.unmatched_runs),
                                 "; ".join(result.unmatched_runs[:2])), highlight=False)
        if result.unchecked:
            console.print(styled(("allowed" if allow_unchecked else "[bold red]unchecked[/]")
                                 + ": {} point run(s) of the new file measured without the data check where the base "
                                 "checked: {}", len(result.unchecked),
                                 ", ".join(result.unchecked[:20]) + (" ..." if len(result.unchecked) > 20 else "")),
                          highlight=False)
        if result.fewer_iters:
            console.print(styled("allowed (--allow-fewer-iters): {} point run(s) of the new file measured over fewer "
                                 "iterations than the base (noisier than the base's noise the gate judges them by): {}",
                                 len(result.fewer_iters), ", ".join(result.fewer_iters[:5])
                                 + (" ..." if len(result.fewer_iters) > 5 else "")), highlight=False)
        for side, count in result.repeated_runs.items():
            console.print(styled("[yellow]note[/]: {}: {} run(s) repeating an earlier run of the file record for "
                                 "record: counted once (the same log imported twice, the baseline copied into the "
                                 "history, say; two copies would make the run-to-run noise zero)",
                                 "history" if side == "history" else f"{side} file", count), highlight=False)
        if history_of_new or result.history_of_new:
            console.print(styled("[yellow]note[/]: history: {} run(s) are the new file's own run ({}): left out of the "
                                 "baseline runs (the run shift is never measured from NEW: a slowdown of NEW would "
                                 "read as noise)", len(history_of_new) + result.history_of_new,
                                 ", ".join(history_of_new[:3] + (["the same records under another run id"]
                                                                 if result.history_of_new else []))),
                          highlight=False)
        if result.known_failed:
            console.print(styled("[yellow]known[/]: {} point(s) skipped in both files (NCCL refused the combination), "
                                 "in the new no more often than in the base (skipped in the base too: no change, not "
                                 "judged where skipped): {}",
                                 len(result.known_failed), ", ".join(result.known_failed[:20])
                                 + (" ..." if len(result.known_failed) > 20 else "")), highlight=False)
        if result.only_in_new:
            console.print(f"{result.only_in_new} point(s) only in {new} (not judged)", highlight=False)
        if result.cut_short_lost:
            console.print(styled(("allowed (--allow-cut-short)" if allow_cut_short else "[bold red]not reached[/]")
                                 + ": {} point run(s) planned by a run of the new file cut short and never reached: "
                                 "{}", len(result.cut_short_lost),
                                 ", ".join(result.cut_short_lost[:20]) + (" ..." if len(result.cut_short_lost) > 20
                                                                          else "")), highlight=False)
        for line in cut_short:
            console.print(styled(("allowed" if allow_cut_short else "[bold red]cut short[/]") + ": {}", line),
                          highlight=False)
        if result.failed_only_in_new:
            console.print(styled("[bold red]failed[/]: {} point run(s) of the new file failed or wrong at points the "
                                 "base does not hold: {}", len(result.failed_only_in_new),
                                 ", ".join(result.failed_only_in_new[:5])
                                 + (" ..." if len(result.failed_only_in_new) > 5 else "")), highlight=False)
    failed_cut = cut_short and not allow_cut_short
    apart_note = back_to_back_note(base_headers, base_continuations, result)
    if not result.passed or unreadable or failed_cut:
        slow = [p for p in result.regressions if p.verdict == "REGRESSED"]
        bad = [p for p in result.regressions if p.verdict != "REGRESSED"]
        parts = [f"{name} slower as a whole: geomean x{result.geomean_by_collective[name]:.2f} beyond "
                 f"{threshold_text(threshold)} and the noise" for name in result.regressed_collectives]
        if slow:
            worst = max(slow, key=lambda p: p.ratio)
            parts.append(f"{len(slow)} point(s) regressed beyond {threshold_text(threshold)} and the noise; worst: {worst.label} "
                         f"x{worst.ratio:.2f} ({worst.statistic}, {worst.detail}, noise {worst.noise_text()})")
        if (slow or result.regressed_collectives) and not (result.run_to_run and result.run_to_run.shift_known):
            parts.append(f"run-to-run noise not measured (one baseline run, "
                         f"{'no --history' if not result.runs.get('history') else 'no --history run sharing its points'}"
                         "): assumed, so a point that moves between runs on a shared host can fail unchanged code; "
                         "append repeated runs to BASE or pass --history DIR to measure it")
        missing = [p for p in bad if p.verdict == "missing"]
        bad = [p for p in bad if p.verdict != "missing"]
        if bad:
            parts.append(f"{len(bad)} point(s) {bad[0].verdict} in the new file (first: {bad[0].label}, {bad[0].detail})")
        lost = result.lost
        if missing and lost:
            parts.append(f"{len(lost)} point run(s) missing in the new file (first: {lost[0]}); "
                         f"--allow-missing permits that")
        if missing and result.not_planned:
            parts.append(f"{len(result.not_planned)} point run(s) of the base not planned by the new file (first: "
                         f"{result.not_planned[0]}; {plan_change}): it checks less than the base did; "
                         "--allow-missing accepts the new plan, or compare against a base measured with it")
        if result.unmatched_runs and not allow_missing:
            parts.append(f"{len(result.unmatched_runs)} run(s) of the new file hold no point of the base (first: "
                         f"{result.unmatched_runs[0]}): judged on nothing, every point of the base missing there; "
                         "--allow-missing permits that")
        if result.unchecked and not allow_unchecked:
            parts.append(f"{len(result.unchecked)} point run(s) of the new file measured without the data check "
                         f"(-c 0) where the base checked (first: {result.unchecked[0]}); --allow-unchecked permits that")
        if result.empty_runs and not allow_missing:
            parts.append(f"{len(result.empty_runs)} run(s) of the new file hold a header and no measurement (first: "
                         f"run {result.empty_runs[0]}): stopped before their first point, every point of the base "
                         "missing there; --allow-missing permits that")
        if result.failed_only_in_new:
            parts.append(f"{len(result.failed_only_in_new)} point run(s) failed or wrong in the new file at points the "
                         f"base does not hold (first: {result.failed_only_in_new[0]}); --allow-missing does not "
                         "permit that")
        if failed_cut:
            parts.append(f"{len(cut_short)} run(s) of the new file cut short (first: {cut_short[0]}): a run that "
                         "stopped part-way failed" + ("; or its points are the unreadable lines'" if unreadable else "")
                         + "; --allow-cut-short judges the points it holds (--allow-missing does not permit that)")
        if unreadable:   # first: lines dropped as unreadable make their runs read as cut short, the lesser reason
            parts.insert(0, f"{len(unreadable)} line(s) of the new file could not be read (first: {unreadable[0]}): "
                            "what they held (a failed or wrong point, say) is unknown; no option permits that")
        raise fail("; ".join(parts + [apart_note] * bool(apart_note)), exit_code=1)
    if not as_json:
        apart = sum(p.verdict in ("not comparable", "not ok in base") for p in result.points)
        base_bad = sum(p.verdict == "not ok in base" for p in result.points)
        unreached = sum(p.verdict == "not reached" for p in result.points)
        absent = result.only_in_base   # the base's points NEW lacks (allowed, or the gate failed above): not compared
        compared = result.num_new_compared if result.num_new_compared is not None else result.runs["new"]
        console.print(styled("[green]pass[/]: {} point(s) in {} run(s) compared{}{}{}{}, none slower than {} beyond "
                             "the noise, none failed{}{}{}{}{}", len(result.points) - apart - absent - unreached,
                             compared, f" ({apart - base_bad} not comparable: no statistic in both files)"
                             if apart > base_bad else "",
                             f" ({base_bad} not ok in base: not judged)" if base_bad else "",
                             f" ({unreached} not reached by a run cut short: --allow-cut-short)" if unreached else "",
                             f" ({absent} of the base's not in the new file: --allow-missing)" if absent else "",
                             threshold_text(threshold),
                             (" (data unchecked on both sides: -c 0, a wrong result cannot be seen)"
                              if len(unchecked_both) >= len(result.points) - apart - absent - unreached else
                              f" or wrong ({len(unchecked_both)} point(s) with data unchecked on both sides: -c 0)")
                             if unchecked_both else " or wrong",
                             f" ({len(result.known_failed)} skipped in both: NCCL refused the combination)"
                             if result.known_failed else "",
                             f" ({len(result.unchecked)} point run(s) unchecked: allowed)"
                             if result.unchecked else "",
                             f"; {result.runs['new'] - compared} other run(s) of the new file hold no point of the "
                             "base: not judged (--allow-missing)" if compared < result.runs["new"] else "",
                             "; the base is cut short or has unreadable lines or points with no good record "
                             f"({len(base_short)} said above, --allow-cut-short): judged on the points it holds only, "
                             f"{result.only_in_new + len(result.base_not_ok)} point(s) of the new file not judged"
                             if base_short else "")
                      + (f"; {escape(apart_note)}" if apart_note else ""), highlight=False)
        console.print(detectable_line(result), highlight=False)
