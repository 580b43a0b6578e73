"""Peak-memory terms checked against published peaks (issue 24: planner bests predicted at 96-98.6% of HBM).

- A per-layer CUDA graph over moe_router + moe_preprocess with the alltoall dispatcher holds each MoE layer's permuted
  tokens until the layer's backward (layout/recompute.py graph_kept_permuted_tokens) in its graph pool: Transformer
  Engine weak-refs the graph's static outputs once its backward graph is captured (2.15-2.18 pytorch/graph.py under
  _reuse_graph_input_output_buffers), so they are reserved HBM, not allocated (step/memory.py
  graph_pool_permuted_bytes). Published: Qwen3-30B-A3B BF16 on 16 H100, EP16, mbs 1, seq 4096, alltoall, graphs over
  moe_router + moe_preprocess: 61.351 GB (decimal: Megatron-Bridge's log, train_utils.py report_memory / 1.0e9) peak
  allocated (Megatron-Bridge docs/training/moe-optimization.md).
- Full recompute: the loss stage's logits and the re-run layer's working set never coexist (the loss and output
  layer's backward free the logits before autograd reaches the last layer's checkpoint): the larger one is charged.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from commbench.planner import Layout, load_model
from commbench.planner.calibrate.published import _preset
from commbench.planner.layout.spec import LayoutArrays
from commbench.planner.step import memory
from commbench.planner.step.evaluate import evaluate_layouts
from commbench.planner.step.loss_memory import run_loss
from commbench.planner.step.stage_memory import candidate_arrays

GiB = 2 ** 30
QWEN3_30B_16_H100 = dict(tp=1, pp=1, ep=16, dp=16, mbs=1, gbs=1024, moe_a2a_overlap=True, cuda_graph="layer",
                         cuda_graph_scope="moe_router+moe_preprocess")


def _activations(model, layouts, gpus=16, seq_len=4096):
    bd = evaluate_layouts(model, _preset("h100-hgx", gpus), LayoutArrays.from_layouts(layouts), seq_len=seq_len,
                          loss=run_loss("megatron"))
    return bd


def test_graphed_alltoall_preprocess_keeps_the_permuted_tokens_in_the_graph_pool():
    model = load_model("qwen3-30b-a3b")
    graphed = Layout(**QWEN3_30B_16_H100, dispatcher="alltoall")
    flex = Layout(**QWEN3_30B_16_H100, dispatcher="flex")
    no_preprocess = Layout(**{**QWEN3_30B_16_H100, "cuda_graph_scope": "attn+moe_router"}, dispatcher="alltoall")
    ungraphed = Layout(**{**QWEN3_30B_16_H100, "cuda_graph": "none", "cuda_graph_scope": ""}, dispatcher="alltoall")
    bd = _activations(model, [graphed, flex, no_preprocess, ungraphed])
    act, reserve = bd.mem_activations_bytes, bd.mem_reserve_bytes
    permuted = model.num_layers * 4096 * model.top_k * model.hidden * 2   # every layer is MoE; bf16
    # the same allocated activations; the graph pool (reserve) holds the permuted tokens, as many as before
    assert act[0] == pytest.approx(act[1]) and act[2] == pytest.approx(act[1]) and act[3] == pytest.approx(act[1])
    assert reserve[0] - reserve[2] == pytest.approx(permuted)
    assert reserve[1] == pytest.approx(reserve[2])
    # against the published peak allocated (61.351 GB, decimal as Megatron-Bridge logs it: 57.14 GiB): within 3%
    allocated = (bd.mem_weights_bytes + bd.mem_grads_bytes + bd.mem_optimizer_bytes + act)[0]
    assert allocated == pytest.approx(61.351e9, rel=0.03)


def test_full_recompute_charges_the_larger_of_logits_and_the_working_set():
    model = load_model("deepseek-v3")
    arr = LayoutArrays.from_layouts([Layout(tp=1, pp=1, ep=8, mbs=1, recompute="full")])
    one = np.ones(1, dtype=np.int64)
    tokens = np.array([4096.0])
    saved = memory.SavedElements(model, arr, tp=one, cp=one, etp=one, sp=np.array([False]))
    (load,) = candidate_arrays(model, one, one, one)
    assert bool(np.ravel(load.loss)[0])
    working = float(tokens[0] * saved.recompute_working(load.counts)[0] * memory.BF16)
    assert working > 0

    def act(logits):
        return float(memory.rank_activation_bytes(model, arr, load, saved, vp=one, n_mb=np.array([8.0]),
                                                  tokens_mb=tokens, logits=np.array([logits]))[0])
    stored = act(0.0) - working
    assert act(0.5 * working) == pytest.approx(stored + working)     # logits freed before the recompute
    assert act(3.0 * working) == pytest.approx(stored + 3.0 * working)


def test_no_graph_term_without_megatron_or_moe():
    dense = load_model("llama3-8b")
    arr = LayoutArrays.from_layouts([Layout(tp=1, cuda_graph="layer")])
    assert memory.graph_permuted_tokens(dense, arr) == 0.0
    moe = load_model("qwen3-30b-a3b")
    arr = LayoutArrays.from_layouts([Layout(ep=8, dispatcher="alltoall", cuda_graph="layer")])
    assert memory.graph_permuted_tokens(moe, arr, "torchtitan") == 0.0
    assert memory.graph_permuted_tokens(moe, arr)[0] == 1.0     # the recipes' scope holds moe_preprocess
    assert memory.graph_permuted_tokens(moe, SimpleNamespace()) == 0.0


def test_a_moe_ranks_backward_holds_the_returning_gradient_beside_its_saved_tensors():
    """DeepSeek-V3 over 8 stages, recompute none: a rank without the loss holds, at its peak, its in-flight saved
    tensors plus the gradient of one MoE layer's expert output, routed rows x hidden in bf16, twice over the
    all-to-all (input and output live together; etp 1); the loss rank the larger of that and its logits."""
    model = load_model("deepseek-v3")
    arr = LayoutArrays.from_layouts([Layout(tp=1, pp=8, ep=8, mbs=1)])
    one = np.ones(1, dtype=np.int64)
    tokens = np.array([4096.0])
    saved = memory.SavedElements(model, arr, tp=one, cp=one, etp=one, sp=np.array([False]))
    transient = memory.moe_backward_transient_bytes(model, tp=one, cp=one, etp=one, tokens_mb=tokens)
    assert transient[0] == pytest.approx(2 * 4096 * model.top_k * model.hidden * 2)
    flex = memory.moe_backward_transient_bytes(model, tp=one, cp=one, etp=one, tokens_mb=tokens, flex=np.array([True]))
    assert flex[0] == pytest.approx((4096 * model.top_k + 4096) * model.hidden * 2)   # the un-expanded gradient in
    logits = memory.logits_bytes(model, tp=one, cp=one, tokens_mb=tokens)
    for load in candidate_arrays(model, 8 * one, one, one):
        kw = dict(vp=one, n_mb=np.array([32.0]), tokens_mb=tokens, logits=logits)
        without = float(memory.rank_activation_bytes(model, arr, load, saved, **kw)[0])
        with_it = float(memory.rank_activation_bytes(model, arr, load, saved, transient=transient, **kw)[0])
        loss = float(np.where(np.ravel(load.loss)[0], logits[0], 0.0))
        assert with_it - (without - loss) == pytest.approx(max(loss, float(transient[0])))
    # memory_per_gpu charges it on the busiest rank: tests/test_stage_memory.py (by hand, rank by rank)
