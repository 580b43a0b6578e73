"""A TorchTitan training log as a row shaped like calibration-runs.json (see runlogs/__init__.py): the config
dict printed at start and the metrics line per step."""

from __future__ import annotations

import ast
import re
from math import prod
from statistics import median
from typing import Any

from commbench.errors import CommbenchError
from commbench.planner.calibrate.runlogs.common import (ANSI, CUT_NOTE, LAUNCHER_LABEL, _finite, _positive, _whole,
                                                       cut_last_line)
from commbench.planner.calibrate.runlogs.torchtitan_ac import titan_recompute
from commbench.planner.calibrate.runlogs.torchtitan_model import check_titan_model
from commbench.planner.calibrate.runlogs.torchtitan_v03 import (V03_PRECISION_NOTE, JsonConfigReader,
                                                                mesh_world_size_v03, normalise_v03)

TITAN_STEP = re.compile(r"step:\s*(\d+)\s.*?tps:\s*(\S+)")
# components/metrics.py log_validation (torchtitan 0.3.0): "validate step: N ... tps: T", the validator's forward-only
# pass over the validation set (validator.freq, default 10, and step 1: every training line's step at the default
# metrics.log_freq 10); not a training step
# components/metrics.py log(): "loss: {global_avg_loss:8.5f}  grad_norm: {grad_norm:7.4f}", 'nan' or 'inf' once the
# run diverged: the step trained nothing and its tps is not the run's
TITAN_HEALTH = re.compile(r"\b(loss|grad_norm):\s*(\S+)")
NAN_NOTE = "step line(s) with a NaN or infinite loss or grad_norm (a diverged run) left out"
TITAN_VALIDATE = re.compile(r"validate step:\s*\d+")
VALIDATE_NOTE = ("validation line(s) ('validate step:', the validator's forward-only pass) left out: not training "
                 "steps")
TITAN_STARTS_AT = re.compile(r"Training starts at step (\d+)")   # trainer.py train(): the first step of a start


def titan_cuda_graph(log: str, training: dict[str, Any]) -> str:
    """The row's cuda_graph: torchtitan 0.3.0 (config/configs.py Training.disable_cuda_graphs, default False) wraps
    the whole forward-backward in a CUDA graph unless disable_cuda_graphs (trainer.py: wrap_with_cuda_graph(
    self.fwd_bwd_fn)), which is the step model's cuda_graph "full", as emit/torchtitan.py writes it
    (disable_cuda_graphs = not graphed); true: "none". A config without the entry (TorchTitan before 0.3.0, which has
    no CUDA graphs): "none". A value other than a JSON bool is one line."""
    if "disable_cuda_graphs" not in training:
        return "none"
    value = training["disable_cuda_graphs"]
    if not isinstance(value, bool):
        raise CommbenchError(f"{log}: training.disable_cuda_graphs={value!r}; allowed: true or false")
    return "none" if value else "full"


def titan_warmup_steps(training: dict[str, Any], pp: int, accumulation_steps: int) -> tuple[int, str]:
    """How many steps after each start are warm-up, and why when more than the first. torchtitan 0.3.0
    (requirements-frameworks.txt) trainer.py wraps the forward-backward in CUDA graphs unless
    training.disable_cuda_graphs (not with PP, which it refuses), and distributed/cudagraph.py CUDAGraphWrapper runs
    its first call eagerly (_warmup_remaining = 1) and captures on the second: the forward-backward runs once a
    micro-batch, so with one micro-batch a step (no gradient accumulation) the capture is step 2. A config without
    the entry (TorchTitan before CUDA graphs) or with it true: the first step only."""
    if "disable_cuda_graphs" not in training or training["disable_cuda_graphs"] or pp > 1 or accumulation_steps > 1:
        return 1, ""
    return 2, ("CUDA graphs (training.disable_cuda_graphs false): step 1 runs the forward-backward eagerly and step "
               "2 captures it, with one micro-batch a step")


def _is_moe(model: str) -> bool:
    """Whether --model is a zoo MoE model (False for one outside the zoo: its row is not modelled)."""
    from commbench.planner.calibrate.published import _zoo_name
    from commbench.planner.models.zoo import load_model
    name = _zoo_name(model)
    return name is not None and load_model(name).is_moe


TITAN_MESH = re.compile(r"Building \d+-D device mesh with \[[^\]]*\], \[([0-9, ]*)\]")


def mesh_world_size(text: str) -> int | None:
    """The GPU count TorchTitan's ParallelDims logs (0.1/0.2 `Building N-D device mesh with [names], [sizes]`:
    the sizes of the dimensions above 1, whose product is the world size; 0.3.0 `Building device mesh with
    parallelism: pp=.., ...`, torchtitan_v03.py); None without that line."""
    match = TITAN_MESH.search(text)
    if not match:
        return mesh_world_size_v03(text)
    sizes = [int(x) for x in match.group(1).replace(" ", "").split(",") if x]
    return prod(sizes)


# TorchTitan names the device at start (components/metrics.py build_device_memory_monitor: "CUDA capacity: NVIDIA
# H100 80GB HBM3 with 79.11GiB memory"); the GPU names hardware.toml has, as torch.cuda.get_device_name spells them
TITAN_DEVICE = re.compile(r"(?:CUDA|GPU) capacity: (.+?) with [\d.]+\s*GiB memory")
DEVICE_GPU = re.compile(r"\b(gb300|gb200|b300|b200|h100|h200|h800)\b", re.IGNORECASE)
# The presets' GPUs are the SXM parts (hardware.toml [gpu.h100] "H100 SXM", DGX/HGX). The same chip in another form
# factor has another datasheet: H100 PCIe 350 W, 2.0 TB/s HBM2e, 756 dense BF16 TFLOPS; H100 NVL 400 W, 3.9 TB/s,
# 94 GB (NVIDIA H100 datasheet, PCIe and NVL columns); H200 NVL 600 W (H200 datasheet); a MIG instance is a slice of
# the GPU. torch.cuda.get_device_name spells them "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL", "... MIG
# 1g.10gb" (the SXM parts: "NVIDIA H100 80GB HBM3", "NVIDIA H200"; an NVL72 rack's GB200 is "NVIDIA GB200").
DEVICE_VARIANT = re.compile(r"\b(PCIe|NVL|MIG)\b", re.IGNORECASE)


def check_titan_device(log: str, text: str, system: str) -> None:
    """One line when a TorchTitan log ran on another GPU than the --system's (an H100 run said to be b200-hgx would
    be predicted as a B200's), or on another form factor of it (DEVICE_VARIANT: an H100 PCIe is not the preset's
    H100 SXM); a device it cannot name (GH200) or a system outside the presets is not checked."""
    from commbench.planner.calibrate.published import _preset_name
    device = TITAN_DEVICE.search(text)
    ran = DEVICE_GPU.search(device.group(1)) if device else None
    preset = _preset_name(system)
    said = preset.split("-")[0] if preset else None
    if not (ran and said):
        return
    if ran.group(1).lower() != said:
        raise CommbenchError(f"{log}: ran on {device.group(1).strip()!r} (its 'CUDA capacity' line), but --system "
                             f"{system} has {said} GPUs: give the --system it ran on")
    variant = DEVICE_VARIANT.search(device.group(1))
    if variant:
        kind = variant.group(1)
        raise CommbenchError(f"{log}: ran on {device.group(1).strip()!r} (its 'CUDA capacity' line), "
                             f"{'an' if kind.upper() == 'NVL' else 'a'} {kind} part, not the {said.upper()} of --system {system} (the SXM / "
                             "superchip part of a DGX, HGX or NVL72 system), whose datasheet (power, clocks, memory "
                             "bandwidth) differs; allowed: a run on the preset's GPU (commbench has no preset for "
                             "this part)")


# torch.distributed.pipelining's one-stage-per-rank schedules; the others (Interleaved1F1B, LoopedBFS,
# InterleavedZeroBubble, ZBVZeroBubble, DualPipeV) run several stages a rank, a virtual pipeline the row cannot state
TITAN_ONE_STAGE_SCHEDULES = ("1f1b", "gpipe")


def titan_microbatch(log: str, par: dict[str, Any], local: int, pp: int) -> int:
    """The micro-batch size the step model prices. Without PP a rank runs its training.local_batch_size at once.
    With PP, torchtitan 0.3.0 trainer.py splits the local batch into local_batch_size //
    parallelism.pipeline_parallel_microbatch_size micro-batches (validate.py refuses a size that does not divide
    it); a config naming instead the count (pipeline_parallel_microbatches, earlier torchtitan) gives local // count.
    A PP config with neither, or one that does not divide, is one line."""
    if pp == 1:
        return local
    schedule = str(par.get("pipeline_parallel_schedule") or "1F1B")
    if schedule.lower() not in TITAN_ONE_STAGE_SCHEDULES:
        raise CommbenchError(f"{log}: parallelism.pipeline_parallel_schedule={schedule!r} (several stages per rank) "
                             "is not read into a virtual-pipeline size; allowed: 1F1B, GPipe")
    if par.get("pipeline_parallel_microbatch_size") is not None:
        size = _whole(log, "parallelism.pipeline_parallel_microbatch_size", par["pipeline_parallel_microbatch_size"])
        if local % size:
            raise CommbenchError(f"{log}: parallelism.pipeline_parallel_microbatch_size={size} does not divide "
                                 f"training.local_batch_size={local}; allowed: a divisor (torchtitan refuses it)")
        return size
    if par.get("pipeline_parallel_microbatches") is not None:
        count = _whole(log, "parallelism.pipeline_parallel_microbatches", par["pipeline_parallel_microbatches"])
        if local % count:
            raise CommbenchError(f"{log}: parallelism.pipeline_parallel_microbatches={count} does not divide "
                                 f"training.local_batch_size={local}; allowed: a divisor")
        return local // count
    raise CommbenchError(f"{log}: pipeline_parallel_degree={pp} but the config has no "
                         "parallelism.pipeline_parallel_microbatch_size: the micro-batch size is not known")


TITAN_CONFIG = re.compile(r"Running with args:\s*(\{.*\})\s*$")
TITAN_RANK = LAUNCHER_LABEL   # "[rank0]:" (run_train.sh's --role rank), "[default0]:", "0: ": one key per rank
# The config entries a run's row is read from (and the model), and those that change its speed (torch.compile, the
# quantization sections of 0.1 float8/mx and 0.2 quantize): two configs that differ in one are two runs
TITAN_RUN_CONFIG = ("model", "parallelism", "activation_checkpoint", "compile", "quantize", "float8", "mx",
                    "training.seq_len", "training.local_batch_size",
                    "training.global_batch_size", "training.mixed_precision_param")


def _entry(config: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        config = config.get(key) if isinstance(config, dict) else None
    return config


# TorchTitan's quantization converters by the number format they train in, as its configs name them: "float8" /
# "mx" (0.1), quantize.linear.float8 / quantize.grouped_mm.mx (0.2.2 job_config), Float8* / MXFP8* / NVFP4*
# converter configs (0.3.0). Its MX converters are MXFP8 only (MX.recipe_name: "mxfp8*"; 0.3.0 "mxfp8_rceil").
TITAN_CONVERTER_PRECISION = (("nvfp4", "NVFP4"), ("mxfp8", "MXFP8"), ("float8", "FP8"), ("fp8", "FP8"), ("mx", "MXFP8"))


# Which part of the model a converter quantizes. TorchTitan's Linear converters (0.1 float8 / mx, 0.2 quantize.linear.*,
# quantize.dense.* between them, 0.3.0 Float8LinearConverter / MXFP8LinearConverter / NVFP4LinearConverter) convert
# nn.Linear only (0.3.0 components/quantization/float8.py:53 "Replace matching Linear.Config"); an MoE model's grouped
# experts stay in BF16 unless their own converter runs (0.2 quantize.grouped_mm.*, quantize.moe.* before it, 0.3.0
# Float8GroupedExpertsConverter float8.py:216 / MXFP8GroupedExpertsConverter) or, before 0.2, the float8 / mx
# section's moe_fqns_prototype names them (torchtitan 5990fa3 "--float8.moe_fqns_prototype").
TITAN_EXPERTS_CONVERTER = ("grouped", "quantize.moe.")


def _converter_format(log: str, name: Any) -> str:
    text = str(name).lower()
    got = next((fmt for key, fmt in TITAN_CONVERTER_PRECISION if key in text), None)
    if got is None:
        raise CommbenchError(f"{log}: model.converters holds {name!r}, a converter of no number format the step "
                             "model reads (float8, mx, nvfp4)")
    return got


def titan_precision(log: str, converters: Any, *, moe: bool = False, config: Any = None) -> str:
    """The row's precision from a TorchTitan config's model.converters (TITAN_CONVERTER_PRECISION): BF16 without
    any; a converter of no known format, or converters of two formats, is one line naming it. For an MoE model the
    Linear layers' and the grouped experts' formats are read apart (TITAN_EXPERTS_CONVERTER): the step model prices
    one format for both, so a run that quantizes one and leaves the other in BF16 is refused in one line naming its
    converters, not priced at 8 bits throughout. A dense model has no experts: its Linear converters say."""
    if isinstance(converters, str):   # a command-line override's comma-separated list
        converters = [part.strip() for part in converters.split(",") if part.strip()]
    if not isinstance(converters, (list, tuple)):
        raise CommbenchError(f"{log}: model.converters = {converters!r}; allowed: a list of converter names")
    formats = {name: _converter_format(log, name) for name in converters}
    found = set(formats.values())
    if len(found) > 1:
        raise CommbenchError(f"{log}: model.converters {list(converters)!r} train in {' and '.join(sorted(found))}; "
                             "the step model prices one number format per run")
    named_experts = {n for n in formats if any(k in str(n).lower() for k in TITAN_EXPERTS_CONVERTER)}
    linear = {f for n, f in formats.items() if n not in named_experts}
    experts = {formats[n] for n in named_experts}
    sections = config if isinstance(config, dict) else {}
    experts |= {f for n, f in formats.items() if str(n).lower() in ("float8", "mx")
                and isinstance(sections.get(str(n).lower()), dict) and sections[str(n).lower()].get("moe_fqns_prototype")}
    if not moe:
        return linear.pop() if linear else "BF16"
    if linear != experts:
        quantized, kept = ("Linear layers", "grouped experts") if linear else ("grouped experts", "Linear layers")
        fmt = (linear or experts).pop()
        raise CommbenchError(
            f"{log}: its quantization converters {list(converters)!r} train the MoE model's {quantized} in {fmt} and "
            f"leave its {kept} in BF16 (TorchTitan's Linear converters convert nn.Linear only, its grouped-experts "
            "converters the experts: Float8GroupedExpertsConverter / quantize.grouped_mm.float8, "
            "MXFP8GroupedExpertsConverter / quantize.grouped_mm.mx); the step model prices one number format for "
            "both, so this run is not priced; give a run with both converters or neither")
    return linear.pop() if linear else "BF16"


def parse_torchtitan_log(text: str, *, source: str, model: str, gpu: str, num_gpus: int | None) -> dict[str, Any]:
    """One row from a TorchTitan training log (see the module docstring)."""
    clean = ANSI.sub("", text)
    log = f"TorchTitan log {source!r}"
    configs: list[Any] = []
    # ((configs before it, rank), step, tps, loss and grad_norm finite) per metrics line
    steps: list[tuple[tuple[int, str], int, float, bool]] = []
    cut, cut_left_out = cut_last_line(clean), False
    starts_at: dict[int, int] = {}   # per start (configs printed before it), the step its 'Training starts at' names
    validation_lines = 0
    json_configs = JsonConfigReader()   # torchtitan 0.3.0's multi-line 'Running with configs: {...}'
    for number, line in enumerate(clean.splitlines()):
        inside, document = json_configs.feed(line)
        if inside:
            if document is not None and not isinstance(document, dict):
                raise CommbenchError(f"{log}: its 'Running with configs:' block (line {number + 1}) is not a JSON "
                                     "object; give the log as torchtitan wrote it")
            if document is not None:
                configs.append(normalise_v03(log, document, clean))
            continue
        match = TITAN_CONFIG.search(line)
        if match:
            try:
                configs.append(ast.literal_eval(match.group(1)))
            except (ValueError, SyntaxError):
                configs.append(None)
            continue
        begins = TITAN_STARTS_AT.search(line)
        if begins:
            starts_at.setdefault(max(len(configs), 1), int(begins.group(1)))
        if TITAN_VALIDATE.search(line):
            validation_lines += 1
            continue
        match = TITAN_STEP.search(line)
        if match and number == cut and match.end(2) >= len(line.rstrip()):   # nothing after tps: cut within it
            cut_left_out = True
        elif match:
            rank = TITAN_RANK.match(line)
            key = (max(len(configs), 1), (rank.group(1) or rank.group(2)) if rank else "")
            steps.append((key, int(match.group(1)), _positive(log, "tps", match.group(2)),
                          all(_finite(value) for _, value in TITAN_HEALTH.findall(line))))
    config = configs[0] if configs else None
    if not isinstance(config, dict):
        raise CommbenchError(f"TorchTitan log {source!r}: no config dict ('Running with configs: {{...}}' of "
                             "torchtitan 0.3.0, 'Running with args: {...}' of 0.1/0.2); run with "
                             "--debug.print_config (0.3.0) or --job.print_args (0.1/0.2)")
    for number, other in enumerate(configs[1:], start=2):
        differ = next((k for k in TITAN_RUN_CONFIG if _entry(config, k) != _entry(other, k)), None)
        if differ:  # two runs' lines in one file: the median would mix their steps
            raise CommbenchError(f"{log}: holds {len(configs)} runs: config {number} has {differ}="
                                 f"{_entry(other, differ)!r} where config 1 has {_entry(config, differ)!r}; give "
                                 "each run its own file")
    if not steps:
        raise CommbenchError(f"TorchTitan log {source!r}: no metrics lines with 'tps:'")
    last: dict[tuple[int, str], int] = {}
    after: list[tuple[int, int, float, bool]] = []   # per metrics line after a start's first: start, step before, tps,
    firsts: dict[int, int] = {}   # per start, the first step it logged                       # finite loss
    for start, step, tps, finite in steps:   # the first step after each start (a config printed: a resumed run) is warm-up
        if start in last and step <= last[start]:
            raise CommbenchError(f"{log}: step numbers go back (step {last[start]}, then step {step}) with no config "
                                 "printed between: two runs in one log; give each run its own file")
        if start in last:
            after.append((start[0], last[start], tps, finite))
        firsts.setdefault(start[0], step)
        last[start] = step
    if not after:  # a crashed or cut-short run: its one figure is the warm-up the median leaves out
        raise CommbenchError(f"{log}: only 1 step logged, the first, warm-up (compilation, allocator, NCCL "
                             "set-up), which is not the run's throughput; give a log with at least 2 metrics "
                             "lines (a smaller metrics.log_freq or more training.steps)")
    par, training = config.get("parallelism", {}), config.get("training", {})
    for key, entry in (("parallelism", par), ("training", training), ("model", config.get("model", {}))):
        if not isinstance(entry, dict):
            raise CommbenchError(f"{log}: its config's {key} = {entry!r:.80}; allowed: a dict (the {key} section "
                                 "TorchTitan prints)")
    missing = [k for k in ("seq_len", "local_batch_size") if training.get(k) is None]
    if missing:
        raise CommbenchError(f"TorchTitan log {source!r}: the config lacks training.{', training.'.join(missing)}")
    tp, pp, cp, ep, rep = (_whole(log, f"parallelism.{key}_degree", par.get(f"{key}_degree", 1))
                           for key in ("tensor_parallel", "pipeline_parallel", "context_parallel", "expert_parallel",
                                       "data_parallel_replicate"))
    shard = _whole(log, "parallelism.data_parallel_shard_degree", par.get("data_parallel_shard_degree", -1), -1)
    meshed, group = mesh_world_size(clean), tp * pp * cp * rep
    if num_gpus and meshed and num_gpus != meshed:
        raise CommbenchError(f"{log}: --gpus {num_gpus}, but its device mesh line ('Building ... device mesh') holds "
                             f"{meshed} GPU(s): give the --gpus it ran on, or none")
    said = "--gpus" if num_gpus else "its device mesh line"
    num_gpus = num_gpus or meshed
    if shard < 1:
        if not num_gpus:
            raise CommbenchError(f"TorchTitan log {source!r}: data_parallel_shard_degree is -1 (auto) and the log has "
                                 "no 'Building ... device mesh with ...' line to read the GPU count from; "
                                 "give it with --gpus (one value for every log, or one per log in order)")
        if num_gpus % group:  # TorchTitan's ParallelDims refuses it: the run cannot have had this layout
            raise CommbenchError(f"{log}: {num_gpus} GPU(s) ({said}) are not a whole number of "
                                 f"tp*pp*cp*dp_replicate = {group}")
        shard = num_gpus // group
    elif num_gpus and num_gpus != shard * group:
        raise CommbenchError(f"{log}: {num_gpus} GPU(s) ({said}), but its parallelism degrees hold dp_shard*"
                             f"dp_replicate*cp*tp*pp = {shard * group}: give the --gpus it ran on, or none")
    dp = shard * rep
    reshard = par.get("fsdp_reshard_after_forward", "default")
    if pp == 1 and shard > 1 and reshard == "never":
        # torch fully_shard reshard_after_forward=False: parameters kept from the forward, gathered once a step
        # (ZeRO-2-like); the step model's FSDP (ZeRO-3) gathers them again for the backward
        raise CommbenchError(f"{log}: parallelism.fsdp_reshard_after_forward='never', which the step model does not "
                             "price (its FSDP gathers the parameters again for the backward); allowed: default, "
                             "always")
    etp = (_whole(log, "parallelism.expert_tensor_parallel_degree", par["expert_tensor_parallel_degree"])
           if par.get("expert_tensor_parallel_degree") is not None else None)   # torchtitan 0.2; 0.3.0 has none
    world = dp * tp * pp * cp
    local = _whole(log, "training.local_batch_size", training["local_batch_size"])
    mbs = titan_microbatch(log, par, local, pp)
    gbs = _whole(log, "training.global_batch_size", training.get("global_batch_size") or -1, -1)
    if gbs < 1:
        gbs = local * dp
    # the warm-up steps after each start: a line is steady when the step logged before it is past them (it averages
    # the steps since); the start is the step before 'Training starts at step N', else before the first logged step
    warmup, graph_why = titan_warmup_steps(training, pp, gbs // (mbs * dp))
    begun = {s: min(starts_at.get(s, first) - 1, first - 1) for s, first in firsts.items()}
    past = [(tps, finite) for s, before, tps, finite in after if before - begun[s] >= warmup]
    graph_lines = len(after) - len(past)
    if not past:
        raise CommbenchError(f"{log}: only warm-up steps logged: {graph_why}, which are not the run's throughput; "
                             "give a log with metrics lines after them (a smaller metrics.log_freq or more "
                             "training.steps)")
    steady = [tps for tps, finite in past if finite]
    nan_lines = len(past) - len(steady)
    if not steady:
        raise CommbenchError(f"{log}: every step line after the warm-up has a NaN or infinite loss or grad_norm (a "
                             "diverged run): not a training run's throughput; give a log of steps that trained")
    graph_note = (f"{graph_lines} step line(s) after the first of CUDA-graph warm-up and capture left out "
                  f"({graph_why})") if graph_lines else ""
    check_titan_model(log, config, model)
    check_titan_device(log, clean, gpu)
    precision = titan_precision(log, config.get("model", {}).get("converters", []), moe=_is_moe(model),
                                config=config)
    if precision == "BF16":   # no converter: the FSDP mixed-precision parameter dtype (training.mixed_precision_param)
        param = str(training.get("mixed_precision_param") or "bfloat16").lower()
        precision = {"bfloat16": "BF16", "float32": "FP32", "float16": "FP16"}.get(param, param.upper())
    recompute, recompute_layers, ac_note = titan_recompute(log, config.get("activation_checkpoint"), model=model,
                                                          pp=pp)
    return {"source": source, "model": model, "gpu": gpu, "num_gpus": world, "precision": precision,
            "seq_len": _whole(log, "training.seq_len", training["seq_len"]), "gbs": gbs, "mbs": mbs, "tp": tp, "pp": pp, "cp": cp, "vp": 1,
            "ep": ep, "etp": etp, "tokens_per_s_per_gpu": median(steady), "tflops_per_gpu": None,
            # without PP TorchTitan's FSDP2 gathers and reduce-scatters every micro-batch (search/frameworks.py
            # TITAN_DP_WITHOUT_PP): the row says FSDP=shard as the published tables do, so it is modelled as FSDP
            # (HSDP over the replicate degree); with PP its one gather a step is the distributed optimizer's
            "notes": f"TorchTitan log; {len({(start[0], step) for start, step, *_ in steps})} steps"
            + (f" (logged by {ranks} ranks)" if (ranks := len({start[1] for start, *_ in steps})) > 1 else "")
            + (f"; FSDP={shard}" if pp == 1 and shard > 1 else "")
            + (f"; {V03_PRECISION_NOTE}" if "model_spec" in config and precision == "BF16" else "")
            + (f"; {graph_lines} CUDA-graph warm-up line(s) left out" if graph_lines else "")
            + (f"; {validation_lines} validation line(s) left out" if validation_lines else "")
            + (f"; {nan_lines} step line(s) with a NaN loss or grad_norm left out" if nan_lines else "")
            + (f"; {CUT_NOTE}" if cut_left_out else "")
            + (f"; {ac_note}" if ac_note else ""),
            "left_out": "; ".join(n for n in (graph_note, f"{validation_lines} {VALIDATE_NOTE}" if validation_lines
                                              else "", f"{nan_lines} {NAN_NOTE}" if nan_lines else "",
                                              CUT_NOTE if cut_left_out else "") if n),
            "priced_as": ac_note, "release": "user",
            "recipe": {"recompute": recompute, "recompute_layers": recompute_layers,
                       "cuda_graph": titan_cuda_graph(log, training),
                       "dispatcher": "alltoall", "tp_comm_overlap": False, "sequence_parallel": True}}

