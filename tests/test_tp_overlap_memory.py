"""Transformer Engine's TP-overlap userbuffers (step/tp_overlap_memory.py): HBM a --tp-comm-overlap launch holds outside
PyTorch's allocator, charged with the reserve (in the total a plan must fit), not with the allocated terms."""

from __future__ import annotations

import numpy as np

from commbench.planner import Layout, load_model
from commbench.planner.calibrate.published import _preset
from commbench.planner.layout.spec import LayoutArrays
from commbench.planner.step.evaluate import evaluate_layouts
from commbench.planner.step.loss_memory import run_loss

# Llama3-70B SFT on 32 H100 (Megatron-Bridge skills/nemo-mbridge-perf-memory-tuning, "More TP" row)
LLAMA_TP8 = dict(tp=8, pp=4, vp=5, dp=1, mbs=1, gbs=32, recompute="none")


def _breakdown(layouts, seq_len=4096):
    return evaluate_layouts(load_model("llama3.1-70b"), _preset("h100-hgx", 32), LayoutArrays.from_layouts(layouts),
                            seq_len=seq_len, loss=run_loss("megatron"))


def test_userbuffers_hand_computed():
    # hidden 8192, one micro-batch of 4096 tokens: 8 all-gather buffers (1 B under fp8, 2 B in bf16) and 4
    # reduce-scatter ones (2 B), each [4096, 8192]; cp 2 halves the rows; no sequence parallelism, no overlap
    layouts = [Layout(**{**LLAMA_TP8, "pp": 4 // cp}, precision=precision, tp_comm_overlap=on, sequence_parallel=sp,
                      cp=cp)
               for precision, on, sp, cp in (("fp8", False, True, 1), ("fp8", True, True, 1),
                                             ("bf16", False, True, 1), ("bf16", True, True, 1),
                                             ("fp8", False, True, 2), ("fp8", True, True, 2),
                                             ("fp8", False, False, 1), ("fp8", True, False, 1))]
    bd = _breakdown(layouts)
    ub = bd.mem_reserve_bytes[1::2] - bd.mem_reserve_bytes[0::2]
    rows = 4096 * 8192
    np.testing.assert_allclose(ub, [rows * (8 * 1 + 4 * 2), rows * (8 * 2 + 4 * 2), rows / 2 * (8 * 1 + 4 * 2), 0.0])
    # outside PyTorch's allocator: the weights, gradients, optimizer state and activations do not move
    for term in ("weights", "grads", "optimizer", "activations"):
        values = getattr(bd, f"mem_{term}_bytes")
        np.testing.assert_array_equal(values[1::2], values[0::2])


def test_userbuffers_count_against_the_fit():
    bd = _breakdown([Layout(**LLAMA_TP8, precision="fp8", tp_comm_overlap=on) for on in (False, True)])
    assert bd.mem_total_bytes[1] - bd.mem_total_bytes[0] == 4096 * 8192 * 16
