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
operand): two all-gathers and two reduce-scatters, of bf16 in every precision: TorchTitan 0.3.0's sharding is
dtype-agnostic (protocols/sharding.py ShardingConfig: "quantization (Float8/MXFP8) is orthogonal"; its
Float8LinearConverter runs rowwise recipes only), and 0.2.2's float8 TP (torchao Float8ColwiseParallel, input cast
to e4m3 before its all-gather) never engages: models/*/infra/parallelize.py enable_float8_linear = "float8" in
job_config.model.converters, a list that holds "quantize.linear.float8" (llama3 :77 at v0.2.2), so its
enable_float8_tensorwise_tp is False and TP gathers bf16 there too.
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
    """Bytes per activation element a TP all-gather moves for each layout's precision code (TorchTitan: bf16 in
    every precision, module docstring)."""
    gathered = GATHER_BYTES if framework == "megatron" else {}
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


def pair_times_s(system, collective_time_s, *, elements: np.ndarray, precision: np.ndarray, sp: np.ndarray,
                 tp: np.ndarray, domains: np.ndarray, framework: str = "megatron", reruns=(0.0,)) -> list[np.ndarray]:
    """pair_time_s at each re-run share of `reruns`, the collectives priced once (they do not depend on it)."""
    act_bytes = elements * BF16_BYTES
    reduce_scatter = collective_time_s(system, "reduce_scatter", act_bytes, tp, domains)
    gather = collective_time_s(system, "all_gather", elements * gather_bytes_per_element(precision, framework),
                               tp, domains)
    gathers = 3.0 if framework == "megatron" else 2.0
    all_reduce = collective_time_s(system, "all_reduce", act_bytes, tp, domains)
    out = []
    for rerun in reruns:
        rerun = np.asarray(rerun, dtype=float)
        with_sp = (2.0 + rerun) * reduce_scatter + (gathers + rerun) * gather
        without_sp = (2.0 + rerun) * all_reduce
        out.append(np.where(tp > 1, np.where(sp, with_sp, without_sp), 0.0))
    return out
