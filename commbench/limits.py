"""Bounds on counts a user can type, checked before anything is expanded into lists.

A count that no real job reaches is a typo (`world_size = 1000000000`); expanding it first would
exhaust memory before any error could be printed. Each bound is far above real use and is named
in the one-line error so the user can see why the value was refused.
"""

from __future__ import annotations

from commbench.errors import invalid

MAX_WORLD_SIZE = 1 << 17  # 131,072 ranks: above the largest published training jobs (~100k GPUs)
MAX_ITERS = 1_000_000  # timed or warm-up iterations per point: every timed one is kept in the record
MAX_PLANNED_POINTS = 200_000  # points one launch (bench or sweep) may plan: days of measuring at 1 s each
MAX_GPUS = 131_072  # GPUs a plan may name: beyond any published training run; the search grows with it
MAX_MOE_IMBALANCE = 4096  # busiest / mean EP rank tokens: at most the EP size, which no layout here exceeds
# The search's HBM left free beyond the predicted total (plan/tune --mem-headroom). The predicted total already holds
# the model's reserve (4 GB + 5% of HBM: CUDA context, NCCL and library workspaces, allocator fragmentation;
# step/terms.py). 1.5%: every published layout of the calibration, held-out GB300 and newer-release tables fits under
# it (the tightest, Llama3-70B on 64 GB200 in fp8 under Megatron-FSDP with its double-buffered unit pools, at 98.3% of
# HBM; benchmarks/memory_fit.py; 2% until its gradient queue was charged as the launch holds it, step/fsdp.py), so the
# search does not refuse a layout NVIDIA ran.
DEFAULT_MEM_HEADROOM = 0.015
MAX_LAYOUT_INT = 1 << 24  # a layout's tp/ep/vp/mbs/gbs/...: larger ones overflow the planner's int64 arrays (a typo)


def check_world_size(value: int, field: str) -> int:
    """`value` if it is a rank count in 1..MAX_WORLD_SIZE, else the one-line error naming `field`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WORLD_SIZE:
        raise invalid(field, value, f"an integer from 1 to {MAX_WORLD_SIZE:,} (commbench's bound on ranks "
                                    "in one job)")
    return value


def check_point_count(count: int, what: str) -> None:
    """One line when a plan would hold more than MAX_PLANNED_POINTS points (counted before building them)."""
    if count > MAX_PLANNED_POINTS:
        from commbench.errors import CommbenchError

        raise CommbenchError(f"{what} would plan {count:,} points; at most {MAX_PLANNED_POINTS:,} per launch: "
                             "use fewer sizes, dtypes, group sizes or layouts, or split it into several runs")


TIMED_ITERS_WHY = "every timed iteration is kept in the record"
WARMUP_ITERS_WHY = "commbench's bound on the iterations run for each point"   # untimed: none is recorded


def check_iters(value: int, field: str, minimum: int = 1, why: str = TIMED_ITERS_WHY) -> int:
    """`value` if it is an iteration count in minimum..MAX_ITERS, else the one-line error naming `field` and `why`
    the bound holds for it."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_ITERS:
        raise invalid(field, value, f"an integer from {minimum} to {MAX_ITERS:,} ({why})")
    return value
