"""Megatron-FSDP on a hybrid (Mamba) model: megatron-core 0.16.1 makes only TransformerLayers FSDP units
(mcore_fsdp_adapter.py, optim_grads_params), so a MambaLayer's weights are gathered by a pre-forward hook and never
released (megatron_fsdp.py registers the post-forward release on units only). The step model charged them as sharded
units (found by an outside probe: ~0.9 B Mamba parameters of Nemotron-3-Nano, 1.8 GB in bf16, uncharged)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from commbench.costmodel import load_preset
from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.models.counts import step_vocab
from commbench.planner.models.mamba import mamba_params_per_layer
from commbench.planner.step import fsdp

NANO = "nemotron-3-nano-30b-a3b"


def non_unit_by_hand(model, tp: int) -> float:
    """Megatron-FSDP's non-unit parameters per GPU at pp = 1 (step/fsdp.py): embedding and output rows Megatron builds,
    the final norm, each Mamba layer with its pre-norm; over TP (these models have no MTP layer)."""
    import numpy as np

    from commbench.planner.models.counts import step_vocab
    assert not model.num_mtp_layers and not model.tied_embeddings
    h, vocab = model.hidden, float(step_vocab(model, np.array([tp]))[0])
    mamba = model.num_mamba_layers * (mamba_params_per_layer(model) + h) if model.num_mamba_layers else 0.0
    return (2 * vocab * h + h + mamba) / tp


def test_megatron_fsdp_units_are_transformer_layers_only():
    pytest.importorskip("megatron.core")
    from megatron.core.distributed.fsdp import mcore_fsdp_adapter
    from megatron.core.distributed.fsdp.src.megatron_fsdp import megatron_fsdp
    from megatron.core.ssm.mamba_layer import MambaLayer
    from megatron.core.transformer.transformer_layer import TransformerLayer
    adapter = inspect.getsource(mcore_fsdp_adapter.FullyShardedDataParallel.__init__)
    assert "self.fsdp_unit_modules = [TransformerLayer]" in adapter and not issubclass(MambaLayer, TransformerLayer)
    hooks = inspect.getsource(megatron_fsdp.MegatronFSDP._register_fsdp_hooks)
    assert '_post_forward hook should only be registered on FSDP unit modules' in hooks


@pytest.mark.parametrize("precision, gathered_bytes", [("bf16", 2.0), ("fp8", 1.0)])
def test_a_hybrid_fsdp_plan_charges_its_mamba_weights_gathered(precision, gathered_bytes, monkeypatch):
    model, gpus = load_model(NANO), 16
    fabric = load_preset("h100-hgx", num_gpus=gpus)
    lay = Layout.for_world(gpus, tp=1, pp=1, ep=16, etp=1, mbs=1, gbs=256, fsdp=True, distributed_optimizer=True,
                           precision=precision)
    arr = LayoutArrays.from_layouts([lay])
    charged = evaluate_layouts(model, fabric, arr).mem_weights_bytes[0]
    monkeypatch.setattr(fsdp, "megatron_kept_gathered_params", lambda *a, **k: 0.0)
    as_units = evaluate_layouts(model, fabric, arr).mem_weights_bytes[0]
    # the Mamba layers, embedding, output, norm; the embedding and output layer in bf16 at every precision
    # (step/module_precision.py), the Mamba layers in the precision's bytes
    vocab = 2 * float(step_vocab(model, np.array([1]))[0]) * model.hidden
    kept = (non_unit_by_hand(model, 1) * gathered_bytes + vocab * (2.0 - gathered_bytes)) * (1 - 1 / 16)
    assert model.num_mamba_layers == 23 and 0.85e9 < model.num_mamba_layers * mamba_params_per_layer(model) < 0.95e9
    assert charged - as_units == pytest.approx(kept, rel=1e-9)


def test_a_transformer_fsdp_plan_keeps_its_embedding_output_and_norm(monkeypatch):
    """Not only a hybrid's Mamba layers: every non-unit parameter stays gathered (test_fsdp_non_unit.py)."""
    model, gpus = load_model("qwen3-30b-a3b"), 16
    fabric = load_preset("h100-hgx", num_gpus=gpus)
    arr = LayoutArrays.from_layouts([Layout.for_world(gpus, tp=1, pp=1, ep=16, etp=1, mbs=1, gbs=256, fsdp=True,
                                                      distributed_optimizer=True)])
    charged = evaluate_layouts(model, fabric, arr).mem_weights_bytes[0]
    monkeypatch.setattr(fsdp, "megatron_kept_gathered_params", lambda *a, **k: 0.0)
    as_units = evaluate_layouts(model, fabric, arr).mem_weights_bytes[0]
    assert charged - as_units == pytest.approx(non_unit_by_hand(model, 1) * (1 - 1 / 16) * 2.0, rel=1e-9)


# Step time (issue 24): the Mamba layers' parameter all-gathers were charged like a unit's, forward and backward of
# every micro-batch. megatron-core 0.16.1 gathers a non-unit bucket once per step (step/fsdp.py's docstring).

def _dense_by_hand(model, fabric, lay, n_mb, non_unit_params):
    """(AG, RS) seconds per step counted by hand: 2 all-gathers per micro-batch of the units' dense parameters per
    GPU and one per step of the non-unit ones; one reduce-scatter per micro-batch of all of them; each one
    collective over the DP group (bf16 parameters and gradients: 2 bytes each)."""
    import numpy as np

    from commbench.costmodel import collective_time_s
    from commbench.planner.layout.placement import domains_touched, gpus_per_rack
    from commbench.planner.models.counts import param_counts, step_vocab
    tp, pp, group = lay.tp, lay.pp, lay.dp * lay.cp
    dense_local = param_counts(model, vocab=step_vocab(model, np.array([tp]))).non_expert / (tp * pp)
    dom = domains_touched(np.array([fabric.num_gpus // pp]), np.array([group]),
                          gpus_per_rack(int(fabric.num_gpus), int(fabric.domain_size)),
                          int(getattr(fabric, "num_domains", 0) or 0) or None)
    def coll(kind, params):
        return collective_time_s(fabric, kind, np.array([params * 2.0]), np.array([float(group)]), dom)[0]
    ag = n_mb * 2 * coll("all_gather", dense_local - non_unit_params)
    return ag + (coll("all_gather", non_unit_params) if non_unit_params else 0.0), n_mb * coll("reduce_scatter",
                                                                                                dense_local)


def _fsdp_row(name, gpus, preset="h100-hgx", **kw):
    model, fabric = load_model(name), load_preset(preset, num_gpus=gpus)
    lay = Layout.for_world(gpus, pp=1, etp=1, mbs=1, gbs=256, fsdp=True, distributed_optimizer=True,
                           precision="bf16", **kw)
    return model, fabric, lay, evaluate_layouts(model, fabric, LayoutArrays.from_layouts([lay]))


def test_a_hybrid_fsdp_plan_gathers_its_mamba_weights_once_per_step():
    model, fabric, lay, b = _fsdp_row(NANO, 16, tp=1, ep=16, dp_overlap=False)
    n_mb = 256 // 16
    mamba = model.num_mamba_layers * mamba_params_per_layer(model)     # tp = pp = 1: all on this GPU
    assert int(b.num_microbatches[0]) == n_mb and mamba > 0.85e9
    expected, rs = _dense_by_hand(model, fabric, lay, n_mb, non_unit_by_hand(model, 1))
    as_units = _dense_by_hand(model, fabric, lay, n_mb, 0.0)[0]          # the old charge: every parameter a unit's
    assert b.dp_dense_ag_total_s[0] == pytest.approx(expected, rel=1e-9)
    assert b.dp_dense_ag_exposed_s[0] == pytest.approx(expected, rel=1e-9)  # no overlap: all of it exposed
    assert b.dp_dense_ag_total_s[0] < 0.7 * as_units
    # the reduce-scatters are as before: every parameter's gradient, every micro-batch
    assert b.dp_dense_rs_total_s[0] == pytest.approx(rs, rel=1e-9)


def test_a_hybrid_fsdp_plan_hides_its_once_per_step_gathers_no_worse_than_they_cost():
    _, _, _, hid = _fsdp_row(NANO, 16, tp=1, ep=16, dp_overlap=True)
    _, _, _, bare = _fsdp_row(NANO, 16, tp=1, ep=16, dp_overlap=False)
    assert hid.dp_dense_ag_total_s[0] == pytest.approx(bare.dp_dense_ag_total_s[0], rel=1e-12)
    assert 0 < hid.dp_dense_ag_exposed_s[0] < hid.dp_dense_ag_total_s[0]


def test_megatron_fsdp_keeps_a_non_unit_bucket_until_the_step_ends():
    """The source facts the once-per-step charge rests on (megatron-core 0.16.1)."""
    pytest.importorskip("megatron.core")
    from megatron.core.distributed.fsdp.src.megatron_fsdp import megatron_fsdp, param_and_grad_buffer
    from megatron.core.optimizer import distrib_optimizer
    gather = inspect.getsource(param_and_grad_buffer.AllGatherPipeline.all_gather_params)
    assert "== BucketStatus.EMPTY" in gather            # a gathered bucket is not gathered again
    hooks = inspect.getsource(megatron_fsdp.MegatronFSDP._register_fsdp_hooks)
    assert "if group.fsdp_unit_id is not None:" in hooks  # only units' buckets become releasable in the backward
    assert "self.all_gather_pipeline.reset()" in inspect.getsource(megatron_fsdp.MegatronFSDP.synchronize_param_gather)
    assert "self.synchronize_param_gather()" in inspect.getsource(megatron_fsdp.MegatronFSDP.finish_grad_sync)
    step = inspect.getsource(distrib_optimizer.DistributedOptimizer.step_with_ready_grads)
    assert "if self.ddp_config.use_megatron_fsdp:" in step and "model_chunk.start_param_sync()" in step
