"""What --recompute-modules moe_act costs: the routed experts' activation function run forward once more.

megatron-core 0.16.1 transformer/moe/experts.py TEGroupedMLP.forward (736-750) checkpoints the whole bias_act_func
(CheckpointWithoutOutput) and re-runs it before FC2's backward: the GLU (read two FFN-widths, write one) and, for a
clamped GLU (gpt-oss, activation_func_clamp_value: 680-725), its chunk + clamp + concatenate passes, per routed
token copy. The step model charged 1/12 of every memory-bound kernel instead: for gpt-oss-120b 0.55x the pass it
re-runs, for DeepSeek-V3 3.0x."""

from __future__ import annotations

import pytest

from commbench.costmodel import load_preset
from commbench.planner.layout.spec import Layout, LayoutArrays
from commbench.planner.models.zoo import load_model
from commbench.planner.step import memory
from commbench.planner.step.evaluate import evaluate_layouts


@pytest.mark.parametrize("name, clamp_widths", [("gpt-oss-120b", 8.0), ("qwen3-30b-a3b", 0.0)])
def test_moe_act_recompute_reruns_the_experts_activation_pass(name, clamp_widths):
    """recompute_s / memory_bound_s = the activation pass's bytes / every memory-bound kernel's (both at one HBM rate;
    pp = 1, so no stage imbalance), the pass counted by hand from the model's sizes."""
    model = load_model(name)
    lay = Layout(tp=1, pp=1, ep=8, dp=8, mbs=1, gbs=8, precision="bf16", recompute="moe_act")
    arr = LayoutArrays.from_layouts([lay])
    bd = evaluate_layouts(model, load_preset("b200-hgx", num_gpus=8), arr, seq_len=4096)
    tokens = 4096.0
    glu_widths = 3.0   # a GLU reads its two halves and writes one
    hand = tokens * model.top_k * (glu_widths + clamp_widths) * model.expert_ffn * model.num_moe_layers * 2.0
    everything = memory.elementwise_bytes_per_microbatch(model, arr, arr.tp, arr.cp, arr.pp, arr.sequence_parallel,
                                                         tokens)[0]
    assert bd.valid[0] and bd.memory_bound_s[0] > 0
    assert bd.recompute_s[0] / bd.memory_bound_s[0] == pytest.approx(hand / everything, rel=1e-9)
