"""The fewest GPUs whose HBM can hold a model's optimizer state at all: a bound from arithmetic alone, checked
before any layout is built, so a model file of absurd size (a million layers) is answered at once instead of
after the search and its fallback over larger GPU counts have built and evaluated layouts for minutes.

Every layout the step model prices holds each trained parameter's optimizer state on some GPU, at least once:
12 B per parameter (fp32 master copy + two Adam moments; step/memory.py static_bytes_per_rank, whatever the
precision or framework), split over TP x PP x EP and sharded over the data-parallel group at best. Weights,
gradients and activations only add to it, and the busiest GPU holds at least the mean, so N GPUs can hold no
layout unless N x (HBM a GPU may fill) >= 12 B x parameters. A necessary condition, never a sufficient one: where
it holds the search still decides."""

from __future__ import annotations

import math

from commbench.planner.models.counts import framework_model, param_counts
from commbench.planner.models.spec import ModelSpec
from commbench.planner.step.memory import OPTIMIZER_STATE_BYTES_PER_PARAM


def trained_params(model: ModelSpec, framework: str) -> float:
    """Parameters the framework's launch builds and trains (MTP included where it builds MTP: counts.py)."""
    counts = param_counts(framework_model(model, framework))
    return counts.total + counts.mtp


def fillable_bytes_per_gpu(gpu, calibration, headroom_fraction: float) -> float:
    """HBM a GPU may fill with a layout's state: usable HBM less the search's headroom and the model's reserve
    (step/memory.py memory_per_gpu: reserve_fixed_bytes + reserve_fraction of HBM)."""
    capacity = gpu.usable_hbm_bytes
    return capacity * (1.0 - headroom_fraction - calibration.reserve_fraction) - calibration.reserve_fixed_bytes


def min_gpus_for_optimizer_state(model: ModelSpec, gpu, calibration, headroom_fraction: float,
                                 framework: str) -> int:
    """ceil(12 B x trained parameters / fillable HBM per GPU): below this count no layout fits in memory."""
    fillable = fillable_bytes_per_gpu(gpu, calibration, headroom_fraction)
    if fillable <= 0:
        return 1   # the search's own memory check says why (the reserve alone fills the GPU)
    return max(1, math.ceil(OPTIMIZER_STATE_BYTES_PER_PARAM * trained_params(model, framework) / fillable))
