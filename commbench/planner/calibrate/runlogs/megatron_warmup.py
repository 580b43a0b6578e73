"""Which iterations of a Megatron-LM log are warm-up, not the run's steady state: the first after each start
(compilation, allocator, NCCL set-up) and, with CUDA graphs, the eager warm-up and capture iterations after it.

What Megatron-LM does (megatron/training/training.py train(), core_v0.16.1):
- full-iteration graphs (`--cuda-graph-impl local --cuda-graph-scope full_iteration`; `--cuda-graph-impl
  full_iteration` in core_v0.19.0; `--enable-cuda-graph --cuda-graph-scope full_iteration` before core_v0.15):
  megatron/core/full_cuda_graph.py FullCudaGraphWrapper runs the first `cuda_graph_warmup_steps` iterations of a
  process eagerly and captures in the next one: W + 1 iterations after each start are not graph replays.
- Transformer Engine graphs (`--cuda-graph-impl transformer_engine`, the deprecated `--external-cuda-graph`):
  train() calls TECudaGraphHelper.create_cudagraphs() before the step where iteration - start_iteration ==
  cuda_graph_warmup_steps: W eager iterations, then one that captures; W + 1 again. (core_v0.13.0 captured in the
  first iteration of a start: there this leaves out W iterations more than it needs, never a capture.)
- per-layer local graphs (`--cuda-graph-impl local`, `--enable-cuda-graph`): megatron/core/transformer/
  cuda_graphs.py create_cudagraphs() captures at the end of the first step's schedule (its warm-up runs inside that
  capture): only the first iteration, as without graphs.
W is `--cuda-graph-warmup-steps` (megatron/core/transformer/transformer_config.py
TransformerConfig.cuda_graph_warmup_steps, default 3; the argument's default is 3 since core_v0.12.0).

A logged line averages the iterations since the line before it (training_log, every --log-interval iterations),
so a line is steady only when every iteration it averages comes after the warm-up.
"""

from __future__ import annotations

import re
from statistics import median
from typing import Any

from commbench.planner.calibrate.runlogs.common import _whole

DEFAULT_GRAPH_WARMUP_STEPS = 3   # TransformerConfig.cuda_graph_warmup_steps, core_v0.16.1
# "successfully loaded checkpoint from DIR [ t 1/1, p 1/2 ] at iteration N" (megatron/training/checkpointing.py
# load_checkpoint): the iteration a resumed start begins after
MEGATRON_LOADED_AT = re.compile(r"successfully loaded checkpoint from .*?at iteration\s+(\d+)")
# Where the arguments block does not say whether the run used CUDA graphs: a line among the first iterations after
# a start that takes this much longer than the median of the lines after it is read as graph warm-up and capture
GRAPH_ARGS = ("cuda_graph_impl", "enable_cuda_graph", "external_cuda_graph")
SPIKE_TIME_RATIO = 1.25
SPIKE_WINDOW_ITERATIONS = 2 * (DEFAULT_GRAPH_WARMUP_STEPS + 1)


def graph_impl(args: dict[str, Any]) -> str:
    """The CUDA-graph implementation a logged arguments block ran with, under its current name: cuda_graph_impl,
    else 'local' for --enable-cuda-graph and 'transformer_engine' for --external-cuda-graph (arguments.py
    validate_args renames them so, core_v0.16.1), else 'none'."""
    impl = str(args.get("cuda_graph_impl") or "none")
    if impl != "none":
        return impl
    if args.get("enable_cuda_graph"):
        return "local"
    return "transformer_engine" if args.get("external_cuda_graph") else "none"


def graph_modules(args: dict[str, Any]) -> Any:
    """The logged per-layer CUDA-graph capture modules: cuda_graph_modules from Megatron-Core 0.18.0 on (core_v0.19.0
    arguments.py: --cuda-graph-scope is a hidden deprecated spelling whose value moves to cuda_graph_modules and whose
    own entry is deleted before the block is printed), else cuda_graph_scope (up to core_v0.17); [] where neither."""
    if args.get("cuda_graph_modules") is not None:
        return args["cuda_graph_modules"]
    return args.get("cuda_graph_scope") or []


def warmup_iterations(args: dict[str, Any], log: str = "Megatron-LM log") -> tuple[int, str]:
    """How many iterations after each start are not steady (see the module docstring), and why when more than the
    first: ('' for the first only). A printed cuda_graph_warmup_steps that is not a count is one line (it was read
    as absent: Megatron-Core's default taken)."""
    impl, scope = graph_impl(args), graph_modules(args)
    full = impl == "full_iteration" or (impl == "local" and "full_iteration" in str(scope))
    if not full and impl != "transformer_engine":
        return 1, ""
    steps = args.get("cuda_graph_warmup_steps")
    if steps is not None:
        steps = _whole(log, "cuda_graph_warmup_steps", steps, 0)
    said = steps is not None
    steps = steps if said else DEFAULT_GRAPH_WARMUP_STEPS
    kind = "full-iteration" if full else "Transformer Engine"
    why = (f"{kind} CUDA graphs (cuda_graph_impl={impl}): the first {steps + 1} iteration(s) after each start are "
           f"{steps} eager warm-up and 1 capture" + ("" if said else " (cuda_graph_warmup_steps not in the arguments "
                                                     f"block: Megatron-Core's default {DEFAULT_GRAPH_WARMUP_STEPS} "
                                                     "taken)"))
    return steps + 1, why


def iterations_before(numbers: list[int | None], *, loaded_at: int | None, log_interval: int) -> list[int]:
    """For the iteration lines of one start (their logged iteration numbers, None where a line has none): how many
    iterations after the start come before the first one each line averages (0 for the first line); a line is
    warm-up where this is below warmup_iterations. The start is the iteration a checkpoint was loaded at; else 0
    where the first line falls in the first --log-interval (a fresh run); else just before the first line (where it
    began is not logged: at most one line more is left out); never after the first line. Lines without numbers
    count one --log-interval each."""
    if not numbers or any(n is None for n in numbers):
        return [i * log_interval for i in range(len(numbers))]
    start = _start(numbers[0], loaded_at, log_interval)
    return [0] + [numbers[i - 1] - start for i in range(1, len(numbers))]


def _start(first: int, loaded_at: int | None, log_interval: int) -> int:
    """The iteration a start began after (iterations_before says how it is read), from its first line's number."""
    return min(loaded_at if loaded_at is not None else (0 if first <= log_interval else first - 1), first - 1)


def averages_the_first(numbers: list[int | None], *, loaded_at: int | None, log_interval: int) -> bool:
    """Whether a start's second line still averages its first iteration: the start's first line is that first
    iteration (iterations_before's start + 1). Megatron-LM logs a process's first iteration without restarting the
    interval timer or the iteration counts (training_log: `should_reset = not is_first_iteration`, from core_v0.16.0
    to core_v0.19.0; not in core_v0.15.0), so the next line is the average of every iteration since the start, the
    first included. Older releases log no first-iteration line unless it falls on --log-interval; where the interval
    is 1 a log cannot tell them apart, and the line is left out either way (one line of data, never a biased one)."""
    if len(numbers) < 2 or any(n is None for n in numbers[:2]):
        return False
    return numbers[0] == _start(numbers[0], loaded_at, log_interval) + 1


def capture_spikes(times_ms: list[float], before: list[int]) -> int:
    """For a start's steady lines (ms each, and the iterations since the start before each line's interval), in a log
    whose arguments do not say whether the run used CUDA graphs: how many leading lines are an obvious graph
    warm-up or capture spike (SPIKE_TIME_RATIO over the median of the lines after it, within the first
    SPIKE_WINDOW_ITERATIONS). At least one line is kept."""
    count = 0
    while (count < len(times_ms) - 1 and before[count] < SPIKE_WINDOW_ITERATIONS
           and times_ms[count] > SPIKE_TIME_RATIO * median(times_ms[count + 1:])):
        count += 1
    return count
