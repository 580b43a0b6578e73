"""`commbench tune`: sweep + fit + plan with one progress display (plan figures are predicted)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from commbench.cli.base import command, console, err_console
from commbench.cli.plan import SOFTWARE_HELP
from commbench.errors import CommbenchError, invalid


@command("tune", help="Sweep the fabric, fit cost curves, and plan the best parallel layout in one command. "
                      "With no options: a small built-in gloo sweep on 2 local ranks, then a plan for DeepSeek-V3 "
                      "on 256 GB300 NVL72 GPUs (mxfp8, gbs 4096).")
def tune(
    sweep: Annotated[Optional[str], typer.Option(help="sweep file (TOML); default: a small built-in sweep")] = None,
    results: Annotated[Optional[str], typer.Option(help="skip the sweep: fit and plan from these JSONL results")] = None,
    model: Annotated[str, typer.Option(help="zoo model name")] = "deepseek-v3",
    system: Annotated[str, typer.Option(help="system preset to plan for")] = "gb300-nvl72",
    gpus: Annotated[int, typer.Option(help="GPUs to plan for")] = 256,
    gbs: Annotated[int, typer.Option(help="global batch size (sequences)")] = 4096,
    precision: Annotated[str, typer.Option(help="bf16, fp8, mxfp8 or nvfp4")] = "mxfp8",
    layout: Annotated[Optional[str], typer.Option(help="pins, key=value pairs as for `commbench plan`")] = None,
    nproc: Annotated[Optional[int], typer.Option(help="local ranks for the sweep (default: the sweep's nproc)")] = None,
    out: Annotated[str, typer.Option("-O", "--out", help="folder for the sweep results, fabric.json and the plan files")] = "results/tune",
    top: Annotated[int, typer.Option(help="layouts to show")] = 10,
    mem_headroom: Annotated[float, typer.Option(help="fraction of HBM left free beyond the predicted total")] = 0.05,
    calibration: Annotated[Optional[str], typer.Option(help="efficiency terms from `commbench calibrate -O` "
                                                       "(default: the shipped calibration)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the plan document as JSON (progress goes to stderr)")] = False,
    software: Annotated[Optional[str], typer.Option(help=SOFTWARE_HELP)] = None,
) -> None:
    from commbench.cli.search_view import run_plan_search
    from commbench.costmodel import preset_names
    from commbench.planner import load_model
    from commbench.planner.search.space import SearchRequest, parse_pins
    from commbench.workflows.tune import planning_fabric

    if system not in preset_names():
        raise invalid("--system", system, f"a preset: {', '.join(preset_names())}")
    from commbench.cli.plan import MAX_GPUS

    if not 1 <= gpus <= MAX_GPUS:
        raise invalid("--gpus", gpus, f"a GPU count from 1 to {MAX_GPUS:,}")
    spec = load_model(model)
    pins = parse_pins(layout)
    from commbench.planner.layout.recipes import check_pins_in_release, check_release, newest_release
    check_pins_in_release(pins, check_release(software) if software else newest_release())  # before the sweep
    from commbench.files import check_output_dir
    from commbench.planner.step.terms import CALIBRATED, load_calibration
    cal = load_calibration(calibration) if calibration else CALIBRATED
    folder = check_output_dir(out, "--out")
    with Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
                  console=err_console if as_json else console,
                  transient=False) as progress:
        if results is None:
            task = progress.add_task("1/3 sweep: starting ranks", total=1)
            results_path, num_points = _run_sweep(sweep, nproc, folder, progress, task)
            progress.update(task, completed=1, description=f"1/3 sweep: {num_points} point(s) → {results_path}")
        else:
            results_path = results
            progress.add_task(f"1/3 sweep: skipped, using {results}", total=1, completed=1)
        task = progress.add_task("2/3 fit", total=1)
        fabric, assumptions, fitted = planning_fabric([results_path], system, gpus)
        if fitted is not None:
            fitted.to_json(folder / "fabric.json")
        progress.update(task, completed=1, description=f"2/3 fit: {len(fitted.curves) if fitted else 0} measured "
                                                         f"curve(s) → {folder / 'fabric.json'}")
        task = progress.add_task("3/3 plan: searching layouts", total=1)
        req = SearchRequest(model=spec, fabric=fabric, num_gpus=gpus, gbs=gbs, precision=precision.lower(),
                            headroom_fraction=mem_headroom, pins=pins, calibration=cal, software=software)
        progress.update(task, completed=1, description="3/3 plan: done")
    if not as_json:
        for line in dict.fromkeys(assumptions):
            console.print(line, highlight=False, markup=False)
    run_plan_search(req, system=system, top=top, emit=None, out=str(folder), as_json=as_json,
                    extra_assumptions=list(dict.fromkeys(assumptions)))


def _run_sweep(sweep_file: str | None, nproc: int | None, folder: Path, progress, task) -> tuple[str, int]:
    from commbench.comm.backends import resolve_backend
    from commbench.comm.job import run_job
    from commbench.sweep import SweepJob, load_sweep, parse_sweep, plan_sweep
    from commbench.workflows.tune import BUILTIN_SWEEP

    spec = load_sweep(sweep_file) if sweep_file else parse_sweep(BUILTIN_SWEEP, "<built-in tune sweep>")
    backend = resolve_backend(spec.backend)
    output = str(folder / "tune-sweep.jsonl")
    Path(output).unlink(missing_ok=True)
    ranks = nproc or spec.nproc or 2
    progress.update(task, description=f"1/3 sweep: {spec.name} on {ranks} {backend} rank(s)")
    job = SweepJob(sweep=spec, backend=backend, output_path=output, argv=tuple(sys.argv), show_progress=False)
    outcomes = run_job(_sweep_rank, job, nproc=ranks, backend=backend,
                       validate_world=lambda world: plan_sweep(spec, world, backend=backend) and None,
                       output_path=output)
    outcome = outcomes.get(0)
    if outcome is not None and outcome.num_ok == 0:
        raise CommbenchError(f"the sweep measured nothing ({outcome.stopped or 'every point failed'}); see {output}")
    return output, (outcome.num_ok if outcome is not None else 0)


def _sweep_rank(rank_env, job):
    from commbench.sweep import run_sweep_rank
    return run_sweep_rank(rank_env, job)
