"""The loss stage's cross entropy in time: the HBM bytes megatron-core's native fused kernel moves per logit beyond
Transformer Engine's, which the step model prices explicitly where a run launches native (step/loss_memory.py
megatron_launch_loss: Megatron-LM from megatron-core 0.18.2 on, 26.06.01 and later).

Why only the difference: the step model has no loss-time term of its own. The loss's time sits in the terms fitted
on published runs, and every one of those ran Transformer Engine's kernel (loss_memory.RUN_LOSS: Megatron-Bridge sets
cross_entropy_fusion_impl="te" in every performance recipe), so TE's kernel is already priced; a run of native pays
what native moves over TE's. Both are memory-bound passes over the logits (bf16 in, bf16 gradient out), charged at the
step model's memory-bound rate (hbm x hbm_efficiency x kernels.sustained_sm_rate, as evaluate.py's memory_bound_s).

Bytes per logit (one vocabulary row of one token on this TP rank), forward + backward, counted from the code; per-token
scalars (max, sum, target logit, loss) and the collectives on them are left out (1 / vocab of these):

- "te": Transformer Engine 2.16.0+b9d690e0 (26.06.01's container, commbench/data/recipes.json) and 2.17.1+4329ff84
  (26.08's; transformer_engine/pytorch/triton/cross_entropy.py and common/triton/cross_entropy.py unchanged between
  them, and since 2.12.0+5671fd36 but for a contiguity check, pytorch/triton/cross_entropy.py:52, that the GEMM's
  contiguous [s, b, V] logits pass), run by megatron-core as te_parallel_cross_entropy(...,
  reduce_loss=False): common/triton/cross_entropy.py online_softmax_kernel reads the bf16 logits once (:72, 2 B);
  cross_entropy_kernel reads them again (:177, 2 B) and writes the gradient in place in bf16 (:190, 2 B); backward,
  pytorch/triton/cross_entropy.py cross_entropy_backward runs element_mul_kernel (:130) unless grad_output equals
  1.0 (:121: a per-token loss's grad_output is a [b, s] tensor, never the scalar), reading and writing the bf16
  gradient in place (common/triton/cross_entropy.py:261-262, 4 B). 10 B.
- "native": megatron-core 0.18.2 (Megatron-LM 458c8d0, 26.06.01) megatron/core/fusions/fused_cross_entropy.py, the same
  file at cd4afffa (26.08; tensor_parallel/cross_entropy.py changes there only in the unfused class's process
  group). Its four steps are each a @jit_fuser function (jit.py:7-33: torch.compile from torch 2.2), separate compiled
  graphs between the TP all-reduces, so each pass counts once at best (a whole graph in one kernel):
  calculate_logits_max (:12) returns the fp32 copy (tensor_parallel/cross_entropy.py:28 .float()): reads the bf16
  logits, writes fp32, 6 B; calculate_predicted_logits (:25) subtracts the max and exps in place
  (cross_entropy.py:45, :65) and sums: reads and writes the fp32 tensor, 8 B; calculate_cross_entropy_loss (:47)
  divides it by the sum in place (cross_entropy.py:80), 8 B; backward, calculate_gradients (:64) subtracts at the
  targets and multiplies by grad_output in place in the saved fp32 softmax (cross_entropy.py:114, :117), writing it
  back (an input a compiled graph mutates is written) and the bf16 gradient (fused_cross_entropy.py:82): 4 + 4 + 2 =
  10 B. 32 B: a lower bound (a graph inductor splits, or an index_put it does not re-place, moves more).
- "torchtitan": not a Megatron run; nothing priced here (the plans' TorchTitan losses are compiled with the model).
"""

from __future__ import annotations

import numpy as np

from commbench.planner.models.counts import step_vocab
from commbench.planner.step.loss_memory import check_loss

# HBM bytes per logit per micro-batch, forward + backward (module docstring)
LOSS_KERNEL_BYTES_PER_LOGIT = {"te": 10.0, "native": 32.0}
# the kernel the step model's fitted terms already price: the published runs' (loss_memory.RUN_LOSS)
PRICED_LOSS = "te"


def loss_logits_per_microbatch(model, *, tp, cp, tokens_mb, framework: str = "megatron") -> np.ndarray:
    """Logits one TP x CP rank of the loss stage computes per micro-batch: its tokens x its vocabulary rows (the
    framework's padded rows, models/counts.step_vocab), for the main head and each MTP head (the same loss runs on
    each: memory.logits_bytes counts the same)."""
    return tokens_mb / (tp * cp) * step_vocab(model, tp, framework) * (1 + model.num_mtp_layers)


def loss_extra_bytes_per_microbatch(model, *, tp, cp, tokens_mb, framework: str = "megatron",
                                    loss: str | None = None) -> np.ndarray:
    """HBM bytes the loss stage's cross entropy `loss` (loss_memory.py; None: the framework's emitted launch's) moves
    per micro-batch beyond Transformer Engine's kernel, which the fitted terms price (0 for te and for TorchTitan)."""
    loss = check_loss(loss, framework)
    if loss not in LOSS_KERNEL_BYTES_PER_LOGIT or loss == PRICED_LOSS:
        return np.zeros(np.shape(tokens_mb))
    per_logit = LOSS_KERNEL_BYTES_PER_LOGIT[loss] - LOSS_KERNEL_BYTES_PER_LOGIT[PRICED_LOSS]
    return loss_logits_per_microbatch(model, tp=tp, cp=cp, tokens_mb=tokens_mb, framework=framework) * per_logit
