"""Megatron-FSDP's non-unit parameters in every model (megatron-core 0.16.1, step/fsdp.py's docstring): only
TransformerLayers are FSDP units, so the embedding, the output layer, the final norm (and a hybrid's Mamba layers, an
MTP layer's projection and norms) share one parameter group that is gathered by the step's first forward and kept
until the step ends. The step model charged the embedding, output layer and final norm as units' parameters (gathered
twice per micro-batch, averaged into every unit's buffer) and memory did not keep them gathered."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from commbench.costmodel import collective_time_s, load_preset
from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.layout.placement import domains_touched, gpus_per_rack
from commbench.planner.models.counts import param_counts, step_vocab
from commbench.planner.models.mamba import mamba_params_per_layer
from commbench.planner.step import fsdp
from commbench.planner.step.terms import CALIBRATED


def non_unit_by_hand(model, tp: int) -> float:
    """Per GPU at pp = 1: embedding (+ output layer unless tied) rows Megatron builds, the final norm, every Mamba
    layer with its pre-norm, every MTP layer's eh_proj (2h x h) and three norms; over TP."""
    h, vocab = model.hidden, float(step_vocab(model, np.array([tp]))[0])
    mamba = model.num_mamba_layers * (mamba_params_per_layer(model) + h) if model.num_mamba_layers else 0.0
    return ((1 if model.tied_embeddings else 2) * vocab * h + h + mamba
            + model.num_mtp_layers * (2 * h * h + 3 * h)) / tp


def _row(name, gpus, *, dp_overlap=False, framework="megatron", **kw):
    model, fabric = load_model(name), load_preset("h100-hgx", num_gpus=gpus)
    lay = Layout.for_world(gpus, pp=1, etp=1, mbs=1, gbs=256, fsdp=True, distributed_optimizer=True,
                           precision="bf16", dp_overlap=dp_overlap, **kw)
    return model, fabric, lay, evaluate_layouts(model, fabric, LayoutArrays.from_layouts([lay]), framework=framework)


def _coll(fabric, lay, kind, params):
    group = lay.dp * lay.cp
    dom = domains_touched(np.array([fabric.num_gpus]), np.array([group]),
                          gpus_per_rack(int(fabric.num_gpus), int(fabric.domain_size)),
                          int(getattr(fabric, "num_domains", 0) or 0) or None)
    return collective_time_s(fabric, kind, np.array([params * 2.0]), np.array([float(group)]), dom)[0]


@pytest.mark.parametrize("name, kw", [("llama3-8b", dict(tp=1, ep=1)), ("qwen3-30b-a3b", dict(tp=1, ep=16)),
                                      ("nemotron-3-nano-30b-a3b", dict(tp=1, ep=16))])
def test_megatron_fsdp_gathers_the_non_unit_parameters_once_per_step(name, kw):
    model, fabric, lay, b = _row(name, 16, **kw)
    n_mb, tp = 256 // 16, kw["tp"]
    dense = param_counts(model, vocab=step_vocab(model, np.array([tp]))).non_expert / tp
    kept = non_unit_by_hand(model, tp)
    assert 0.05 * dense < kept < dense
    ag = n_mb * 2 * _coll(fabric, lay, "all_gather", dense - kept) + _coll(fabric, lay, "all_gather", kept)
    assert b.dp_dense_ag_total_s[0] == pytest.approx(ag, rel=1e-9)
    assert b.dp_dense_ag_exposed_s[0] == pytest.approx(ag, rel=1e-9)           # no overlap: all exposed
    assert b.dp_dense_rs_total_s[0] == pytest.approx(n_mb * _coll(fabric, lay, "reduce_scatter", dense), rel=1e-9)


def test_the_non_unit_gather_is_exposed_even_with_overlap():
    """Its buckets come first and the first unit's gather queues behind them: nothing hides it."""
    coll = lambda system, kind, nbytes, g, dom: np.asarray(nbytes, dtype=float) * 1e-9   # 1 s per GB
    common = dict(group=np.array([16]), domains=np.array([1]), n_mb=np.array([4]), units=32,
                  compute_mb=np.array([1e6]), dp_overlap=np.array([True]))   # a window that hides all it can
    local, kept = np.array([8e9]), np.array([1e9])
    _, _, ag_total, ag_x = fsdp.fsdp_sync_s(None, CALIBRATED, coll, local=local, kept_local=kept, **common)
    eff, edge, unit_ag, kept_ag = CALIBRATED.overlap_efficiency, 1 / 32, 7e9 * 2 * 1e-9, 1e9 * 2 * 1e-9
    per_pass = (1 - eff) * unit_ag * (1 - edge) + unit_ag * edge
    assert ag_total[0] == pytest.approx(4 * 2 * unit_ag + kept_ag, rel=1e-12)
    assert ag_x[0] == pytest.approx(4 * 2 * per_pass + kept_ag, rel=1e-12)


def test_megatron_fsdp_memory_keeps_the_non_unit_parameters_and_buffers_units_only():
    model, fabric, lay, b = _row("llama3-8b", 16, tp=1, ep=1)
    dense = param_counts(model, vocab=step_vocab(model, np.array([1]))).non_expert
    kept = non_unit_by_hand(model, 1)
    unit = (dense - kept) / model.num_layers
    weights = 2.0 * (dense / 16 + fsdp.GATHERED_UNITS * unit + kept * (1 - 1 / 16))
    assert b.mem_weights_bytes[0] == pytest.approx(weights, rel=1e-9)
    # two units' unsharded gradients: the plans launch with --fsdp-double-buffer (step/fsdp.py "Unit buffers")
    assert b.mem_grads_bytes[0] == pytest.approx(2.0 * (dense / 16 + fsdp.GATHERED_UNITS * unit), rel=1e-9)


def test_a_hybrid_s_gathered_unit_is_a_transformer_layer_s_share():
    model, fabric, lay, b = _row("nemotron-3-nano-30b-a3b", 16, tp=1, ep=16)
    pc = param_counts(model, vocab=step_vocab(model, np.array([1])))
    kept = non_unit_by_hand(model, 1)
    units = model.num_layers - model.num_mamba_layers
    unit = (pc.non_expert - kept) / units + pc.expert / 16 / model.num_moe_layers
    edp = 16 // 16
    weights = 2.0 * (pc.non_expert / 16 + pc.expert / 16 / edp + fsdp.GATHERED_UNITS * unit + kept * (1 - 1 / 16))
    assert b.mem_weights_bytes[0] == pytest.approx(weights, rel=1e-9)


def test_torchtitan_fsdp_is_charged_as_before():
    """TorchTitan fully_shards the embedding and [norm, output] as groups of their own: no kept parameters, every
    parameter gathered twice per micro-batch."""
    model, fabric, lay, b = _row("llama3-8b", 16, tp=1, ep=1, framework="torchtitan")
    dense = param_counts(model, vocab=step_vocab(model, np.array([1]), "torchtitan")).non_expert
    assert b.dp_dense_ag_total_s[0] == pytest.approx(16 * 2 * _coll(fabric, lay, "all_gather", dense), rel=1e-9)


@pytest.mark.parametrize("tp", [1, 2])
def test_torchtitan_fsdp_memory_follows_its_units_and_dtypes(tp):
    """TorchTitan's FSDP2 memory was charged as Megatron-FSDP's with the vocabulary averaged into the blocks (Llama 3
    8B: a 251M-parameter unit) and 4 B of gradients per unit parameter beside a bf16 shard; found from outside.
    torchtitan 0.3.0 distributed/fsdp.py apply_fsdp_to_decoder makes tok_embeddings and [norm, lm_head] units of
    their own (525M parameters each against a 218M block), FSDP2 holds one unit's bf16 unsharded gradients beside
    their fp32 reduce-scatter input (reduce_dtype float32; torch _fsdp_collectives.py foreach_reduce) and keeps its
    sharded parameters in fp32, the optimizer's master copy (no bf16 shard)."""
    model, fabric, lay, b = _row("llama3-8b", 16, tp=tp, ep=1, framework="torchtitan")
    h = model.hidden
    vocab = float(step_vocab(model, np.array([tp]), "torchtitan")[0]) * h
    dense = param_counts(model, vocab=vocab / h).non_expert
    block = (dense - 2 * vocab - h) / model.num_layers   # every Llama block alike
    lm_head = vocab / tp + h                              # [norm, lm_head]: the largest unit
    assert lm_head > 2 * block / tp
    shard = dense / tp / (16 // tp)
    assert b.mem_weights_bytes[0] == pytest.approx(2.0 * (lm_head + block / tp), rel=1e-3)   # gathered, bf16
    assert b.mem_grads_bytes[0] == pytest.approx(4.0 * shard + 6.0 * lm_head, rel=1e-3)
    assert b.mem_optimizer_bytes[0] == pytest.approx(12.0 * shard, rel=1e-9)   # fp32 param (master), exp_avg(_sq)
    megatron = _row("llama3-8b", 16, tp=tp, ep=1)[3]   # Megatron-FSDP's path is not TorchTitan's
    assert megatron.mem_weights_bytes[0] != pytest.approx(b.mem_weights_bytes[0], rel=1e-2)


def test_the_sources_put_every_non_unit_parameter_in_one_group_ahead_of_the_units():
    pytest.importorskip("megatron.core")
    from megatron.core.distributed.fsdp.src.megatron_fsdp import megatron_fsdp, param_and_grad_buffer
    from megatron.core.transformer.multi_token_prediction import MultiTokenPredictionLayer
    from megatron.core.transformer.transformer_layer import TransformerLayer
    src = inspect.getsource(param_and_grad_buffer)
    assert "fsdp_unit_id=None," in src and "if group_attrs == param_attrs:" in src   # one group per attributes
    assert "bucket_id = ag_buckets[0] + 1" in src                # forward prefetch walks bucket ids upward
    assert not issubclass(MultiTokenPredictionLayer, TransformerLayer)
    assert "params=[first_param], prefetch=True" in inspect.getsource(megatron_fsdp.MegatronFSDP.start_param_sync)
