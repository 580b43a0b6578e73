"""The optimizer step's fp32 gradient copy (step/memory.py optimizer_step_grad_bytes).

megatron-core's DistributedOptimizer (and Float16OptimizerWithFloat16Params) steps on `main_grad.float()`: with the bf16
gradient buffer the plans launch, a new fp32 tensor per parameter of the rank's optimizer shard, 4 B beside the 12 B
of state, held from prepare_grads until the next train_step's zero_grad, after the activations are freed. The peak
holds the larger of the two: a layout with few saved activations (full recompute) peaks at the optimizer step.
"""

from __future__ import annotations

import numpy as np
import pytest

from commbench.planner import Layout, load_model
from commbench.planner.calibrate.published import _preset
from commbench.planner.layout.spec import LayoutArrays
from commbench.planner.step.evaluate import evaluate_layouts
from commbench.planner.step.loss_memory import run_loss


def _breakdown(layouts, framework="megatron"):
    return evaluate_layouts(load_model("llama3-8b"), _preset("h100-hgx", 8), LayoutArrays.from_layouts(layouts),
                            seq_len=4096, loss=run_loss(framework), framework=framework)


def test_full_recompute_layout_peaks_at_the_optimizer_steps_fp32_gradient_copy():
    bd = _breakdown([Layout(tp=1, pp=1, dp=8, mbs=1, gbs=64, recompute="full"),
                     Layout(tp=1, pp=1, dp=8, mbs=1, gbs=64, recompute="none")])
    static = bd.mem_weights_bytes + bd.mem_grads_bytes + bd.mem_optimizer_bytes
    # 4 B of fp32 gradient per parameter whose 12 B of optimizer state the rank holds
    assert bd.mem_optimizer_step_bytes == pytest.approx(bd.mem_optimizer_bytes / 3.0)
    # full recompute keeps only the layer inputs: the optimizer step's copy is the larger, and the total holds it
    assert bd.mem_optimizer_step_bytes[0] > bd.mem_activations_bytes[0]
    assert bd.mem_total_bytes[0] == pytest.approx(static[0] + bd.mem_optimizer_step_bytes[0] + bd.mem_reserve_bytes[0])
    # without recompute the activations are the larger: the copy adds nothing (never held beside them)
    assert bd.mem_activations_bytes[1] > bd.mem_optimizer_step_bytes[1]
    assert bd.mem_total_bytes[1] == pytest.approx(static[1] + bd.mem_activations_bytes[1] + bd.mem_reserve_bytes[1])


def test_no_fp32_gradient_copy_under_megatron_fsdp_or_torchtitan():
    fsdp = _breakdown([Layout(tp=1, pp=1, dp=8, mbs=1, gbs=64, recompute="full", fsdp=True)])
    titan = _breakdown([Layout(tp=1, pp=1, dp=8, mbs=1, gbs=64, recompute="full")], framework="torchtitan")
    assert np.all(fsdp.mem_optimizer_step_bytes == 0.0) and np.all(titan.mem_optimizer_step_bytes == 0.0)


def test_plan_shows_the_gradient_copy_where_the_total_holds_it():
    from typer.testing import CliRunner

    from commbench.cli.app import app
    args = ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8", "--seq-len", "2048", "--layout",
            "tp=1,pp=1,vp=1,ep=1,dp=8,mbs=1,recompute={}"]
    full = CliRunner().invoke(app, args[:-1] + [args[-1].format("full")], terminal_width=200)
    assert full.exit_code == 0, full.output
    assert "optimizer step's fp32 gradient copy (held instead of the activations)" in full.output
    none = CliRunner().invoke(app, args[:-1] + [args[-1].format("none")], terminal_width=200)
    assert none.exit_code == 0, none.output
    assert "gradient copy" not in none.output
