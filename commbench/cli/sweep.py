"""`commbench sweep FILE`: every point of a sweep file in one launch (resumable), or --dry-run."""

from __future__ import annotations

import dataclasses
import datetime
import shlex
import sys
import uuid
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Callable, Optional

import typer
from rich.markup import escape

from commbench.cli.base import command, console, err_console, fail, print_json, renamed
from commbench.results.render import styled
from commbench.errors import CommbenchError
from commbench.files import (OutputLock, refuse_empty_inputs, refuse_empty_path, refuse_writing_inputs,
                             repair_torn_tail, safe_file_stem)
from commbench.sweep import SweepJob, estimate_point_s, load_sweep, plan_sweep, run_sweep_rank
from commbench.sweep.plan import describe, listed_size, size_notes
from commbench.sweep.resume import check_resume_identity, earlier_problems, finished_before_launch, has_records
from commbench.results.tables import Col, print_table
from commbench.units import format_size


def default_output(sweep_name: str) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return str(Path("results") / f"sweep-{safe_file_stem(sweep_name)}-{stamp}-{uuid.uuid4().hex[:6]}.jsonl")


# how a resume hint names the launch a sweep ran under (RankEnv.launcher): the command alone is a local launch
LAUNCH_WORDS = {"torchrun": "torchrun", "slurm": "srun", "mpi": "mpirun", "hydra": "mpiexec",
                "emulate": "commbench emulate", "env": "RANK/WORLD_SIZE"}


def resume_command(file: str, output: str, nproc: Optional[int], launcher: Optional[str] = None) -> str:
    """The command that continues the sweep; under a launch (`launcher`, RankEnv.launcher), with what to run it under:
    alone it would start local ranks, not the launch's."""
    parts = ["commbench", "sweep", file, "-O", output, "--resume"] + (["--nproc", str(nproc)] if nproc else [])
    command = " ".join(shlex.quote(p) for p in parts)
    if launcher is None or launcher == "local":
        return command
    return f"{command}, run under the same {LAUNCH_WORDS.get(launcher, launcher)} launch as this one"


def go_on_text(output: str, again: str) -> str:
    """How to go on from a sweep that ended early: `again` (continue with --resume) while the file lacks planned
    points; when it holds a record of every one (a stop after the last point), that it does (--resume would have
    nothing to measure)."""
    from commbench.sweep.resume import holds_every_planned_point

    planned = holds_every_planned_point(output)
    if planned is not None:
        return f"every planned point ({planned}) is in {output}: nothing is left for --resume"
    return f"continue with: {again}"


def file_nproc(spec) -> str:
    """How an error names the sweep file's [sweep] nproc (the ranks a launch without --nproc starts here)."""
    return f"sweep {spec.path}: [sweep] nproc"


def world_note(spec, nproc: int | None = None) -> str | None:
    """The world a launch here runs where the file declares another (one rule for --dry-run and launch): [sweep]
    world_size beside another nproc, or a --nproc other than the file's world_size (else nproc), whose points are
    then planned for fewer or more ranks than the file was written for (probe CG F6: ci-small's 2 racks x 2 ranks on
    --nproc 2, said nowhere). None where they agree."""
    if nproc is None:
        if spec.nproc is None or spec.world_size in (None, spec.nproc):
            return None
        return (f"note: sweep {spec.path}: [sweep] world_size={spec.world_size} differs from its nproc={spec.nproc}: "
                f"`commbench sweep` here starts {spec.nproc} rank(s) and plans for them; a launcher (torchrun, srun) "
                f"runs the world it starts; --dry-run --world-size {spec.world_size} plans for {spec.world_size}")
    key, declared = ("world_size", spec.world_size) if spec.world_size is not None else ("nproc", spec.nproc)
    if declared in (None, nproc):
        return None
    return (f"note: sweep {spec.path}: --nproc {nproc} measures {nproc} rank(s), not the file's [sweep] "
            f"{key}={declared}: its points are planned for {nproc} (groups, racks and sizes as its entries give them "
            "on that world), and its header records that world")


def file_backend(spec) -> str:
    """The file's [sweep] backend resolved here, a refusal naming it (not a --backend never given) and what the
    file is written for."""
    from commbench.comm.backends import resolve_backend

    world = spec.world_size or spec.nproc
    gpus = f" and {world} GPUs" if world else ""
    return resolve_backend(spec.backend, option=f"sweep {spec.path}: [sweep] backend",
                           needs=f"the file is written for {spec.backend}{gpus} (--backend gloo runs it on CPU ranks, "
                                 f"--dry-run lists it)" if spec.backend == "nccl" else "")


def dry_run_backend(declared: str) -> str:
    if declared != "auto":
        return declared
    from commbench.comm.backends import backend_status

    return "nccl" if backend_status("nccl")[0] else "gloo"


def refuse_axes_on(requested: str, spec) -> None:
    """A dry run refuses NCCL tuning axes on the backend it lists, as the launch refuses them on the one it resolves
    (auto: NCCL where this machine has it, else gloo), saying how to plan for an NCCL machine from here."""
    from commbench.comm.nccl_tuning import refuse_on_backend

    try:
        refuse_on_backend(dry_run_backend(requested), list(spec.tuning))
    except CommbenchError as exc:
        if requested != "auto":
            raise
        raise CommbenchError(f"{exc} (--backend=auto is {dry_run_backend(requested)} here, as a launch here would "
                             "run it; --backend nccl or --world-size N plans for an NCCL machine)") from None


def dry_run_document(sweep, world_size: int, backend: str, resume: dict | None = None) -> dict:
    """`sweep --dry-run --json`: the points of one pass with a rough (predicted) time each; with NCCL tuning axes
    the launch runs that pass once per combination, each in fresh processes (commbench.sweep.tuned_sweep), so
    the totals count every combination. `resume`: what --resume would skip (dry_run_output), else None."""
    points = []
    for number, point in enumerate(plan_sweep(sweep, world_size, backend=backend), start=1):
        row = describe(point)
        size_bytes, basis = listed_size(point, world_size)
        points.append({"number": number, "entry": row["entry"], "collective": row["collective"], "dtype": row["dtype"],
                       "size_bytes": size_bytes, "size_basis": basis, "groups": row["groups"],
                       "params": {k: v for k, v in sorted(point.point.spec.params.items())}, "how": row["how"],
                       "estimated_s": estimate_point_s(point, world_size, backend, size_bytes)})
    num_passes = max(1, len(sweep.tuning))
    pass_s = sum(p["estimated_s"] for p in points)
    return {"format": "commbench-sweep-plan", "version": 1, "sweep": sweep.name, "description": sweep.description,
            "world_size": world_size, "backend": backend, "num_entries": len(sweep.entries), "points": points,
            "tuning_combinations": [c.label for c in sweep.tuning], "num_points_total": len(points) * num_passes,
            "estimated_pass_s": pass_s, "estimated_total_s": pass_s * num_passes, "resume": resume,
            "size_notes": size_notes(sweep, world_size)}


def print_dry_run(doc: dict) -> None:
    cols = [Col(name="#"), Col(name="entry", numeric=False, keep=2), Col(name="collective", numeric=False),
            Col(name="dtype", numeric=False, keep=1), Col(name="size"), Col(name="groups", numeric=False, keep=3),
            Col(name="how", numeric=False, keep=5), Col(name="params", numeric=False, keep=4), Col(name="est. time (s)")]
    rows = [[str(p["number"]), escape(p["entry"]), p["collective"], p["dtype"],
             format_size(p["size_bytes"]) + ("" if p["size_basis"].startswith("recorded") else " nominal"),
             p["groups"], p["how"], escape(", ".join(f"{k}={v}" for k, v in p["params"].items())),
             f"{p['estimated_s']:.2f}"]
            for p in doc["points"]]
    print_table(console, f"sweep {doc['sweep']}: {len(rows)} point(s) on {doc['world_size']} rank(s), {doc['backend']} "
                "(dry run)", cols, rows)
    if doc["description"]:
        console.print(doc["description"], highlight=False, markup=False)
    for note in doc.get("size_notes", ()):
        console.print(f"note: {note}", highlight=False, markup=False)
    nominal = sorted({p["size_basis"] for p in doc["points"] if not p["size_basis"].startswith("recorded")})
    for basis in nominal:
        console.print(f"note: sizes marked nominal are the {basis}", highlight=False, markup=False)
    combos = doc["tuning_combinations"]
    times = (f"; estimated run time {doc['estimated_total_s']:.0f} s" if not combos else
             f" x {len(combos)} NCCL tuning combination(s) = {doc['num_points_total']} point(s); estimated run time "
             f"{doc['estimated_total_s']:.0f} s, {doc['estimated_pass_s']:.0f} s a combination")
    console.print(f"valid: {doc['num_entries']} entr(y/ies), {len(rows)} point(s){times} (a rough alpha-beta estimate "
                  f"for {doc['backend']} of the points alone, not a measurement: process start and rendezvous, seconds "
                  "per launch, are not counted); nothing launched", highlight=False)
    if doc["resume"] is not None:
        resume = doc["resume"]
        console.print(f"--resume: {resume['num_points_recorded']} of "
                      + (f"the {doc['num_points_total']} point(s) of all {len(combos)} combinations" if combos
                         else "these point(s)")
                      + f" are already in {resume['out']} and would not be measured again", highlight=False)
    if combos:
        console.print(f"x {len(combos)} NCCL tuning combination(s), each in fresh processes: " + ", ".join(combos),
                      highlight=False)


def earlier_text(earlier: tuple[str, ...], output: str) -> str:
    """The failed or wrong points --resume found recorded and did not measure again, in one clause."""
    return (f"{len(earlier)} point(s) of this sweep recorded in {output} before this launch failed or had wrong data "
            f"(first: {earlier[0]}); --resume never measures a point twice: delete their lines to measure them again")


def dry_run_output(output: str, resume: bool, spec, world: int, backend: str, file: str) -> int:
    """`--dry-run -O FILE [--resume]`: refuse what the launch would refuse about FILE (touching nothing);
    the number of the planned points --resume would skip as already recorded (every tuning combination's)."""
    from commbench.files import check_results_target, probe_output_file
    from commbench.sweep.resume import recorded_keys
    from commbench.sweep.tuned_sweep import launch_passes

    check_results_target(output, "--out")
    probe_output_file(output, "--out")
    if not has_records(output):
        return 0
    if not resume:
        raise CommbenchError(f"--out={output!r} already holds records: pass --resume to continue it, "
                             f"or choose another -O/--out")
    check_resume(output, spec, world, backend, file)
    done = recorded_keys(output)
    return sum(point.key in done for one in launch_passes(spec) for point in plan_sweep(one, world, backend=backend))


def refuse_another_setup(output: str, backend: str, world: int) -> None:
    """A dry run of a --resume that a launch here would run (points left to measure: ranks start) refuses a setup
    the file's last run was not measured on, in the launch's words (runner.resumed_on_another_setup, which the ranks
    check against their own header): torch threads and version on gloo, NCCL version and settings, devices,
    fabric. --world-size plans for another machine, whose setup this one cannot tell: not checked."""
    from commbench.sweep.launch_header import local_launch_header
    from commbench.sweep.runner import resumed_on_another_setup

    if not has_records(output):   # nothing, or a torn first line the launch cuts: no run to compare with
        return
    refused = resumed_on_another_setup(output, local_launch_header(backend, world))
    if refused:
        raise CommbenchError(refused)


def check_resume(output: str, spec, world: int, backend: str, file: str) -> None:
    """Refuse a --resume into `output` that would join other measurements: another sweep (its identity, naming what
    changed), or points of a trace-routed entry measured on another trace (the records' trace_sha256). A world the
    sweep cannot plan is left to the launch's checks, in their words."""
    from commbench.sweep.resume import check_resume_traces, identity_entries
    from commbench.sweep.tuned_sweep import launch_passes, tuned_resume_identities

    passes = launch_passes(spec)
    try:
        points = [point for one in passes for point in plan_sweep(one, world, backend=backend)]
    except CommbenchError:
        points = []
    check_resume_traces(output, points)
    check_resume_identity(output, tuned_resume_identities(spec, world, backend),
                          f"this sweep ({file} on {world} rank(s), {backend})",
                          [(identity_entries(one), world, backend) for one in passes])


def print_nothing_to_do(num_points: int, output: str, earlier: tuple[str, ...] = ()) -> None:
    if earlier:  # the file is complete, not clean: a CI job must not read this as a pass
        raise fail(f"nothing measured: all {num_points} point(s) are already in {output}, but "
                   f"{earlier_text(earlier, output)}", exit_code=1)
    console.print(styled("[green]nothing to do[/]: all {} point(s) are already in {}", num_points, output), highlight=False)


def finished_on_resume(spec, output: str, world: int, backend: str) -> bool:
    """--resume of a sweep whose points are all in `output`: say so and start no rank (nor a rendezvous
    that a loaded machine can fail), decided before launch where the keys are known (finished_before_launch);
    exit 1 when some of them failed or had wrong data."""
    finished = finished_before_launch(output, spec, world, backend)
    if finished is not None:
        print_nothing_to_do(finished, output, earlier_problems(output, plan_sweep(spec, world, backend=backend)))
    return finished is not None


def run_sweep_axes(job, nproc: Optional[int], again: str) -> None:
    """The sweep once per NCCL tuning combination, each in fresh processes, into one file."""
    from commbench.cli.nccl_tuner import note_inherited_axes, print_combinations
    from commbench.comm.nccl_tuning import refuse_on_backend
    from commbench.sweep.tuned_bench import world_size_of
    from commbench.sweep.tuned_sweep import run_tuned_sweep, wrong_points

    refuse_on_backend(job.backend, list(job.sweep.tuning))
    note_inherited_axes()
    results = run_tuned_sweep(job, nproc=nproc)
    print_combinations(results, job.output_path, again, wrong_points(job, world_size_of(nproc, job.backend)))


def run_with_fresh_ranks(job: SweepJob, spec, nproc: Optional[int], backend: str,
                         go_on: Callable[[], str]) -> tuple[dict, tuple[int, int]]:
    """Run the sweep; when ranks hang on a point or one is killed from outside (recorded failed, ranks killed),
    start fresh ranks for the remaining points (said on stderr). Returns rank 0's outcomes and
    (ok, failed) points of the launches whose ranks hung (the last launch sees those as already in the file). A run
    that cannot go on ends in its line and `go_on()`: how to go on from the file (`sweep`: continue with --resume;
    `tune`: fit and plan from what was measured). `commbench sweep` and `commbench tune`'s sweep, one rule."""
    from commbench.comm.job import run_job
    from commbench.comm.local_ranks import RanksHung, RunFailed
    from commbench.errors import Interrupted, ResultsNotWritten

    from commbench.sweep.resume import recorded_keys

    timeout_s = max(entry.timeout_s for entry in spec.entries)
    earlier = (0, 0)
    # what the file held before this command: after a hang, fresh ranks resume it, and the point this command
    # recorded failed was reported again as one recorded 'before this launch'
    before = frozenset(recorded_keys(job.output_path)) if job.resume else frozenset()
    while True:
        try:
            return run_job(run_sweep_rank, job, nproc=nproc, backend=backend, timeout_s=timeout_s,
                           validate_world=lambda world: plan_sweep(spec, world, backend=backend) and None,
                           output_path=job.output_path), earlier
        except RanksHung as exc:
            if not exc.recorded:
                raise RunFailed(with_go_on(exc, go_on)) from None
            earlier = (earlier[0] + exc.num_ok, earlier[1] + exc.num_failed)
            err_console.print(f"{exc}; starting fresh ranks for the remaining points", highlight=False,
                              markup=False, soft_wrap=True)
            job = dataclasses.replace(job, resume=True, recorded_before=before)
        except Interrupted as exc:
            raise Interrupted(with_go_on(exc, go_on), signal=exc.signal) from None
        except (RunFailed, ResultsNotWritten) as exc:   # the disk refused a record: a failed run too (exit 1)
            raise RunFailed(with_go_on(exc, go_on)) from None


def with_go_on(exc: Exception, go_on: Callable[[], str]) -> str:
    """`exc`'s line and how to go on, the latter on rank 0 alone under a launch (every rank printed the same resume
    command: rank 0 writes the file, and says what it holds)."""
    from commbench.comm.launch import detect_rank_env

    launched = detect_rank_env()
    if launched is not None and launched.launcher != "local" and launched.rank != 0:
        return str(exc)
    return f"{exc}; {go_on()}"


@command("sweep", short_help="Run every point of a sweep file (TOML) in one launch; --dry-run checks and lists them.",
         help="Run every point of a sweep file (TOML) in one launch; --dry-run checks and lists them. "
                       "Exit 0: every point of the sweep is in the file, measured with correct data; 1: a point failed "
                       "or found wrong data (with --resume: also one recorded before; with NCCL tuning axes, a forced "
                       "combination NCCL refuses is recorded as data, not a failure), or the sweep stopped; 2: bad "
                       "input, found before any rank starts; 130: interrupted (what was measured is kept).")
def sweep(
    file: Annotated[str, typer.Argument(help="Sweep file (TOML), or the name of a shipped one: ci-small, h100-node, nvl72-rack, nvl72-multirack, nccl-tuning-node.")],
    out: Annotated[Optional[str], typer.Option("-O", "--out", help="JSONL results file (default results/sweep-<name>-<time>.jsonl).")] = None,
    old_out: Annotated[Optional[str], typer.Option("-o", "--output", hidden=True)] = None,
    nproc: Annotated[Optional[int], typer.Option("--nproc", help="Local ranks to start (default: the file's \\[sweep] nproc, else 2). Omit under torchrun/srun/mpirun.")] = None,
    backend: Annotated[Optional[str], typer.Option("--backend", help="auto, nccl or gloo (default: the file's \\[sweep] backend).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Skip points already recorded in the output file; never measure one twice (failed or wrong ones among them still exit 1).")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate, list the points with an estimated run time, launch nothing; with -O, also check that file as the launch would (with --resume: count the points it holds).")] = False,
    world_size: Annotated[Optional[int], typer.Option("--world-size", help="Ranks to plan for with --dry-run (default: --nproc, else the file's \\[sweep] nproc, the ranks a launch here starts, else its world_size, else 2).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="With --dry-run: print the points as JSON (schema: docs/json-output.md).")] = False,
    nccl_algo: Annotated[Optional[str], typer.Option("--nccl-algo", help="NCCL algorithms to force, a comma list (replaces the file's \\[sweep] nccl_algo): tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat, default. The whole sweep runs once per combination, NCCL's default first.")] = None,
    nccl_proto: Annotated[Optional[str], typer.Option("--nccl-proto", help="NCCL protocols to force: ll, ll128, simple, default (replaces \\[sweep] nccl_proto).")] = None,
    nccl_channels: Annotated[Optional[str], typer.Option("--nccl-channels", help="Channel counts to force, e.g. 4,8,16 (replaces \\[sweep] nccl_channels).")] = None,
    refused_g: Annotated[Optional[str], typer.Option("-g", hidden=True)] = None,
    refused_t: Annotated[Optional[str], typer.Option("-t", hidden=True)] = None,
    sweep_letter: Annotated[Optional[str], typer.Option("-b", "-e", "-f", "-n", "-w", "-G", "-N", "-m", "-z", "-T", hidden=True)] = None,
) -> None:
    """Validate the whole file before anything launches; records are appended as each point finishes."""
    output = renamed(out, old_out, old="-o/--output", new="-O/--out")
    refuse_empty_inputs(("FILE", file, "a sweep file (TOML) or a shipped sweep's name"))
    if output is not None:   # -O '': refused, never the default name (files.refuse_empty_path)
        refuse_empty_path(output, "--out")
        refuse_writing_inputs("--out", output, [output], [file])
    elif resume:   # the default name is new each launch (a time and a random suffix): there is no file to continue
        raise CommbenchError("--resume needs -O/--out: give the results file of the sweep to continue (a sweep "
                             "without -O writes a new results/sweep-<name>-<time>.jsonl each launch)")
    from commbench.cli.nccl_flags import refuse_nccl_tests_flags
    refuse_nccl_tests_flags({"-g": refused_g, "-t": refused_t})
    if sweep_letter is not None:
        raise CommbenchError(f"nccl-tests letters (-b -e -f -n -w -G -N -m -z -T) are per-run settings of a sweep file: "
                             f"set them in its [defaults] or [[run]] tables (sizes, iters, warmup_iters, timeout_s), "
                             f"or use `commbench bench` for one collective (got {sweep_letter!r})")
    from commbench.comm.backends import resolve_backend
    from commbench.comm.launch import detect_rank_env
    from commbench.limits import check_world_size

    spec = load_sweep(file)
    if (nccl_algo, nccl_proto, nccl_channels) != (None, None, None):
        from commbench.comm.nccl_tuning import parse_axes

        spec = dataclasses.replace(spec, tuning=tuple(parse_axes(nccl_algo, nccl_proto, nccl_channels)))
    if backend is not None and backend not in ("auto", "nccl", "gloo"):  # a dry run indexed its estimates by it
        raise CommbenchError(f"--backend={backend!r} is invalid: allowed auto, nccl, gloo (as [sweep] backend)")
    requested = backend or spec.backend
    if dry_run:
        # what the launch here would run: --nproc (as given on the same line), else the file's nproc (the ranks
        # `commbench sweep FILE` starts), before the file's world_size (the world a launcher's job gives it)
        world = next((n for n in (world_size, nproc, spec.nproc, spec.world_size) if n is not None), 2)
        check_world_size(world, "--world-size" if world_size is not None else "--nproc" if nproc is not None
                         else file_nproc(spec) if spec.nproc is not None else "[sweep] world_size")
        if requested == "gloo" or world_size is None:   # as the launch here refuses them: auto is what it
            refuse_axes_on(requested, spec)                # resolves to here; --world-size plans for another machine
        if world_size is None and nproc is not None:   # --nproc: ranks started here, as the launch checks them
            from commbench.comm.backends import max_local_ranks   # (--world-size plans for another machine)
            limit, why = max_local_ranks(dry_run_backend(requested))
            if not 1 <= nproc <= limit:
                from commbench.comm.backends import ranks_allowed
                line = ranks_allowed("--nproc", nproc, dry_run_backend(requested), limit, why)
                raise CommbenchError(line if limit <= 0 else f"{line}; --world-size plans for another machine")
        elif world_size is None and spec.nproc is not None:   # the file's nproc: the ranks a launch here starts
            from commbench.comm.backends import max_local_ranks
            limit, why = max_local_ranks(dry_run_backend(requested))
            if limit > 0 and not spec.nproc <= limit:   # 0: no such device here, the file is for another machine
                raise CommbenchError(f"{file_nproc(spec)}={spec.nproc} is invalid: allowed 1..{limit} on "
                                     f"{dry_run_backend(requested)} ({why}); --world-size plans for another machine")
        doc = dry_run_document(spec, world, dry_run_backend(requested))
        if world_size is None and (note := world_note(spec, nproc)):   # what a launch here says (once it plans)
            err_console.print(note, highlight=False, markup=False, soft_wrap=True)
        skipped = dry_run_output(output, resume, spec, world, doc["backend"], file) if output is not None else 0
        if resume and output is not None and world_size is None and skipped < doc["num_points_total"]:
            refuse_another_setup(output, doc["backend"], world)
        if resume and output is not None:
            doc["resume"] = {"out": output, "num_points_recorded": skipped,
                             "num_points_to_measure": doc["num_points_total"] - skipped}
        if as_json:
            print_json(doc, default=str)
            return
        print_dry_run(doc)
        return
    if as_json:
        raise CommbenchError("--json applies to --dry-run (a launch writes its records as JSONL to -O/--out)")
    if world_size is not None:
        raise CommbenchError("--world-size only applies to --dry-run: a launch's world size is its number of ranks")
    resolved = resolve_backend(requested) if backend is not None else file_backend(spec)
    output = default_output(spec.name) if output is None else output
    launched = detect_rank_env()
    if launched is not None and launched.launcher != "local":
        if nproc is not None and nproc != launched.world_size:
            raise CommbenchError(f"--nproc={nproc} conflicts with the {launched.launcher} launch of "
                                 f"{launched.world_size} ranks: omit --nproc under a launcher")
        if nproc is None and spec.nproc is not None and spec.nproc != launched.world_size and launched.rank == 0:
            err_console.print(f"note: {file_nproc(spec)}={spec.nproc} does not apply under the {launched.launcher} "
                              f"launch of {launched.world_size} ranks: measuring {launched.world_size} ranks",
                              highlight=False, markup=False, soft_wrap=True)
    local_nproc = None if launched is not None and launched.launcher != "local" else (nproc if nproc is not None else spec.nproc)
    if local_nproc is not None:   # refused before any note (the file's nproc named as such, not as a --nproc)
        from commbench.comm.job import check_local_ranks
        check_local_ranks(local_nproc, resolved, option="--nproc" if nproc is not None else file_nproc(spec))
    writer = launched is None or launched.rank == 0
    with OutputLock(output, "--out") if writer else nullcontext():
        if has_records(output) and not resume and writer:
            raise CommbenchError(f"--out={output!r} already holds records: pass --resume to continue it, "
                                 f"or choose another -O/--out")
        if writer:
            repair_torn_tail(output)  # a line cut off mid-write goes (said), as bench -O does, before anything reads it
        if resume and writer:
            from commbench.comm.job import DEFAULT_NPROC

            world = launched.world_size if launched is not None else (DEFAULT_NPROC if local_nproc is None else local_nproc)
            check_resume(output, spec, world, resolved, file)
            # under torchrun/srun/mpirun the other ranks wait for this one at the rendezvous: only own ranks are spared
            if launched is None and not spec.tuning and finished_on_resume(spec, output, world, resolved):
                return
        if writer:
            from commbench.comm.job import DEFAULT_NPROC

            planned_world = launched.world_size if launched is not None else (local_nproc or DEFAULT_NPROC)
            notes = size_notes(spec, planned_world)   # an entry the world cannot run: refused here, in one line
            if launched is None and (note := world_note(spec, nproc)):
                err_console.print(note, highlight=False, markup=False, soft_wrap=True)
            for note in notes:
                err_console.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
        job = SweepJob(sweep=spec, backend=resolved, output_path=output, resume=resume, argv=tuple(sys.argv))
        again = resume_command(file, output, local_nproc, launched.launcher if launched is not None else None)
        if spec.tuning:
            run_sweep_axes(job, local_nproc, again)
            return
        outcomes, (ok_before, failed_before) = run_with_fresh_ranks(job, spec, local_nproc, resolved,
                                                                    lambda: go_on_text(output, again))
    outcome = outcomes.get(0)
    if outcome is None:  # a non-zero rank under a launcher: rank 0 reports, except that its sweep stopped
        mine = next(iter(outcomes.values()), None)
        if mine is not None and mine.stopped:
            raise fail(f"rank {launched.rank}: sweep stopped: {mine.stopped}; rank 0 keeps what was measured",
                       exit_code=1)
        return
    if outcome.num_ok + outcome.num_failed + ok_before + failed_before == 0 and outcome.num_skipped:
        print_nothing_to_do(outcome.num_planned, output, outcome.earlier)
        return
    num_failed = outcome.num_failed + failed_before
    summary = (f"{outcome.num_ok + ok_before} point(s) measured, {num_failed} failed, "
               f"{outcome.num_skipped - ok_before - failed_before} skipped "
               f"(already in the file); records in {output}")
    earlier = f"; {earlier_text(outcome.earlier, output)}" if outcome.earlier else ""
    if outcome.stopped:
        go_on = go_on_text(output, again).replace("continue with:", "Continue with:", 1)
        raise fail(f"sweep stopped: {outcome.stopped}. {summary}{earlier}. {go_on}", exit_code=1)
    if num_failed:
        raise fail(f"{summary} (failed points are recorded with their error){earlier}", exit_code=1)
    if outcome.num_wrong:
        raise fail(f"{outcome.num_wrong} wrong element(s) in the data checks; {summary}{earlier}", exit_code=1)
    if earlier:
        raise fail(f"{summary}{earlier}", exit_code=1)
    console.print(styled("[green]done[/]: {}", summary), highlight=False)
    from commbench.costmodel.fit_readiness import undetermined_bandwidth_notes

    for line in undetermined_bandwidth_notes(output, larger="sizes in the sweep file",
                                             larger_moe="tokens_per_rank in the sweep file"):  # the file is the sweep's
        err_console.print(f"note: {line}", highlight=False, markup=False, soft_wrap=True)
