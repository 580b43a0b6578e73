"""A Megatron-LM training log as a row shaped like calibration-runs.json (see runlogs/__init__.py): the
arguments block `_print_args` prints and the per-iteration lines of `training_log`."""

from __future__ import annotations

import re
from statistics import median
from typing import Any

from commbench.errors import CommbenchError
from commbench.planner.calibrate.runlogs.common import (ANSI, CUT_NOTE, LAUNCHER_LABEL, _finite, _positive, _value,
                                                       _whole, cut_last_line)
from commbench.planner.calibrate.runlogs.megatron_features import (check_fsdp_strategy, check_moe_capacity,
                                                                   check_cp_comm, check_optimizer_instances, dispatcher,
                                                                   dp_overlap, flex_backend_of, recompute_mode,
                                                                   recompute_priced_note)
from commbench.planner.calibrate.runlogs.megatron_split import check_logged_split
from commbench.planner.calibrate.runlogs.megatron_warmup import (GRAPH_ARGS, MEGATRON_LOADED_AT, SPIKE_TIME_RATIO,
                                                                  averages_the_first, capture_spikes, graph_impl,
                                                                  graph_modules, iterations_before, warmup_iterations)

MEGATRON_ARG = re.compile(r"^\s*(\w+) \.+ (.*)$")
MEGATRON_ARG_ANYWHERE = re.compile(r"\s*\b\w+ \.{3,} ")   # an argument line behind a prefix MEGATRON_ARG does not read
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
# training_log's losses (" lm loss: 2.3E+00 |", " load_balancing_loss: ... |") and " grad norm: 1.234 |". An iteration
# that was not skipped counts in neither number above even when its loss or gradients were NaN (a bf16 run with
# --no-check-for-nan-in-loss-and-grad, which full-iteration CUDA graphs need: training.py training_log counts NaN only
# among skipped iterations), and a NaN or non-positive loss average is not printed at all ("if avg > 0.0",
# core_v0.16.1 training.py 2069): a non-finite figure or a loss other lines print and this one lacks marks it
# A Python traceback and the exception it ends in ("torch.OutOfMemoryError: CUDA out of memory. ..."): after the last
# iteration line, the run crashed (no "[after training is done]")
TRACEBACK = re.compile(r"^Traceback \(most recent call last\):")
EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt)\b.*")
# Megatron-LM prints the arguments block on rank 0 only (core_v0.16.1 arguments.py:1288-1291 _print_args, is_rank0)
# and the iteration lines on the last rank only (training.py:2088 print_rank_last): a launcher writing one file per
# rank splits them
PER_RANK_LOGS = ("Megatron-LM prints the arguments block on rank 0 and the iteration lines on the last rank: with one "
                 "log file per rank, concatenate the rank-0 and last-rank logs into one file and give that")
# A median of fewer lines than this cannot set a slow one aside: said with the measured figure
FEW_STEADY_LINES = 3
MEGATRON_HEALTH = re.compile(r"\|\s*([^|:]*?(?:loss|grad norm)):\s*([^\s|]+)")


# A Megatron-LM argument and the model field it is emitted from (emit/megatron.py model_args)
MEGATRON_MODEL_ARGS = (("num_layers", "num_layers"), ("hidden_size", "hidden"), ("num_attention_heads", "num_heads"),
                       ("num_experts", "num_routed_experts"), ("moe_router_topk", "top_k"),
                       ("moe_ffn_hidden_size", "expert_ffn"), ("ffn_hidden_size", "dense_ffn"))


NAN_FIGURES = "NaN or infinite loss or grad norm, or a loss other lines print missing (Megatron-LM prints no NaN average)"


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
    from commbench.planner.calibrate.runlogs.megatron_arch import architecture_mismatch
    differ = architecture_mismatch(spec, args)
    if differ:
        arg, want, got = differ
        raise CommbenchError(f"{log}: ran with {arg}={got!r}, but --model {model} has {want!r}: the log is of another "
                             "model (or a cut-down one); give the --model it trained")


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


# Megatron-LM's --fp8-recipe (core_v0.14.0 megatron/training/arguments.py:1224, default 'delayed'; core_v0.12.0 added
# it: before, delayed scaling was the only recipe) and what the step model prices each as. Transformer Engine's
# DelayedScaling and Float8CurrentScaling ('tensorwise', core_v0.14.0 megatron/core/fp8_utils.py:432-441) both scale
# per tensor (TransformerEngine v2.8 transformer_engine/common/recipe/__init__.py:106-108
# float8_per_tensor_scaling) and run the same FP8 GEMMs; they differ in where the scale comes from (an amax history
# of earlier iterations, or the tensor's own amax), which the step model does not price.
FP8_RECIPES_PRICED = {"tensorwise": "FP8", "delayed": "FP8-DS", "mxfp8": "MXFP8"}
DELAYED_NOTE = ("priced as per-tensor FP8, as --fp8-recipe tensorwise: delayed and current scaling run the same "
                "per-tensor-scaled FP8 GEMMs (Transformer Engine float8_per_tensor_scaling); the amax-history "
                "bookkeeping of delayed scaling is not priced")


def megatron_precision(log: str, args: dict[str, Any]) -> tuple[str, str]:
    """The row's precision from the logged --fp4/--fp8/--fp8-recipe/--fp16/--bf16, and a note where it is priced as
    another recipe than it ran ('' otherwise): FP16, and FP32 where the block prints bf16 False without fp16, are
    named (the step model lists them as not modelled), not read as BF16. An FP8 recipe the step model has no price
    for (blockwise: 128x128 weight and 1x128 activation blocks, other GEMM kernels; custom) is refused by name."""
    if args.get("fp4"):
        return "NVFP4", ""
    if args.get("fp8"):
        # no fp8_recipe printed: a release before core_v0.12.0, whose only recipe was delayed scaling
        recipe = str(args.get("fp8_recipe") or "delayed").lower()
        if recipe not in FP8_RECIPES_PRICED:
            why = ": 128x128 weight and 1x128 activation blocks, other GEMM kernels" if recipe == "blockwise" else ""
            raise CommbenchError(f"{log}: ran with fp8_recipe={recipe}, which the step model has no price for{why} "
                                 f"(allowed: {', '.join(FP8_RECIPES_PRICED)}); give a run of a priced recipe")
        note = f"fp8_recipe={recipe}" + ("" if "fp8_recipe" in args else " (no fp8_recipe printed: a release "
                                         "before core_v0.12.0, delayed scaling only)") + f": {DELAYED_NOTE}"
        return FP8_RECIPES_PRICED[recipe], note if recipe == "delayed" else ""
    if args.get("fp16"):
        return "FP16", ""
    return ("FP32" if "bf16" in args and not args["bf16"] else "BF16"), ""


# The arguments a run's row is read from (and the model's shape): two arguments blocks that differ in one of these
# are two runs in one log; a resumed run prints the same values again (its checkpoint paths may differ)
MEGATRON_RUN_ARGS = ("world_size", "tensor_model_parallel_size", "pipeline_model_parallel_size", "micro_batch_size",
                     "global_batch_size", "seq_length", "context_parallel_size", "virtual_pipeline_model_parallel_size",
                     "expert_model_parallel_size", "expert_tensor_parallel_size", "num_layers", "hidden_size",
                     "ffn_hidden_size", "num_attention_heads", "num_experts", "moe_ffn_hidden_size", "moe_router_topk",
                     "fp4", "fp8", "fp8_recipe", "recompute_granularity", "recompute_modules", "recompute_method",
                     "recompute_num_layers", "cpu_offloading", "cpu_offloading_num_layers", "cuda_graph_impl",
                     "cuda_graph_scope", "cuda_graph_modules", "enable_cuda_graph",
                     "moe_token_dispatcher_type",
                     "overlap_moe_expert_parallel_comm", "tp_comm_overlap", "overlap_grad_reduce", "overlap_param_gather",
                     "sequence_parallel",
                     "use_distributed_optimizer", "fp8_dot_product_attention", "moe_permute_fusion", "moe_grouped_gemm",
                     "use_megatron_fsdp", "use_custom_fsdp", "use_torch_fsdp2", "num_distributed_optimizer_instances",
                     "moe_expert_capacity_factor", "moe_pad_expert_input_to_capacity",
                     "data_parallel_sharding_strategy", "pipeline_model_parallel_layout",
                     "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
                     "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
                     "multi_latent_attention", "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim",
                     "v_head_dim", "group_query_attention", "num_query_groups", "kv_channels", "vocab_size",
                     "padded_vocab_size", "moe_layer_freq", "moe_shared_expert_intermediate_size",
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


FIRST_AVERAGED = ("Megatron-LM (core_v0.16.0 on) logs a start's first iteration without restarting its interval timer, "
                  "so the next line's average includes that warm-up iteration")


def _line_names(chosen: list, lines: list) -> str:
    return ", ".join(f"iteration {x[5]}" if x[5] is not None else f"line {lines.index(x) + 1}" for x in chosen)


def parse_megatron_log(text: str, *, source: str, model: str, gpu: str, num_gpus: int | None = None) -> dict[str, Any]:
    """One row from a Megatron-LM training log (see the module docstring); `num_gpus` (--gpus), when given, must
    be the log's world_size."""
    log = f"Megatron-LM log {source!r}"
    blocks: list[dict[str, Any]] = []
    # (arguments block before it, ms, TFLOP/s, skipped any, the global batch size the line logs, its iteration)
    lines: list[tuple[int, float, float | None, bool, int | None, int | None]] = []
    inside, cut, cut_left_out = False, cut_last_line(text), False
    unread: tuple[int, str] | None = None   # the first argument line not read (line number, what stands before it)
    loaded_at: dict[int, int] = {}   # per start, the iteration the checkpoint it loaded was saved at
    last_iteration: dict[int, int] = {}   # per arguments block (a start), the last iteration number logged
    printed: list[frozenset[str]] = []   # per iteration line, the losses it prints
    traceback_after = False   # a Python traceback after the last iteration line read so far (a crashed run)
    crash = ""   # the exception line it ends in
    for number, line in enumerate(text.splitlines()):
        line = LAUNCHER_LABEL.sub("", ANSI.sub("", line), count=1)
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
        elif inside and unread is None and (dotted := MEGATRON_ARG_ANYWHERE.search(line)):
            unread = (number + 1, line[:dotted.start()])   # an argument line behind a prefix not stripped
        loaded = MEGATRON_LOADED_AT.search(line)
        if loaded:
            loaded_at.setdefault(max(len(blocks), 1), int(loaded.group(1)))
        if TRACEBACK.search(line):
            traceback_after = True
        elif traceback_after and not crash and (raised := EXCEPTION_LINE.match(line)):
            crash = raised.group(0)[:100]
        elapsed = MEGATRON_ITER.search(line)
        if elapsed:
            traceback_after, crash = False, ""   # training went on after it (a warning's traceback, a restart)
        if elapsed and number == cut and not line.rstrip().endswith("|"):   # a whole line ends with its last '|'
            cut_left_out = True
        elif elapsed:
            iteration = MEGATRON_ITER_NUMBER.search(line)
            _check_iteration_order(log, iteration, len(blocks), last_iteration)
            rate = MEGATRON_TFLOPS.search(line)
            figures = dict(MEGATRON_HEALTH.findall(line))
            lines.append((max(len(blocks), 1), _positive(log, "elapsed time per iteration (ms)", elapsed.group(1)),
                          _positive(log, "throughput per GPU (TFLOP/s/GPU)", rate.group(1)) if rate else None,
                          any(int(n) for n in MEGATRON_SKIPPED.findall(line)) or not all(map(_finite,
                                                                                              figures.values())),
                          int(batch.group(1)) if (batch := MEGATRON_LOGGED_GBS.search(line)) else None,
                          int(iteration.group(1)) if iteration else None))
            printed.append(frozenset(k.strip() for k in figures if k.strip().endswith("loss")))
    losses = frozenset().union(*printed)   # a loss another line prints and a line lacks: its average was NaN
    lines = [x[:3] + (x[3] or not losses <= keys,) + x[4:] for x, keys in zip(lines, printed)]
    args = blocks[0] if blocks else {}
    if blocks and not args:
        where = (f"; its lines begin {unread[1]!r} (line {unread[0]}), a per-line prefix it does not strip (it strips "
                 "ANSI colours and a launcher's rank label: '[rank0]:', '[default0]:', '0: ', OpenMPI's "
                 "'[1,0]<stdout>:')" if unread else "")
        raise CommbenchError(f"{log}: its arguments block ('---- arguments ----' ... '---- end of arguments ----') "
                             f"was found but none of its lines could be read as '  name ....... value'{where}; give "
                             "the log without that prefix")
    if not args:
        raise CommbenchError(f"Megatron-LM log {source!r}: no arguments block ('---- arguments ----' ... "
                             "'---- end of arguments ----'); run with the default argument printing on"
                             + (f"; it has {len(lines)} iteration line(s): {PER_RANK_LOGS}; a Megatron-Bridge log "
                                "(which prints its config, not this block) is not read: give its run as a JSON row "
                                "(README, calibrate's runs files)" if lines else ""))
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
        raise CommbenchError(f"Megatron-LM log {source!r}: no 'elapsed time per iteration (ms)' lines; "
                             f"{PER_RANK_LOGS}")
    # the first iteration after each start (arguments block: a resumed run starts again) is warm-up, and with CUDA
    # graphs the warm-up and capture iterations after it (megatron_warmup.py)
    warmup, graph_why = warmup_iterations(args, log)
    log_interval = _whole(log, "log_interval", args["log_interval"]) if args.get("log_interval") is not None else 1
    spacing = _spacing_note(lines, log_interval)
    steady_lines, graph_lines, spikes, first_averaged = [], 0, [], []
    for start in dict.fromkeys(x[0] for x in lines):
        ours = [x for x in lines if x[0] == start]
        numbers = [x[5] for x in ours]
        before = iterations_before(numbers, loaded_at=loaded_at.get(start), log_interval=log_interval)
        graph_lines += sum(1 for b in before[1:] if b < warmup)
        if before[1:2] and before[1] >= warmup and averages_the_first(numbers, loaded_at=loaded_at.get(start),
                                                                      log_interval=log_interval):
            first_averaged.append(ours[1])
            before[1] = 0
        kept = [(x, b) for x, b in zip(ours, before) if b >= warmup]
        if kept and not any(key in args for key in GRAPH_ARGS):   # the log does not say: an obvious spike is named
            count = capture_spikes([x[1] for x, _ in kept], [b for _, b in kept])
            spikes += [x for x, _ in kept[:count]]
            kept = kept[count:]
        steady_lines += [x for x, _ in kept]
    if not steady_lines and warmup > 1:
        raise CommbenchError(f"{log}: only warm-up iterations logged: {graph_why}, which are not the run's "
                             "throughput; give a log with iteration lines after them (a smaller --log-interval or "
                             "more --train-iters)")
    if not steady_lines and first_averaged:
        raise CommbenchError(f"{log}: only the first iteration and the line averaging it logged: {FIRST_AVERAGED}; "
                             "give a log with at least 3 'elapsed time per iteration' lines (a smaller "
                             "--log-interval or more --train-iters)")
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
                             f"or has a {NAN_FIGURES} (a skipped optimizer step, a diverged run): not a training "
                             "run's throughput; give a log of iterations that trained")
    spike_names = ", ".join(f"iteration {x[5]}" if x[5] is not None else f"line {lines.index(x) + 1}"
                            for x in spikes)
    left_out_text = "; ".join(([f"{graph_lines} iteration line(s) after the first of CUDA-graph warm-up and "
                                 f"capture left out ({graph_why})"] if graph_lines else [])
                               + ([f"{_line_names(first_averaged, lines)} left out: {FIRST_AVERAGED}"]
                                  if first_averaged else [])
                               + ([f"{spike_names} left out: over {SPIKE_TIME_RATIO:g}x the median iteration time "
                                   "after them, right after a start, as CUDA-graph warm-up and capture are (the "
                                   "arguments block does not say whether the run used CUDA graphs: no "
                                   "cuda_graph_impl)"] if spikes else [])
                               + ([f"{len(ramp)} iteration line(s) of a batch-size ramp-up (a global batch size other "
                                 f"than global_batch_size={full_batch}) left out"] if ramp else [])
                               + ([f"{len(steady_lines) - len(healthy)} iteration line(s) counting skipped or NaN "
                                 f"iterations, or with a {NAN_FIGURES}, left out"] if len(healthy) < len(steady_lines) else [])
                               + ([CUT_NOTE] if cut_left_out else []) + ([spacing] if spacing else []))
    numbers = [x[5] for x in healthy if x[5] is not None]
    measured_text = (f"measured: the median of {len(healthy)} of its {len(lines)} iteration lines"
                     + ((f" (iterations {min(numbers)}-{max(numbers)})" if min(numbers) < max(numbers)
                                                          else f" (iteration {numbers[0]})") if numbers else "") + ", the rest warm-up or "
                     "left out" + (f"; only {len(healthy)}: too few for a median to set a slow one aside"
                                   if len(healthy) < FEW_STEADY_LINES else ""))
    last = next((x[5] for x in reversed(lines) if x[5] is not None), None)
    crash_text = (f"crashed after iteration {last if last is not None else len(lines)} "
                  f"({crash[:60] + ('...' if len(crash) > 60 else '') or 'a traceback'}): the lines before it are read"
                  if traceback_after else "")
    steady = [x[1] for x in healthy]
    tflops = [x[2] for x in healthy if x[2] is not None]
    left_out = len(steady_lines) - len(healthy)
    sizes = {key: _whole(log, key, args[key]) for key in need}
    for key in ("context_parallel_size", "virtual_pipeline_model_parallel_size", "expert_model_parallel_size",
                "expert_tensor_parallel_size"):
        # None where Megatron-LM prints it unset (no interleaving, etp = tp); 0 or any other value is checked
        sizes[key] = _whole(log, key, args[key]) if args.get(key) is not None else None
    world, gbs, seq = sizes["world_size"], sizes["global_batch_size"], sizes["seq_length"]
    if num_gpus and num_gpus != world:
        raise CommbenchError(f"{log}: --gpus {num_gpus}, but it ran with world_size={world}: give the --gpus it ran "
                             "on, or none (a Megatron-LM log states its own)")
    mtp = megatron_mtp_note(log, args, model)
    fsdp = megatron_fsdp_note(log, args, world // (sizes["tensor_model_parallel_size"] * sizes[
        "pipeline_model_parallel_size"] * (sizes["context_parallel_size"] or 1)))
    check_fsdp_strategy(log, args)
    pipeline_layout, split_note = check_logged_split(log, args, model, pp=sizes["pipeline_model_parallel_size"],
                                    vp=sizes["virtual_pipeline_model_parallel_size"] or 1,
                                    tp=sizes["tensor_model_parallel_size"], without_mtp=mtp == "w/o MTP")
    check_cp_comm(log, args, model, sizes["context_parallel_size"] or 1)
    moe_dispatcher = dispatcher(log, args)
    backend = flex_backend_of(args) if moe_dispatcher == "flex" else None
    recompute = recompute_mode(log, args)
    recompute_note = recompute_priced_note(args, model)
    check_moe_capacity(log, args, model)
    check_optimizer_instances(log, args)
    scope = graph_modules(args)   # cuda_graph_modules from core 0.18.0 on, cuda_graph_scope before
    impl = graph_impl(args)   # --external-cuda-graph is transformer_engine; core_v0.19.0 names full_iteration an impl
    graph = "full" if impl == "full_iteration" or "full_iteration" in (scope if isinstance(scope, list) else [scope]) \
        else ("layer" if impl in ("local", "transformer_engine") else "none")
    precision, precision_note = megatron_precision(log, args)
    row = {"source": source, "model": model, "gpu": gpu, "num_gpus": world, "precision": precision,
           "seq_len": seq, "gbs": gbs, "mbs": sizes["micro_batch_size"],
           "tp": sizes["tensor_model_parallel_size"], "pp": sizes["pipeline_model_parallel_size"],
           "cp": sizes["context_parallel_size"] or 1, "vp": sizes["virtual_pipeline_model_parallel_size"] or 1,
           "ep": sizes["expert_model_parallel_size"] or 1, "etp": sizes["expert_tensor_parallel_size"],
           "tokens_per_s_per_gpu": gbs * seq / (median(steady) / 1000.0 * world),
           "tflops_per_gpu": median(tflops) if tflops else None,
           "notes": f"Megatron-LM log; median of {len(healthy)} of {len(lines)} iteration line(s)"
           + (f" (log_interval {log_interval}: each averages {log_interval} iterations)" if log_interval > 1 else "") + "".join(f"; {n}" for n in (fsdp, mtp, split_note, recompute_note) if n) + (
               f" ({left_out} counting skipped or NaN iterations, or with a NaN loss or grad norm, left out)"
               if left_out else "") + (
               f"; {graph_lines + len(spikes)} CUDA-graph warm-up line(s) left out" if graph_lines or spikes
               else "") + (
               f"; {CUT_NOTE}" if cut_left_out else "") + ("; crashed" if traceback_after else ""), "measured": measured_text, "crashed": crash_text, "split": split_note, "left_out": left_out_text, "priced_as": recompute_note,
           "precision_as": precision_note, "release": "user",
           **({"pipeline_layout": pipeline_layout} if pipeline_layout else {}),
           **({"flex_backend": backend} if backend else {}),
           "recipe": {"recompute": recompute,
                      # block recompute: that many layers of each model chunk (recompute_layers); uniform: every layer
                      "recompute_layers": _whole(log, "recompute_num_layers", args["recompute_num_layers"])
                      if recompute == "full" and args.get("recompute_method") == "block"
                      and args.get("recompute_num_layers") else 0,
                      "cpu_offload_layers": _whole(log, "cpu_offloading_num_layers", args["cpu_offloading_num_layers"])
                      if args.get("cpu_offloading") and args.get("cpu_offloading_num_layers") else 0,
                      "dispatcher": moe_dispatcher,
                      "moe_a2a_overlap": bool(args.get("overlap_moe_expert_parallel_comm")),
                      "tp_comm_overlap": bool(args.get("tp_comm_overlap")),
                      "dp_overlap": dp_overlap(log, args),
                      "sequence_parallel": bool(args.get("sequence_parallel")) or sizes["tensor_model_parallel_size"] == 1,
                      "distributed_optimizer": bool(args.get("use_distributed_optimizer")),
                      "cuda_graph": graph, "cuda_graph_scope": _graph_modules(graph, scope),
                      "fp8_attention": bool(args.get("fp8_dot_product_attention")),
                      "fused_moe": bool(args.get("moe_permute_fusion")) and bool(args.get("moe_grouped_gemm"))}}
    return row


def _spacing_note(lines: list[tuple], log_interval: int) -> str:
    """A note where the iteration lines of one start stand other than log_interval apart (training_log prints every
    log_interval-th iteration, core_v0.16.1 training.py: `if iteration % args.log_interval == 0`): lines cut out or
    joined from another run, or another interval than the block says; the warm-up is counted with the block's."""
    gaps = {}
    for (start, *_, number), (other, *_, after) in zip(lines, lines[1:]):
        if start == other and number is not None and after is not None and number >= log_interval:
            gaps[after - number] = gaps.get(after - number, 0) + 1
    off = sorted(g for g in gaps if g != log_interval)
    if not off:
        return ""
    return (f"iteration lines {', '.join(map(str, off))} iteration(s) apart, though the arguments block's log_interval "
            f"is {log_interval} (Megatron-LM prints every log_interval-th iteration): lines left out of the log, or "
            "another interval; the warm-up is counted with log_interval")


def _graph_modules(graph: str, scope) -> str:
    """The logged --cuda-graph-scope as the layout field (graph_scope.py): its capture modules joined by
    '+', 'layer' for per-layer graphs of the whole layer (an empty scope, or Megatron-Core's older 'full')."""
    from commbench.planner.layout.graph_scope import MODULES, WHOLE_LAYER_NAME
    if graph != "layer":
        return ""
    names = list(dict.fromkeys(m for m in re.findall(r"[a-z_]+", str(scope)) if m in MODULES))
    return "+".join(names) or WHOLE_LAYER_NAME
