"""A chosen layout in the forms frameworks take: plan.json, Megatron-LM arguments + launch.env, TorchTitan.

- Megatron-LM: megatron.py (arguments, the layer split's flags, launch environment).
- TorchTitan: torchtitan.py (0.3.x overrides by default; 0.2.x TOML with --torchtitan-version 0.2).
- plan.json is schema-versioned (`PLAN_FORMAT`, `PLAN_VERSION`); every figure in it is predicted. Version 2
  adds the "megatron" section (target, layer split, launch env) and per-emitter target versions
  ("emitters"); the "torchtitan" section names its version and holds either the launch or a refusal.
  Version 3: "top" and "pareto" entries hold the layout as an object ("layout", the fields of
  "layout" at the top level) with the display text beside it ("layout_text").
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict
from pathlib import Path
from typing import Any

from commbench.errors import CommbenchError, first_line, invalid, read_user_file
from commbench.planner.emit.megatron import (connections_notes, launch_connections, launch_env, launch_env_text,
                                             later_flags, megatron_args, megatron_script, megatron_target,
                                             parse_megatron_args, precision_notes, cross_entropy_note)
from commbench.planner.emit.megatron_arch import MEGATRON_LM_RELEASE, architecture_notes, positions_notes
from commbench.planner.emit.torchtitan import (DEFAULT_TORCHTITAN, TORCHTITAN_VERSIONS, torchtitan_args,
                                               torchtitan_plan, torchtitan_toml)
from commbench.typed_json import check_fields, non_finite_path
from commbench.planner.layout.precision import checkpoint_note
from commbench.planner.layout.spec import Layout, check_layout
from commbench.planner.models.architecture import architecture_from_json
from commbench.planner.models.counts import (FLOPS_COUNTS, framework_flops_per_token, megatron_vocab_padding_note,
                                             step_vocab)
from commbench.planner.models.spec import ModelSpec
from commbench.planner.layout.split import choose_split, pipe_pattern, split_vocab, stage_weights

__all__ = ["EMIT_KINDS", "PLAN_FORMAT", "PLAN_VERSION", "check_emit", "load_plan", "megatron_args",
           "megatron_launch_text", "megatron_section", "megatron_text",
           "parse_megatron_args", "plan_document", "torchtitan_args", "torchtitan_plan", "torchtitan_text",
           "torchtitan_toml", "plan_json_text", "write_plan"]

PLAN_FORMAT = "commbench-plan"
PLAN_VERSION = 3
READABLE_PLAN_VERSIONS = (1, 2, 3)  # the layout and model spec read the same in all
MAX_SEQ_LEN = 1 << 24  # tokens per sequence a plan may name: 16M, beyond any published context
EMIT_KINDS = ("json", "megatron", "torchtitan")


def release_core_note(release: str | None, args: list[str] | None = None, *, asked: bool = True,
                      later_flags: str = "", spelled: list[str] | None = None) -> list[str]:
    """Where the release runs another megatron-core than the one the arguments are checked against
    (megatron_target: Megatron-LM core_v0.16.1), a note naming both and the release (given with --software, or the
    default one: `asked`), and each flag of `args` that release's parse_args refuses (release_flags.refused_flags,
    from its own arguments.py: commbench/data/megatron-release-flags.json), saying the line will not parse there.
    `later_flags`: which of the arguments are the release's own (megatron.later_flags: gpt-oss's YaRN, a hybrid
    model's MTP pattern), which core_v0.16.1 has not; `spelled`: the options written in that release's own spelling (release_flags.spellings_used)."""
    from commbench.planner.layout.release_flags import TARGET_CORE, refused_flags, release_core

    core = release_core(release) if release is not None else None
    if core is None or core[1] == TARGET_CORE:
        return []
    ref, version = core
    which = (f"release {release} (--software)" if asked
             else f"release {release} (the default release; --software picks another)")
    later = f" but {later_flags}, which {MEGATRON_LM_RELEASE} has not" if later_flags else ""
    head = (f"the Megatron-LM arguments are {MEGATRON_LM_RELEASE}'s (megatron-core 0.16.1: what they are checked "
            f"against){later}{', but where that release spells an option otherwise' if spelled else ''}; {which} runs "
            f"megatron-core {version} (Megatron-LM {ref[:12]})"
            + (f", whose own spelling is written: {'; '.join(spelled)}" if spelled else ""))
    refused = refused_flags(list(args or []), release)
    if refused:
        return [f"{head}, whose parse_args refuses {len(refused)} of these flags, so the line will not parse in that "
                f"container: {'; '.join(refused)} (commbench/data/megatron-release-flags.json, read from its "
                "arguments.py); plan with a release that has them or change those flags by hand"]
    if args is None:
        return [f"{head}: its parse_args is not checked here (no Megatron arguments)"]
    return [f"{head}, whose parse_args takes every flag here (commbench/data/megatron-release-flags.json, read from "
            "its arguments.py); its validate_args may still differ from core_v0.16.1's"]


def rack_lines(placement, domain_size: int, layout: Layout | None = None, flex_backend: str | None = None) -> list[str]:
    """The rack placement priced and how a launch gets it, the groups that leave a domain, and what HybridEP groups
    across domains need (rack_placement.py)."""
    from commbench.planner.emit.rack_placement import groups_leaving_line, hybridep_domains_line, rack_fill_line
    hybridep = None if layout is None else hybridep_domains_line(placement, layout.dispatcher, flex_backend)
    return [x for x in (rack_fill_line(placement, domain_size), groups_leaving_line(placement, domain_size), hybridep)
            if x]


def megatron_section(layout: Layout, model: ModelSpec, *, gpu_name: str, fabric_name: str, domain_size: int = 8,
                     seq_len: int | None = None, flex_backend: str = "deepep", release: str | None = None,
                     release_asked: bool = True, loss: str | None = None, fits: bool = True,
                     placement_lines: tuple[str, ...] | list[str] = ()) -> dict[str, Any]:
    """plan.json "megatron": target, arguments, the layer split the step model charged, launch.env; `release`: the
    plan's release (`release_asked`: given with --software, else the default), whose megatron-core and the flags its
    parse_args refuses are in "release" and, where its core is not the target's, in a note (release_core_note);
    `loss`: the cross entropy the plan's memory charged (SearchRequest.loss; None: the launch's), which the loss note
    names; `fits`: whether
    the layout is predicted to fit (a pinned one may not), which the loss note says."""
    vocab = split_vocab(model, layout.tp, "megatron")   # the rows the step model charged the loss stage with
    split = choose_split(model, layout.pp, layout.vp, vocab)
    env = launch_env(layout, gpu_name)
    _, connections_why = launch_connections(layout, gpu_name)
    try:
        # a layout searched or pinned for --framework torchtitan keeps TorchTitan's rules, which differ from Megatron's
        # (the interleaved schedule's micro-batches, the sequence split, MoE HSDP): no Megatron-LM arguments for a
        # layout Megatron refuses (found from outside: 4 micro-batches under PP 8 VP 4, probe P7)
        try:
            check_layout(model, layout, layout.world, seq_len, framework="megatron")
        except CommbenchError as exc:
            raise CommbenchError(f"no Megatron-LM arguments (megatron_args.txt, launch.env): Megatron-LM "
                                 f"{MEGATRON_LM_RELEASE} refuses this layout: {exc}") from exc
        args: dict[str, Any] = {"args": megatron_args(layout, model, seq_len=seq_len, flex_backend=flex_backend,
                                                      release=release)}
    except CommbenchError as exc:  # a pinned flag combination Megatron refuses: the plan says why
        args = {"refused": str(exc)}
    from commbench.planner.layout.release_flags import refused_flags, release_args, release_core, spellings_used
    spelled = spellings_used(args.get("args", []), release)   # the release's own spelling where it has one
    if "args" in args:
        args["args"] = release_args(args["args"], release)
    core = release_core(release) if release is not None else None
    unparsed = refused_flags(args.get("args", []), release) if core is not None else []
    release_doc = {} if core is None else {"release": {
        "name": release, "asked": bool(release_asked), "megatron_core": core[1], "megatron_lm": core[0],
        "refused_flags": unparsed}}
    if unparsed and "refused" not in args:   # the line is written for editing by hand, never called a launch
        args["refused"] = (f"release {release}'s Megatron-LM ({core[0][:12]}) parse_args refuses "
                           f"{'; '.join(unparsed)}: this line does not launch there")
    return {"target": megatron_target(model, release), "script": megatron_script(model), **args,
            "launch": "args" in args and not unparsed,   # a Megatron-LM launch its release parses; else "refused" says why
            **release_doc,
            "layer_split": split.summary(stage_weights(model, vocab), pipe_pattern(model, split)),
            "launch_env": env, "launch_env_why": connections_why, "launch_env_file": "launch.env",
            "launch_env_text": launch_env_text(env, gpu_name=gpu_name, fabric_name=fabric_name,
                                               domain_size=domain_size, script=megatron_script(model),
                                               connections_why=connections_why,
                                               placement_lines=placement_lines),
            "notes": precision_notes(layout, model, release) + connections_notes(layout, gpu_name) + architecture_notes(model)
            + positions_notes(model, seq_len or model.seq_len, release)
            + megatron_vocab_padding_note(model, layout.tp)
            + ([] if "refused" in args else [cross_entropy_note(model, layout, seq_len, loss, fits=fits,
                                                                release=release)])
            + release_core_note(release, args.get("args"), asked=release_asked,
                                later_flags=later_flags(model) if "args" in args else "", spelled=spelled) + (
                [] if model.architecture is not None else [
                f"{model.name} has no [arch] table: its Megatron arguments carry Llama-style defaults (RMSNorm, "
                "RoPE, SwiGLU if glu, no biases); give the model's architecture in its [model.NAME.arch] table"])}


def megatron_text(section: dict[str, Any]) -> str:
    """The Megatron-LM argument line; a refused plan raises its one-line reason."""
    if "refused" in section:
        raise CommbenchError(section["refused"])
    return shlex.join(section["args"])


def megatron_launch_text(section: dict[str, Any]) -> str:
    """What `plan --emit megatron` prints: one line to copy, launch.env's variables, the Megatron-LM script that builds
    the model from the flags (pretrain_mamba.py for a hybrid model) and the flags; a launcher such as torchrun goes
    before the script. A refused plan raises its one-line reason."""
    env = [f"{k}={shlex.quote(str(v))}" for k, v in section.get("launch_env", {}).items()]
    return " ".join(env + [shlex.quote(section["script"]), megatron_text(section)])


def check_emit(doc: dict[str, Any], emit: str | None) -> None:
    """`--emit megatron` / `--emit torchtitan` of a plan whose section is refused (a model that framework's release
    cannot launch, though the plan predicts it): its one-line reason, raised before any plan file is written."""
    section = doc.get(emit) if emit in ("megatron", "torchtitan") else None
    if section is not None and "refused" in section:
        raise CommbenchError(section["refused"])


def torchtitan_text(section: dict[str, Any]) -> str:
    """What the TorchTitan emitter prints/writes: 0.3 overrides on one line, 0.2 TOML; refusal raises."""
    if "refused" in section:
        raise CommbenchError(section["refused"])
    if "config" in section:
        return shlex.join(torchtitan_args(section)) + "\n"
    return torchtitan_toml(section)


def torchtitan_emit_text(section: dict[str, Any], *, out: str | None) -> str:
    """What `plan --emit torchtitan` prints. A 0.3 launch whose --module is the config function the plan generates
    (commbench_torchtitan.py) is launchable only beside that file, which only --out writes: without --out the
    printed line fails in TorchTitan's ConfigManager ("Cannot import module 'commbench_torchtitan'"), so it is
    refused in one line saying what to add."""
    text = torchtitan_text(section)
    module = section.get("config_module")
    if module is not None and not out:
        raise CommbenchError(f"--emit torchtitan needs --out here: the launch's --module {section['module']} --config "
                             f"{section['config']} is a config function this plan generates ({module['file']}), which "
                             f"only --out writes; add -O DIR and launch with PYTHONPATH=DIR")
    return text


def framework_assumptions(framework: str, model=None, layout: Layout | None = None) -> list[str]:
    """What the prediction charges differently from what the framework runs (plan.json assumptions), and the layers
    it charges where the framework's launch trains fewer than the model has (models/counts.framework_model). How DP
    communication is charged depends on the plan's `layout` (step/evaluate.py): an FSDP row (fsdp=true, HSDP too) per
    unit and micro-batch (step/fsdp.py: gathered in forward and again in backward, reduce-scattered), any other row
    (pp > 1 without fsdp) as a distributed optimizer, once a step."""
    if framework != "torchtitan":
        return []
    mtp = getattr(model, "num_mtp_layers", 0)
    limits = ("framework torchtitan: layouts limited to what TorchTitan 0.3 runs (etp=1, all-to-all EP, its configs' "
              "activation checkpointing, a whole-step CUDA graph only with pp=1 and ep=1)")
    if layout is not None and layout.fsdp:
        dp = ("DP communication is charged as FSDP2 runs it (reshard after forward): every micro-batch each unit's "
              "parameters are all-gathered in forward and again in backward and its gradients reduce-scattered")
    elif layout is not None:
        dp = ("DP communication is charged as a distributed optimizer (gradient reduce-scatter and parameter "
              "all-gather once per step), as torch's pipeline schedule runs FSDP2 with PP (no reshard after forward, "
              "gradients reduce-scattered at the last micro-batch)")
    else:
        dp = ("DP communication is charged per micro-batch and unit (gathered in forward and again in backward) on "
              "fsdp=true rows, once per step (distributed optimizer) on pp > 1 rows without fsdp")
    return ([f"framework torchtitan: the prediction leaves out {model.name}'s {mtp} MTP layer(s), as TorchTitan "
             "0.3.0's launch trains none (the Megatron arguments beside it train them: --mtp-num-layers)"]
            if mtp else []) + [f"{limits}; {dp}"]


# What each framework's log calls the figure a plan's model TFLOP/s is (framework_flops_per_token): Megatron-LM
# core_v0.16.1 training.py training_log, TorchTitan 0.3.0 components/metrics.py MetricsProcessor.log; and what it
# prints for MFU (logged_mfu.py).
LOGGED_AS = {"megatron": "its log's throughput per GPU (TFLOP/s/GPU) reads",
             "torchtitan": "its log's tflops read"}


def flops_count_line(framework: str, model: ModelSpec, layout: Layout, seq_len: int | None, gpu,
                     torchtitan_version: str = "0.3") -> str:
    """plan.json's assumption naming whose FLOPs count the plan's model TFLOP/s and MFU are in, its GFLOP/token
    for the network the framework's launch trains (models/counts.framework_flops_per_token), the peak the plan's MFU
    is of and what the framework's log prints for MFU (logged_mfu.py)."""
    from commbench.planner.emit.logged_mfu import plan_mfu_peak, titan_mfu_logged
    from commbench.planner.step.evaluate import dense_peak_tflops
    from commbench.planner.search.frameworks import flops_count_name
    name, what = flops_count_name(framework, torchtitan_version), FLOPS_COUNTS[framework][1]
    s = seq_len or model.seq_len
    rows = step_vocab(model, layout.tp, framework)
    gflop = float(framework_flops_per_token(model, s, framework, vocab=rows)) / 1e9
    padded = (f", the vocabulary padded to {float(rows):,.0f} rows at TP{layout.tp}"
              if framework == "megatron" and float(rows) != model.vocab else "")
    logged = (titan_mfu_logged(gpu, layout.precision, version=torchtitan_version) if framework == "torchtitan"
              else "Megatron-LM core_v0.16.1's log prints no MFU (training.py training_log: throughput per GPU alone)")
    return (f"model TFLOP/s and MFU: {name} ({what}), {gflop:.2f} GFLOP/token at seq_len {s}{padded}: the model "
            f"TFLOP/s is what {LOGGED_AS[framework]} at the same tokens/s; "
            f"{plan_mfu_peak(gpu.name, layout.precision, dense_peak_tflops(gpu, layout.precision))}; {logged}")


def framework_record(framework: str, torchtitan_section: dict[str, Any]) -> dict[str, str]:
    """plan.json "framework": what the search proposed layouts for and the release its configuration targets."""
    from commbench.planner.search.frameworks import FRAMEWORK_VERSIONS
    if framework == "torchtitan":
        return {"name": framework, "version": f"torchtitan {torchtitan_section['version']}"}
    return {"name": framework, "version": FRAMEWORK_VERSIONS[framework]}


def layout_dict(layout: Layout) -> dict[str, Any]:
    return {k: getattr(layout, k) for k in layout.__dataclass_fields__}


def model_dict(model: ModelSpec) -> dict[str, Any]:
    out = asdict(model)
    out.pop("extra", None)
    out.pop("hybrid_uneven_split", None)   # the release's build, not the model: plan_model sets it from inputs.software
    out.pop("gdn_context_parallel", None)   # the same
    out.pop("hybrid_pipe_segments", None)   # the same
    out.pop("pinned_split", None)   # a calibration row's, never a plan's
    return out


def plan_json_text(doc: dict[str, Any]) -> str:
    """plan.json's text; a non-finite figure (inf/NaN from a model or fabric file) is refused in one
    line: strict JSON readers (and frameworks) reject Infinity/NaN."""
    try:
        return json.dumps(doc, indent=1, default=float, allow_nan=False) + "\n"
    except ValueError:
        where = non_finite_path(doc) or "a figure"
        raise CommbenchError(f"plan has a non-finite value at {where}: check the model and fabric inputs "
                             "(every figure must be a finite number); plan.json not written") from None


def write_plan(doc: dict[str, Any], path: str | Path, *, force: bool = False) -> None:
    """plan.json alone, under the output lock (files.write_output)."""
    from commbench.files import write_output

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_output(path, plan_json_text(doc), "--out", marker=f'"{PLAN_FORMAT}"', what="commbench plan",
                 force=force)


def load_plan(path: str | Path) -> dict[str, Any]:
    """Read a plan.json, refusing other formats and schema versions with one line."""
    text = read_user_file(path, "plan file")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommbenchError(f"plan file {str(path)!r} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != PLAN_FORMAT:
        raise invalid("format", doc.get("format") if isinstance(doc, dict) else type(doc).__name__,
                      f"a commbench plan has format {PLAN_FORMAT!r} (write one with `commbench plan --out`)")
    if doc.get("version") not in READABLE_PLAN_VERSIONS:
        raise invalid("version", doc.get("version"),
                      f"this commbench reads plan schema versions {', '.join(map(str, READABLE_PLAN_VERSIONS))}")
    try:
        for key, kind in (("inputs", dict), ("placement", dict), ("layout", dict)):
            if not isinstance(doc.get(key), kind):
                raise ValueError(f"{key}: expected a JSON object, got {type(doc.get(key)).__name__}")
        for section, key, kind in (("inputs", "gpus", int), ("inputs", "system", str), ("placement", "gpus_per_rack", int)):
            value = doc[section].get(key)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ValueError(f"field '{section}.{key}'={value!r} has the wrong type: expected {kind.__name__}")
        if "fabric" in doc["inputs"] and not isinstance(doc["inputs"]["fabric"], dict):  # verify-plan reads its source
            raise ValueError(f"field 'inputs.fabric'={doc['inputs']['fabric']!r} has the wrong type: expected a JSON "
                             "object (the fabric summary `commbench plan` writes)")
        _check_plan_magnitudes(doc)
        _check_layout_counts(doc["layout"])
        _check_layout_keys(doc["layout"])
        _check_predicted(doc.get("predicted"))
    except ValueError as exc:
        raise CommbenchError(f"plan file {str(path)!r}: {exc}") from None
    lay = plan_layout(doc)
    model = plan_model(doc)
    if not model.is_moe and (lay.ep, lay.etp) != (1, lay.tp):  # the plan writes ep 1, etp = tp: no EP item to run
        key, value, allowed = ("ep", lay.ep, "1") if lay.ep != 1 else ("etp", lay.etp, f"tp ({lay.tp}) or absent")
        raise CommbenchError(f"plan file {str(path)!r}: field 'layout.{key}'={value!r} is invalid: {allowed} for a "
                             f"dense model ({model.name} has no experts)")
    if (lay.tp * lay.cp * lay.dp) % (lay.ep * lay.etp):  # Megatron: etp x ep x expert-dp = tp x cp x dp
        raise CommbenchError(f"plan file {str(path)!r}: fields 'layout.ep'={lay.ep!r} and 'layout.etp'={lay.etp!r} "
                             f"are invalid: ep x etp ({lay.ep} x {lay.etp}) must divide tp x cp x dp ({lay.tp} x "
                             f"{lay.cp} x {lay.dp}), the ranks of a pipeline stage (write the plan again with "
                             "`commbench plan`)")
    said, ran = doc["inputs"].get("precision"), doc["layout"].get("precision")
    if isinstance(said, str) and isinstance(ran, str) and said.lower() != ran.lower():
        raise CommbenchError(f"plan file {str(path)!r}: field 'inputs.precision'={said!r} but field "
                             f"'layout.precision'={ran!r}: a hand edit changed one and not the other (write the plan "
                             "again with `commbench plan`)")
    named, built = doc["inputs"].get("model"), doc["inputs"]["model_spec"].get("name")
    if named != built:   # plan writes both from one model (plan_inputs): another name measures one model as another
        raise CommbenchError(f"plan file {str(path)!r}: field 'inputs.model'={named!r} but field "
                             f"'inputs.model_spec.name'={built!r}: a hand edit changed one and not the other; the "
                             "sizes and launch are the model_spec's (write the plan again with `commbench plan`)")
    gpus = doc["inputs"]["gpus"]
    if lay.world != gpus:
        raise CommbenchError(f"plan file {str(path)!r}: its layout holds {lay.world} ranks (tp x cp x dp x pp = "
                             f"{lay.tp} x {lay.cp} x {lay.dp} x {lay.pp}), not the {gpus} of field 'inputs.gpus': "
                             "a hand edit changed one and not the other (write the plan again with `commbench plan`)")
    seq_len = doc["inputs"].get("seq_len", model.seq_len)  # plans that never recorded it ran the model's
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or not 1 <= seq_len <= MAX_SEQ_LEN:
        raise CommbenchError(f"plan file {str(path)!r}: field 'inputs.seq_len'={seq_len!r} is invalid: a whole "
                             f"number of tokens from 1 to {MAX_SEQ_LEN:,}")
    _check_args_match_layout(doc, lay, model, path)   # last: the checks above name a single field more plainly
    return doc


def _check_plan_magnitudes(doc: dict[str, Any]) -> None:
    """The counts and factors a plan run reads, in the ranges `plan` accepts (a hand-edited plan.json)."""
    from commbench.limits import MAX_GPUS, MAX_MOE_IMBALANCE

    for section, key, low, high in (("inputs", "gpus", 1, MAX_GPUS), ("placement", "gpus_per_rack", 1, MAX_GPUS),
                                    ("inputs", "moe_imbalance", 1, MAX_MOE_IMBALANCE)):
        value = doc[section].get(key, 1)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            raise ValueError(f"field '{section}.{key}'={value!r} is invalid: a number from {low} to {high:,}")


# The predicted figures verify-plan reads: those it re-predicts the recorded layout against (workflows/verify.py
# REPREDICTED) and whether the layout fits (its DOES NOT FIT flag, pinned.unfit_line).
PREDICTED_READ = ("step_s", "tokens_per_s_per_gpu", "mem_total_bytes", "mem_capacity_bytes")


def _check_predicted(predicted: Any) -> None:
    """A hand-edited plan's `predicted` block: there, with the figures verify-plan holds the plan to as finite numbers
    and `fits` a boolean. Without them a plan predicted not to fit would pass as one that fits, and its figures would
    go unchecked against its layout, with no word."""
    import math

    if not isinstance(predicted, dict):
        raise ValueError(f"field 'predicted' is {'missing' if predicted is None else type(predicted).__name__}: every "
                         f"plan records its predicted figures ({', '.join(PREDICTED_READ)}, fits), which verify-plan "
                         "checks the plan against (write the plan again with `commbench plan`)")
    for key in PREDICTED_READ:
        value = predicted.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"field 'predicted.{key}'={value!r} is invalid: a finite number >= 0, the plan's "
                             "predicted figure verify-plan checks it against (write the plan again with "
                             "`commbench plan`)")
    if not isinstance(predicted.get("fits"), bool):
        raise ValueError(f"field 'predicted.fits'={predicted.get('fits')!r} is invalid: true or false, whether the "
                         "layout was predicted to fit in HBM (write the plan again with `commbench plan`)")


def _check_layout_counts(layout: dict[str, Any]) -> None:
    """A hand-edited layout's integers in the ranges `plan --layout` accepts (search/space.py parse_pins): tp, ep,
    vp, mbs, gbs, ... from 1, the layer counts from 0, all up to MAX_LAYOUT_INT. Their types and the layout's
    other rules are left to Layout and to the plan that wrote them."""
    from commbench.limits import MAX_LAYOUT_INT
    from commbench.planner.layout.spec import COUNT_FIELDS, INT_FIELDS

    for names, low, what in ((INT_FIELDS, 1, "a positive integer"), (COUNT_FIELDS, 0, "a non-negative integer")):
        for name in names:
            value = layout.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and not low <= value <= MAX_LAYOUT_INT:
                raise ValueError(f"field 'layout.{name}'={value!r} is invalid: {what} up to {MAX_LAYOUT_INT:,}")


# The layout fields every plan writes (plan.schema.json's layout "required", less etp: a dense plan may leave it out,
# Layout's default then being tp as Megatron's): a plan missing one would be read with Layout's default for it
# (bf16, ep 1), a different plan from the one its arguments launch.
REQUIRED_LAYOUT_FIELDS = ("tp", "pp", "vp", "ep", "cp", "dp", "mbs", "gbs", "precision")
# What a plan's Megatron arguments and its layout must agree on (parse_megatron_args reads them back).
ARGS_LAYOUT_FIELDS = ("tp", "pp", "vp", "ep", "etp", "cp", "dp", "mbs", "gbs", "precision")


def _check_layout_keys(layout: dict[str, Any]) -> None:
    """A hand-edited layout: every field a plan writes is there, and no key is one Layout does not have."""
    import dataclasses

    missing = [name for name in REQUIRED_LAYOUT_FIELDS if name not in layout]
    if missing:
        raise ValueError(f"field 'layout.{missing[0]}' is missing" + (f" (and {', '.join(missing[1:])})" if missing[1:]
                         else "") + ": every plan writes it, and a default in its place would be another plan (write "
                         "the plan again with `commbench plan`)")
    known = {f.name for f in dataclasses.fields(Layout)}
    unknown = sorted(set(layout) - known)
    if unknown:
        raise ValueError(f"field 'layout.{unknown[0]}' is not a layout field (known: {', '.join(sorted(known))})")


def _check_args_match_layout(doc: dict[str, Any], lay: Layout, model, path) -> None:
    """The plan's Megatron arguments describe its layout (ARGS_LAYOUT_FIELDS): a hand edit of one and not the other
    is refused in one line, since verify-plan would check one plan and the launch run another."""
    args = doc.get("megatron_args")
    if not isinstance(args, list) or not args or not all(isinstance(a, str) for a in args):
        return   # refused for Megatron (empty), or a plan without arguments: nothing to hold the layout to
    from commbench.planner.emit.megatron import parse_megatron_args

    try:
        launched = parse_megatron_args(args, int(doc["inputs"]["gpus"]), model)
    except CommbenchError as exc:
        raise CommbenchError(f"plan file {str(path)!r}: field 'megatron_args' does not parse ({exc}) (write the plan "
                             "again with `commbench plan`)") from None
    differ = [f"{name} {getattr(lay, name)!r} vs {getattr(launched, name)!r}" for name in ARGS_LAYOUT_FIELDS
              if str(getattr(lay, name)).lower() != str(getattr(launched, name)).lower()]
    if differ:
        raise CommbenchError(f"plan file {str(path)!r}: field 'layout' and field 'megatron_args' describe different "
                             f"layouts ({'; '.join(differ)}, layout vs arguments): a hand edit changed one and not the "
                             "other (write the plan again with `commbench plan`)")


def plan_layout(doc: dict[str, Any]) -> Layout:
    try:
        return Layout(**check_fields(Layout, doc["layout"], "layout"))
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, CommbenchError):
            raise
        raise CommbenchError(f"plan file has no usable layout: {first_line(exc)}") from None


def plan_model(doc: dict[str, Any]) -> ModelSpec:
    try:
        inputs = doc["inputs"]
        if not isinstance(inputs, dict):
            raise ValueError(f"inputs: expected a JSON object, got {type(inputs).__name__}")
        fields = check_fields(ModelSpec, inputs["model_spec"], "inputs.model_spec")
        if fields.get("architecture") is not None:
            fields["architecture"] = architecture_from_json(fields["architecture"])
        fields.pop("hybrid_uneven_split", None)
        fields.pop("gdn_context_parallel", None)
        fields.pop("hybrid_pipe_segments", None)
        fields.pop("pinned_split", None)
        model = ModelSpec(**fields)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, CommbenchError):
            raise
        raise CommbenchError(f"plan file has no usable model_spec: {first_line(exc)}") from None
    return _plan_release_model(doc, model)


def _plan_release_model(doc: dict[str, Any], model: ModelSpec) -> ModelSpec:
    """`model` as the plan's release's Megatron-LM splits it (release_flags.release_model, as SearchRequest sets it);
    as it is for a TorchTitan plan or one whose release is missing or unreadable (verify-plan flags that)."""
    from commbench.planner.layout.recipes import check_release
    from commbench.planner.layout.release_flags import release_model
    framework = doc.get("framework")
    software = doc["inputs"].get("software")
    if (isinstance(framework, dict) and framework.get("name", "megatron") != "megatron") or not isinstance(software, str):
        return model
    try:
        return release_model(model, check_release(software))
    except CommbenchError:
        return model


def fabric_summary(fabric) -> dict[str, Any]:
    """Which network numbers the plan used: tiers, per (collective, tier) the curve sources, and `content_sha256`
    (fabric_digest: `verify-plan` names a preset or fabric .json changed since the plan was made on it)."""
    sources: dict[str, set[str]] = {}
    for c in fabric.curves:
        sources.setdefault(f"{c.collective}/{c.tier}", set()).add(c.source)
    return {"name": fabric.name, "source": fabric.source, "domain_size": fabric.domain_size,
            "tiers": {k: {"name": t.name, "link_gbps_per_gpu": t.link_gbps_per_gpu} for k, t in fabric.tiers.items()},
            "curve_sources": {k: sorted(v) for k, v in sorted(sources.items())},
            "notes": list(fabric.notes), "warnings": list(fabric.warnings),
            "content_sha256": fabric_digest(fabric)}


# Fields of Fabric.to_dict that do not change a communication prediction at a given GPU count: the GPU count
# (plan and verify-plan scale the profile to theirs) and the GPU's name (`plan --gpu` names one for a profile
# fitted without a GPU; a preset's GPU sets its link rates, which the tiers and curves hold), and where the results
# files it was fitted from are (source_files: a profile moved with its results is the same profile).
_NOT_DIGESTED = ("num_gpus", "gpu", "source_files")


def fabric_digest(fabric) -> str:
    """SHA-256 of the fabric's content as loaded (Fabric.to_dict less _NOT_DIGESTED, keys sorted, compact JSON):
    every tier, curve, fit-report entry, note, warning and NCCL parameter, so any edit of a fabric .json, or of a
    preset (hardware.toml, costmodel/presets.py) that moves a number, changes it."""
    import hashlib

    content = {k: v for k, v in fabric.to_dict().items() if k not in _NOT_DIGESTED}
    blob = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def fabric_lines(fabric) -> list[str]:
    """For a fitted fabric: which (collective, tier) curves were measured and how (backend, group sizes, message
    sizes), which come from the preset, that anything beyond the measured group and message sizes is extrapolated,
    and its fit warnings. Nothing for a preset."""
    from commbench.units import format_size

    fitted = [r for r in fabric.fit_report if r.get("for_prediction") and r.get("collective") in fabric.collectives]
    if not fitted:
        return []
    measured = sorted({f"{r['collective']}/{r['tier']}" for r in fitted})
    borrowed = sorted({f"{c.collective}/{c.tier}" for c in fabric.curves if not c.source.startswith("fitted")}
                      - set(measured))
    backends = ", ".join(sorted({str(r["backend"]) for r in fitted}))
    groups = ", ".join(str(n) for n in sorted({int(r["group_size"]) for r in fitted}))
    # each curve's largest message where they differ: one maximum over all of them called an fp8 dispatch measured
    # to 4 MiB measured to its fp32 combine's 16 MiB (probe PE)
    per_curve: dict[str, int] = {}
    for r in fitted:
        phase = f"[{r['algorithm']}]" if r["collective"] == "moe_all_to_all" and r.get("algorithm") else ""
        name = f"{r['collective']}{phase}/{r['tier']}"
        per_curve[name] = max(per_curve.get(name, 0), int(r["max_size_bytes"]))
    if len(set(per_curve.values())) == 1:
        largest = format_size(next(iter(per_curve.values())))
        up_to, beyond = f"messages up to {largest}", f"messages of {largest}"
    else:
        each = ", ".join(f"{name} {format_size(size)}" for name, size in sorted(per_curve.items()))
        up_to, beyond = f"messages up to: {each}", "each curve's largest message"
    lines = [f"network: {fabric.name} ({fabric.source}) measured {', '.join(measured)} with {backends} at group "
             f"size(s) {groups}, {up_to}"
             + (f"; from the preset: {', '.join(borrowed)}" if borrowed else ""),
             f"network: beyond group size(s) {groups} and {beyond} the measured curves are extrapolated "
             "(alpha-beta formula, not measured)"]
    from commbench.costmodel.plausibility import above_hardware_lines

    lines += above_hardware_lines(fabric)   # in full, whatever else the profile warns of
    if fabric.warnings:
        lines.append(f"network: {len(fabric.warnings)} fit warning(s) in the profile, first: {fabric.warnings[0]}")
    return lines


def _framework_note(calibration_file: str | None, framework: str) -> str:
    from commbench.planner.calibrate.fit import framework_note
    return framework_note(calibration_file, framework) if calibration_file else ""


def efficiency_terms(calibration_file: str | None, shipped_terms: tuple[str, ...] = (),
                     other_gpu_terms: tuple[str, ...] = ()) -> str:
    """The plan's line on where its efficiency terms come from: the shipped ones, or a calibrate -O file and, by name,
    the terms that file does not set (`shipped_terms`) and the kernel terms it sets for other GPUs than the plan's
    (`other_gpu_terms`: calibrate.fit.CalibrationFile.for_gpu): the shipped values stand in for both."""
    if calibration_file is None:
        return "efficiency terms: commbench.planner.step.terms (fitted to published runs)"
    record = fit_record_text(calibration_file, shipped_terms)
    if not shipped_terms and not other_gpu_terms:
        return f"efficiency terms: {calibration_file} (commbench calibrate -O; {record})"
    parts = []
    if shipped_terms:
        parts.append(f"{', '.join(shipped_terms)}: the file does not set these {len(shipped_terms)}")
    if other_gpu_terms:
        parts.append(f"{', '.join(other_gpu_terms)}: the file's runs do not show these {len(other_gpu_terms)} kernel "
                     "terms were fitted on this plan's GPU (runs of other GPUs, or none named)")
    return (f"efficiency terms: {calibration_file} (commbench calibrate -O; {record}), except "
            f"{'; and '.join(parts)}; so they are the shipped values (commbench.planner.step.terms), not fitted to your "
            "runs of this GPU")


def fit_record(calibration_file: str, shipped_terms: tuple[str, ...] = ()) -> dict[str, list[str] | None]:
    """plan.json's record of which of the file's terms its fits determined ("calibration_terms_fitted"), which it
    holds at the values its fit started from ("calibration_terms_held": set, not fitted to its runs) and which of the
    fitted ended at a bound of their physical range ("calibration_terms_at_bound"); None each for a file that does
    not record them (written before they were: unknown)."""
    from commbench.planner.step.terms import FITTED_TERMS, recorded_fit
    fitted, at_bound = recorded_fit(calibration_file)
    held = None if fitted is None else [t for t in FITTED_TERMS if t not in fitted and t not in shipped_terms]
    return {"calibration_terms_fitted": None if fitted is None else list(fitted), "calibration_terms_held": held,
            "calibration_terms_at_bound": None if at_bound is None else list(at_bound)}


def fit_record_text(calibration_file: str, shipped_terms: tuple[str, ...] = ()) -> str:
    """fit_record in words: '1 of 15 terms fitted to its runs (T); the other 14 held at the values its fit started
    from', and the fitted ones at a bound; or that the file does not record which (unknown)."""
    from commbench.planner.step.terms import FITTED_TERMS
    record = fit_record(calibration_file, shipped_terms)
    fitted, held, at_bound = (record[f"calibration_terms_{k}"] for k in ("fitted", "held", "at_bound"))
    if fitted is None:
        return ("it does not record which terms its fit determined (written before that was recorded), so which are "
                "fitted to its runs and which held at their start values is unknown")
    text = (f"{len(fitted)} of {len(FITTED_TERMS)} terms fitted to its runs ({', '.join(fitted) or 'none'})"
            + (f"; the other {len(held)} held at the values its fit started from (its runs did not determine them)"
               if held else ""))
    return text + (f"; {', '.join(at_bound)} ended at a bound of its physical range (the runs may want it beyond: "
                   "less trustworthy)" if at_bound else "")


def calibration_inputs(calibration_file: str | None, shipped_terms: tuple[str, ...] = (),
                       calibration=None, other_gpu_terms: tuple[str, ...] = ()) -> dict[str, Any]:
    """plan.json inputs on the efficiency terms: "calibration" (the file or "shipped") and, with a file, the terms
    it does not set, taken from the shipped calibration ("calibration_shipped_terms"), and the fitted terms the plan
    was predicted with (`calibration`, as read when planning, not the file read again: "calibration_terms";
    verify-plan predicts with them, and names a file changed since) and, for a plan of a GPU the file was not fitted
    on, its kernel terms taken from the shipped calibration ("calibration_other_gpu_terms")."""
    from commbench import __version__
    from commbench.planner.step.terms import STEP_MODEL
    made_by = {"step_model": STEP_MODEL, "commbench_version": __version__}   # what predicted the plan
    if calibration_file is None:
        return {"calibration": "shipped", **made_by}
    from commbench.planner.calibrate.fit import calibration_provenance
    from commbench.planner.step.terms import FITTED_TERMS
    cal = calibration
    if cal is None:
        from commbench.planner.calibrate.fit import read_calibration_file
        cal = read_calibration_file(calibration_file).calibration
    fitted = calibration_provenance(calibration_file)
    return {"calibration": calibration_file, "calibration_shipped_terms": list(shipped_terms),
            **fit_record(calibration_file, shipped_terms),
            "calibration_other_gpu_terms": list(other_gpu_terms),
            "calibration_terms": {t: getattr(cal, t) for t in FITTED_TERMS}, **made_by,
            "calibration_step_model": fitted["step_model"],
            "calibration_commbench_version": fitted["commbench_version"]}


def calibration_step_model_line(calibration_file: str | None) -> list[str]:
    """The plan's assumption where its --calibration file was fitted to another step model than the one that predicted
    it (or records none: calibrate.fit.step_model_note): [] for the shipped terms or a file of this step model. `plan`
    printed it as a warning only, so plan.json carried the file's terms read as this model's without a word."""
    if calibration_file is None:
        return []
    from commbench.planner.calibrate.fit import calibration_provenance, step_model_note
    fitted = calibration_provenance(calibration_file)
    note = step_model_note(calibration_file, fitted["step_model"], fitted["commbench_version"])
    return [f"step model: {note}"] if note else []


def calibration_software_line(calibration_file: str | None, req) -> list[str]:
    """The plan's assumption where its --calibration file's runs ran at another release or precision than the plan
    (`req`: its SearchRequest, the release resolved), or at a release the file does not record
    (calibrate.fit.software_note): [] for the shipped terms or a file of the plan's release and precision."""
    if calibration_file is None:
        return []
    from commbench.planner.calibrate.fit import read_calibration_file
    note = read_calibration_file(calibration_file).software_note(req.software, req.precision)
    return [note] if note else []


def predicted_section(row: dict[str, Any], layout: Layout, *, gpus_per_rack: int, num_gpus: int) -> dict[str, Any]:
    """A plan's `predicted`, pinned or searched (one schema, docs/json-output.md): the step model's row of the layout
    plus its memory headroom (HBM less the predicted total, bytes per GPU) and the scale-up domains one EP x ETP
    group spans (placement.ep_domains), the figures the search ranks and places by."""
    from commbench.planner.layout.placement import ep_domains

    return dict(row) | {"mem_headroom_bytes": float(row["mem_capacity_bytes"] - row["mem_total_bytes"]),
                        "ep_racks_per_group": int(ep_domains(layout.ep, layout.etp, gpus_per_rack, num_gpus))}


def seq_len_inputs(seq_len: int, note: str | None) -> dict[str, Any]:
    """plan.json inputs' sequence length: seq_len, seq_len_default (not given: the model's default) and, where
    defaulted, seq_len_note (where the default comes from; recipe_model.sequence_length)."""
    return {"seq_len": seq_len, "seq_len_default": note is not None, **({"seq_len_note": note} if note else {})}


def model_params(model) -> dict[str, Any]:
    """plan.json inputs' model_params: the model's total and per-token active parameters, in billions, computed from
    its architecture (models/counts.py param_counts, active_params: embedding and output layer at the model's own
    vocabulary, MTP layers apart, as model cards count), with the MTP layers' own (mtp_b) where it has some."""
    from commbench.planner.models.counts import active_params, param_counts
    counts = param_counts(model)
    return {"total_b": counts.total / 1e9, "active_b": active_params(model) / 1e9,
            **({"mtp_b": counts.mtp / 1e9} if counts.mtp else {}),
            "how": "computed from the architecture (commbench/planner/models/counts.py), not published"}


def model_params_line(model) -> str:
    """The plan text's line of model_params, with the published figures beside where the zoo records them."""
    n = model_params(model)
    active = (f", {n['active_b']:.4g}B active per token" if model.is_moe else " (dense: every parameter active)")
    mtp = f"; its MTP layers' {n['mtp_b']:.4g}B apart" if "mtp_b" in n else ""
    published = [f"{what} {value:g}B" for what, value in (("total", model.published_params_total_b),
                                                          ("active", model.published_params_active_b)) if value]
    return (f"{model.name}: {n['total_b']:.4g}B parameters{active} (computed from the architecture{mtp}"
            + (f"; published: {', '.join(published)}" if published else "") + ")")


def plan_inputs(req, *, system: str, pins: dict, searched: bool, calibration_file: str | None = None,
                calibration_shipped_terms: tuple[str, ...] = (),
                calibration_other_gpu_terms: tuple[str, ...] = ()) -> dict[str, Any]:
    """plan.json `inputs` of a SearchRequest, searched or pinned (one builder, so a pinned plan records every input a
    search does: the --software release it read and, where another release's recipes stood in, software_note);
    `pins`: the search's pins or the pinned layout's fields; only a search keeps a memory headroom
    (mem_headroom_fraction): a pinned layout is reported whether or not it fits."""
    from commbench.planner.layout.recipe_model import sequence_length
    seq_len, seq_note = sequence_length(req.model, req.seq_len)
    return {"model": req.model.name, "model_spec": model_dict(req.model), "system": system,
            "model_params": model_params(req.model),
            "gpus": req.num_gpus, "gbs": req.gbs, "precision": req.precision, **seq_len_inputs(seq_len, seq_note),
            **({"mem_headroom_fraction": req.headroom_fraction} if searched else {}),
            "moe_imbalance": req.moe_imbalance,
            **({"moe_capacity_factor": req.moe_capacity_factor} if req.moe_capacity_factor is not None else {}),
            "loss": req.loss,   # the cross entropy whose logits the memory charged (step/loss_memory.py)
            "pins": pins, "fabric": fabric_summary(req.fabric),
            "software": req.software, **({"software_note": req.software_note} if req.software_note else {}),
            **calibration_inputs(calibration_file, calibration_shipped_terms, req.calibration,
                                 calibration_other_gpu_terms)}


def plan_document(result, *, system: str, explanation: list[str], sensitivity: list[dict],
                  extra_assumptions: list[str] = (), top: int = 10, flex_backend: str = "deepep",
                  torchtitan_version: str = DEFAULT_TORCHTITAN, calibration_file: str | None = None,
                  calibration_shipped_terms: tuple[str, ...] = (),
                  calibration_other_gpu_terms: tuple[str, ...] = ()) -> dict[str, Any]:
    """The schema-versioned plan.json for the winner of a SearchResult (every figure predicted).
    `calibration_shipped_terms`: the terms the --calibration file does not set; `calibration_other_gpu_terms`: the
    kernel terms it fitted on other GPUs (plan.json names both: the shipped values stand in)."""
    from commbench.planner.search.explain import short
    from commbench.planner.layout.placement import place
    req, bd = result.request, result.breakdown
    framework = req.framework
    lay = result.layouts.layout(0)
    from commbench.planner.layout.recipe_model import sequence_length
    seq_len, seq_note = sequence_length(req.model, req.seq_len)
    placement = place(lay, req.num_gpus, result.gpus_per_rack)
    megatron = megatron_section(lay, req.model, gpu_name=req.fabric.gpu.name, fabric_name=req.fabric.name,
                                domain_size=int(req.fabric.domain_size), seq_len=req.seq_len,
                                flex_backend=flex_backend, release=req.software, release_asked=bool(req.software_asked),
                                loss=req.loss,
                                placement_lines=rack_lines(placement, int(req.fabric.domain_size), lay, flex_backend))
    torchtitan = torchtitan_plan(lay, req.model, seq_len=req.seq_len, version=torchtitan_version, framework=framework,
                                gpu=req.fabric.gpu)
    assumptions = [
        f"routing: busiest EP rank receives {req.moe_imbalance:g}x the mean tokens (1 = perfectly balanced)",
        f"memory: predicted total incl. the model's reserve (CUDA context, NCCL, workspaces, CUDA graph pools, "
        f"fragmentation) "
        f"leaves >= {req.headroom_fraction * 100:g}% of HBM free"
        + (f", on pipeline rank {int(bd.mem_pipeline_rank[0])}: the one whose layers, embedding/output copies and "
           "micro-batches in flight hold the most" if lay.pp > 1 else ""),
        f"placement: {result.gpus_per_rack} GPUs per scale-up domain, {placement.num_racks} domain(s); "
        "ranks ordered tp-cp-dp-pp and etp-ep-edp-pp (Megatron-Core)",
        *rack_lines(placement, int(req.fabric.domain_size), lay, flex_backend),
        (f"overlaps as TorchTitan {TORCHTITAN_VERSIONS[torchtitan_version]} runs them: FSDP2's gathers and "
         "reduce-scatters overlapped, TP (async TP off) "
         "and the EP all-to-all not" if framework == "torchtitan" else
         "overlaps on where Megatron allows them") + " (they never lengthen a step in the model)",
        efficiency_terms(calibration_file, calibration_shipped_terms, calibration_other_gpu_terms),
        *calibration_step_model_line(calibration_file),
        *calibration_software_line(calibration_file, req),
        *[n for n in [_framework_note(calibration_file, req.framework)] if n],
        f"layer split ({megatron['layer_split']['method']}): {megatron['layer_split']['layout']}; the busiest "
        f"pipeline rank sets the pace (x{megatron['layer_split']['imbalance']} the mean rank's FLOPs)",
        "launch environment: launch.env " + (", ".join(f"{k}={v}" for k, v in megatron["launch_env"].items())
                                             or "sets nothing") + "; NCCL's defaults are priced (launch.env says why no NCCL_* variable is written)",
    ] + ([seq_note] if seq_note else []) + fabric_lines(req.fabric) + list(megatron["notes"]) \
        + framework_assumptions(framework, req.model, lay) \
        + [flops_count_line(framework, req.model, lay, req.seq_len, req.fabric.gpu, torchtitan_version)] \
        + [n for n in [checkpoint_note(req.model, lay.precision)] if n] + list(extra_assumptions)
    kept = [{"rank": i + 1, "layout": layout_dict(result.layouts.layout(i)), "layout_text": short(result.layouts.layout(i)),
             "tokens_per_s_per_gpu": float(bd.tokens_per_s_per_gpu[i]), "step_s": float(bd.step_s[i]),
             "mem_headroom_bytes": float(result.headroom_bytes[i]), "ep_racks": int(result.ep_racks[i])}
            for i in range(min(top, len(result)))]
    pareto = [{"layout": layout_dict(result.layouts.layout(int(i))), "layout_text": short(result.layouts.layout(int(i))),
               "tokens_per_s_per_gpu": float(bd.tokens_per_s_per_gpu[i]),
               "mem_headroom_bytes": float(result.headroom_bytes[i])} for i in result.pareto]
    return {
        "format": PLAN_FORMAT, "version": PLAN_VERSION, "kind": "predicted", "mode": "search",
        "inputs": plan_inputs(req, system=system, pins=dict(req.pins), searched=True,
                              calibration_file=calibration_file, calibration_shipped_terms=calibration_shipped_terms,
                              calibration_other_gpu_terms=calibration_other_gpu_terms),
        "assumptions": assumptions,
        "layout": layout_dict(lay),
        "predicted": predicted_section(bd.row(0), lay, gpus_per_rack=result.gpus_per_rack, num_gpus=req.num_gpus),
        "placement": {"gpus_per_rack": placement.gpus_per_rack, "num_racks": placement.num_racks,
                      "summary": placement.summary(), "groups": placement.groups,
                      "rack_of_rank": [placement.rack_of(r) for r in range(req.num_gpus)]},
        "framework": framework_record(framework, torchtitan),
        "emitters": {"megatron": megatron["target"], "torchtitan": torchtitan["version"]},
        "megatron_args": megatron.get("args", []),
        "megatron": megatron,
        "torchtitan": torchtitan,
        "explanation": list(explanation), "sensitivity": list(sensitivity),
        "top": kept, "pareto": pareto,
        "search": {"enumerated": result.num_enumerated, "valid": result.num_valid, "fit": result.num_fit,
                   "elapsed_s": result.elapsed_s},
    }
