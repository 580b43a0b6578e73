"""Megatron-FSDP on a hybrid (Mamba) model: megatron-core 0.16.1 makes only TransformerLayers FSDP units
(mcore_fsdp_adapter.py, optim_grads_params), so a MambaLayer's weights are gathered by a pre-forward hook and never
released (megatron_fsdp.py registers the post-forward release on units only). The step model charged them as sharded
units (found by an outside probe: ~0.9 B Mamba parameters of Nemotron-3-Nano, 1.8 GB in bf16, uncharged)."""

from __future__ import annotations

import inspect

import pytest

from commbench.costmodel import load_preset
from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.models.mamba import mamba_params_per_layer
from commbench.planner.step import fsdp

NANO = "nemotron-3-nano-30b-a3b"


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
    kept = model.num_mamba_layers * mamba_params_per_layer(model) * (1 - 1 / 16) * gathered_bytes
    assert model.num_mamba_layers == 23 and 0.85e9 < model.num_mamba_layers * mamba_params_per_layer(model) < 0.95e9
    assert charged - as_units == pytest.approx(kept, rel=1e-9)


def test_a_transformer_fsdp_plan_is_unchanged(monkeypatch):
    model, gpus = load_model("qwen3-30b-a3b"), 16
    fabric = load_preset("h100-hgx", num_gpus=gpus)
    arr = LayoutArrays.from_layouts([Layout.for_world(gpus, tp=1, pp=1, ep=16, etp=1, mbs=1, gbs=256, fsdp=True,
                                                      distributed_optimizer=True)])
    charged = evaluate_layouts(model, fabric, arr).mem_weights_bytes[0]
    monkeypatch.setattr(fsdp, "megatron_kept_gathered_params", lambda *a, **k: 0.0)
    assert evaluate_layouts(model, fabric, arr).mem_weights_bytes[0] == charged
