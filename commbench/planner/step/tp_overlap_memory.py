"""HBM that Transformer Engine's userbuffers take for TP communication overlap (Megatron's --tp-comm-overlap).

With --tp-comm-overlap, megatron-core calls Transformer Engine's initialize_ub once at start-up with the shape of one
micro-batch's gathered sequence, [seq_length x micro_batch_size / cp, hidden_size] (Megatron-LM 3758b54
megatron/training/initialize.py:223-247 _initialize_tp_communicators; Megatron-Bridge 067f987 src/megatron/bridge/
training/initialize.py:352-371, the same shape). With the default config (no --tp-comm-overlap-cfg, as the planner's
launches run it) initialize_ub registers one buffer of that shape per overlapped GEMM (Transformer Engine v2.8 to v2.16
pytorch/module/base.py initialize_ub, v2.14:270-296 and :366-373): 12 of them, ring_exchange qkv_fprop, fc1_fprop,
proj_dgrad, fc2_dgrad; pipeline proj_fprop, fc2_fprop; bulk qkv_dgrad, qkv_wgrad, fc1_dgrad, fc1_wgrad; external
proj_wgrad, fc2_wgrad. The 8 all-gather ones (layers_all_gather_overlap) hold 1 B elements (torch.uint8, fp8_buf) when
the run quantizes to 8 bits (UserBufferQuantizationMode.FP8: Megatron's --fp8-format, per-tensor fp8 and mxfp8; nvfp4
runs under --fp4 with args.fp8 None, so NONE), the 4 reduce-scatter ones the bf16 output (base.py:401-405); no default
ring-exchange buffer is a reduce-scatter, so none takes the 2 tp - 1 chunks of comm_gemm_overlap.cpp:680-687.

The buffers are not PyTorch tensors: userbuffers allocates them itself (common/comm_gemm_overlap/userbuffers/
userbuffers-host.cpp v2.14:660 cudaMalloc, or :557 cuMemCreate for multicast), so torch.cuda.max_memory_allocated does
not count them, but they hold HBM for the whole run, beside the allocator's pool: charged with the reserve.
"""

from __future__ import annotations

import numpy as np

from commbench.planner.layout.spec import PRECISIONS

# per element of the [tokens, hidden] shape, summed over the default buffers (module docstring)
ALL_GATHER_BUFFERS = 8
REDUCE_SCATTER_BUFFERS = 4
BF16_BYTES = 2
FP8_BUFFER_BYTES = 1
QUANTIZED_UB = (PRECISIONS.index("fp8"), PRECISIONS.index("mxfp8"))   # UserBufferQuantizationMode.FP8


def tp_overlap_buffer_bytes(model, *, tokens_mb, cp, tp, sp, precision, tp_comm_overlap,
                            framework: str = "megatron") -> np.ndarray:
    """Bytes per GPU of Transformer Engine's TP-overlap userbuffers (module docstring) where a Megatron launch runs
    --tp-comm-overlap (it needs tp > 1 and sequence parallelism); 0 elsewhere. `tokens_mb`: one micro-batch's tokens
    (seq_length x micro_batch_size)."""
    quantized = np.isin(np.asarray(precision), QUANTIZED_UB)
    per_element = ALL_GATHER_BUFFERS * np.where(quantized, FP8_BUFFER_BYTES, BF16_BYTES) \
        + REDUCE_SCATTER_BUFFERS * BF16_BYTES
    runs = np.asarray(tp_comm_overlap, dtype=bool) & np.asarray(sp, dtype=bool) & (np.asarray(tp) > 1) \
        & (framework == "megatron")
    rows = np.floor(np.asarray(tokens_mb, dtype=np.float64) / np.asarray(cp))
    return np.where(runs, rows * model.hidden * per_element, 0.0)
