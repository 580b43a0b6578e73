"""Per-kernel physics of the step model: roofline, attention (tensor cores vs exp units), host
launch time vs CUDA-graph scope, SMs taken by an overlapped MoE dispatcher. Vectorised over layouts.

- Roofline: a kernel's time is the larger of its compute time and its memory time (Williams,
  Waterman, Patterson, "Roofline", CACM 2009), not their sum. Real kernels do not overlap the two
  perfectly near the ridge point, so the step model takes a smooth maximum (the p-norm,
  p = ROOFLINE_P): equal to the max when one side dominates, 2^(1/p) x it when they are equal.
- Attention core (flash attention): the two GEMMs run on the tensor cores, the softmax's
  exponentials on the special-function units (MUFU.EX2); FlashAttention-3 (arXiv 2407.08608)
  overlaps them, so a pass takes the slower of the two. Exponentials per token per layer: heads x
  the keys it attends (s/2 on average under a causal mask) once forward and once again in the
  backward pass, which recomputes the probabilities. Forward and backward are separate kernels, each
  bound on its own side: the forward holds a third of the counted FLOPs (FLOPS.md: backward = 2 x
  forward) and half the exponentials (a sliding-window layer's queries see only its window's keys:
  models.counts.mean_keys_per_query), so it is the exp-bound pass (FlashAttention-4's motivation on
  Blackwell: ~500 tensor FLOPs per exp at B200's rates against 4 x head_dim = 512 per score forward)
  while the backward stays tensor-bound. Blackwell Ultra doubles the exp rate (hardware.toml
  sfu_texp_per_s: NVIDIA's "2x attention-layer acceleration" for GB300).
- Host time: each layer's kernels are launched from Python (layer_overhead_s of host time per
  layer per micro-batch, forward + backward); per-layer CUDA graphs replay the launches of the modules
  in their scope (Megatron-Core --cuda-graph-scope, layout/graph_scope.py) and leave the rest eager, per
  layer kind (eager_share: attention and MLP halves; the experts of dropless MoE always eager,
  graph_layer_residual of the layer; a Mamba layer needs "mamba" in the scope); a full-iteration
  graph replays the whole step (no launch time). Launches are asynchronous: the host runs ahead of
  the GPU through the stream's queue, so a layer costs the slower of its GPU time and its host
  time, and only the excess of host over GPU time is exposed (CUDA C++ Programming Guide,
  "Asynchronous Concurrent Execution"; the CPU-bound regime PyTorch's CUDA-graph notes describe is
  the one where the host is the slower side). Taken smoothly (smooth_max) because kernel and
  launch times vary within a layer. Dropless MoE also syncs the per-expert token counts to the
  host before the grouped GEMM (moe_sync_s per MoE layer per micro-batch: the queue drains, the
  GPU idles for the round trip and the relaunch); full-iteration graphs need the sync-free path,
  so they remove it.
- Expert GEMM kernels: without the fused grouped MLP, each local expert's GEMMs are separate
  kernels (Transformer Engine GroupedLinear: one cuBLAS GEMM per expert), 6 per expert per MoE
  layer per micro-batch (fc1, fc2 x fprop, dgrad, wgrad), each paying a fixed GPU time (launch
  gap, partial last wave) that CUDA graphs do not remove: expert_gemm_kernel_s each. The fused
  grouped MLP (TE te.ops, v2.16: forward_grouped_mlp.py / backward_grouped_mlp.py) runs each of the
  six as one grouped kernel over all local experts with dynamic tile scheduling (cuDNN frontend
  grouped_gemm_glu / dglu / quant / wgrad), so neither the per-expert launches nor the per-expert
  tails remain; what stays per expert is the padding of its rows to 128 (< 1% at the recipes' token
  counts). It exists only for MXFP8 / NVFP4 on Blackwell (fused_grouped_mlp).
- Power-limited clock: a GPU running dense GEMMs sits at its power limit, so its tensor rate is
  the datasheet's x sustained_tensor_fraction (from TDP and SM count, per GPU family). The clock is the GPU's, not a
  kernel's (the power controller acts over milliseconds, a step interleaves GEMMs and elementwise kernels every few
  microseconds), so the memory-bound kernels run at it too: at the fitted ~0.4 of the HBM peak they are bound by the
  bytes the SMs keep in flight, not by HBM (Little's law: throughput = concurrency / latency; V. Volkov,
  "Understanding Latency Hiding on GPUs", UC Berkeley EECS-2016-143, ch. 4), so their rate goes with SMs x that clock
  (sustained_sm_rate, relative to the family's reference SKU). GB300's edge over GB200 on them is 160 vs 148 SMs at
  1.4 vs 1.2 kW (1.109x), where both datasheets give 8 TB/s of HBM.
- Overlapped dispatcher: DeepEP/HybridEP kernels occupy SMs while they run; overlapped with
  compute they slow it by the fraction of SMs they hold (DeepEP README: normal kernels on 24 SMs).
- Block-scaled GEMMs: MXFP8 dense GEMMs reach MXFP8_GEMM_RATIO of per-tensor fp8's rate at one datasheet peak
  (Transformer Engine's published GEMM benchmark, below).
"""

from __future__ import annotations

import numpy as np

from commbench.planner.layout.graph_scope import BIT, WHOLE_LAYER, resolved_masks
from commbench.planner.models import counts, dsv4

ROOFLINE_P = 4.0
# MXFP8 GEMMs (Blackwell's block-scaled MMA: an e8m0 scale per 32 elements of each operand along K, loaded beside the
# data) run at this fraction of per-tensor fp8 GEMMs' rate on the same shapes, as Transformer Engine calls them: its
# published GEMM profiling benchmark (NVIDIA/TransformerEngine docs/examples/gemm_profiling/gemm_profiling.rst and
# benchmarks/gemm/benchmark_gemm.py, commit 1609c890e, PR #2863), pre-quantized inputs (the GEMM kernels alone,
# tex.generic_gemm), a 4096-hidden / 16384-FFN layer at 15,872 tokens on B300: the 12 GEMMs of a layer (fprop, dgrad,
# wgrad) take 6.812 ms per layer with FP8 CurrentScaling and 7.161 ms with MXFP8 (fprop 2.158 / 2.365, dgrad
# 2.329 / 2.397, wgrad 2.325 / 2.400). The datasheet gives both formats one peak (hardware.toml fp8_tflops), so the
# ratio is the kernels', not the peak's. Quantization is not in it (it is the memory-bound kernels' work, memory.py).
MXFP8_GEMM_RATIO = 6.812 / 7.161
DISPATCHER_SMS = 24  # deepseek-ai/DeepEP README (normal kernels, 24 SMs); HybridEP documents fewer
EXPS_PER_SCORE = 2.0  # forward softmax + the backward's recomputation of the probabilities


def smooth_max(a: np.ndarray, b: np.ndarray, p: float = ROOFLINE_P) -> np.ndarray:
    """(a^p + b^p)^(1/p): max(a, b) <= it <= 2^(1/p) max(a, b); monotone in both."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    top = np.maximum(np.maximum(a, b), 1e-300)
    if p == 4.0:  # the search's default: squares and square roots, several times faster than float powers
        qa, qb = a / top, b / top
        qa *= qa
        qb *= qb
        qa *= qa
        qb *= qb
        qa += qb
        return top * np.sqrt(np.sqrt(qa))
    return top * ((a / top) ** p + (b / top) ** p) ** (1.0 / p)


def attention_exps_per_token(model, seq_len: int) -> float:
    """Exponentials of the attention core per token over all layers (incl. MTP), forward + backward."""
    if model.attention == "dsv4":  # windows and selected compressed blocks, not the causal half of the sequence
        return dsv4.scores_per_token(model, seq_len) * EXPS_PER_SCORE
    layers = model.num_attention_layers + model.num_mtp_layers  # hybrid: attention blocks only
    return layers * model.num_heads * counts.mean_keys_per_query(model, seq_len) * EXPS_PER_SCORE


FORWARD_FLOP_SHARE = 1.0 / 3.0  # FLOPS.md counts training as 3 x forward
FORWARD_EXP_SHARE = 0.5         # one exp per score forward, one in the backward's recomputation


def attention_time_s(tc_flops, exps, *, tc_rate_flops, sfu_rate_exps) -> np.ndarray:
    """Attention core, forward + backward: per pass the slower of tensor-core time and exp (SFU) time,
    smoothly."""
    fwd = smooth_max(tc_flops * FORWARD_FLOP_SHARE / tc_rate_flops, exps * FORWARD_EXP_SHARE / sfu_rate_exps)
    bwd = smooth_max(tc_flops * (1 - FORWARD_FLOP_SHARE) / tc_rate_flops,
                     exps * (1 - FORWARD_EXP_SHARE) / sfu_rate_exps)
    return fwd + bwd


def layer_kinds(model) -> tuple[tuple[int, str], ...]:
    """(count, kind) of the model's layers (MTP included) by what a per-layer graph can capture in them:
    a transformer layer is an attention half and an MLP half ("attn+mlp", "attn+moe"); a hybrid model's
    layers are single blocks ("mamba", "attn", "mlp", "moe"; its MTP layers are transformer layers)."""
    mtp_kind = "attn+moe" if model.is_moe else "attn+mlp"
    if model.is_hybrid:
        p = model.layer_pattern
        kinds = ((p.count("M"), "mamba"), (p.count("*"), "attn"), (p.count("-"), "mlp"), (p.count("E"), "moe"),
                 (model.num_mtp_layers, mtp_kind))
    else:
        moe = (model.num_moe_layers + model.num_mtp_layers) if model.is_moe else 0
        kinds = ((moe, "attn+moe"), (model.num_layers + model.num_mtp_layers - moe, "attn+mlp"))
    return tuple((n, kind) for n, kind in kinds if n)


def eager_share(kind: str, masks: np.ndarray, expert_share: float) -> np.ndarray:
    """Fraction of a layer's eager launch time a per-layer graph of scope `masks` (graph_scope bit masks,
    defaults resolved) leaves eager. A transformer layer's launches are half attention, half MLP
    (TransformerLayer runs _forward_attention, then _forward_mlp: a norm, GEMMs, a core and a
    bias-dropout-add each); of a MoE MLP, `expert_share` of the layer (graph_layer_residual) is the
    dispatch, expert GEMMs and combine, which no per-layer scope captures in dropless MoE (Megatron-Core
    captures the MoE part whole only with "moe", drop-and-pad), the rest the router and preprocess
    (moe_router / moe_preprocess). A hybrid model's single-block layers take their block's shares whole."""
    masks = np.asarray(masks, dtype=np.int64)

    def eager(module: str) -> np.ndarray:
        return ((masks & (BIT[module] | WHOLE_LAYER)) == 0).astype(np.float64)

    def moe(weight: float) -> np.ndarray:
        experts = min(2.0 * expert_share, 1.0) * weight
        return np.where(masks & BIT["moe"], 0.0, (weight - experts) * eager("moe_router") + experts)
    parts = {"attn": lambda w: w * eager("attn"), "mlp": lambda w: w * eager("mlp"), "moe": moe,
             "mamba": lambda w: w * eager("mamba")}
    halves = kind.split("+")
    return sum(parts[h](1.0 / len(halves)) for h in halves)


def host_time_s(layers, moe_layers, cuda_graph, cal, gpu_layer_s=0.0, *, model, graph_scope) -> np.ndarray:
    """Exposed launch + host-sync time per micro-batch (forward + backward) by CUDA-graph code (0 none,
    1 per-layer, 2 full iteration) and per-layer scope (`graph_scope`: graph_scope masks, 0 = the
    recipes' scope for the model): per layer kind (layer_kinds, in their share of `layers`), what its
    host launch time (layer_overhead_s x eager_share) exceeds the layer's GPU time `gpu_layer_s` by
    (asynchronous launches), plus the MoE token-count syncs."""
    masks = resolved_masks(model, np.asarray(graph_scope))
    gpu_layer_s = np.asarray(gpu_layer_s, dtype=np.float64)
    kinds = layer_kinds(model)
    total = float(sum(n for n, _ in kinds))
    exposed_s = np.zeros(np.broadcast(np.asarray(cuda_graph), gpu_layer_s, masks).shape)
    for count, kind in kinds:
        share = np.where(cuda_graph == 0, 1.0,
                         np.where(cuda_graph == 1, eager_share(kind, masks, cal.graph_layer_residual), 0.0))
        host_layer_s = cal.layer_overhead_s * share
        exposed_layer_s = np.maximum(smooth_max(gpu_layer_s, host_layer_s) - gpu_layer_s, 0.0)
        exposed_s = exposed_s + layers * (count / total) * exposed_layer_s
    return exposed_s + moe_sync_time_s(moe_layers, cuda_graph, cal)


def moe_sync_time_s(moe_layers, cuda_graph, cal) -> np.ndarray:
    """The MoE token-count syncs per micro-batch (none under a full-iteration graph): the GPU idles."""
    return moe_layers * cal.moe_sync_s * np.where(cuda_graph == 2, 0.0, 1.0)


EXPERT_GEMMS_PER_LAYER = 6  # fc1, fc2 x (fprop, dgrad, wgrad); the GLU's two halves are one fc1 GEMM


def fused_grouped_mlp(fused_moe, precision, gpu) -> np.ndarray:
    """Where a fused_moe layout runs Transformer Engine's fused grouped MLP: its fusion pass keeps the
    unfused ops unless the recipe is MXFP8 or NVFP4 and the GPU is compute capability 10.x (Blackwell;
    te.ops fused/grouped_mlp.py fuse_grouped_mlp_ops and is_supported, v2.16-v2.18)."""
    from commbench.planner.layout.spec import CODE_FIELDS
    from commbench.planner.step.terms import HOPPER
    block_scaled = np.isin(precision, [CODE_FIELDS["precision"].index(p) for p in ("mxfp8", "nvfp4")])
    return np.asarray(fused_moe, dtype=bool) & block_scaled & (str(gpu.name).lower() not in HOPPER)


def expert_kernel_time_s(moe_layers, local_experts, fused_moe, cal) -> np.ndarray:
    """Fixed time of the per-expert GEMM kernels per micro-batch (none with the fused grouped MLP)."""
    return np.where(fused_moe, 0.0, moe_layers * local_experts * EXPERT_GEMMS_PER_LAYER * cal.expert_gemm_kernel_s)


def _fact(gpu, name: str) -> float:
    value = getattr(gpu, name, None)
    if not value:
        from commbench.errors import CommbenchError
        raise CommbenchError(f"GPU {gpu.name!r} has no {name} in hardware.toml; the step model needs it")
    return float(value)


def sfu_rate_exps(gpu) -> float:
    """Exponentials per second of the GPU's special-function units (hardware.toml sfu_texp_per_s)."""
    return _fact(gpu, "sfu_texp_per_s") * 1e12


def sustained_tensor_fraction(gpu) -> float:
    """Tensor-core rate at the GPU's power limit / its datasheet rate (hardware.toml tdp_w, sms,
    clock_reference; commbench.data.reference.sustained_tensor_fraction has the law and its source)."""
    value = getattr(gpu, "sustained_tensor_fraction", None)
    if not value:
        from commbench.errors import CommbenchError
        raise CommbenchError(f"GPU {gpu.name!r} has no tdp_w, sms or clock_reference in hardware.toml; the step "
                             "model needs them for the power-limited tensor rate")
    return float(value)


def sustained_sm_rate(gpu) -> float:
    """The GPU's SM throughput at its power limit relative to its family's reference SKU (hardware.toml
    clock_reference): SMs x the power-limited clock, the law of commbench.data.reference.sustained_tensor_fraction
    before the datasheet is divided out (= sustained_tensor_fraction x fp8_tflops / the reference's fp8_tflops;
    per-SM-per-clock FP8 width is the same across a family). B200 1, GB200 1.063, B300 1.087, GB300 1.178; Hopper 1.
    A GPU without a clock_reference (a hand-made spec) is its own reference: 1."""
    ref_name = getattr(gpu, "clock_reference", None)
    if not ref_name:
        return 1.0
    from commbench.data.reference import gpu_spec
    return sustained_tensor_fraction(gpu) * float(gpu.fp8_tflops) / gpu_spec(ref_name).fp8_tflops


def host_link_bytes_per_s(gpu) -> float:
    """GPU <-> host memory bandwidth, one direction (hardware.toml host_link_gbps_per_dir: PCIe or NVLink-C2C)."""
    return _fact(gpu, "host_link_gbps_per_dir") * 1e9


def host_memory_bytes(gpu) -> float:
    """Host (CPU) memory per GPU (hardware.toml host_memory_gb_per_gpu)."""
    return _fact(gpu, "host_memory_gb_per_gpu") * 1e9


def offload_exposed_s(copy_s: np.ndarray, compute_mb: np.ndarray) -> np.ndarray:
    """Exposed seconds per micro-batch of CPU activation offloading: the copies to host memory run on a
    copy engine beside the forward (a third of the micro-batch's compute), the copies back beside the
    backward (two thirds); each pass waits only for what its copies outlast it by (Transformer Engine's
    offload context copies on its own stream and synchronises at the layer boundaries it needs)."""
    return np.maximum(copy_s - compute_mb / 3.0, 0.0) + np.maximum(copy_s - compute_mb * 2.0 / 3.0, 0.0)


def dispatcher_sm_fraction(gpu) -> float:
    """Fraction of the GPU's SMs an overlapped DeepEP/HybridEP kernel holds."""
    return DISPATCHER_SMS / _fact(gpu, "sms")
