"""`commbench tune`: sweep + fit + plan with one progress display (plan figures are predicted)."""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from commbench.cli.base import command, console, err_console
from commbench.cli.plan import (FRAMEWORK_HELP, GBS_HELP, LAYOUT_KEYS, MODEL_HELP, SOFTWARE_HELP,
                               TORCHTITAN_VERSION_HELP, SeqLenOption)
from commbench.errors import CommbenchError, invalid
from commbench.limits import DEFAULT_MEM_HEADROOM
from commbench.planner.layout.precision import DEFAULT_HELP


@command("tune", help="Sweep the fabric, fit cost curves, and plan the best parallel layout in one command. "
                      "With no options: a small built-in sweep on 2 local ranks (NCCL where 2 CUDA GPUs are visible, "
                      "else gloo), then a plan for DeepSeek-V3 "
                      "on 256 GB300 NVL72 GPUs (gbs 4096, its Megatron-Bridge recipe's, in the GPU's default precision: mxfp8 on GB300).")
def tune(
    ctx: typer.Context,
    sweep: Annotated[Optional[str], typer.Option(help="sweep file (TOML); default: a small built-in sweep")] = None,
    results: Annotated[Optional[str], typer.Option(help="skip the sweep: fit and plan from these JSONL results")] = None,
    model: Annotated[str, typer.Option(help=MODEL_HELP)] = "deepseek-v3",
    model_file: Annotated[Optional[str], typer.Option(help="TOML file of \\[model.NAME] tables, laid out like the "
                                                           "shipped models.toml")] = None,
    system: Annotated[str, typer.Option(help="system preset to plan for")] = "gb300-nvl72",
    gpus: Annotated[int, typer.Option(help="GPUs to plan for")] = 256,
    gbs: Annotated[Optional[int], typer.Option(help=GBS_HELP + "; or the --layout gbs= pin")] = None,
    precision: Annotated[Optional[str], typer.Option(help=DEFAULT_HELP)] = None,
    seq_len: SeqLenOption = None,
    layout: Annotated[Optional[str], typer.Option(help=f"pins for the search, key=value pairs as for `commbench plan`. "
                                                       f"Keys: {LAYOUT_KEYS}")] = None,
    nproc: Annotated[Optional[int], typer.Option(help="local ranks for the sweep (default: the sweep's nproc)")] = None,
    out: Annotated[str, typer.Option("-O", "--out", help="folder for the sweep results, fabric.json and the plan files")] = "results/tune",
    top: Annotated[int, typer.Option(help="layouts to show")] = 10,
    mem_headroom: Annotated[float, typer.Option(help="fraction of HBM left free beyond the predicted total; the total holds the model's reserve of 4 GB + 5% of HBM; the default leaves every published layout the memory model prices searchable")] = DEFAULT_MEM_HEADROOM,
    calibration: Annotated[Optional[str], typer.Option(help="efficiency terms from `commbench calibrate -O` "
                                                       "(default: the shipped calibration); on a GPU the file's runs "
                                                       "do not include, its kernel terms are the shipped ones (said)")
                   ] = None,
    framework: Annotated[str, typer.Option(help=FRAMEWORK_HELP)] = "megatron",
    torchtitan_version: Annotated[str, typer.Option(help=TORCHTITAN_VERSION_HELP)] = "0.3",
    as_json: Annotated[bool, typer.Option("--json", help="print the plan document as JSON (progress goes to stderr)")] = False,
    force: Annotated[bool, typer.Option("--force", help="replace OUT/tune-sweep.jsonl, OUT/fabric.json, OUT/fabric-measured.json and the plan files even when another command (a sweep) or a person wrote them; with --results FILE, delete an OUT/tune-sweep.jsonl that is not FILE")] = False,
    software: Annotated[Optional[str], typer.Option(help=SOFTWARE_HELP)] = None,
    fit_dtype: Annotated[Optional[str], typer.Option("--fit-dtype", help="fit only this data type's points (as fit --dtype); where the results mix data types within a collective and this is not given, the fit takes bfloat16, else float32, and says so")] = None,
    fit_op: Annotated[Optional[str], typer.Option("--fit-op", help="fit only this reduction op's points (as fit --op): needed where the results mix reduction ops within a collective")] = None,
    leave_out_wrong: Annotated[bool, typer.Option("--leave-out-wrong", help="with --results: fit and plan although points failed their data check (#wrong > 0), leaving them out (said); without it such results are refused (exit 1): a path that returns wrong data is no fabric to plan on")] = False,
) -> None:
    from commbench.costmodel import preset_names
    from commbench.planner import load_model
    from commbench.planner.search.space import SearchRequest, parse_pins

    from commbench.files import refuse_empty_inputs, refuse_empty_path, refuse_writing_inputs
    from commbench.planner.emit.plan_files import PLAN_FILE_NAMES

    refuse_empty_inputs(("--sweep", sweep, "a sweep file (TOML)"), ("--results", results, "a results file"),
                        ("--model-file", model_file, "a models TOML file"),
                        ("--calibration", calibration, "a calibration file (commbench calibrate -O)"))
    refuse_empty_path(out, "--out", "a folder")
    written = ["fabric.json", "fabric-measured.json", *PLAN_FILE_NAMES,
               *(["tune-sweep.jsonl"] if results is None else [])]   # --results OUT/tune-sweep.jsonl: read, kept
    refuse_writing_inputs("--out", out, [Path(out) / name for name in written],
                          [sweep, results, model, model_file, calibration])
    if system not in preset_names():
        raise invalid("--system", system, f"a preset: {', '.join(preset_names())}")
    from commbench.cli.plan import MAX_GPUS

    if not 1 <= gpus <= MAX_GPUS:
        raise invalid("--gpus", gpus, f"a GPU count from 1 to {MAX_GPUS:,}")
    from commbench.cli.plan import check_seq_len
    check_seq_len(seq_len)
    spec = load_model(model, model_file, release=software)   # an hf: refusal cites the release's megatron-core
    pins = parse_pins(layout)
    from commbench.cli.plan import resolve_gbs, resolve_precision
    from commbench.costmodel import load_preset
    gpu = load_preset(system, num_gpus=gpus).gpu
    precision_asked = precision is not None or "precision" in pins   # a refusal over the default says so
    from commbench.planner.emit.torchtitan import titan_02_pins, torchtitan_version_key
    torchtitan_version = torchtitan_version_key(torchtitan_version)   # as plan takes it
    precision = resolve_precision(precision, pins, gpu, model=spec, framework=framework,
                                  torchtitan_version=torchtitan_version)
    gbs, gbs_note = resolve_gbs(gbs, pins, model=spec, gpu=gpu.name, precision=precision.lower(), num_gpus=gpus,
                                software=software)
    from commbench.planner.layout.recipes import (check_pins_in_release, check_precision_in_release, check_release,
                                                  newest_release)
    release = check_release(software) if software is not None else newest_release()
    from commbench.planner.search.frameworks import check_framework, framework_pins
    if check_framework(framework) == "torchtitan" and torchtitan_version == "0.2":   # what a 0.2 TOML fixes (plan)
        pins = titan_02_pins(spec, pins, precision.lower())
    framework_pins(check_framework(framework), spec, pins, release=release,  # refuse before the sweep, not after it
                   torchtitan_version=torchtitan_version)
    check_precision_in_release(precision, release, software)   # before the sweep
    if check_framework(framework) == "megatron":   # what the release's Megatron-LM cannot build, before the sweep
        from commbench.planner.layout.release_flags import check_model_in_release, hybrid_pp_refusal
        check_model_in_release(spec, release, software)
        refusal = hybrid_pp_refusal(spec, release, int(pins.get("pp", 1) or 1))   # an uneven hybrid split, before
        if refusal:
            raise CommbenchError(refusal)
    check_pins_in_release(pins, release, system,
                          precision.lower(), int(load_preset(system, num_gpus=gpus).domain_size),
                          framework=check_framework(framework))  # before the sweep
    if check_framework(framework) == "megatron":   # a pin whose flags the release cannot parse, before the sweep
        from commbench.planner.layout.release_flags import release_pin_flags_refusal
        refusal = release_pin_flags_refusal(spec, release, pins, int(load_preset(system, num_gpus=gpus).domain_size))
        if refusal:
            raise CommbenchError(refusal)
    from commbench.files import check_output_dir
    from commbench.planner.calibrate.fit import read_calibration_file
    from commbench.planner.step.terms import CALIBRATED
    cal_file = read_calibration_file(calibration) if calibration else None
    gpu_name = load_preset(system, num_gpus=gpus).gpu.name
    cal, other_gpu_terms = cal_file.for_gpu(gpu_name) if cal_file else (CALIBRATED, ())
    for line in cal_file.warnings(gpu_name) if cal_file else []:
        from commbench.cli.base import err_console
        err_console.print(f"warning: {line}", highlight=False, markup=False, soft_wrap=True)
    req = SearchRequest(model=spec, fabric=None, num_gpus=gpus, gbs=gbs, precision=precision.lower(),
                        precision_asked=precision_asked, seq_len=seq_len,
                        headroom_fraction=mem_headroom, pins=pins, calibration=cal, framework=framework,
                        software=software, torchtitan_version=torchtitan_version)
    from commbench.cli.plan import _print_calibration_software
    _print_calibration_software(cal_file, req)
    state = TuneState(plan_options=plan_options_given(ctx))
    launched = outside_launch()
    if launched is not None and launched.rank != 0:
        state.other_rank, state.out = f"rank {launched.rank} of the {launched.launcher} launch", out
    with interrupt_says_what_was_written(state):
        _check_every_stage(sweep, results, nproc, system, req, top, fit_dtype, fit_op, launched=launched,
                           leave_out_wrong=leave_out_wrong,
                           plan_instead=shlex.join(["commbench", "plan", "--model", model, "--system", system,
                                                    "--gpus", str(gpus)]))
        if launched is not None and launched.rank != 0:
            # one rank of torchrun/srun/mpirun or `commbench emulate`: it measures the sweep's points with rank 0,
            # which alone claims and writes OUT's files, fits and plans (as bench's and sweep's other ranks write
            # nothing); every rank claiming them failed 'in use by PID <its sibling rank>'
            if results is None:
                _run_sweep(sweep, nproc, Path(out), None, None, launched=launched)
            return
        made = _folders_to_make(Path(out))
        folder = check_output_dir(out, "--out")   # made only once every option is known good
        with contextlib.ExitStack() as held:
            held.callback(_remove_if_left_empty, made)   # a run refused or failed before writing leaves no folder
            state.folder, state.results = folder, Path(results) if results else folder / "tune-sweep.jsonl"
            state.measuring, state.stage = results is None, "claimed"   # the file's points are counted as they are
            locks = _claim(folder, measure=results is None, force=force, results=results)
            for lock in locks:
                held.enter_context(lock)
            _tune_in(folder, sweep, results, nproc, system, gpus, req, top, as_json, force, calibration,
                     cal_file.shipped_terms if cal_file else (), gbs_note, state, other_gpu_terms,
                     leave_out_wrong=leave_out_wrong, fit_dtype=fit_dtype, fit_op=fit_op, launched=launched)


def _folders_to_make(folder: Path) -> list[Path]:
    """The folders check_output_dir will create for `folder` (it and its missing parents), deepest first."""
    missing = []
    for path in (folder.absolute(), *folder.absolute().parents):
        if path.exists():
            break
        missing.append(path)
    return missing


def _remove_if_left_empty(made: list[Path]) -> None:
    """Remove the folders this run created (deepest first) that are still empty: nothing was written there."""
    for path in made:
        try:
            path.rmdir()
        except OSError:   # something was written there (or it went): kept
            return


def outside_launch():
    """The launch (torchrun, srun, mpirun, `commbench emulate`) this process is one rank of, or None when tune starts
    its own ranks (comm/job.py run_job's rule)."""
    from commbench.comm.launch import detect_rank_env

    rank_env = detect_rank_env()
    return None if rank_env is None or rank_env.launcher == "local" else rank_env


@dataclasses.dataclass
class TuneState:
    """How far tune got, for the line an interrupt prints (interrupted_line): `stage` checks (nothing written),
    claimed (the output files claimed; with a sweep to run, OUT/tune-sweep.jsonl emptied and an earlier tune's
    fabric and plan files removed), sweep, fit, replaced (this run's fit replaced an earlier tune's files in
    `folder`), plan (fabric.json written: planning)."""

    stage: str = "checks"
    folder: Path | None = None
    results: Path | None = None   # tune-sweep.jsonl, or the --results file (read, never written)
    measuring: bool = True
    plan_options: tuple[str, ...] = ()   # plan_options_given: what the hint to go on from the points repeats
    other_rank: str | None = None   # "rank N of the torchrun launch": a rank other than 0, which writes nothing
    out: str = ""                   # the -O rank 0 writes (said by the other ranks)


# the options that say what the sweep measures and where it writes: a `tune --results` going on from its points
# (go_on_command) is given everything else the run was
SWEEP_OPTIONS = frozenset({"sweep", "nproc", "results", "out"})


def plan_options_given(ctx) -> tuple[str, ...]:
    """The options this `tune` was given (on the command line or from the environment, not defaults; `ctx` its
    typer.Context) as argv words, less SWEEP_OPTIONS: the model, system, GPUs, precision, layout, fit and output
    choices a `tune --results` that goes on from the sweep's points must repeat to plan what was asked (without them
    it planned tune's defaults, DeepSeek-V3 on 256 GB300, into the same folder)."""
    words: list[str] = []
    for param in ctx.command.params:
        if param.param_type_name != "option" or param.name in SWEEP_OPTIONS:
            continue
        source = ctx.get_parameter_source(param.name)
        if source is None or source.name == "DEFAULT":
            continue
        value = ctx.params.get(param.name)
        name = next((opt for opt in param.opts if opt.startswith("--")), param.opts[0])
        if param.is_flag:
            words += [name] if value else []
        elif value is not None:
            words += [name, str(value)]
    return tuple(words)


def go_on_command(results: Path | str, folder: Path | str, plan_options: tuple[str, ...], *,
                  leave_out_wrong: bool = False) -> str:
    """The one command that fits and plans from a sweep's points that tune did not get to fit (interrupted, or a
    point failed): `tune --results` on them into the same folder, with the run's own plan options."""
    words = ["commbench", "tune", "--results", str(results), "-O", str(folder), *plan_options]
    if leave_out_wrong and "--leave-out-wrong" not in words:
        words.append("--leave-out-wrong")
    return shlex.join(words)


def _points_in(path: Path) -> int:
    """Measurement records in a results file (a line each), 0 when it cannot be read."""
    try:
        with path.open("rb") as handle:
            return sum(1 for line in handle if b'"record_type":"measurement"' in line.replace(b" ", b""))
    except OSError:
        return 0


def interrupted_line(signal: str, state: TuneState) -> str:
    """What an interrupted tune kept, true at every stage: nothing before its files were claimed; else the measured
    points in the results file, the fabric files and the plan this run wrote, and how to go on from them. A rank
    other than 0 of an outside launch writes nothing and says so, leaving what was kept to rank 0's line."""
    head = f"interrupted ({signal})"
    if state.other_rank is not None:   # rank 0 alone claims and writes OUT: what was kept is its to say
        return f"{head}: {state.other_rank} stopped; rank 0 writes tune's files in {state.out} and says what it kept"
    if state.folder is None or state.stage == "checks":
        return f"{head} before tune wrote anything: nothing was written"
    folder, results = state.folder, state.results
    points = _points_in(results) if state.measuring else 0
    if not state.measuring:
        source = f"the results file {results} is unchanged (tune only reads it)"
    else:
        source = (f"{points} measured point(s) kept in {results}" if points else
                  f"no point measured ({results} {'holds none' if results.is_file() else 'was not written'})")
    if state.stage in ("claimed", "sweep", "fit"):
        kept = [name for name in ("fabric.json", "fabric-measured.json", "plan.json") if (folder / name).is_file()]
        earlier = (f"; the earlier {', '.join(kept)} in {folder} kept" if kept and not state.measuring else "")
        resume = (f" (to fit and plan from them: {go_on_command(results, folder, state.plan_options)})"
                  if points else "")
        return f"{head} before the fit was written: {source}; nothing fitted or planned{resume}{earlier}"
    fabric = [name for name in ("fabric.json", "fabric-measured.json") if (folder / name).is_file()]
    written = f"{', '.join(str(folder / n) for n in fabric)} written" if fabric else "no fabric written"
    if state.stage == "replaced":
        return f"{head} while writing the fit: {source}; {written}; no plan (the earlier tune's plan files were removed)"
    planned = "plan.json written" if (folder / "plan.json").is_file() else "no plan.json written (planning stopped)"
    return f"{head} while planning: {source}; {written}; {planned}"


@contextlib.contextmanager
def interrupt_says_what_was_written(state: TuneState):
    """A stop signal anywhere in tune ends in one line saying what was kept (interrupted_line), exit 130; the
    sweep's own line (run_job: the points kept) gets what was not fitted or planned."""
    from commbench.comm.stop_signals import signal_name
    from commbench.errors import Interrupted

    try:
        yield
    except Interrupted as exc:   # the sweep's ranks were stopped: "interrupted (SIG): N point(s) kept in PATH"
        raise Interrupted(interrupted_line(exc.signal, state), signal=exc.signal) from None
    except KeyboardInterrupt as exc:
        raise Interrupted(interrupted_line(signal_name(exc), state), signal=signal_name(exc)) from None


def _claim(folder: Path, *, measure: bool, force: bool, results: str | None = None) -> list:
    """Locks on the files tune writes in `folder` (another tune or sweep there is refused); an earlier
    sweep's results are not deleted unless --force (plan from them with --results). With --results `results`: an
    OUT/tune-sweep.jsonl that is not that file would sit beside a fit it is no part of, read as its measurements;
    one holding records is refused unless --force (measurements are remade from nothing in OUT), and is deleted
    with the earlier fit and plan once the fit succeeds (_remove_previous)."""
    from commbench.costmodel.fabric import PROFILE_FORMAT
    from commbench.files import OutputLock, claim_output
    from commbench.sweep.resume import has_records

    from commbench.planner.emit.plan_files import check_plan_folder

    check_plan_folder(folder, force=force)
    locks = []
    for name in ("fabric.json", "fabric-measured.json"):  # both before the sweep: refused after it, hours are lost
        try:
            locks.append(claim_output(folder / name, "--out", marker=PROFILE_FORMAT, what="fabric profile", force=force))
        except CommbenchError:
            for held in locks:
                held.release()
            raise
    if measure:
        results = folder / "tune-sweep.jsonl"
        lock = OutputLock(results, "--out")
        locks.append(lock)
        if has_records(results) and not force and not _written_by_tune(results):
            for held in locks:
                held.release()
            raise CommbenchError(f"--out={str(folder)!r} already holds a sweep's results ({results}): plan from them "
                                 f"with --results {results}, choose another --out, or pass --force to measure again")
        results.write_bytes(b"")
        _remove_previous(folder)  # the old plan's measurements are gone: so are the files made from them
    elif (sweep := _other_sweep(folder, results)) is not None:
        locks.append(OutputLock(sweep, "--out"))
        if has_records(sweep) and not force:
            for held in locks:
                held.release()
            raise CommbenchError(f"--out={str(folder)!r} holds another run's measurements ({sweep}), which a fit of "
                                 f"--results {results} would leave beside it as if they were its own: plan from them "
                                 f"with --results {sweep}, choose another --out, or pass --force to delete them")
    return locks


def _other_sweep(folder: Path, results: str | None) -> Path | None:
    """OUT/tune-sweep.jsonl where it exists and is not the --results file `results` (None: no --results)."""
    import os

    sweep = folder / "tune-sweep.jsonl"
    if results is None or not sweep.exists():
        return None
    try:
        return None if os.path.samefile(sweep, results) else sweep
    except OSError:
        return sweep


def _remove_previous(folder: Path, results: str | None = None) -> None:
    """Delete an earlier tune's fabric.json, fabric-measured.json and plan files in `folder` (those
    commbench wrote; the caller holds the fabric files' locks) once this run replaces them: an
    interrupted or failed run never leaves the old plan beside the new sweep or fit. With --results `results`, also
    an OUT/tune-sweep.jsonl that is not that file (_claim locked it, and refused one with records without --force)."""
    from commbench.costmodel.fabric import PROFILE_FORMAT
    from commbench.files import remove_if_written
    from commbench.planner.emit.plan_files import remove_plan_files

    remove_plan_files(folder)
    for name in ("fabric.json", "fabric-measured.json"):
        remove_if_written(folder / name, PROFILE_FORMAT)
    other = _other_sweep(folder, results)
    if other is not None:
        other.unlink()


def _written_by_tune(path: Path) -> bool:
    """Whether the results file's first header is an earlier `commbench tune` run's (re-running tune
    replaces its own sweep; a `sweep` someone wrote there is kept)."""
    import json

    try:
        with path.open("rb") as handle:
            header = json.loads(handle.readline(1 << 20))
    except (OSError, ValueError):
        return False
    argv = header.get("argv") if isinstance(header, dict) else None
    return isinstance(argv, list) and "tune" in argv[1:3]


def _tune_in(folder, sweep, results, nproc, system, gpus, req, top, as_json, force, calibration_file=None,
             calibration_shipped_terms: tuple[str, ...] = (), gbs_note: str | None = None,
             state: TuneState | None = None, calibration_other_gpu_terms: tuple[str, ...] = (),
             leave_out_wrong: bool = False, fit_dtype: str | None = None, fit_op: str | None = None,
             launched=None) -> None:
    from commbench.cli.search_view import run_plan_search
    from commbench.files import write_output
    from commbench.costmodel.fabric import PROFILE_FORMAT
    from commbench.costmodel.profile import located
    from commbench.workflows.tune import planning_fabric

    with Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
                  console=err_console if as_json else console,
                  transient=False) as progress:
        state = state if state is not None else TuneState()
        state.measuring = results is None
        if results is None:
            state.stage = "sweep"
            task = progress.add_task("1/3 sweep: starting ranks", total=1)
            results_path, num_points = _run_sweep(sweep, nproc, folder, progress, task, launched=launched,
                                                  plan_options=state.plan_options)
            progress.update(task, completed=1, description=f"1/3 sweep: {num_points} point(s) → {results_path}")
        else:
            results_path = results
            task = progress.add_task(f"1/3 sweep: skipped, using {results}", total=1)
            progress.update(task, completed=1)  # finished (a task added completed still shows its spinner)
        task = progress.add_task("2/3 fit", total=1)
        state.stage = "fit"
        fabric, assumptions, fitted = planning_fabric([results_path], system, gpus, leave_out_wrong=leave_out_wrong,
                                                        dtype=fit_dtype, op=fit_op)
        state.stage = "replaced"
        _remove_previous(folder, results)  # with --results: only once the fit has succeeded
        # fabric.json: what the plan used (measured curves where they cover a tier, the preset's elsewhere),
        # so `plan --system fabric.json` re-plans tune's result; the fit alone: fabric-measured.json
        planned_on = located(fabric, folder / "fabric.json")   # each results file also from the profile's folder
        write_output(folder / "fabric.json", planned_on.to_json() + "\n", "--out", marker=PROFILE_FORMAT,
                     what="fabric profile", claimed=True)
        if fitted is not None:
            measured = located(fitted, folder / "fabric-measured.json")
            write_output(folder / "fabric-measured.json", measured.to_json() + "\n", "--out", marker=PROFILE_FORMAT,
                         what="fabric profile", claimed=True)
        progress.update(task, completed=1, description=f"2/3 fit: {len(fitted.curves) if fitted else 0} measured "
                                                         f"curve(s) → {folder / 'fabric-measured.json'}; planned "
                                                         f"with {folder / 'fabric.json'}")
        state.stage = "plan"
        task = progress.add_task("3/3 plan: searching layouts", total=1)
        req = dataclasses.replace(req, fabric=fabric)
        progress.update(task, completed=1, description="3/3 plan: done")
    if not as_json:
        for line in dict.fromkeys(assumptions):
            console.print(line, highlight=False, markup=False)
    run_plan_search(req, system=system, top=top, emit=None, out=str(folder), as_json=as_json,
                    extra_assumptions=list(dict.fromkeys(assumptions)), force=force, calibration_file=calibration_file,
                    calibration_shipped_terms=calibration_shipped_terms, gbs_note=gbs_note,
                    calibration_other_gpu_terms=calibration_other_gpu_terms,
                    extra_inputs={"results_file": str(results_path)}, torchtitan_version=req.torchtitan_version)


def _check_every_stage(sweep_file: str | None, results: str | None, nproc: int | None, system: str, req,
                       top: int, fit_dtype: str | None = None, fit_op: str | None = None, launched=None,
                       plan_instead: str = "", leave_out_wrong: bool = False) -> None:
    """Every stage's inputs, before the first stage starts (one line, exit 2): the sweep plans on its ranks
    (`launched`: the outside launch's world; a --nproc other than it is refused) and measures the --fit-dtype and
    --fit-op asked for (the fit checks them against a --results file before it writes anything), or the results
    file reads, and the plan's search finds a layout on the preset's GPUs and domains (validity and memory do not
    depend on the measured curves the fit adds)."""
    import dataclasses

    from commbench.costmodel import load_preset
    from commbench.planner.search.space import search
    from commbench.planner import PRECISIONS
    if top < 1:
        raise invalid("--top", top, "a positive number of layouts")
    if req.precision not in PRECISIONS:
        raise invalid("--precision", req.precision, f"one of {', '.join(PRECISIONS)}")
    for option, value in (("--sweep", sweep_file), ("--nproc", nproc)):
        if results is not None and value is not None:  # it was ignored: the plan named no sweep of those
            raise invalid(option, value, "not with --results, which skips the sweep: give one or the other")
    if leave_out_wrong and results is None:   # it was ignored: the sweep tune runs ends at a point with wrong data
        raise CommbenchError("--leave-out-wrong applies only with --results: the sweep tune runs stops at the first "
                             "point that fails its data check, before the fit; give --results FILE to fit and plan "
                             "from measured results leaving wrong points out, or omit --leave-out-wrong")
    if results is None:
        from commbench.comm.backends import resolve_backend
        from commbench.sweep import load_sweep, parse_sweep, plan_sweep
        from commbench.workflows.tune import BUILTIN_SWEEP
        spec = load_sweep(sweep_file) if sweep_file else parse_sweep(BUILTIN_SWEEP, "<built-in tune sweep>")
        if launched is not None and nproc is not None and nproc != launched.world_size:   # run_job's check, first
            raise CommbenchError(f"--nproc={nproc} conflicts with the {launched.launcher} launch of "
                                 f"{launched.world_size} ranks: omit --nproc under a launcher")
        ranks = _sweep_ranks(spec, nproc, launched)
        backend = _sweep_backend(spec, sweep_file, nproc)[0]
        if ranks < 2:   # fit_all's rule: a curve is fitted from groups of >= 2 ranks; one rank ran the whole sweep
            _refuse_one_rank(ranks, spec, sweep_file, nproc, launched, plan_instead, backend)
        from commbench.comm.job import check_local_ranks
        if launched is None:  # run_job's check, before _claim empties the folder's earlier sweep and deletes its plan
            check_local_ranks(ranks, backend, option="--nproc" if nproc is not None else
                              f"{sweep_file or 'the built-in sweep'}: nproc", minimum=2)
        from commbench.workflows.tune import check_fit_choice
        check_fit_choice(plan_sweep(spec, ranks, backend=backend), f"sweep {sweep_file}" if sweep_file
                         else "the built-in sweep", fit_dtype, fit_op)
    else:
        from commbench.errors import read_user_file
        from commbench.files import refuse_being_written
        read_user_file(results, "results file")
        refuse_being_written(results, f"--results={results!r}", "plan from it")   # as fit and compare refuse it
    search(dataclasses.replace(req, fabric=load_preset(system, num_gpus=req.num_gpus), keep=1))


def _refuse_one_rank(ranks: int, spec, sweep_file: str | None, nproc: int | None, launched, plan_instead: str,
                     backend: str):
    """A sweep of fewer than 2 ranks fits no curve (a fit needs groups of >= 2 ranks): refused in one line naming
    where the count came from, with what to do instead (on one GPU: the built-in sweep on 2 gloo ranks, or a plan on
    the preset's numbers without a sweep, `plan_instead`)."""
    from commbench.cli.sweep import file_nproc

    why = "a fit needs groups of >= 2 ranks"
    instead = f"or plan on the preset's numbers without a sweep: {plan_instead}" if plan_instead else ""
    if launched is not None:
        raise CommbenchError(f"the {launched.launcher} launch of {ranks} rank is too small to tune: {why}; launch 2 "
                             f"or more{', ' + instead if instead else ''}")
    one_gpu = " (on a machine with one GPU leave --nproc out: the built-in sweep runs its 2 ranks on gloo)" \
        if sweep_file is None else ""
    option = "--nproc" if nproc is not None else file_nproc(spec)
    from commbench.comm.backends import max_local_ranks
    limit, limit_why = max_local_ranks(backend)   # the one range check_local_ranks states for too many
    allowed = f"allowed 2..{limit} on {backend} ({limit_why})" if limit >= 2 else "2 or more"
    raise invalid(option, ranks, f"{why}: {allowed}{one_gpu}{', ' + instead if instead else ''}")


def _sweep_ranks(spec, nproc: int | None, launched) -> int:
    """The sweep's ranks: the outside launch's world, else --nproc, the sweep file's nproc or 2."""
    return launched.world_size if launched is not None else (nproc if nproc is not None else spec.nproc or 2)


def _run_sweep(sweep_file: str | None, nproc: int | None, folder: Path, progress, task,
               launched=None, plan_options: tuple[str, ...] = ()) -> tuple[str, int]:
    """The sweep into folder/tune-sweep.jsonl (rank 0 writes it); `progress` None: a rank other than 0 of an
    outside launch, which measures and says nothing. Ranks that hang on a point or one killed from outside (kill -9,
    the OOM killer) record the point failed and fresh ranks measure the rest, as `commbench sweep`'s
    (cli.sweep.run_with_fresh_ranks); a point that failed ends tune before the fit (exit 1, as sweep's), saying how to
    fit and plan from what was measured (go_on_command)."""
    from commbench.cli.sweep import run_with_fresh_ranks
    from commbench.comm.local_ranks import RunFailed
    from commbench.sweep import SweepJob, load_sweep, parse_sweep
    from commbench.workflows.tune import BUILTIN_SWEEP

    spec = load_sweep(sweep_file) if sweep_file else parse_sweep(BUILTIN_SWEEP, "<built-in tune sweep>")
    backend, note = _sweep_backend(spec, sweep_file, nproc)
    if note and progress is not None:
        progress.console.print(f"note: {note}", highlight=False, markup=False)
    output = str(folder / "tune-sweep.jsonl")  # claimed (locked, empty) by _claim
    ranks = _sweep_ranks(spec, nproc, launched)
    if progress is not None:
        progress.update(task, description=f"1/3 sweep: {spec.name} on {ranks} {backend} rank(s)"
                        + (f" ({launched.launcher} launch)" if launched is not None else ""))

    def go_on(wrong: bool = False) -> str:
        return "nothing fitted or planned" + (
            f" (to plan from what it measured, the fit leaving those points out: "
            f"{go_on_command(output, folder, plan_options, leave_out_wrong=wrong)})" if _points_in(Path(output)) else "")

    job = SweepJob(sweep=spec, backend=backend, output_path=output, argv=tuple(sys.argv), show_progress=False)
    outcomes, (ok_before, failed_before) = run_with_fresh_ranks(job, spec, None if launched is not None else ranks,
                                                                backend, go_on)
    outcome = outcomes.get(0)
    if outcome is None:   # a rank other than 0 of an outside launch: rank 0 reports
        return output, 0
    num_ok, num_failed = outcome.num_ok + ok_before, outcome.num_failed + failed_before
    if num_ok == 0:
        raise CommbenchError(f"the sweep measured nothing ({outcome.stopped or 'every point failed'}); see {output}")
    if outcome.stopped or num_failed or outcome.num_wrong:
        # a failed run is not planned on as if whole (the fit would leave those points out): exit 1, as sweep's
        what = "; ".join(filter(None, (f"stopped: {outcome.stopped}" if outcome.stopped else "",
                                       f"{num_failed} of {outcome.num_planned} point(s) failed" if num_failed else "",
                                       f"{outcome.num_wrong} wrong element(s) in the data checks"
                                       if outcome.num_wrong else "")))
        raise RunFailed(f"the sweep did not measure every point correctly ({what}); records in {output}; "
                        f"{go_on(bool(outcome.num_wrong))}")
    return output, num_ok


def _sweep_backend(spec, sweep_file: str | None, nproc: int | None) -> tuple[str, str | None]:
    """The sweep's backend, and a note where the built-in sweep (no --sweep, no --nproc) runs on gloo because fewer
    CUDA GPUs are visible than its ranks: NCCL runs one rank per GPU (a one-GPU workstation was refused
    '--nproc=2 is invalid' though no --nproc was given)."""
    from commbench.cli.sweep import file_backend
    from commbench.comm.backends import max_local_ranks

    backend = file_backend(spec)   # a refusal names the file's [sweep] backend (tune has no --backend)
    ranks = nproc or spec.nproc or 2
    if sweep_file is None and nproc is None and backend == "nccl":
        gpus, _ = max_local_ranks("nccl")
        if gpus < ranks:
            return "gloo", (f"{gpus} CUDA GPU{'' if gpus == 1 else 's'} visible: the built-in sweep's {ranks} ranks run "
                            f"on gloo (CPU processes), as NCCL runs one rank per GPU")
    return backend, None
