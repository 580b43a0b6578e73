"""Training runs a user measured, as rows shaped like commbench/data/calibration-runs.json.

Three inputs (`read_runs` picks by content):
- JSON: a list of rows like calibration-runs.json (model, gpu, num_gpus, precision, seq_len, gbs,
  mbs, tp, pp, cp, vp, ep, etp, tokens_per_s_per_gpu); recipe fields (published.RECIPE_FIELDS)
  optional, at top level or under "recipe"; missing ones take published.DEFAULT_FLAGS.
- Megatron-LM log: the arguments block `_print_args` prints (`---- arguments ----`, lines
  `  name ....... value`, `---- end of arguments ----`) and the per-iteration lines of
  `training_log` (`elapsed time per iteration (ms): X | throughput per GPU (TFLOP/s/GPU): Y`).
  tokens/s/GPU = global_batch_size x seq_length / (iteration s x world_size), median over the
  logged iterations after the first (warm-up), leaving out lines counting skipped or NaN iterations and lines of a
  --rampup-batch-size ramp (a logged global batch size below global_batch_size); a log of
  one iteration (the warm-up) is refused.
- TorchTitan log: the config dict printed at start (`Running with args: {...}`) and the metrics
  line per step (`step: N  loss: ...  tps: T  tflops: F  mfu: M%`); tps is tokens/s per GPU, median
  over the steps after the first (warm-up), as for Megatron-LM; the device its 'CUDA capacity' line names must be
  the --system's GPU.
A last line cut off mid-write (no line break after it, and its figure at the end of the line) is left out and
named (read_runs_noted), never read as a figure: "elapsed time per iteration (ms): 10" of 10402.9 would be 1000x.
The model and system of a log come from the command line (logs do not name a zoo model).
A log missing what a prediction needs raises one line naming what is missing.
"""

from __future__ import annotations

import ast
import json
import re
from math import prod
from statistics import median
from typing import Any

from commbench.errors import CommbenchError, read_user_file

ANSI = re.compile(r"\x1b\[[0-9;]*m")
MEGATRON_ARG = re.compile(r"^\s*(\w+) \.+ (.*)$")
# A logged figure is whatever stands after its label (not only digits): a 'nan' or 'inf' iteration is refused by
# name (_positive), not skipped as if the line were not there
MEGATRON_ITER = re.compile(r"elapsed time per iteration \(ms\):\s*([^\s|]+)")
MEGATRON_ITER_NUMBER = re.compile(r"\biteration\s+(\d+)\s*/")   # training_log's "iteration   5/   100 |"
# training_log's "global batch size:  4096": below --global-batch-size while --rampup-batch-size ramps it up
MEGATRON_LOGGED_GBS = re.compile(r"global batch size:\s*(\d+)")
MEGATRON_TFLOPS = re.compile(r"throughput per GPU \(TFLOP/s/GPU\):\s*([^\s|]+)")
# training_log's counts over the interval: iterations whose optimizer step was skipped (loss-scale overflow) or
# whose loss/gradients were NaN; their time is not a training iteration's
MEGATRON_SKIPPED = re.compile(r"number of (?:skipped|nan) iterations:\s*(\d+)")
TITAN_STEP = re.compile(r"step:\s*(\d+)\s.*?tps:\s*(\S+)")


def _value(text: str) -> Any:
    text = text.strip()
    if text in ("None", "none", ""):
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


MAX_LOG_COUNT = 10_000_000  # any GPU count, batch, length or parallel size beyond this is a damaged log


def _whole(log: str, key: str, value: Any, minimum: int = 1) -> int:
    """A count from a log (`log` names it: "Megatron-LM log 'x'"), or one line naming the field and value."""
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and value.strip().lstrip("-").isdecimal() and len(value.strip()) < 20:
        number = int(value.strip())
    if number is None or not minimum <= number <= MAX_LOG_COUNT:
        raise CommbenchError(f"{log}: {key}={value!r} is invalid: a whole number from {minimum} to {MAX_LOG_COUNT:,}")
    return number


def _positive(log: str, key: str, text: str) -> float:
    """A logged time or rate: a finite number > 0, or one line naming the field and value."""
    try:
        number = float(text.replace(",", ""))
    except ValueError:
        number = float("nan")
    if not 0 < number < 1e30:
        raise CommbenchError(f"{log}: {key}={text!r} is invalid: a positive finite number")
    return number


def cut_last_line(text: str) -> int | None:
    """The index (in text.splitlines()) of a last line cut off mid-write: a log whose writer stopped (a kill, a full
    disk, a log read while the run writes it) ends without a line break, and its last figure may be cut short
    ("elapsed time per iteration (ms): 10" of 10402.9). None when the text ends with a line break."""
    if not text or text.endswith(("\n", "\r")):
        return None
    return len(text.splitlines()) - 1


CUT_NOTE = "last line cut off mid-write (no line break after it): its figure left out"


# A Megatron-LM argument and the model field it is emitted from (emit/megatron.py model_args)
MEGATRON_MODEL_ARGS = (("num_layers", "num_layers"), ("hidden_size", "hidden"), ("num_attention_heads", "num_heads"),
                       ("num_experts", "num_routed_experts"), ("moe_router_topk", "top_k"),
                       ("moe_ffn_hidden_size", "expert_ffn"), ("ffn_hidden_size", "dense_ffn"))


FLAVOR_PARAMS_RE = re.compile(r"^(\d+(?:\.\d+)?)[bB]\b")   # TorchTitan flavors name total params: 30B-A3B, 671B, 120b
FLAVOR_PARAMS_AGREE = (0.8, 1.25)   # the name rounds (gpt-oss-120b holds 117B): a factor beyond is another model


def check_titan_flavor(log: str, logged: Any, model: str) -> None:
    """One line when a TorchTitan log's model flavor names a parameter count the --model does not have (a
    Qwen3 30B-A3B log said to be qwen3-235b-a22b would be predicted as the larger network); a flavor
    without a count (debugmodel) or a model outside the zoo is not checked."""
    from commbench.planner.calibrate.published import _zoo_name
    from commbench.planner.models.counts import param_counts
    from commbench.planner.models.zoo import load_model
    flavor = str(logged.get("flavor", "")) if isinstance(logged, dict) else ""
    match, name = FLAVOR_PARAMS_RE.match(flavor), _zoo_name(model)
    if match is None or name is None:
        return
    have = param_counts(load_model(name)).total / 1e9
    said = float(match.group(1))
    if not FLAVOR_PARAMS_AGREE[0] <= said / have <= FLAVOR_PARAMS_AGREE[1]:
        raise CommbenchError(f"{log}: model.flavor={flavor!r} ({logged.get('name', '?')}) is a {said:g}B-parameter "
                             f"model, but --model {model} has {have:,.0f}B: give the --model the log trained")


def check_logged_model(log: str, args: dict[str, Any], model: str) -> None:
    """One line when the arguments a Megatron-LM log ran with are not the --model it is said to be (another model,
    or a cut-down proxy of it): its run would be predicted as the other network. A model outside the zoo is not
    checked here (the run is listed as not modelled)."""
    from commbench.planner.calibrate.published import _zoo_name
    from commbench.planner.models.zoo import load_model
    name = _zoo_name(model)
    if name is None:
        return
    spec = load_model(name)
    for arg, field_name in MEGATRON_MODEL_ARGS:
        if arg not in args or (arg != "num_experts" and args[arg] is None):
            continue
        want, got = getattr(spec, field_name), args[arg]
        if field_name in ("num_routed_experts", "top_k", "expert_ffn") and not spec.is_moe:
            want = None if arg == "num_experts" else got   # a dense model: only num_experts tells
        if field_name == "dense_ffn" and not want:
            want = got   # a model of MoE layers only: Megatron prints its default ffn_hidden_size, unused
        if (got or None) != (want or None):
            raise CommbenchError(f"{log}: ran with {arg}={got!r}, but --model {model} has {want or None!r}: the log "
                                 "is of another model (or a cut-down one); give the --model it trained")


def megatron_mtp_note(log: str, args: dict[str, Any], model: str) -> str:
    """"w/o MTP" (the published tables' tag, published.py drops the zoo model's MTP layers) for a log that ran
    without the MTP layers its --model has (mtp_num_layers None, Megatron's default); one line for another depth;
    '' where the log does not print the argument or agrees."""
    from commbench.planner.calibrate.published import _zoo_name
    from commbench.planner.models.zoo import load_model
    name = _zoo_name(model)
    if "mtp_num_layers" not in args or name is None:
        return ""
    ran, have = args["mtp_num_layers"] or 0, load_model(name).num_mtp_layers
    if ran == have:
        return ""
    if ran == 0:
        return "w/o MTP"
    raise CommbenchError(f"{log}: ran with mtp_num_layers={ran!r}, but --model {model} has {have}: give the --model "
                         "it trained")


def megatron_precision(args: dict[str, Any]) -> str:
    """The row's precision from the logged --fp4/--fp8/--fp8-recipe/--fp16/--bf16: FP16, and FP32 where the block
    prints bf16 False without fp16, are named (the step model lists them as not modelled), not read as BF16."""
    if args.get("fp4"):
        return "NVFP4"
    if args.get("fp8"):
        return "MXFP8" if str(args.get("fp8_recipe", "")).lower() == "mxfp8" else "FP8"
    if args.get("fp16"):
        return "FP16"
    return "FP32" if "bf16" in args and not args["bf16"] else "BF16"


# The arguments a run's row is read from (and the model's shape): two arguments blocks that differ in one of these
# are two runs in one log; a resumed run prints the same values again (its checkpoint paths may differ)
MEGATRON_RUN_ARGS = ("world_size", "tensor_model_parallel_size", "pipeline_model_parallel_size", "micro_batch_size",
                     "global_batch_size", "seq_length", "context_parallel_size", "virtual_pipeline_model_parallel_size",
                     "expert_model_parallel_size", "expert_tensor_parallel_size", "num_layers", "hidden_size",
                     "ffn_hidden_size", "num_attention_heads", "num_experts", "moe_ffn_hidden_size", "moe_router_topk",
                     "fp4", "fp8", "fp8_recipe", "recompute_granularity", "recompute_modules", "recompute_method",
                     "recompute_num_layers", "cpu_offloading", "cpu_offloading_num_layers", "cuda_graph_impl",
                     "cuda_graph_scope", "enable_cuda_graph", "moe_token_dispatcher_type",
                     "overlap_moe_expert_parallel_comm", "tp_comm_overlap", "overlap_grad_reduce", "sequence_parallel",
                     "use_distributed_optimizer", "fp8_dot_product_attention", "moe_permute_fusion", "moe_grouped_gemm",
                     "use_megatron_fsdp", "use_custom_fsdp", "use_torch_fsdp2", "num_distributed_optimizer_instances",
                     "mtp_num_layers", "fp16", "bf16")


def megatron_fsdp_note(log: str, args: dict[str, Any], dp: int) -> str:
    """"FSDP=N" for a Megatron-FSDP run (N of its DP ranks shard; the row's notes, as the published tables say it),
    '' otherwise: --use-megatron-fsdp (--use-custom-fsdp before core 0.14) shards over dp /
    num_distributed_optimizer_instances ranks (HSDP beyond one instance), as emit/megatron.py reads the flags back.
    Torch FSDP2 under Megatron-LM (--use-torch-fsdp2) is refused: the step model does not price it."""
    if args.get("use_torch_fsdp2"):
        raise CommbenchError(f"{log}: ran with use_torch_fsdp2=True: torch FSDP2 under Megatron-LM, which the step "
                             "model does not price; give the run as a JSON row (notes \"FSDP=N\" for Megatron-FSDP)")
    if not (args.get("use_megatron_fsdp") or args.get("use_custom_fsdp")):
        return ""
    instances = _whole(log, "num_distributed_optimizer_instances", args.get("num_distributed_optimizer_instances") or 1)
    return f"FSDP={max(dp // instances, 1)}"


def _check_iteration_order(log: str, number, start: int, last: dict[int, int]) -> None:
    """Iteration numbers rise within one start (arguments block): a number that goes back is another run's line
    appended without its arguments block, whose warm-up iteration would count as steady. One line naming both."""
    if number is None:
        return
    iteration = int(number.group(1))
    if start in last and iteration <= last[start]:
        raise CommbenchError(f"{log}: iteration numbers go back (iteration {last[start]}, then iteration {iteration}) "
                             "with no arguments block between: two runs in one log; give each run its own file")
    last[start] = iteration


def parse_megatron_log(text: str, *, source: str, model: str, gpu: str, num_gpus: int | None = None) -> dict[str, Any]:
    """One row from a Megatron-LM training log (see the module docstring); `num_gpus` (--gpus), when given, must
    be the log's world_size."""
    log = f"Megatron-LM log {source!r}"
    blocks: list[dict[str, Any]] = []
    # (arguments block before it, ms, TFLOP/s, skipped any, the global batch size the line logs)
    lines: list[tuple[int, float, float | None, bool, int | None]] = []
    inside, cut, cut_left_out = False, cut_last_line(text), False
    last_iteration: dict[int, int] = {}   # per arguments block (a start), the last iteration number logged
    for number, line in enumerate(text.splitlines()):
        line = ANSI.sub("", line)
        if re.search(r"-+ end of arguments -+", line):
            inside = False
            continue
        if re.search(r"-+ arguments -+", line):
            inside = True
            blocks.append({})
            continue
        match = MEGATRON_ARG.match(line) if inside else None
        if match:
            blocks[-1][match.group(1)] = _value(match.group(2))
        elapsed = MEGATRON_ITER.search(line)
        if elapsed and number == cut and not line.rstrip().endswith("|"):   # a whole line ends with its last '|'
            cut_left_out = True
        elif elapsed:
            _check_iteration_order(log, MEGATRON_ITER_NUMBER.search(line), len(blocks), last_iteration)
            rate = MEGATRON_TFLOPS.search(line)
            lines.append((max(len(blocks), 1), _positive(log, "elapsed time per iteration (ms)", elapsed.group(1)),
                          _positive(log, "throughput per GPU (TFLOP/s/GPU)", rate.group(1)) if rate else None,
                          any(int(n) for n in MEGATRON_SKIPPED.findall(line)),
                          int(batch.group(1)) if (batch := MEGATRON_LOGGED_GBS.search(line)) else None))
    args = blocks[0] if blocks else {}
    if not args:
        raise CommbenchError(f"Megatron-LM log {source!r}: no arguments block ('---- arguments ----' ... "
                             "'---- end of arguments ----'); run with the default argument printing on")
    for number, other in enumerate(blocks[1:], start=2):
        differ = next((k for k in MEGATRON_RUN_ARGS if args.get(k) != other.get(k)), None)
        if differ:  # two runs' lines in one file: the median would mix their iterations
            raise CommbenchError(f"{log}: holds {len(blocks)} runs: arguments block {number} has {differ}="
                                 f"{other.get(differ)!r} where block 1 has {args.get(differ)!r}; give each run "
                                 "its own file")
    need = ("world_size", "tensor_model_parallel_size", "pipeline_model_parallel_size", "micro_batch_size",
            "global_batch_size", "seq_length")
    missing = [k for k in need if args.get(k) is None]
    if missing:
        raise CommbenchError(f"Megatron-LM log {source!r}: the arguments block lacks {', '.join(missing)}")
    check_logged_model(log, args, model)
    if not lines:
        raise CommbenchError(f"Megatron-LM log {source!r}: no 'elapsed time per iteration (ms)' lines")
    # the first iteration after each start (arguments block: a resumed run starts again) is warm-up
    firsts = {i for i in range(len(lines)) if i == 0 or lines[i][0] != lines[i - 1][0]}
    steady_lines = [x for i, x in enumerate(lines) if i not in firsts]
    if not steady_lines:  # a crashed or cut-short run: its one figure is the warm-up the median leaves out
        raise CommbenchError(f"{log}: only 1 iteration logged, the first, warm-up (compilation, allocator, NCCL "
                             "set-up), which is not the run's throughput; give a log with at least 2 "
                             "'elapsed time per iteration' lines (a smaller --log-interval or more --train-iters)")
    full_batch = _whole(log, "global_batch_size", args["global_batch_size"])
    ramp = [x for x in steady_lines if x[4] is not None and x[4] != full_batch]
    if ramp and len(ramp) == len(steady_lines):
        raise CommbenchError(f"{log}: every iteration line after the warm-up logs a global batch size other than "
                             f"global_batch_size={full_batch} (a --rampup-batch-size ramp): not the run's throughput "
                             "at its batch; give a log that reaches it")
    steady_lines = [x for x in steady_lines if x not in ramp]
    healthy = [x for x in steady_lines if not x[3]]
    if not healthy:
        raise CommbenchError(f"{log}: every iteration line after the warm-up counts skipped or NaN iterations "
                             "(a skipped optimizer step, a NaN loss): not a training run's throughput; give a log "
                             "of iterations that trained")
    left_out_text = "; ".join(([f"{len(ramp)} iteration line(s) of a batch-size ramp-up (a global batch size below "
                                 f"{full_batch}) left out"] if ramp else [])
                               + ([f"{len(steady_lines) - len(healthy)} iteration line(s) counting skipped or NaN "
                                 "iterations left out"] if len(healthy) < len(steady_lines) else [])
                               + ([CUT_NOTE] if cut_left_out else []))
    steady = [ms for _, ms, _, _, _ in healthy]
    tflops = [t for _, _, t, _, _ in healthy if t is not None]
    left_out = len(steady_lines) - len(healthy)
    sizes = {key: _whole(log, key, args[key]) for key in need}
    for key in ("context_parallel_size", "virtual_pipeline_model_parallel_size", "expert_model_parallel_size",
                "expert_tensor_parallel_size"):
        sizes[key] = _whole(log, key, args[key]) if args.get(key) else None
    world, gbs, seq = sizes["world_size"], sizes["global_batch_size"], sizes["seq_length"]
    if num_gpus and num_gpus != world:
        raise CommbenchError(f"{log}: --gpus {num_gpus}, but it ran with world_size={world}: give the --gpus it ran "
                             "on, or none (a Megatron-LM log states its own)")
    mtp = megatron_mtp_note(log, args, model)
    fsdp = megatron_fsdp_note(log, args, world // (sizes["tensor_model_parallel_size"] * sizes[
        "pipeline_model_parallel_size"] * (sizes["context_parallel_size"] or 1)))
    recompute = args.get("recompute_granularity") or "none"
    modules = args.get("recompute_modules") or []
    if recompute == "selective" and modules and "core_attn" not in modules:
        recompute = next((m for m in ("mla_up_proj", "moe_act") if m in modules), "selective")
    scope = args.get("cuda_graph_scope") or []
    impl = str(args.get("cuda_graph_impl") or ("local" if args.get("enable_cuda_graph") else "none"))
    graph = "full" if "full_iteration" in (scope if isinstance(scope, list) else [scope]) else \
        ("layer" if impl in ("local", "transformer_engine") else "none")
    row = {"source": source, "model": model, "gpu": gpu, "num_gpus": world, "precision": megatron_precision(args),
           "seq_len": seq, "gbs": gbs, "mbs": sizes["micro_batch_size"],
           "tp": sizes["tensor_model_parallel_size"], "pp": sizes["pipeline_model_parallel_size"],
           "cp": sizes["context_parallel_size"] or 1, "vp": sizes["virtual_pipeline_model_parallel_size"] or 1,
           "ep": sizes["expert_model_parallel_size"] or 1, "etp": sizes["expert_tensor_parallel_size"],
           "tokens_per_s_per_gpu": gbs * seq / (median(steady) / 1000.0 * world),
           "tflops_per_gpu": median(tflops) if tflops else None,
           "notes": f"Megatron-LM log; {len(lines)} iterations" + "".join(f"; {n}" for n in (fsdp, mtp) if n) + (
               f" ({left_out} counting skipped or NaN iterations left out)" if left_out else "") + (
               f"; {CUT_NOTE}" if cut_left_out else ""), "left_out": left_out_text, "release": "user",
           "recipe": {"recompute": recompute,
                      # block recompute: that many layers of each model chunk (recompute_layers); uniform: every layer
                      "recompute_layers": _whole(log, "recompute_num_layers", args["recompute_num_layers"])
                      if recompute == "full" and args.get("recompute_method") == "block"
                      and args.get("recompute_num_layers") else 0,
                      "cpu_offload_layers": _whole(log, "cpu_offloading_num_layers", args["cpu_offloading_num_layers"])
                      if args.get("cpu_offloading") and args.get("cpu_offloading_num_layers") else 0,
                      "dispatcher": "flex" if args.get("moe_token_dispatcher_type") == "flex" else "alltoall",
                      "moe_a2a_overlap": bool(args.get("overlap_moe_expert_parallel_comm")),
                      "tp_comm_overlap": bool(args.get("tp_comm_overlap")),
                      "dp_overlap": bool(args.get("overlap_grad_reduce")),
                      "sequence_parallel": bool(args.get("sequence_parallel")) or sizes["tensor_model_parallel_size"] == 1,
                      "distributed_optimizer": bool(args.get("use_distributed_optimizer")),
                      "cuda_graph": graph, "cuda_graph_scope": _graph_modules(graph, scope),
                      "fp8_attention": bool(args.get("fp8_dot_product_attention")),
                      "fused_moe": bool(args.get("moe_permute_fusion")) and bool(args.get("moe_grouped_gemm"))}}
    return row


def _graph_modules(graph: str, scope) -> str:
    """The logged --cuda-graph-scope as the layout field (graph_scope.py): its capture modules joined by
    '+', 'layer' for per-layer graphs of the whole layer (an empty scope, or Megatron-Core's older 'full')."""
    from commbench.planner.layout.graph_scope import MODULES, WHOLE_LAYER_NAME
    if graph != "layer":
        return ""
    names = list(dict.fromkeys(m for m in re.findall(r"[a-z_]+", str(scope)) if m in MODULES))
    return "+".join(names) or WHOLE_LAYER_NAME


TITAN_MESH = re.compile(r"Building \d+-D device mesh with \[[^\]]*\], \[([0-9, ]*)\]")


def mesh_world_size(text: str) -> int | None:
    """The GPU count TorchTitan's ParallelDims logs (`Building N-D device mesh with [names], [sizes]`:
    the sizes of the dimensions above 1, whose product is the world size); None without that line."""
    match = TITAN_MESH.search(text)
    if not match:
        return None
    sizes = [int(x) for x in match.group(1).replace(" ", "").split(",") if x]
    return prod(sizes)


# TorchTitan names the device at start (components/metrics.py build_device_memory_monitor: "CUDA capacity: NVIDIA
# H100 80GB HBM3 with 79.11GiB memory"); the GPU names hardware.toml has, as torch.cuda.get_device_name spells them
TITAN_DEVICE = re.compile(r"(?:CUDA|GPU) capacity: (.+?) with [\d.]+\s*GiB memory")
DEVICE_GPU = re.compile(r"\b(gb300|gb200|b300|b200|h100|h200|h800)\b", re.IGNORECASE)


def check_titan_device(log: str, text: str, system: str) -> None:
    """One line when a TorchTitan log ran on another GPU than the --system's (an H100 run said to be b200-hgx would
    be predicted as a B200's); a device it cannot name (GH200) or a system outside the presets is not checked."""
    from commbench.planner.calibrate.published import _preset_name
    device = TITAN_DEVICE.search(text)
    ran = DEVICE_GPU.search(device.group(1)) if device else None
    preset = _preset_name(system)
    said = preset.split("-")[0] if preset else None
    if ran and said and ran.group(1).lower() != said:
        raise CommbenchError(f"{log}: ran on {device.group(1).strip()!r} (its 'CUDA capacity' line), but --system "
                             f"{system} has {said} GPUs: give the --system it ran on")


TITAN_CONFIG = re.compile(r"Running with args:\s*(\{.*\})\s*$")
TITAN_RANK = re.compile(r"^\[rank(\d+)\]:")
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


def titan_precision(log: str, converters: Any) -> str:
    """The row's precision from a TorchTitan config's model.converters (TITAN_CONVERTER_PRECISION): BF16 without
    any; a converter of no known format, or converters of two formats, is one line naming it."""
    if isinstance(converters, str):   # a command-line override's comma-separated list
        converters = [part.strip() for part in converters.split(",") if part.strip()]
    if not isinstance(converters, (list, tuple)):
        raise CommbenchError(f"{log}: model.converters = {converters!r}; allowed: a list of converter names")
    found = set()
    for name in converters:
        text = str(name).lower()
        got = next((fmt for key, fmt in TITAN_CONVERTER_PRECISION if key in text), None)
        if got is None:
            raise CommbenchError(f"{log}: model.converters holds {name!r}, a converter of no number format the step "
                                 "model reads (float8, mx, nvfp4)")
        found.add(got)
    if len(found) > 1:
        raise CommbenchError(f"{log}: model.converters {list(converters)!r} train in {' and '.join(sorted(found))}; "
                             "the step model prices one number format per run")
    return found.pop() if found else "BF16"


def parse_torchtitan_log(text: str, *, source: str, model: str, gpu: str, num_gpus: int | None) -> dict[str, Any]:
    """One row from a TorchTitan training log (see the module docstring)."""
    clean = ANSI.sub("", text)
    log = f"TorchTitan log {source!r}"
    configs: list[Any] = []
    steps: list[tuple[tuple[int, str], int, float]] = []   # ((configs before it, rank), step, tps) per metrics line
    cut, cut_left_out = cut_last_line(clean), False
    for number, line in enumerate(clean.splitlines()):
        match = TITAN_CONFIG.search(line)
        if match:
            try:
                configs.append(ast.literal_eval(match.group(1)))
            except (ValueError, SyntaxError):
                configs.append(None)
            continue
        match = TITAN_STEP.search(line)
        if match and number == cut and match.end(2) >= len(line.rstrip()):   # nothing after tps: cut within it
            cut_left_out = True
        elif match:
            rank = TITAN_RANK.match(line)
            steps.append(((max(len(configs), 1), rank.group(1) if rank else ""), int(match.group(1)),
                          _positive(log, "tps", match.group(2))))
    config = configs[0] if configs else None
    if not isinstance(config, dict):
        raise CommbenchError(f"TorchTitan log {source!r}: no config dict ('Running with args: {{...}}'); "
                             "run with --job.print_args (print_config) on")
    for number, other in enumerate(configs[1:], start=2):
        differ = next((k for k in TITAN_RUN_CONFIG if _entry(config, k) != _entry(other, k)), None)
        if differ:  # two runs' lines in one file: the median would mix their steps
            raise CommbenchError(f"{log}: holds {len(configs)} runs: config {number} has {differ}="
                                 f"{_entry(other, differ)!r} where config 1 has {_entry(config, differ)!r}; give "
                                 "each run its own file")
    if not steps:
        raise CommbenchError(f"TorchTitan log {source!r}: no metrics lines with 'tps:'")
    last: dict[tuple[int, str], int] = {}
    steady = []
    for start, step, tps in steps:   # the first step after each start (a config printed: a resumed run) is warm-up
        if start in last and step <= last[start]:
            raise CommbenchError(f"{log}: step numbers go back (step {last[start]}, then step {step}) with no config "
                                 "printed between: two runs in one log; give each run its own file")
        if start in last:
            steady.append(tps)
        last[start] = step
    if not steady:  # a crashed or cut-short run: its one figure is the warm-up the median leaves out
        raise CommbenchError(f"{log}: only 1 step logged, the first, warm-up (compilation, allocator, NCCL "
                             "set-up), which is not the run's throughput; give a log with at least 2 metrics "
                             "lines (a smaller metrics.log_freq or more training.steps)")
    par, training = config.get("parallelism", {}), config.get("training", {})
    if not isinstance(par, dict) or not isinstance(training, dict):
        raise CommbenchError(f"{log}: the config's parallelism and training entries are not dicts")
    missing = [k for k in ("seq_len", "local_batch_size") if training.get(k) is None]
    if missing:
        raise CommbenchError(f"TorchTitan log {source!r}: the config lacks training.{', training.'.join(missing)}")
    tp, pp, cp, ep, rep = (_whole(log, f"parallelism.{key}_degree", par.get(f"{key}_degree", 1))
                           for key in ("tensor_parallel", "pipeline_parallel", "context_parallel", "expert_parallel",
                                       "data_parallel_replicate"))
    shard = _whole(log, "parallelism.data_parallel_shard_degree", par.get("data_parallel_shard_degree", -1), -1)
    meshed, group = mesh_world_size(clean), tp * pp * cp * rep
    if num_gpus and meshed and num_gpus != meshed:
        raise CommbenchError(f"{log}: --gpus {num_gpus}, but its device mesh line ('Building N-D device mesh') holds "
                             f"{meshed} GPU(s): give the --gpus it ran on, or none")
    said = "--gpus" if num_gpus else "its device mesh line"
    num_gpus = num_gpus or meshed
    if shard < 1:
        if not num_gpus:
            raise CommbenchError(f"TorchTitan log {source!r}: data_parallel_shard_degree is -1 (auto) and the log has "
                                 "no 'Building N-D device mesh with [...], [...]' line to read the GPU count from; "
                                 "give it with --gpus (one value for every log, or one per log in order)")
        if num_gpus % group:  # TorchTitan's ParallelDims refuses it: the run cannot have had this layout
            raise CommbenchError(f"{log}: {num_gpus} GPU(s) ({said}) are not a whole number of "
                                 f"tp*pp*cp*dp_replicate = {group}")
        shard = num_gpus // group
    elif num_gpus and num_gpus != shard * group:
        raise CommbenchError(f"{log}: {num_gpus} GPU(s) ({said}), but its parallelism degrees hold dp_shard*"
                             f"dp_replicate*cp*tp*pp = {shard * group}: give the --gpus it ran on, or none")
    dp = shard * rep
    world = dp * tp * pp * cp
    mbs = _whole(log, "training.local_batch_size", training["local_batch_size"])
    gbs = _whole(log, "training.global_batch_size", training.get("global_batch_size") or -1, -1)
    if gbs < 1:
        gbs = mbs * dp
    check_titan_flavor(log, config.get("model", {}), model)
    check_titan_device(log, clean, gpu)
    precision = titan_precision(log, config.get("model", {}).get("converters", []))
    if precision == "BF16":   # no converter: the FSDP mixed-precision parameter dtype (training.mixed_precision_param)
        param = str(training.get("mixed_precision_param") or "bfloat16").lower()
        precision = {"bfloat16": "BF16", "float32": "FP32", "float16": "FP16"}.get(param, param.upper())
    mode = str(config.get("activation_checkpoint", {}).get("mode", "none"))
    return {"source": source, "model": model, "gpu": gpu, "num_gpus": world, "precision": precision,
            "seq_len": _whole(log, "training.seq_len", training["seq_len"]), "gbs": gbs, "mbs": mbs, "tp": tp, "pp": pp, "cp": cp, "vp": 1,
            "ep": ep, "etp": None, "tokens_per_s_per_gpu": median(steady), "tflops_per_gpu": None,
            # without PP TorchTitan's FSDP2 gathers and reduce-scatters every micro-batch (search/frameworks.py
            # TITAN_DP_WITHOUT_PP): the row says FSDP=shard as the published tables do, so it is modelled as FSDP
            # (HSDP over the replicate degree); with PP its one gather a step is the distributed optimizer's
            "notes": f"TorchTitan log; {len(steps)} steps" + (f"; FSDP={shard}" if pp == 1 and shard > 1 else "")
            + (f"; {CUT_NOTE}" if cut_left_out else ""), "left_out": CUT_NOTE if cut_left_out else "",
            "release": "user",
            "recipe": {"recompute": {"full": "full", "selective": "selective"}.get(mode, "none"),
                       "dispatcher": "alltoall", "tp_comm_overlap": False, "sequence_parallel": True}}


def _one_value_per_key(pairs: list[tuple[str, Any]], path: str) -> dict[str, Any]:
    """A JSON object of a runs file; a key given twice is refused (JSON would keep the last without a word)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise CommbenchError(f"runs file {path!r}: field {key!r} given twice in one object ({out[key]!r} and "
                                 f"{value!r}): give it once")
        out[key] = value
    return out


def runs_file_text(path: str) -> str:
    """A RUNS file's text, without the UTF-8 byte-order mark some editors and exports put first (it would hide
    the JSON list's "[" and JSON refuses it)."""
    return read_user_file(path, "runs file", errors="replace").removeprefix("\ufeff")


# A JSON list opens with a value; a log line that opens with a bracket is a prefix, "[rank0]:[titan] ..."
_JSON_LIST_START = re.compile(r'\[\s*(?:[{\["\]-]|\d|true\b|false\b|null\b|$)')


def _log_kind(text: str) -> str | None:
    return ("megatron" if re.search(r"-+ arguments -+|elapsed time per iteration", text)
            else "torchtitan" if re.search(r"tps:|Running with args", text) else None)


def is_json_list(text: str) -> bool:
    """Whether a RUNS file's text is a JSON list (of runs), not a training log whose lines open with a bracket
    ("[rank0]:[titan] ...", "[2026-01-10 10:00:00] ..."): broken JSON is JSON unless it reads as a log."""
    if not _JSON_LIST_START.match(text.lstrip()):
        return False
    try:
        json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return _log_kind(text) is None
    return True


def read_runs(path: str, *, model: str | None, gpu: str | None, num_gpus: int | None = None) -> list[dict[str, Any]]:
    """Rows from one RUNS file: a JSON list, a Megatron-LM log or a TorchTitan log."""
    return read_runs_noted(path, model=model, gpu=gpu, num_gpus=num_gpus)[0]


def read_runs_noted(path: str, *, model: str | None, gpu: str | None,
                    num_gpus: int | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """read_runs' rows, and for a log what it read but did not count (lines of skipped or NaN iterations, a last
    line cut off mid-write): one line each, for calibrate to print."""
    rows = _read_rows(path, model=model, gpu=gpu, num_gpus=num_gpus)
    notes = [row.pop("left_out") for row in rows if row.get("source") == path and "left_out" in row
             and str(row.get("notes", "")).startswith(("Megatron-LM log", "TorchTitan log"))]
    return rows, [n for n in notes if n]


def _read_rows(path: str, *, model: str | None, gpu: str | None, num_gpus: int | None) -> list[dict[str, Any]]:
    text = runs_file_text(path)
    stripped = text.lstrip()
    if stripped.startswith("{"):  # JSON, but not the list of runs (it was called a TorchTitan log)
        try:
            json.loads(text)
        except json.JSONDecodeError:
            pass
        else:
            raise CommbenchError(f"runs file {path!r}: a JSON object; a runs file is a JSON list of objects shaped "
                                 "like calibration-runs.json")
    if is_json_list(stripped):
        try:
            rows = json.loads(text, object_pairs_hook=lambda pairs: _one_value_per_key(pairs, path))
        except json.JSONDecodeError as exc:
            raise CommbenchError(f"runs file {path!r}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        if not all(isinstance(r, dict) for r in rows):
            raise CommbenchError(f"runs file {path!r}: a JSON list of objects shaped like calibration-runs.json")
        return rows
    kind = _log_kind(text)
    if kind is None:
        raise CommbenchError(f"runs file {path!r}: neither a JSON list of runs, a Megatron-LM log "
                             "(arguments block + 'elapsed time per iteration') nor a TorchTitan log ('tps:')")
    if not model or not gpu:
        raise CommbenchError(f"runs file {path!r} is a {kind} log: give --model and --system for it")
    if kind == "megatron":
        return [parse_megatron_log(text, source=path, model=model, gpu=gpu, num_gpus=num_gpus)]
    return [parse_torchtitan_log(text, source=path, model=model, gpu=gpu, num_gpus=num_gpus)]
