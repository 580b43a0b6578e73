"""`commbench sweep FILE`: every point of a sweep file in one launch (resumable), or --dry-run."""

from __future__ import annotations

import datetime
import shlex
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from commbench.cli.base import command, console, err_console, fail
from commbench.errors import CommbenchError
from commbench.sweep import SweepJob, estimate_point_s, load_sweep, plan_sweep, run_sweep_rank
from commbench.sweep.plan import describe
from commbench.sweep.resume import has_records


def default_output(sweep_name: str) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return str(Path("results") / f"sweep-{sweep_name}-{stamp}.jsonl")


def resume_command(file: str, output: str, nproc: Optional[int]) -> str:
    parts = ["commbench", "sweep", file, "-o", output, "--resume"] + (["--nproc", str(nproc)] if nproc else [])
    return " ".join(shlex.quote(p) for p in parts)


def dry_run_backend(declared: str) -> str:
    if declared != "auto":
        return declared
    from commbench.comm.backends import backend_status

    return "nccl" if backend_status("nccl")[0] else "gloo"


def print_dry_run(sweep, world_size: int, backend: str) -> None:
    points = plan_sweep(sweep, world_size, backend=backend)
    table = Table(title=f"sweep {sweep.name}: {len(points)} point(s) on {world_size} rank(s), {backend} (dry run)",
                  title_justify="left")
    for name in ("#", "entry", "collective", "dtype", "size", "groups", "params", "est. time (s)"):
        table.add_column(name, justify="right" if name in ("#", "size", "est. time (s)") else "left")
    total_s = 0.0
    for number, point in enumerate(points, start=1):
        est_s = estimate_point_s(point, world_size, backend)
        total_s += est_s
        row = describe(point)
        table.add_row(str(number), row["entry"], row["collective"], row["dtype"], row["size"], row["groups"],
                      row["params"][:60], f"{est_s:.2f}")
    console.print(table)
    if sweep.description:
        console.print(sweep.description, highlight=False)
    console.print(f"valid: {len(sweep.entries)} entr(y/ies), {len(points)} point(s); estimated run time "
                  f"{total_s:.0f} s (a rough alpha-beta estimate for {backend}, not a measurement); nothing launched",
                  highlight=False)


def run_sweep_axes(job, nproc: Optional[int], again: str) -> None:
    """The sweep once per NCCL tuning combination, each in fresh processes, into one file."""
    from commbench.cli.nccl_tuner import print_combinations
    from commbench.comm.nccl_tuning import refuse_on_backend
    from commbench.sweep.tuned_sweep import run_tuned_sweep

    refuse_on_backend(job.backend, list(job.sweep.tuning))
    print_combinations(run_tuned_sweep(job, nproc=nproc), job.output_path, again)


@command("sweep", help="Run every point of a sweep file (TOML) in one launch; --dry-run checks and lists them.")
def sweep(
    file: Annotated[str, typer.Argument(help="Sweep file, e.g. sweeps/ci-small.toml.")],
    output: Annotated[Optional[str], typer.Option("-o", "--output", help="JSONL results file (default results/sweep-<name>-<time>.jsonl).")] = None,
    nproc: Annotated[Optional[int], typer.Option("--nproc", help="Local ranks to start (default: the file's [sweep] nproc, else 2). Omit under torchrun/srun/mpirun.")] = None,
    backend: Annotated[Optional[str], typer.Option("--backend", help="auto, nccl or gloo (default: the file's [sweep] backend).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Skip points already recorded in the output file; never measure one twice.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate, list the points with an estimated run time, launch nothing.")] = False,
    world_size: Annotated[Optional[int], typer.Option("--world-size", help="Ranks to plan for with --dry-run (default: the file's world_size, else nproc).")] = None,
    nccl_algo: Annotated[Optional[str], typer.Option("--nccl-algo", help="NCCL algorithms to force, a comma list (replaces the file's [sweep] nccl_algo): tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat, default. The whole sweep runs once per combination, NCCL's default first.")] = None,
    nccl_proto: Annotated[Optional[str], typer.Option("--nccl-proto", help="NCCL protocols to force: ll, ll128, simple, default (replaces [sweep] nccl_proto).")] = None,
    nccl_channels: Annotated[Optional[str], typer.Option("--nccl-channels", help="Channel counts to force, e.g. 4,8,16 (replaces [sweep] nccl_channels).")] = None,
) -> None:
    """Validate the whole file before anything launches; records are appended as each point finishes."""
    from commbench.comm.backends import resolve_backend
    from commbench.comm.job import run_job
    from commbench.comm.launch import detect_rank_env

    spec = load_sweep(file)
    if (nccl_algo, nccl_proto, nccl_channels) != (None, None, None):
        import dataclasses

        from commbench.comm.nccl_tuning import parse_axes

        spec = dataclasses.replace(spec, tuning=tuple(parse_axes(nccl_algo, nccl_proto, nccl_channels)))
    requested = backend or spec.backend
    if dry_run:
        world = world_size or spec.world_size or nproc or spec.nproc or 2
        print_dry_run(spec, world, dry_run_backend(requested))
        if spec.tuning:
            console.print(f"x {len(spec.tuning)} NCCL tuning combination(s), each in fresh processes: "
                          + ", ".join(c.label for c in spec.tuning), highlight=False)
        return
    if world_size is not None:
        raise CommbenchError("--world-size only applies to --dry-run: a launch's world size is its number of ranks")
    resolved = resolve_backend(requested)
    output = output or default_output(spec.name)
    launched = detect_rank_env()
    local_nproc = None if launched is not None and launched.launcher != "local" else (nproc or spec.nproc)
    if has_records(output) and not resume and (launched is None or launched.rank == 0):
        raise CommbenchError(f"--output={output!r} already holds records: pass --resume to continue it, "
                             f"or choose another -o")
    job = SweepJob(sweep=spec, backend=resolved, output_path=output, resume=resume, argv=tuple(sys.argv))
    again = resume_command(file, output, local_nproc)
    if spec.tuning:
        run_sweep_axes(job, local_nproc, again)
        return
    from torch.distributed.elastic.multiprocessing.api import SignalException  # Ctrl-C reaching the local launcher

    try:
        outcomes = run_job(run_sweep_rank, job, nproc=local_nproc, backend=resolved,
                           validate_world=lambda world: plan_sweep(spec, world, backend=resolved) and None,
                           output_path=output)
    except (KeyboardInterrupt, SignalException):
        err_console.print(f"interrupted: every finished point is in {output}; continue with:\n  {again}", highlight=False)
        raise typer.Exit(130) from None
    except CommbenchError as exc:
        raise CommbenchError(f"{exc}; continue with: {again}") from None
    outcome = outcomes.get(0)
    if outcome is None:  # a non-zero rank under a launcher: rank 0 reports
        return
    if outcome.num_ok + outcome.num_failed == 0 and outcome.num_skipped:
        console.print(f"[green]nothing to do[/]: all {outcome.num_planned} point(s) are already in {output}", highlight=False)
        return
    summary = (f"{outcome.num_ok} point(s) measured, {outcome.num_failed} failed, {outcome.num_skipped} skipped "
               f"(already in the file); records in {output}")
    if outcome.stopped:
        raise fail(f"sweep stopped: {outcome.stopped}. {summary}. Continue with: {again}", exit_code=1)
    if outcome.num_failed:
        raise fail(f"{summary} (failed points are recorded with their error)", exit_code=1)
    if outcome.num_wrong:
        raise fail(f"{outcome.num_wrong} wrong element(s) in the data checks; {summary}", exit_code=1)
    console.print(f"[green]done[/]: {summary}", highlight=False)
