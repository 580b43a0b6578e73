"""Tensor-parallel communication of one (column-parallel, row-parallel) linear pair per micro-batch.

Without sequence parallelism: one all-reduce forward (the row-parallel output) and one backward (the
column-parallel input gradient). With it, Megatron-core on Transformer Engine moves five collectives:
- forward: all-gather the column-parallel input, reduce-scatter the row-parallel output;
- backward: all-gather the row-parallel output gradient (its dgrad), reduce-scatter the column-parallel
  input gradient, and all-gather the column-parallel input again for its weight gradient: only the
  local shard is saved in forward (TE module/linear.py and layernorm_linear.py `backward_input_needs_gather`
  = column-parallel and sequence_parallel, overlapped with the dgrad GEMM as userbuffers' bulk all-gather;
  megatron/core/tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.backward, the
  same re-gather for local linears).
In an 8/4-bit recipe TE quantizes before it gathers (transformer_engine/pytorch/distributed.py
gather_along_first_dim: _all_gather_fp8, _all_gather_mxfp8, _all_gather_nvfp4; the userbuffers
all-gather buffers are 8-bit too), so the three all-gathers move the quantized tensor and its scales;
the two reduce-scatters sum bf16 GEMM outputs.
TorchTitan's DTensor TP saves the gathered input for the weight gradient (autograd keeps the matmul's
operand): two all-gathers and two reduce-scatters. Its float8 (tensorwise) converter parallelises with
torchao's Float8ColwiseParallel / Float8RowwiseParallel (apply_tp's enable_float8_tensorwise_tp; docs/
float8.md: "float8 all-gather ... for TP (by default for Float8Linear)"): the input is cast to e4m3 before
its all-gather and the output gradient to e5m2 before its; MXFP8 and bf16 gather bf16.
Full recompute re-runs each recomputed layer's forward in its backward, its forward collectives with it (`rerun`:
the share of the layers recomputed): Megatron-Core's full granularity checkpoints whole TransformerLayers
(transformer_block.py _checkpointed_forward -> tensor_parallel.checkpoint, whose CheckpointFunction.backward calls
the layer's forward again, random.py; te_checkpoint alike), so the column-parallel input's all-gather and the
row-parallel output's reduce-scatter (the all-reduce without SP) run twice; TorchTitan's full activation
checkpointing re-runs the block's forward the same way (torch.utils.checkpoint).
"""

from __future__ import annotations

import numpy as np

from commbench.planner.layout.spec import CODE_FIELDS

BF16_BYTES = 2.0
# Bytes per element an all-gather of a quantized activation moves: the data and its scales (MXFP8:
# one 8-bit scale per 32 elements; NVFP4: 4-bit data, one 8-bit scale per 16; per-tensor fp8: one scale).
GATHER_BYTES = {"bf16": BF16_BYTES, "fp8": 1.0, "mxfp8": 1.0 + 1.0 / 32, "nvfp4": 0.5 + 1.0 / 16}


def gather_bytes_per_element(precision: np.ndarray, framework: str = "megatron") -> np.ndarray:
    """Bytes per activation element a TP all-gather moves for each layout's precision code."""
    gathered = GATHER_BYTES if framework == "megatron" else {"fp8": GATHER_BYTES["fp8"]}
    table = np.array([gathered.get(p, BF16_BYTES) for p in CODE_FIELDS["precision"]])
    return table[np.asarray(precision)]


def pair_time_s(system, collective_time_s, *, elements: np.ndarray, precision: np.ndarray, sp: np.ndarray,
                tp: np.ndarray, domains: np.ndarray, framework: str = "megatron", rerun=0.0) -> np.ndarray:
    """Seconds of TP collectives per (column, row) linear pair per micro-batch, forward + backward, and the forward's
    again for the `rerun` share of layers full recompute re-runs (module docstring).
    `elements`: the full (gathered) activation of the pair's input, tokens x hidden."""
    (out,) = pair_times_s(system, collective_time_s, elements=elements, precision=precision, sp=sp, tp=tp,
                          domains=domains, framework=framework, reruns=(rerun,))
    return out


def pair_collectives_s(system, collective_time_s, *, elements: np.ndarray, precision: np.ndarray, tp: np.ndarray,
                       domains: np.ndarray, framework: str = "megatron") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(reduce-scatter, all-gather, all-reduce) seconds of one TP collective of a pair's activation (module docstring):
    every collective of a pair moves the same tokens x hidden activation, the gathers in the recipe's 8/4-bit form."""
    act_bytes = elements * BF16_BYTES
    reduce_scatter = collective_time_s(system, "reduce_scatter", act_bytes, tp, domains)
    gather = collective_time_s(system, "all_gather", elements * gather_bytes_per_element(precision, framework),
                               tp, domains)
    all_reduce = collective_time_s(system, "all_reduce", act_bytes, tp, domains)
    return reduce_scatter, gather, all_reduce


def pair_times_s(system, collective_time_s, *, elements: np.ndarray, precision: np.ndarray, sp: np.ndarray,
                 tp: np.ndarray, domains: np.ndarray, framework: str = "megatron", reruns=(0.0,)) -> list[np.ndarray]:
    """pair_time_s at each re-run share of `reruns`, the collectives priced once (they do not depend on it)."""
    reduce_scatter, gather, all_reduce = pair_collectives_s(system, collective_time_s, elements=elements,
                                                            precision=precision, tp=tp, domains=domains,
                                                            framework=framework)
    gathers = 3.0 if framework == "megatron" else 2.0
    out = []
    for rerun in reruns:
        rerun = np.asarray(rerun, dtype=float)
        with_sp = (2.0 + rerun) * reduce_scatter + (gathers + rerun) * gather
        without_sp = (2.0 + rerun) * all_reduce
        out.append(np.where(tp > 1, np.where(sp, with_sp, without_sp), 0.0))
    return out


# Transformer Engine's pipelined reduce-scatter overlap (proj_fprop, fc2_fprop) splits the GEMM in 4: Megatron-Bridge's
# userbuffers configurations set num_splits=4 on every PipelineOverlapCfg (training/comm_overlap.py).
PIPELINE_SPLITS = 4.0


def _hidden(total, window, efficiency):
    return np.maximum(total - efficiency * np.minimum(total, window), 0.0)


def overlapped_pair_exposed_s(*, reduce_scatter: np.ndarray, gather: np.ndarray, all_reduce: np.ndarray,
                              sp: np.ndarray, column_s: np.ndarray, row_s: np.ndarray, efficiency: float,
                              rerun=0.0, framework: str = "megatron") -> np.ndarray:
    """Exposed seconds of one (column, row) linear pair's TP collectives under TE's comm-GEMM overlap, per micro-batch.

    Each collective hides only behind the one GEMM Transformer Engine runs it with, not behind the layer's GEMMs
    at large (Megatron-Bridge training/comm_overlap.py TransformerLayerTPOverlapCfg: one userbuffers overlap per
    GEMM, qkv/fc1 = column-parallel, proj/fc2 = row-parallel):
    - forward: the column input's all-gather with the column fprop GEMM (ring exchange, *_fprop); the row output's
      reduce-scatter with the row fprop GEMM, pipelined in PIPELINE_SPLITS chunks whose last chunk's reduce-scatter
      runs after the last GEMM chunk, the main stream waiting for it (PipelineOverlapCfg; Transformer Engine
      transformer_engine/common/comm_gemm_overlap/comm_gemm_overlap.cpp CommOverlapBase::split_overlap_rs);
    - backward: the row output gradient's all-gather with the row dgrad GEMM (ring exchange, proj_dgrad/fc2_dgrad);
      the column input's re-gather with the column dgrad GEMM (bulk, qkv_dgrad/fc1_dgrad) and the column input
      gradient's reduce-scatter with the column wgrad GEMM (bulk, qkv_wgrad/fc1_wgrad).
    `column_s`, `row_s`: one forward GEMM of each linear (a dgrad or wgrad GEMM has the same FLOPs). `efficiency`: the
    fraction of its GEMM a collective hides behind (Calibration.overlap_efficiency). Without sequence parallelism
    (no userbuffers overlap there: the forward all-reduce after the row GEMM, the backward one after the column dgrad)
    the same one-GEMM windows. `rerun`: the share of layers full recompute re-runs, their forward collectives again.
    TorchTitan (async TP) has no re-gather (module docstring) and no userbuffers pipeline: its collectives pair the same
    way, without the split tail."""
    megatron = framework == "megatron"
    rs_tail = reduce_scatter / PIPELINE_SPLITS if megatron else 0.0 * reduce_scatter
    forward = _hidden(gather, column_s, efficiency) + _hidden(reduce_scatter - rs_tail, row_s, efficiency) + rs_tail
    backward = _hidden(gather, row_s, efficiency) + _hidden(reduce_scatter, column_s, efficiency)
    if megatron:
        backward = backward + _hidden(gather, column_s, efficiency)
    with_sp = (1.0 + np.asarray(rerun, dtype=float)) * forward + backward
    without_sp = (1.0 + np.asarray(rerun, dtype=float)) * _hidden(all_reduce, row_s, efficiency) \
        + _hidden(all_reduce, column_s, efficiency)
    return np.where(sp, with_sp, without_sp)


def pair_linear_macs(model) -> dict[str, tuple[float, float]]:
    """{block kind: (column-parallel MACs, row-parallel MACs)} per token of one TP linear pair, forward, for the
    kinds the step model counts a pair for (evaluate.py tp_pairs_stage): attention (GQA: qkv | proj; MLA: every
    projection before the output one | proj, counts._attention_macs_per_layer; DeepSeek-V4: its projections halved),
    Gated DeltaNet (in_proj | out_proj), Mamba (in_proj | out_proj), the dense MLP and the shared experts
    (fc1 | fc2)."""
    from commbench.planner.models import gdn, mamba as mamba_model
    from commbench.planner.models.counts import _attention_macs_per_layer, flops_breakdown
    h = model.hidden
    if model.attention == "gqa":
        q, kv = model.num_heads * model.head_dim, model.num_kv_heads * model.head_dim
        attention = (h * (q * (2 if model.attention_gate else 1) + 2 * kv), q * h)
    elif model.attention == "mla":
        proj, _ = _attention_macs_per_layer(model, model.seq_len)
        row = model.num_heads * model.v_head_dim * h
        attention = (proj - row, row)
    else:
        fl = flops_breakdown(model)
        per_layer = fl.attention_proj / 6.0 / max(model.num_attention_layers + model.num_mtp_layers, 1)
        attention = (per_layer / 2.0, per_layer / 2.0)
    g = model.glu_factor
    shared_ffn = model.expert_ffn * model.num_shared_experts
    out = {"attention": attention,
           "dense": (h * model.dense_ffn * g, model.dense_ffn * h),
           "shared": (h * shared_ffn * g, shared_ffn * h)}
    if model.num_mamba_layers:
        out["mamba"] = (h * mamba_model.in_proj_width(model), mamba_model.d_inner(model) * h)
    if model.linear_attention_freq:
        out["linear"] = (h * gdn.in_proj_width(model), gdn.v_dim(model) * h)
    return out
