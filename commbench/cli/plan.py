"""`commbench plan`: predict one training step of one parallel layout (all figures predicted)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from commbench.cli.base import command, console, print_json
from commbench.results.render import styled
from commbench.limits import DEFAULT_MEM_HEADROOM, MAX_GPUS, MAX_MOE_IMBALANCE  # noqa: F401 (tune and tests read them here)
from commbench.errors import CommbenchError, invalid
from commbench.planner import check_layout, load_model, parse_layout
from commbench.planner.emit.torchtitan import torchtitan_version_key
from commbench.planner.layout.precision import DEFAULT_HELP, check_precision, default_precision
from commbench.planner.search.pinned_gap import (defaults_line, defaults_taken, input_defaults, versus_best,
                                                 versus_best_lines)
from commbench.results.tables import Col, print_table

if TYPE_CHECKING:
    from commbench.planner.models.spec import ModelSpec

COMM_ROWS = (("TP", "tp"), ("EP all-to-all", "ep"), ("ETP all-gather + reduce-scatter", "etp"), ("CP ring", "cp"), ("PP send/recv", "pp"),
             ("DP dense grad RS", "dp_dense_rs"), ("DP dense param AG", "dp_dense_ag"),
             ("DP expert grad RS", "dp_expert_rs"), ("DP expert param AG", "dp_expert_ag"))
def _zoo() -> str:
    from commbench.planner.models.zoo import model_names
    return ", ".join(model_names())


def _layout_keys() -> str:
    """Every --layout key with its values, spaced so help wraps it instead of cutting it."""
    from commbench.planner.layout.graph_scope import MODULES, WHOLE_LAYER_NAME
    from commbench.planner.layout.spec import BOOL_FIELDS, CODE_FIELDS, INT_FIELDS
    codes = "; ".join(f"{k} ({' | '.join(v)}{', as --precision' if k == 'precision' else ''})"
                      for k, v in CODE_FIELDS.items())
    return (f"integers {', '.join(INT_FIELDS)}; {codes}; "
            f"cuda_graph_scope (with cuda_graph=layer: {WHOLE_LAYER_NAME} for the whole layer, not for MoE models under "
            "Megatron (dropless MoE is uncapturable), or modules joined "
            f"by + from {', '.join(MODULES)}; default: the recipes' scope for the model); "
            f"true/false {', '.join(BOOL_FIELDS)}; "
            "0 or more cpu_offload_layers (layers whose activations go to host memory; needs pp=1; not for hybrid "
            "(Mamba) models under Megatron, whose MambaStack offloads nothing; searched "
            "for dense FSDP layouts where the --software release's recipes offload on the GPU) and "
            "recompute_layers (with recompute=full, layers of each model chunk recomputed; 0 = all); "
            "fused_mlp_offload_min (a 26.08 recipe's offload of the fused grouped MLP's tensors of at least that many "
            "elements; 0, as no planned launch runs it)")


LAYOUT_KEYS = _layout_keys()
MODEL_HELP = f"zoo model ({_zoo()}), a name from --model-file, or hf:PATH (a Hugging Face config.json or a folder holding one)"
LAYOUT_HELP = (f"key=value pairs, comma-separated, e.g. tp=1,pp=2,vp=8,ep=32,mbs=1. Keys: {LAYOUT_KEYS}. Naming "
               "tp, pp, vp, ep and mbs evaluates that one layout (and shows the best, its rank and every default "
               "taken); a subset (or none) pins those and searches the rest.")
MEM_ROWS = ("weights", "grads", "optimizer", "activations", "reserve")


def _system(name: str, num_gpus: int, gpu: str | None = None, warnings: list[str] | None = None):
    """The fabric to plan on; a fabric measured without a GPU (fit without --system, tune on CPU)
    needs `--gpu` to say whose compute and memory to plan with. A profile older than the results it was fitted from
    is warned about, and its lines appended to `warnings` as plan.json's assumptions word them."""
    import dataclasses

    from commbench.costmodel import load_fabric, load_preset, preset_names
    from commbench.data.reference import gpu_names, gpu_spec
    from commbench.files import refuse_empty_inputs
    refuse_empty_inputs(("--system", name, "a preset or a fabric .json from `commbench fit`"))
    if name.endswith(".json"):
        fabric = load_fabric(name).scaled(num_gpus=num_gpus)
        if fabric.gpu is None and gpu is None:
            raise CommbenchError(f"--system={name!r} names no GPU (a fabric fitted without --system, e.g. by "
                                 f"`commbench tune` or `fit` on CPU ranks): pass --gpu NAME ({', '.join(gpu_names())}) "
                                 f"or fit with --system PRESET")
        if gpu is not None and fabric.gpu is not None and fabric.gpu.name != gpu.lower():
            raise invalid("--gpu", gpu, f"only for a fabric without a GPU; {name} already names {fabric.gpu.name}")
        from commbench.cli.base import profile_older_than_results
        age = profile_older_than_results(name)   # a fitted profile older than the results it was fitted from
        if warnings is not None:   # the plan made on it says so too (plan.json's assumptions)
            warnings += [f"WARNING: fabric profile {name}: {line}" for line in age.lines]
        return fabric if gpu is None else dataclasses.replace(fabric, gpu=_gpu_option(gpu, gpu_spec, gpu_names))
    if name not in preset_names():
        raise invalid("--system", name, f"a preset ({', '.join(preset_names())}) or a fabric .json from `commbench fit`")
    if gpu is not None:
        raise invalid("--gpu", gpu, f"only for a fabric .json without a GPU; preset {name} names its GPU")
    return load_preset(name, num_gpus=num_gpus)


# plan's and tune's --torchtitan-version (one text)
TORCHTITAN_VERSION_HELP = ("TorchTitan release the TorchTitan emitter targets: 0.3 or 0.3.0 (--module/--config + "
                           "--section.option overrides), 0.2 or 0.2.2 (TOML)")


def resolve_precision(precision: str | None, pins: dict, gpu, *, model=None, framework: str = "megatron",
                      torchtitan_version: str = "0.3") -> str:
    """--precision (or a pinned precision=), checked against the GPU; default: the GPU's best recipe one that
    `framework` trains `model` in whole (layout/precision.default_precision: TorchTitan 0.3.0 cannot train gpt-oss's
    experts in MXFP8, so its Blackwell default is fp8), said in one note where the GPU's best is passed over."""
    if "precision" in pins:
        pinned = check_precision(str(pins.pop("precision")), gpu, "--layout precision")
        if precision is not None and precision.lower() != pinned:
            raise invalid("--precision", precision, f"must equal the pinned precision={pinned} (or leave one out)")
        return pinned
    if precision is not None:
        return check_precision(precision, gpu)
    chosen, passed_over = default_precision(gpu, model=model, framework=framework, torchtitan_version=torchtitan_version)
    if passed_over:
        from commbench.cli.base import err_console
        err_console.print(f"note: --precision not given: {chosen}, not {passed_over}", highlight=False, markup=False,
                          soft_wrap=True)
    return chosen


# plan's and tune's --framework (one text; the rules: planner/search/frameworks.py, TITAN_ETP for etp)
FRAMEWORK_HELP = ("megatron (Megatron-LM core_v0.16.1) or torchtitan (0.3.0): search only the layouts and features that "
                  "framework runs (TorchTitan: CUDA graphs only with pp=1 and ep=1, etp=tp at ep=1 and 1 with EP, "
                  "all-to-all EP, FSDP, its configs' activation checkpointing) and charge what its emitted configuration "
                  "runs")
GBS_HELP = ("global batch size in sequences (search). Default: the global batch of the --software release's "
            "Megatron-Bridge recipe for this model, GPU, precision and GPU count; without one, 16 per GPU (the median "
            "of those recipes; 128 on 8 GPUs, 4096 on 256); the plan says which it took")


def resolve_gbs(gbs: int | None, pins: dict, *, model: str | ModelSpec, gpu: str | None, precision: str,
                num_gpus: int, software: str | None) -> tuple[int, str | None]:
    """--gbs (or a pinned gbs=), the one global batch size, and None; without either, recipes.default_gbs and the
    line saying where that default comes from (4096 on any GPU count planned Qwen3-8B on 8 H100 at a predicted 133 s step)."""
    if "gbs" in pins:
        pinned = int(pins.pop("gbs"))
        if gbs is not None and gbs != pinned:
            raise invalid("--gbs", gbs, f"must equal the pinned gbs={pinned} (or leave one out)")
        return pinned, None
    if gbs is not None:
        return gbs, None
    from commbench.planner.layout.recipe_model import recipe_model
    from commbench.planner.layout.recipes import default_gbs
    if isinstance(model, str):   # a zoo name
        return default_gbs(software, model, gpu, precision, num_gpus)
    # a model read elsewhere (hf:PATH) reads the recipe of the zoo model it is (recipe_model), and the note says so
    return default_gbs(software, recipe_model(model), gpu, precision, num_gpus, given_as=model.name)


def _gpu_option(gpu: str, gpu_spec, gpu_names):
    if gpu.lower() not in gpu_names():
        raise invalid("--gpu", gpu, f"one of {', '.join(gpu_names())}")
    return gpu_spec(gpu)


SOFTWARE_HELP = ("Megatron-Bridge / NeMo release (e.g. 25.11, 26.02): search only the features its performance "
                 "recipes use (full-iteration CUDA graphs, fused MoE kernels, EP overlap, HybridEP, MLA recompute). "
                 "Default: the newest release in commbench/data/recipes.json. A release it lacks (26.06.02, 26.10) "
                 "reads the newest one not newer than it, and the plan says so. A precision its megatron-core has no "
                 "flags for is refused (25.09: no nvfp4)")


# --seq-len, one definition and one check for `plan` and `tune` (tune printed '--seq-len to change' without one)
SeqLenOption = Annotated[Optional[int], typer.Option("--seq-len", help="sequence length (default: the model's)")]


def check_seq_len(seq_len: int | None) -> None:
    """--seq-len from 1 to MAX_SEQ_LEN tokens, or not given (larger overflowed the search's int64 arrays)."""
    from commbench.planner.emit.plan import MAX_SEQ_LEN

    if seq_len is not None and not 1 <= seq_len <= MAX_SEQ_LEN:
        raise invalid("--seq-len", seq_len, f"a sequence length in tokens from 1 to {MAX_SEQ_LEN:,}")


@command("plan", help="Predict one training step of a parallel layout: time breakdown, exposed communication, "
                      "memory per GPU (predicted, from the fabric cost model and calibrated efficiencies).")
def plan(
    model: Annotated[str, typer.Option(help=MODEL_HELP)],
    system: Annotated[str, typer.Option(help="system preset (e.g. gb300-nvl72) or a fabric .json")],
    gpus: Annotated[int, typer.Option(help="number of GPUs")],
    layout: Annotated[Optional[str], typer.Option(help=LAYOUT_HELP)] = None,
    precision: Annotated[Optional[str], typer.Option(help=DEFAULT_HELP)] = None,
    seq_len: SeqLenOption = None,
    model_file: Annotated[Optional[str], typer.Option(help="TOML file of \\[model.NAME] tables, laid out like the shipped models.toml")] = None,
    moe_imbalance: Annotated[float, typer.Option(help="busiest EP rank's tokens / mean (1 = balanced)")] = 1.0,
    moe_capacity_factor: Annotated[Optional[float], typer.Option(
        help="expert capacity / mean tokens, the padding full-iteration CUDA graphs need (default: --moe-imbalance)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the plan document as JSON instead of tables (the same as "
                                          "--emit json; refused with --emit megatron or torchtitan)")] = False,
    # --- layout search options (issue 9) ---
    gbs: Annotated[Optional[int], typer.Option(help=GBS_HELP)] = None,
    top: Annotated[int, typer.Option(help="layouts to show (search)")] = 10,
    emit: Annotated[Optional[str], typer.Option(help="print the plan (the chosen or the --layout one) as json, megatron or "
                                                "torchtitan (megatron and torchtitan: the launch alone, so not with --json)")] = None,
    out: Annotated[Optional[str], typer.Option("-O", "--out", help="folder for plan.json, megatron_args.txt, launch.env "
                                              "and the TorchTitan file (torchtitan_args.txt for 0.3, torchtitan.toml for 0.2)")] = None,
    torchtitan_version: Annotated[str, typer.Option(help=TORCHTITAN_VERSION_HELP)] = "0.3",
    mem_headroom: Annotated[float, typer.Option(help="fraction of HBM left free beyond the predicted total (search); the total holds the model's reserve of 4 GB + 5% of HBM; the default leaves every published layout the memory model prices searchable")] = DEFAULT_MEM_HEADROOM,
    calibration: Annotated[Optional[str], typer.Option(help="efficiency terms from `commbench calibrate -O` "
                                                       "(default: the shipped calibration); on a GPU the file's runs "
                                                       "do not include, its kernel terms are the shipped ones (said)")
                   ] = None,
    framework: Annotated[str, typer.Option(help=FRAMEWORK_HELP)] = "megatron",
    gpu: Annotated[Optional[str], typer.Option(help="GPU to plan with when --system is a fabric .json that names none "
                                           "(fitted without --system, or by `commbench tune`)")] = None,
    software: Annotated[Optional[str], typer.Option(help=SOFTWARE_HELP)] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace files in --out named like plan files even when "
                                        "commbench did not write them.")] = False,
    allow_unfit: Annotated[bool, typer.Option("--allow-unfit", help="with a full --layout predicted not to fit in HBM: "
                                              "still write --out's files and print --emit megatron/torchtitan (refused "
                                              "otherwise; the plan says it does not fit)")] = False,
) -> None:
    from commbench.planner.emit.plan import EMIT_KINDS
    if emit is not None and emit not in EMIT_KINDS:
        raise invalid("--emit", emit, f"one of {', '.join(EMIT_KINDS)}")
    if as_json and emit not in (None, "json"):   # both pick what stdout holds: the plan document or the launch
        raise invalid("--emit", emit, "only json with --json (the same document); --emit megatron or torchtitan prints "
                      "the launch instead of the plan document: give --json or --emit, not both")
    if not 1 <= gpus <= MAX_GPUS:
        raise invalid("--gpus", gpus, f"a GPU count from 1 to {MAX_GPUS:,}")
    if not 1 <= moe_imbalance <= MAX_MOE_IMBALANCE:
        raise invalid("--moe-imbalance", moe_imbalance, f"a number from 1 to {MAX_MOE_IMBALANCE:,} (the busiest rank "
                      "holds at most every token: the imbalance is at most the EP size)")
    if precision is not None:
        check_precision(precision, None)
    if gbs is not None and gbs < 1:
        raise invalid("--gbs", gbs, "a positive number")
    check_seq_len(seq_len)
    from commbench.files import refuse_empty_inputs, refuse_writing_inputs

    refuse_empty_inputs(("--model-file", model_file, "a models TOML file"),
                        ("--calibration", calibration, "a calibration file (commbench calibrate -O)"))
    if out is not None:
        from commbench.files import check_output_dir, refuse_empty_path

        from commbench.planner.emit.plan_files import PLAN_FILE_NAMES, check_plan_folder

        refuse_empty_path(out, "--out", "a folder")
        refuse_writing_inputs("--out", out, [Path(out) / name for name in PLAN_FILE_NAMES],
                              [model, model_file, system, calibration])
        check_output_dir(out, "--out")
        check_plan_folder(out, force=force)
    torchtitan_version = torchtitan_version_key(torchtitan_version)   # 0.3.0 / 0.2.2 too, as plan.json names them
    spec = load_model(model, model_file, release=software)   # an hf: refusal cites the release's megatron-core
    from commbench.planner.calibrate.fit import read_calibration_file
    from commbench.planner.step.terms import CALIBRATED
    cal_file = read_calibration_file(calibration) if calibration else None
    from commbench.planner.search.space import SearchRequest, best_for_pins, is_complete, parse_pins
    pins = parse_pins(layout)
    given = set(pins)
    complete = layout is not None and is_complete(pins)
    stale: list[str] = []   # a profile older than its results: in plan.json too, not only on the terminal
    fabric = _system(system, gpus, gpu, stale)
    precision_asked = precision is not None or "precision" in pins   # a refusal over the default says so
    precision = resolve_precision(precision, pins, fabric.gpu, model=spec, framework=framework,
                                  torchtitan_version=torchtitan_version)
    cal, other_gpu_terms = cal_file.for_gpu(fabric.gpu.name) if cal_file else (CALIBRATED, ())
    shipped_terms = cal_file.shipped_terms if cal_file else ()
    for line in cal_file.warnings(fabric.gpu.name) if cal_file else []:
        from commbench.cli.base import err_console
        err_console.print(f"warning: {line}", highlight=False, markup=False, soft_wrap=True)
    gbs, gbs_note = resolve_gbs(gbs, pins, model=spec, gpu=fabric.gpu.name if fabric.gpu else None,
                                precision=precision, num_gpus=gpus, software=software)
    from commbench.planner.layout.recipe_model import sequence_length
    seq_used, seq_note = sequence_length(spec, seq_len)   # the length planned at, and where a default came from
    if framework == "torchtitan" and torchtitan_version == "0.2":
        # the pins gain what a 0.2 TOML fixes, so the search proposes only what it can write (a later stage's facts:
        # the planner's search may not import its emitters)
        from commbench.planner.emit.torchtitan import titan_02_pins
        pins = titan_02_pins(spec, pins, precision)
    req = SearchRequest(model=spec, fabric=fabric, num_gpus=gpus,
                        gbs=gbs, precision=precision, precision_asked=precision_asked,
                        seq_len=seq_len, headroom_fraction=mem_headroom, moe_imbalance=moe_imbalance,
                        moe_capacity_factor=moe_capacity_factor,
                        pins=pins, calibration=cal, framework=framework, software=software,
                        torchtitan_version=torchtitan_version)
    spec = req.model   # as the release's Megatron-LM splits it (release_flags.release_model)
    _print_calibration_software(cal_file, req)
    if not complete:
        from commbench.cli.search_view import run_plan_search
        run_plan_search(req, system=system, top=top, emit=emit, out=out, as_json=as_json,
                        torchtitan_version=torchtitan_version, force=force, calibration_file=calibration,
                        calibration_shipped_terms=shipped_terms, gbs_note=gbs_note,
                        calibration_other_gpu_terms=other_gpu_terms, extra_assumptions=stale)
        return
    # One layout: the search's own candidates for it (cp=1, etp=tp unless given; flags not given
    # chosen as the search chooses them), so plan --layout and the search listing agree.
    req.pins.setdefault("cp", 1)
    req.pins.setdefault("etp", req.pins["tp"])
    lay = parse_layout(layout, gpus, precision=req.precision, gbs=req.gbs)
    if req.pins.get("fsdp") and not lay.fsdp:   # implied by the framework (TorchTitan HSDP: frameworks.framework_pins)
        import dataclasses
        lay = dataclasses.replace(lay, fsdp=True)
    check_layout(spec, lay, gpus, seq_len, given=given, framework=req.framework)
    fabric = req.fabric
    arr, bd = best_for_pins(req)
    lay = arr.layout(0)
    row = bd.row(0)
    # the layout fields not pinned, then the inputs not given (a search's document lists those too: search_view)
    versus = _versus_best(req, bd)
    from commbench.planner.search.frameworks import graph_fallback
    fallback = graph_fallback(req.framework, spec, req.software, req.gpu_name, req.precision, req.domain_size)
    taken = defaults_taken(lay, given | {"gbs", "precision"}, spec, req.framework, fallback, fits=bool(row["fits"])) \
        + input_defaults(req, gbs_note)
    from commbench.planner.emit.pinned import UNFIT_OPTION, unfit_line
    unfit = unfit_line(row)
    launch_asked = out or emit in ("megatron", "torchtitan")
    refusal = None
    if unfit and launch_asked and not allow_unfit:   # no launch files as if launchable: the plan still printed, then this
        asked = " and ".join(x for x in ((f"--out {out}" if out else ""), (f"--emit {emit}" if emit in (
            "megatron", "torchtitan") else "")) if x)
        refusal = f"{asked} refused: {unfit}; change the layout, or add {UNFIT_OPTION} to write it anyway"
        out, emit = None, (emit if emit == "json" else None)
    if unfit and emit in ("megatron", "torchtitan"):   # stdout holds the launch: the warning goes to stderr (a
        # document, --json / --emit json, says it itself: predicted.fits, its first assumption)
        from commbench.cli.base import err_console
        err_console.print(f"WARNING: {unfit}", highlight=False, markup=False, soft_wrap=True)
    if as_json or out or emit:
        from commbench.cli.search_view import flex_backend_for
        from commbench.planner.emit.plan_files import write_plan_files
        from commbench.planner.emit.pinned import pinned_plan_document
        doc = pinned_plan_document(req, lay, row, system=system, flex_backend=flex_backend_for(fabric, req.software),
                                   torchtitan_version=torchtitan_version, calibration_file=calibration,
                                   calibration_shipped_terms=shipped_terms, calibration_other_gpu_terms=other_gpu_terms)
        doc["versus_best"], doc["defaults_taken"] = versus, taken
        doc["assumptions"] += stale
        from commbench.planner.emit.plan import check_emit
        check_emit(doc, emit)   # a refused launch asked for: one line, before any file is written
        written = write_plan_files(doc, out, force=force) if out else []
        if as_json or emit == "json":
            from commbench.cli.search_view import written_paths
            print_json(doc | written_paths(out, written), default=float)
            if refusal:
                raise CommbenchError(refusal)
            return
        if emit in ("megatron", "torchtitan"):
            from commbench.planner.emit.plan import megatron_launch_text, torchtitan_emit_text
            from commbench.cli.search_view import print_launch_notes
            text = (megatron_launch_text(doc["megatron"]) if emit == "megatron"
                    else torchtitan_emit_text(doc["torchtitan"], out=out))
            console.print(text, highlight=False, markup=False, soft_wrap=True)
            from commbench.cli.search_view import print_written
            print_launch_notes(doc[emit])
            print_written(out, written, stdout_is_output=True)
            return
    step = row["step_s"]
    rows = [["compute (GEMM + attention + memory-bound + overhead + recompute + native loss)",
             f"{row['compute_s']:.3f}", f"{row['compute_s']:.3f}", f"{100 * row['compute_s'] / step:.1f}"]]
    for label, key in COMM_ROWS:
        total, exposed = row[f"{key}_total_s"], row[f"{key}_exposed_s"]
        if total > 0:
            rows.append([label, f"{total:.3f}", f"{exposed:.3f}", f"{100 * exposed / step:.1f}"])
    rows += [["pipeline bubble", "", f"{row['bubble_s']:.3f}", f"{100 * row['bubble_s'] / step:.1f}"],
             ["optimizer step", "", f"{row['optimizer_s']:.3f}", f"{100 * row['optimizer_s'] / step:.1f}"],
             ["[bold]step[/]", "", f"[bold]{step:.3f}[/]", "100.0"]]
    print_table(console, f"predicted step: {spec.name} on {gpus} x {fabric.gpu.name} ({system}), {lay.precision}, "
                         f"seq_len {seq_used}{' (default)' if seq_note else ''}",
                [Col(name="term", numeric=False), Col(name="total (s)"), Col(name="exposed (s)"), Col(name="% of step")], rows)
    from commbench.planner.search.frameworks import flops_count_name
    console.print(f"tokens/s/GPU {row['tokens_per_s_per_gpu']:,.0f}   model TFLOP/s/GPU "
                  f"{row['model_tflops_per_gpu']:,.0f} ({flops_count_name(req.framework, req.torchtitan_version)})   "
                  f"MFU {100 * row['mfu']:.1f}% of {row['peak_tflops']:,.0f} "
                  f"TFLOP/s ({lay.precision} dense peak)   micro-batches {row['num_microbatches']}   (predicted)")
    if unfit:   # beside the headline: the figures above are of a layout that does not fit
        console.print(styled("[bold red]WARNING[/]: {}", unfit), highlight=False)
    verdict = "fits" if row["fits"] else "[red]does not fit[/]"
    mem_rows = [[kind, f"{row[f'mem_{kind}_bytes'] / 1e9:.1f}"] for kind in MEM_ROWS]
    if row["mem_optimizer_step_bytes"] > row["mem_activations_bytes"]:   # the peak is the optimizer step's, not theirs
        mem_rows.insert(MEM_ROWS.index("activations") + 1,
                        ["optimizer step's fp32 gradient copy (held instead of the activations)",
                         f"{row['mem_optimizer_step_bytes'] / 1e9:.1f}"])
    mem_rows.append([f"[bold]total[/] of {row['mem_capacity_bytes'] / 1e9:.1f} ({verdict}; CUDA exposes "
                     f"{fabric.gpu.hbm_cuda_gib:g} GiB of the {fabric.gpu.name}'s {fabric.gpu.hbm_gb:g} GB)",
                     f"[bold]{row['mem_total_bytes'] / 1e9:.1f}[/]"])
    on_rank = f" on pipeline rank {row['mem_pipeline_rank']} (the one that holds the most)" if lay.pp > 1 else ""
    print_table(console, f"memory per GPU{on_rank} (predicted, GB = 1e9 B)",
                [Col(name="kind", numeric=False), Col(name="GB")], mem_rows)
    from commbench.planner.layout.split import choose_split, split_vocab, stage_weights
    from commbench.planner.models.counts import framework_model
    charged = framework_model(spec, req.framework)     # the layers the step model charged (TorchTitan: no MTP)
    vocab = split_vocab(charged, lay.tp, req.framework)   # the loss stage's rows, as the step model charged them
    split = choose_split(charged, lay.pp, lay.vp, vocab).summary(stage_weights(charged, vocab))
    flags = "" if split["method"] == "layout" else f" ({' '.join(split['megatron_args']) or 'no flag'})"
    console.print(f"layer split, {split['method']}: {split['layout']}{flags}; busiest pipeline rank "
                  f"x{split['imbalance']} the mean (charged)", highlight=False)
    from commbench.planner.calibrate.fit import framework_note
    from commbench.planner.emit.plan import efficiency_terms, fabric_lines
    from commbench.planner.layout.precision import checkpoint_note
    from commbench.planner.layout.recipe_model import recipe_model_line
    from commbench.planner.search.explain import software_line
    from commbench.planner.emit.plan import model_params_line
    from commbench.cli.search_view import flex_backend_for
    from commbench.planner.emit.rack_placement import hybridep_domains_line, rack_fill_line
    from commbench.planner.layout.placement import place
    placed = place(lay, gpus, int(fabric.domain_size))
    recipes_of = recipe_model_line(spec, req.software)   # hf:PATH reading a zoo model's recipes: whose, and why
    for line in (versus_best_lines(versus) if "gap_pct" in versus else [versus["unavailable"]]) + \
            [model_params_line(spec)] + \
            ([defaults_line(taken)] if taken else []) + ([gbs_note] if gbs_note else []) + \
            ([seq_note] if seq_note else []) + \
            ([recipes_of] if recipes_of else []) + [software_line(req)] + \
            [n for n in [checkpoint_note(spec, req.precision)] if n] + fabric_lines(fabric) + \
            [n for n in [rack_fill_line(placed, int(fabric.domain_size)),
                         hybridep_domains_line(placed, lay.dispatcher, flex_backend_for(fabric, req.software))] if n] + \
            ([efficiency_terms(calibration, shipped_terms, other_gpu_terms)] if calibration else []) + \
            ([note] if calibration and (note := framework_note(calibration, req.framework)) else []):
        console.print(line, highlight=False, markup=False)
    if out:   # the launches written: their notes reach the terminal, not only plan.json
        from commbench.cli.search_view import print_megatron_notes, print_torchtitan_section
        print_megatron_notes(doc)
        print_torchtitan_section(doc, written)
        console.print(styled("[green]plan[/] → {}: {}", out, ", ".join(written)), highlight=False)
    if refusal:
        raise CommbenchError(refusal)


def _versus_best(req, pinned_bd) -> dict:
    """The searched best (nothing pinned) against the pinned layout; why not, when the search finds none."""
    import dataclasses

    from commbench.planner.search.space import search
    try:
        result = search(dataclasses.replace(req, pins={}))
    except CommbenchError as exc:
        return {"unavailable": f"No searched layout to compare with: {exc}"}
    return versus_best(result, pinned_bd)


def _print_calibration_software(cal_file, req) -> None:
    """One note where the --calibration file's runs ran at another release or precision than the plan (or at a
    release it does not record): calibrate.fit.software_note; plan.json keeps it among its assumptions."""
    note = cal_file.software_note(req.software, req.precision) if cal_file else ""
    if note:
        from commbench.cli.base import err_console
        err_console.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
