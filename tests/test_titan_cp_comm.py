"""TorchTitan 0.3.0's context parallelism charged as it runs (step/cp_comm.py): FlexAttention wrapped by
flex_cp_allgather (torchtitan distributed/context_parallel/api.py apply_cp_to_forward; torch
_context_parallel/_cp_custom_ops.py): blocking all-gathers of K and V forward, reduce-scatters of dK and dV backward,
the all-gathers again under activation checkpointing; nothing hidden. The step model charged Megatron's ring
(sendrecv passes hidden behind the attention core) for --framework torchtitan too (found from outside)."""

from __future__ import annotations

import numpy as np
import pytest

from commbench.costmodel import collective_time_s, load_preset
from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.layout.placement import domains_touched, gpus_per_rack


@pytest.mark.parametrize("name, recompute, ep, gathers", [("llama3-8b", "selective", 1, 2), ("llama3-8b", "none", 1, 1),
                                                          ("deepseek-v3", "full", 16, 2)])
def test_torchtitan_cp_is_blocking_all_gathers_and_reduce_scatters(name, recompute, ep, gathers):
    model, fabric = load_model(name), load_preset("h100-hgx", num_gpus=16)
    seq = 16384
    lay = Layout.for_world(16, tp=1, cp=2, pp=1, ep=ep, etp=1, mbs=1, gbs=16, fsdp=True, recompute=recompute)
    arr = LayoutArrays.from_layouts([lay])
    titan = evaluate_layouts(model, fabric, arr, seq_len=seq, framework="torchtitan")
    megatron = evaluate_layouts(model, fabric, arr, seq_len=seq)
    assert titan.cp_total_s[0] > 0 and titan.cp_exposed_s[0] == titan.cp_total_s[0]   # nothing overlaps
    dom = domains_touched(np.array([2]), np.array([2]), gpus_per_rack(16, int(fabric.domain_size)), None)
    per_layer = 0.0
    widths = ((model.num_heads * (model.qk_nope_head_dim + model.qk_rope_head_dim), model.num_heads * model.v_head_dim)
              if model.attention == "mla" else (model.num_kv_heads * model.head_dim,) * 2)   # K, V
    for width in widths:
        size = np.array([seq * width * 2.0])
        per_layer += gathers * collective_time_s(fabric, "all_gather", size, np.array([2.0]), dom)[0] \
            + collective_time_s(fabric, "reduce_scatter", size, np.array([2.0]), dom)[0]
    n_mb = int(titan.num_microbatches[0])
    assert titan.cp_total_s[0] == pytest.approx(n_mb * model.num_layers * per_layer, rel=1e-9)   # no MTP layers
    assert megatron.cp_exposed_s[0] < megatron.cp_total_s[0]   # Megatron's ring hides behind the attention core
