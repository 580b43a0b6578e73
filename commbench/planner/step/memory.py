"""Memory per GPU (weights, gradients, optimizer state, activations, reserve) and the HBM traffic
of the memory-bound kernels, vectorised over layouts.

Static memory follows ZeRO/Megatron mixed precision (Rajbhandari et al., arXiv 1910.02054): bf16
weights (2 B; mxfp8 / nvfp4, and per-tensor fp8 on Hopper, add the cached quantized copies,
quantized_weight_cache_bytes; the embedding, the output layer and, under nvfp4, the MTP layers stay bf16 with no
copies: step/module_precision.py), gradients in the param dtype (2 B, Megatron-Core's default), fp32 master weights
+ Adam m, v (12 B), the last
sharded over DP x CP (dense) / EDP (experts) by the distributed optimizer.
Activations: the tensors each layer keeps for backward (Korthikanti et al., arXiv 2205.05198,
with flash attention so no s^2 term), per token, in bf16, sharded by TP (all of them with
sequence parallel, only the head/FFN-sized ones without) and CP; experts hold top-k x tokens
per rank, times ETP for the all-gathered (full-width) FC1 input. 1F1B keeps PP micro-batches in flight on the first stage; interleaved 1F1B keeps
(PP x VP + PP - 1) model-chunk micro-batches (Megatron's warm-up count + 1). Full recompute
keeps only each layer's input; selective and the light modes drop the saved tensors layout/recompute.py's table
says their modules free on the model's layer specs (Megatron: the MLA input norm, the MoE pre-MLP norm, the routed
experts' activation output, MLA's up-projections; never a fused norm or a dense MLP's activation output), the one
table the emitter writes --recompute-modules from. The last stage also holds what its loss keeps of the logits for
backward, by the cross entropy the run runs (step/loss_memory.py: TE's 2 B, megatron-core native's 4 B per logit), or
the backward's working set where larger (full recompute's re-run layer, a MoE layer's returning gradient:
rank_activation_bytes), never both. An alltoall layer graph over moe_preprocess holds the permuted tokens in its
graph pool, charged with the reserve, not the activations (layout/recompute.py graph_kept_permuted_tokens,
graph_pool_permuted_bytes).
The embedding, output layer and logits have the rows the
framework builds (models/counts.step_vocab: Megatron-LM's vocabulary padded to make_vocab_size_divisible_by x TP,
TorchTitan's unpadded). Blocks are
counted by kind (step/mamba.py block_counts), so a hybrid model's Mamba, attention, MLP and MoE
layers each add their own terms (Mamba's in step/mamba.py).
Module-level offload of the fused grouped MLP (layout fused_mlp_offload_min, megatron-core 0.19.0) takes the routed
experts' saved tensors that reach the element threshold off the GPU for all MoE layers but one
(fused_mlp_offload_elements); HSDP's outer "optim" sharding splits the optimizer state across the replicas
(outer_optim_shards). The optimizer step holds an fp32 copy of the rank's gradient shard once the activations are
freed (optimizer_step_grad_bytes): the total charges the larger of the two. The reserve adds, where the launch runs --tp-comm-overlap, Transformer Engine's userbuffers
(step/tp_overlap_memory.py: HBM outside PyTorch's allocator).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from commbench.planner.layout import recompute as rc
from commbench.planner.layout.spec import DISPATCHERS, PRECISIONS
from commbench.planner.models import dsv4
from commbench.planner.models.spec import ModelSpec
from commbench.planner.models.counts import param_counts, step_vocab
from commbench.planner.step import fsdp, gdn, mamba, module_precision
from commbench.planner.step.dp_sync import grad_bytes, param_gather_bytes
from commbench.planner.step.loss_memory import LOSS_LOGIT_BYTES, check_loss
from commbench.planner.step.mamba import block_counts
from commbench.planner.step.stage_memory import RankArrays, _layer_kinds, _per_kind_params, candidate_arrays
from commbench.planner.step.tp_overlap_memory import tp_overlap_buffer_bytes
from commbench.row_groups import RowGroups

BF16 = 2
FP8, MXFP8 = PRECISIONS.index("fp8"), PRECISIONS.index("mxfp8")


@dataclass(frozen=True, kw_only=True)
class MemoryBytes:
    weights: np.ndarray
    grads: np.ndarray
    optimizer: np.ndarray
    activations: np.ndarray
    reserve: np.ndarray
    capacity: np.ndarray
    host_offload: np.ndarray    # activations CPU offloading keeps in host memory
    host_capacity: np.ndarray   # host memory per GPU less the host reserve (inf without offloading)
    rank: np.ndarray            # the pipeline rank these bytes are of (the one that holds the most)
    optimizer_step: np.ndarray  # the optimizer step's fp32 gradient copy (optimizer_step_grad_bytes), activations freed

    @property
    def transient(self) -> np.ndarray:
        """Bytes beside the static terms at the peak: the saved activations (forward and backward) or the optimizer
        step's gradient copy (after the last backward), whichever is larger: the two are never held together."""
        return np.maximum(self.activations, self.optimizer_step)

    @property
    def total(self) -> np.ndarray:
        return self.weights + self.grads + self.optimizer + self.transient + self.reserve


NVFP4 = PRECISIONS.index("nvfp4")


def saved_gemm_input(precision):
    """A GEMM input kept for backward, in bf16 elements: bf16 keeps it (1); fp8 / mxfp8 keep the
    quantized copy (1 B: 0.5); nvfp4 keeps the columnwise NVFP4 copy the wgrad GEMM reads, 4-bit values
    plus one e4m3 scale per 16 (0.5625 B: 0.28125) (NVFP4 format: arXiv 2509.25149, Transformer Engine
    NVFP4BlockScaling)."""
    return np.select([precision == NVFP4, precision > 0], [0.5625 / BF16, 0.5], 1.0)


def quantized_weight_cache_bytes(precision, primary_bytes, framework: str = "megatron", *,
                                 fp8_transpose=False) -> np.ndarray:
    """Bytes per parameter of the block-scaled weight copies the GEMMs read, held for the whole step beside
    the primary weights. Megatron-Core caches them across micro-batches (TransformerConfig.
    disable_parameter_transpose_cache, default False: "the parameter transposes are cached"); fprop reads
    the rowwise copy, dgrad the columnwise one, and with block scales along one axis (mxfp8: an e8m0
    scale per 32; nvfp4: an e4m3 scale per 16, see saved_gemm_input) the columnwise copy is a quantization
    of its own, not a view. With 8-bit primary weights (fp8_param_gather, primary_bytes 1) the rowwise
    copy is the weight itself; with bf16 primary weights both copies are extra ("Dual precision weights
    (default): maintains both BF16 and FP8 weight copies ... uses more memory than BF16 training alone",
    Megatron-LM docs/discussions/deepseek-v3-gb200-optimization, section 1).
    Per-tensor fp8 where the GPU's fp8 GEMMs take only the TN layout (`fp8_transpose`: Hopper,
    fp8_transpose_needed): dgrad reads the weight's fp8 transpose, a copy of its own, 1 B per parameter
    (Transformer Engine v2.9 pytorch/csrc/quantizer.cpp Float8 quantizers: with_transpose = columnwise_usage
    && !nvte_is_non_tn_fp8_gemm_supported(), which common/transformer_engine.cpp answers true only for
    compute capability 10.x and >= 13.0); with bf16 primary weights the cached rowwise fp8 copy too
    (module/base.py get_weight_workspace, kept across micro-batches like the block-scaled ones). Blackwell
    reads per-tensor fp8 data in either layout: no copy there.
    TorchTitan (torchao) quantizes the weight at each GEMM call and caches nothing across micro-batches: 0."""
    copy = np.select([precision == MXFP8, precision == NVFP4, (precision == FP8) & np.asarray(fp8_transpose)],
                     [1.0 + 1 / 32, 0.5625, 1.0], 0.0)
    copies = np.where(np.asarray(primary_bytes) < 2, 1.0, 2.0)
    return copy * copies * (framework == "megatron")


def fp8_transpose_needed(gpu) -> bool:
    """Whether per-tensor fp8 GEMMs on `gpu` need the transposed fp8 operand (a copy of its own): compute capability
    below 10.0 (Hopper), as Transformer Engine's nvte_is_non_tn_fp8_gemm_supported decides (v2.9
    common/transformer_engine.cpp: non-TN fp8 GEMMs only on 10.x and >= 13.0; 12.x, consumer Blackwell, is not
    in the planner's GPU table)."""
    cc = gpu.compute_capability
    return cc is not None and not (10 <= cc[0] < 12 or cc[0] >= 13)


def router_map_elements(model: ModelSpec) -> float:
    """bf16-equivalent elements per token per MoE layer of the router's and the permutation's saved maps under
    Megatron (_per_token_elements' docstring): routing_map (1 B per expert), the fused top-k's intermediate output
    and, with an aux loss, the aux-loss scores' (each one router-dtype value per expert), and the permutation's
    row_id_map (int32, 2 x experts + 1)."""
    e = model.num_routed_experts
    arch = model.architecture
    router_bytes = {"bf16": 2.0, "fp64": 8.0}.get(arch.router_dtype if arch is not None else "fp32", 4.0)
    aux = arch is None or (arch.load_balancing not in ("none", "sinkhorn") and arch.aux_loss_coeff > 0)
    return (e * (1.0 + router_bytes * (1 + int(aux))) + 4.0 * (2 * e + 1)) / BF16


def _per_token_elements(model: ModelSpec, tp, cp, etp, sp, recompute, precision, keep=None,
                        framework: str = "megatron"):
    """(attention, dense MLP, MoE MLP) stored bf16-equivalent elements per micro-batch token on one GPU.

    GEMM inputs saved for backward are fp8 copies (half a bf16 element) in 8/4-bit recipes, as
    Transformer Engine keeps them; expert probabilities are fused into the activation function,
    so the expert output is not kept. The router's GEMM is not Transformer Engine's: it keeps the MoE
    block's norm output in bf16 whatever the recipe (megatron-core 0.16.1 transformer/moe/router.py
    gating -> moe_utils.py RouterGatingLinearFunction.forward: ctx.save_for_backward(inp, weight, bias)).
    `keep` (layout/recompute.py keep_factors: per saved tensor, 0 where the row's recompute frees it; default
    Megatron's table with no graphed router) says which norm outputs, activation outputs and MLA up-projections
    a selective-granularity recompute drops.

    Megatron (megatron-core 0.14 to 0.16.1, Transformer Engine >= 2.6; every 8/4-bit recipe the planner launches is
    a non-delayed one: --fp8-recipe tensorwise / mxfp8, or nvfp4) keeps, as counted here:
    - the attention output once, in bf16: flash attention saves it for its backward (Transformer Engine v2.9
      attention/dot_product_attention/backends.py FusedAttnFunc: qkvo_tensors = (q, k, v, out)), and linear_proj is
      set to save that original input instead of a quantized copy (transformer/attention.py and
      multi_latent_attention.py: set_save_original_input(self.linear_proj), "the output of the fused core_attn is
      saved by itself, and linear_proj also saves the quantized tensor of this output"): attn_out_dim bf16
      elements whatever the precision, not a GEMM input's quantized copy;
    - the MoE norm output once, in bf16: a shared expert's linear_fc1 saves the original input the router keeps
      (transformer/moe/shared_experts.py: "the output of pre_mlp_layernorm is saved by router ... set the
      linear_fc1 to save the original input tensors"), no quantized copy beside it;
    - the QK norms' inputs (Qwen3: --qk-layernorm): q_layernorm / k_layernorm (TENorm, Transformer Engine v2.9
      ops/basic/rmsnorm.py: ctx.save_for_backward(x, rstdevs), x the contiguous input) keep the pre-norm query and
      key (q_dim + kv_dim / 2) beside the normalized, rotated q, k the attention keeps (attention.py
      get_query_key_value_tensors applies them before the rope);
    - MLA: the two down-projections (linear_q_down_proj, linear_kv_down_proj: TELinear) each keep their own
      quantized copy of the input norm output in 8/4-bit recipes (one bf16 tensor in bf16; save_original_input is
      set on them only under layernorm recompute: set_for_recompute_input_layernorm), and each up-projection (a
      TELayerNormColumnParallelLinear with qk_layernorm) keeps its normalized latent (ln_out, a GEMM input) beside
      the latent itself, freed with the up-projections by mla_up_proj (its CheckpointWithoutOutput);
    - the router's and the permutation's maps per MoE layer (megatron-core 0.16.1 moe_router_fusion and
      moe_permute_fusion, set by every Megatron-Bridge performance recipe: scripts/performance/configs/*, and the
      model providers): Transformer Engine v2.9 router.py FusedTopkScoreFunction saves routing_map (bool) and
      intermediate_output, FusedComputeScoresForMoEAuxLoss (an aux loss enabled) a second intermediate_output, both
      tokens x experts in the router's dtype (csrc/extensions/router.cpp: logits.scalar_type()), and permutation.py
      _moe_permute_mask_map saves row_id_map, tokens x (2 x experts + 1) int32 (triton/permutation.py
      make_row_id_map), the same tensor unpermute keeps. Charged as for the alltoall dispatcher on the sequence-
      sharded tokens; the flex dispatcher's maps are of the received tokens and its local experts, of the same order.
    TorchTitan keeps the formulas above (its op-level selective recompute and torchao's saved inputs differ)."""
    keep = rc.keep_factors(model, None, recompute) if keep is None else keep
    h, g = model.hidden, model.glu_factor
    seq_shard = np.where(sp, tp, 1) * cp       # h-sized tensors
    head_shard = tp * cp                         # head / FFN-sized tensors
    keep_up = keep[rc.MLA_UP]                    # MLA up-projections
    gemm_in = saved_gemm_input(precision)
    res = model.residual_streams * h  # a block's saved residual input (DeepSeek-V4's mHC keeps hc_mult streams)
    megatron = framework == "megatron"
    attn_out = model.attn_out_dim * (1.0 if megatron else gemm_in)   # bf16 under Megatron (docstring)
    norm_in = h * gemm_in                        # the attention's input-norm output its first GEMM keeps
    if model.attention == "mla":
        latents = model.q_lora_rank + model.kv_lora_rank
        up_ln_out = latents * gemm_in if megatron else 0.0
        qkv = keep_up * (model.q_dim + model.kv_dim + up_ln_out) + latents
        if megatron:   # two down-projections, each its own quantized copy (one bf16 tensor in bf16)
            norm_in = h * np.where(gemm_in < 1.0, 2.0 * gemm_in, 1.0)
    elif model.attention == "dsv4":  # q up-projected, its latent, the one KV head, the indexer's query on C layers
        qkv = keep_up * model.q_dim + model.q_lora_rank + model.kv_dim + dsv4.indexer_query_elements(model)
        attn_out = attn_out + model.o_groups * model.o_lora_rank * gemm_in  # the grouped low-rank output's input
    else:
        qkv = model.q_dim + model.kv_dim
        if megatron and model.architecture is not None and model.architecture.qk_norm:
            qkv = qkv + model.q_dim + model.kv_dim / 2   # the QK norms' inputs: pre-norm query and key
    attn = (res + keep[rc.ATTN_NORM] * norm_in) / seq_shard + (qkv + attn_out) / head_shard
    # (g - 1) x FFN: the activation function's whole input, bf16. glu_factor counts the MLP's matrices (3 with a
    # GLU), so for SwiGLU this is the 2 x FFN FC1 output megatron-core 0.16.1 fusions/fused_bias_swiglu.py saves
    # (activation_func_fp8_input_store, default False, is set by no Megatron-Bridge performance recipe), for a
    # plain MLP the FFN-wide activation input. Adding another FFN for "the whole SwiGLU input" counts it twice.
    dense_mlp = (res + keep[rc.MLP_NORM] * h * gemm_in) / seq_shard \
        + (keep[rc.MLP_FC1] * model.dense_ffn * (g - 1) + keep[rc.MLP_ACT] * model.dense_ffn * gemm_in) / head_shard
    if model.is_moe:
        k, ffn = model.top_k, model.expert_ffn
        # Per rank the experts hold etp x (tokens per rank x top-k) gathered rows: the FC1 input is
        # full-width (h) for each of them, the FFN-wide tensors are sliced by ETP.
        w = model.expert_width  # latent MoE: experts read the latent width (its projections ~ a shared expert)
        routed = k * (etp * w * gemm_in + ffn * (g - 1) + keep[rc.EXPERT_ACT] * ffn * gemm_in) / (tp * cp)
        shared = model.num_shared_experts * ffn * (g - 1 + keep[rc.SHARED_ACT] * gemm_in) / head_shard
        # The MoE block's norm output: the router keeps it in bf16 (h), its own GEMM input; under TorchTitan a
        # shared expert's FC1 keeps its own quantized copy beside it in 8/4-bit recipes (in bf16 the two are one
        # tensor); Megatron's saves the router's (docstring).
        copy = np.where((gemm_in < 1.0) & (model.num_shared_experts > 0) & (not megatron), gemm_in, 0.0)
        norm_out = h * (1.0 + copy)
        maps = router_map_elements(model) if megatron else 0.0
        moe_mlp = (res + keep[rc.MOE_NORM] * norm_out + k + maps) / seq_shard + routed + shared
    else:
        moe_mlp = np.zeros_like(attn)
    full = recompute == 2
    layer_input = res / seq_shard
    return np.where(full, layer_input, attn), np.where(full, 0.0, dense_mlp), np.where(full, 0.0, moe_mlp)


def full_recompute_share(model: ModelSpec, arr) -> np.ndarray:
    """Share of a stage's layers that full recompute recomputes: all of them (method uniform), or
    recompute_layers of each model chunk's layers / (pp x vp) (method block: TransformerBlock checkpoints
    its chunk's first N layers and stores the rest; megatron-core transformer_block.py _checkpointed_forward)."""
    chunk = block_counts(model).layers / (arr.pp * arr.vp)
    return np.where(arr.recompute_layers > 0, np.minimum(arr.recompute_layers, chunk) / chunk, 1.0)


# The flex dispatcher with HybridEP keeps no permuted-token copy of its own (issue 24, session 44 F8; checked against
# the HybridEP row of benchmarks/peak_memory.py, -9.6% at the time). Megatron-LM 2a75ac1 (Megatron-Bridge 067f987's
# pin) transformer/moe/fused_a2a.py: HybridEPDispatch / HybridEPCombine save no tensor, only the handle (DeepEP
# hybrid-ep 94a9f8f csrc/hybrid_ep/executor/executor.cu metadata_preprocess_core: int32 / bool maps of
# [tokens x EP, local experts], ~2.8 MiB a layer at Qwen3-30B EP16, under the maps charged here); the permuted
# tokens dispatch_with_permute returns (csrc/hybrid_ep/hybrid_ep.cu: torch::empty [num_permuted_tokens, hidden]) are
# the FC1 input the routed term counts; the registered dispatch / combine buffers go through cuMemCreate / cudaMalloc
# (allocator/allocator.cu), outside PyTorch's allocator and its max_memory_allocated. With EP overlap,
# models/common/utils.py should_free_input keeps the flex dispatch node's 1 x hidden input, the combine node frees
# the experts' output, and at PP 1 pipeline_parallel/combined_1f1b.py pairs layer j's forward with layer L-1-j's
# backward: one micro-batch plus part of one layer. Transformer Engine 2.17.1 pytorch/graph.py: with
# _reuse_graph_input_output_buffers (megatron-core sets it from TE 2.7) a graph's static outputs are weak references
# once its backward graph is captured (make_weak_ref: graph-pool memory, not in max_memory_allocated).


def graph_permuted_tokens(model: ModelSpec, arr, framework: str = "megatron") -> np.ndarray | float:
    """1.0 per layout where a per-layer CUDA graph holds the MoE layers' permuted tokens (layout/recompute.py
    graph_kept_permuted_tokens: Megatron only), else 0.0; 0.0 for an `arr` without the graph columns."""
    if framework != "megatron" or not model.is_moe or not hasattr(arr, "cuda_graph_scope"):
        return 0.0
    return rc.graph_kept_permuted_tokens(model, arr).astype(float)


class SavedElements:
    """Saved activation elements per token per block of each kind under each row's recompute, computed once per
    layout array; `of(counts)` sums them over the blocks a rank (or the whole model) holds. `graph_kept_norm`:
    layout/recompute.py graph_kept_moe_norm per row where the caller has it (keep_factors' graph_kept)."""

    def __init__(self, model: ModelSpec, arr, *, tp, cp, etp, sp, framework: str = "megatron", graph_kept_norm=None,
                 graph_tokens=None):
        self.model, self.arr, self.framework, self.graph_kept_norm = model, arr, framework, graph_kept_norm
        if graph_tokens is None:   # the rule read from `arr` where it has the columns (a whole LayoutArrays)
            graph_tokens = graph_permuted_tokens(model, arr, framework)
        self.graph_tokens = graph_tokens
        self.tp, self.cp, self.etp, self.sp = tp, cp, etp, sp
        self._whole = None
        self.input_elements = model.hidden / (np.where(sp, tp, 1) * cp)   # a layer's input: full recompute keeps it
        self.kinds = self._kinds(arr.recompute, tp=tp, cp=cp, etp=etp, sp=sp)
        self.share = self.stored = None
        if np.any(arr.recompute_layers > 0):   # block recompute: the layers it does not recompute keep everything
            self.share = full_recompute_share(model, arr)
            self.stored = self._kinds(np.zeros_like(arr.recompute), tp=tp, cp=cp, etp=etp, sp=sp)

    def _kinds(self, recompute, *, tp, cp, etp, sp, keep=None) -> dict:
        model, precision = self.model, self.arr.precision
        keep = (rc.keep_factors(model, self.arr, recompute, self.framework, graph_kept=self.graph_kept_norm)
                if keep is None else keep)
        attn, dense_mlp, moe_mlp = _per_token_elements(model, tp, cp, etp, sp, recompute, precision, keep,
                                                       framework=self.framework)
        kinds = {"attention": attn, "dense": dense_mlp, "moe": moe_mlp, "recompute": recompute}
        if model.linear_attention_freq:  # Gated DeltaNet blocks in place of attention (step/gdn.py)
            kinds["linear"] = np.where(recompute == 2, self.input_elements,
                                       gdn.activation_elements(model, tp, cp, sp, keep[rc.LINEAR_NORM], precision))
        if model.is_hybrid:
            kinds["mamba"] = mamba.activation_elements(model, tp, cp, sp, recompute, precision,
                                                       keep_norm=keep[rc.MAMBA_NORM])
        return kinds

    def _sum(self, kinds: dict, counts) -> np.ndarray:
        per_token = kinds["attention"] * counts.attention + kinds["dense"] * counts.dense + kinds["moe"] * counts.moe
        if "linear" in kinds:
            per_token = per_token + kinds["linear"] * counts.linear
        if "mamba" in kinds:  # every hybrid block is a layer of its own: full recompute keeps each one's input
            per_token = per_token + kinds["mamba"] * counts.mamba
            per_token = np.where(kinds["recompute"] == 2, counts.layers * self.input_elements, per_token)
        return per_token

    def recompute_working(self, counts=None) -> np.ndarray:
        """Elements per token one layer adds while full recompute re-runs it (0 for other rows): megatron-core's
        CheckpointFunction.backward (tensor_parallel/random.py) re-runs the checkpointed forward under
        enable_grad, which saves every tensor that layer's backward needs, then runs that backward: for one layer at
        a time (the plans' --recompute-method uniform --recompute-num-layers 1, and block's per-layer checkpoints)
        a whole layer's saved activations sit beside the stored layer inputs. The largest layer the `counts` blocks
        make (attention or Gated DeltaNet + its dense or MoE MLP; a hybrid's blocks are layers of their own), less
        its input, which is stored anyway."""
        full = np.asarray(self.arr.recompute) == 2
        if not np.any(full):
            return np.zeros(np.shape(full))
        if self._whole is None:   # recompute none's elements per block kind (every saved tensor kept), once per array
            self._whole = self._kinds(np.zeros_like(self.arr.recompute), tp=self.tp, cp=self.cp, etp=self.etp,
                                      sp=self.sp, keep={tensor: 1.0 for tensor in rc.SAVED})
        counts = block_counts(self.model) if counts is None else counts
        kinds = self._whole

        def present(name):
            return np.where(np.asarray(getattr(counts, name)) > 0, kinds[name], 0.0) if name in kinds else 0.0
        if "mamba" in kinds:
            layer = np.maximum.reduce([present(k) for k in ("attention", "mamba", "dense", "moe")])
        else:
            layer = np.maximum(present("attention"), present("linear")) + np.maximum(present("dense"), present("moe"))
        return np.where(full, np.maximum(layer - self.input_elements, 0.0), 0.0)

    def graph_permuted_elements(self) -> np.ndarray:
        """Elements per micro-batch token per MoE layer of the permuted tokens a per-layer CUDA graph holds in its
        pool (graph_pool_permuted_bytes): top-k x the expert width, on the sequence-sharded tokens; none for the
        layers full recompute re-runs (all of them, or block recompute's share)."""
        model, tp, cp = self.model, self.tp, self.cp
        if not model.is_moe:
            return np.zeros(np.shape(np.asarray(self.arr.recompute)))
        per_token = np.asarray(self.graph_tokens, dtype=float) * model.top_k * model.expert_width \
            / (np.where(self.sp, tp, 1) * cp)
        kept = 1.0 - self.share if self.share is not None else 0.0
        return per_token * np.where(np.asarray(self.arr.recompute) == 2, kept, 1.0)

    def of(self, counts=None) -> np.ndarray:
        """Elements per token of the blocks `counts` holds (default the whole model's, step/mamba.block_counts)."""
        counts = block_counts(self.model) if counts is None else counts
        per_token = self._sum(self.kinds, counts)
        if self.stored is not None:
            per_token = self.share * per_token + (1.0 - self.share) * self._sum(self.stored, counts)
        return per_token


def _saved_elements_per_token(model: ModelSpec, arr, *, tp, cp, etp, sp, framework: str = "megatron") -> np.ndarray:
    """Saved activation elements per token of the whole model (all stages) under each row's recompute."""
    return SavedElements(model, arr, tp=tp, cp=cp, etp=etp, sp=sp, framework=framework).of()


def offloaded_share(model: ModelSpec, arr, pp, layers_local=None) -> np.ndarray:
    """Share of a rank's layers whose activations CPU offloading moves to host memory (Transformer Engine
    get_cpu_offload_context via Megatron-Core cpu_offloading_num_layers: that many of the rank's layers,
    each once its forward ends; at least one layer stays on the GPU). `layers_local`: the rank's layers
    (default the mean rank's)."""
    layers_local = block_counts(model).layers / pp if layers_local is None else np.maximum(layers_local, 1)
    return np.minimum(arr.cpu_offload_layers, np.maximum(layers_local - 1, 0)) / layers_local


def offloaded_bytes_per_microbatch(model: ModelSpec, arr, *, tp, cp, pp, etp, tokens_mb, sp,
                                   framework: str = "megatron") -> np.ndarray:
    """Activation bytes one micro-batch sends to host memory in its forward (and reads back for its
    backward) under CPU offloading: the offloaded layers' share of what the stage saves."""
    per_token = _saved_elements_per_token(model, arr, tp=tp, cp=cp, etp=etp, sp=sp, framework=framework)
    return offloaded_share(model, arr, pp) * tokens_mb * per_token * BF16 / pp


def fused_mlp_offload_elements(model: ModelSpec, arr, *, tp, cp, etp, tokens_mb, recompute=None,
                               framework: str = "megatron") -> np.ndarray:
    """bf16-equivalent elements per micro-batch token per MoE layer that module-level activation offload of the fused
    grouped MLP (layout fused_mlp_offload_min > 0: megatron-core 0.19.0 --fine-grained-activation-offloading
    --offload-modules fused_group_mlp --min-offloaded-tensor-size N) moves to host memory on one GPU; 0 elsewhere.

    megatron-core cd4afff (26.08's pin) transformer/moe/experts.py wraps the fused grouped MLP (TE op fuser) in one
    offload group; pipeline_parallel/fine_grained_activation_offload.py intercepts every tensor autograd saves inside
    it (saved_tensors_hooks) and offloads those whose numel() reaches min_offloaded_tensor_size
    (tensor_need_offloading_checker: `tensor.numel() < self.min_offloaded_tensor_size` stays). The routed saved
    tensors of one layer and micro-batch on a rank, as _per_token_elements counts them, with their element counts:
    the FC1 input (etp x the rank's routed copies x the expert width, a quantized copy in 8/4-bit recipes), the FC1
    output (the activation input, (g - 1) x FFN wide, bf16) and the activation output (FFN wide, quantized; freed by
    moe_act recompute). The rank's routed copies per layer are tokens_mb x top-k / (tp x cp), as the routed term
    charges them (Megatron-Bridge's Ultra recipes force-balance the routing). Nemotron-3-Ultra on 256 GB300 (TP1,
    8192 tokens, top-22, latent 2048, FFN 5120, squared ReLU): FC1 input 369M elements, FC1 output 923M: only the FC1
    output passes the recipe's 500M, as its comment says ("approximates offloading the moe_act input"); on GB200
    (TP2 + SP) 184.5M and 461M against 350M. Not under full recompute (the layer's input alone is kept)."""
    n = np.broadcast(np.asarray(tp), np.asarray(arr.fused_mlp_offload_min)).shape
    if not model.is_moe or framework != "megatron" or not np.any(arr.fused_mlp_offload_min > 0):
        return np.zeros(n)
    recompute = arr.recompute if recompute is None else recompute
    keep = rc.keep_factors(model, None, recompute)
    gemm_in = saved_gemm_input(arr.precision)
    k, ffn, w, g = model.top_k, model.expert_ffn, model.expert_width, model.glu_factor
    rows = tokens_mb * k / (tp * cp)                 # the rank's routed token copies in one MoE layer
    threshold = arr.fused_mlp_offload_min
    tensors = ((rows * etp * w, etp * w * gemm_in),                          # FC1 input (etp gathered copies)
               (rows * ffn * (g - 1), ffn * (g - 1)),                        # FC1 output: the activation's input
               (rows * ffn, keep[rc.EXPERT_ACT] * ffn * gemm_in))            # activation output (FC2 input)
    per_token = sum(np.where(numel >= threshold, elements, 0.0) for numel, elements in tensors) * k / (tp * cp)
    return np.where((threshold > 0) & (recompute != 2), per_token, 0.0)


# The offload groups megatron-core keeps on the GPU: after the first iteration's warm-up, post_warmup_callback
# (fine_grained_activation_offload.py at cd4afff) marks the last group of each module name not offloadable "to make
# sure the reloading won't block the main stream" (the offload margin: one per name, fused_group_mlp's one layer).
FUSED_MLP_KEPT_LAYERS = 1

# Adam's optimizer state per trained parameter: fp32 master copy + two fp32 moments (search/memory_floor.py reads it)
OPTIMIZER_STATE_BYTES_PER_PARAM = 12.0
# The fp32 copy of a gradient the Megatron optimizer steps on (optimizer_step_grad_bytes)
FP32_GRAD_COPY_BYTES_PER_PARAM = 4.0


def optimizer_step_grad_bytes(optimizer_bytes, fsdp, framework: str = "megatron") -> np.ndarray:
    """Bytes of the fp32 gradients a Megatron-Core optimizer step holds beside the optimizer state, for the
    parameters whose state a rank holds (`optimizer_bytes`: OPTIMIZER_STATE_BYTES_PER_PARAM each, so the same share).

    megatron-core 3758b54 (Megatron-Bridge 0026ec1's pin; the same at 2a75ac1) optimizer/distrib_optimizer.py
    _copy_model_grads_to_main_grads: `shard_main_param.grad = shard_model_grad.float()` for each fp32 main-parameter
    shard (optimizer.py Float16OptimizerWithFloat16Params does the same unsharded): with the bf16 gradient buffer the
    plans launch (--grad-reduce-in-bf16) a new fp32 tensor, 4 B per parameter of the rank's shard. It is set in
    prepare_grads, after the last micro-batch's backward has freed the activations, and dropped only by zero_grad
    (set_to_none) at the start of the next train_step (Megatron-Bridge 0026ec1 training/train.py train_step:
    zero_grad_buffer, optimizer.zero_grad before the forward-backward): never beside the activations, so the peak holds
    the larger of the two (MemoryBytes.transient). Transformer Engine's FusedAdam (v2.x optimizers/fused_adam.py) steps
    fp32 parameters with fp32 gradients in place, nothing more. Not under Megatron-FSDP (its step returns before the
    copy: `if self.ddp_config.use_megatron_fsdp: return`), nor under TorchTitan (FSDP2's fp32 gradients are the
    optimizer's, grad_bytes 4), nor with --use-precision-aware-optimizer (a decoupled bf16 gradient, no copy), which
    the plans do not launch."""
    copy = np.asarray(optimizer_bytes, dtype=float) * (FP32_GRAD_COPY_BYTES_PER_PARAM / OPTIMIZER_STATE_BYTES_PER_PARAM)
    return np.where(np.asarray(fsdp, dtype=bool) | (framework != "megatron"), 0.0, copy)


def fused_mlp_offloaded_layers(moe_layers) -> np.ndarray:
    """MoE layers of a rank whose fused grouped MLP's large tensors go to host memory: all but the margin."""
    return np.maximum(np.asarray(moe_layers, dtype=float) - FUSED_MLP_KEPT_LAYERS, 0.0)


def logits_bytes(model: ModelSpec, *, tp, cp, tokens_mb, framework: str = "megatron",
                 loss: str | None = None) -> np.ndarray:
    """What the loss stage's cross entropy `loss` (loss_memory.py; None: the framework's emitted launch's) keeps of
    one micro-batch's logits (main head and MTP heads) at the rows the framework builds."""
    per_logit = LOSS_LOGIT_BYTES[check_loss(loss, framework)]
    return tokens_mb / (tp * cp) * step_vocab(model, tp, framework) * per_logit * (1 + model.num_mtp_layers)


def moe_backward_transient_bytes(model: ModelSpec, *, tp, cp, etp, tokens_mb, flex=False) -> np.ndarray:
    """Bytes of the gradient buffers a MoE layer's backward holds beside everything that layer saved, at its start: the
    gradient of the routed experts' output coming back to the experts, one micro-batch's routed token copies on the
    rank (rows: tokens_mb x top-k / (tp x cp), as the routed activations count them) by the expert width, in bf16.
    - alltoall dispatcher (megatron-core 0.16.1 token_dispatcher.py MoEAlltoAllTokenDispatcher.combine: unpermute,
      all_to_all, sort_chunks_by_idxs): TE's moe_unpermute backward writes the top-k-expanded gradient (rows) and
      _AllToAll.backward all-to-alls it into a new tensor (rows), the collective's input and output alive together:
      two copies; the expert-TP all-gather (the reduce-scatter's backward) widens the output to ETP x rows: 1 + ETP.
    - flex (DeepEP / HybridEP: fused_a2a.py HybridEPCombine.backward = dispatch_with_permute of the [tokens, hidden]
      gradient, one all-to-all over ETP x EP): the un-expanded gradient (rows / top-k) and the ETP x rows it returns.
    Only after that do the experts' backward GEMMs free the saved FC2 input, activation input and FC1 input. At EP 1
    (no all-to-all) this over-counts a copy. 0 for a dense model."""
    if not model.is_moe:
        return np.zeros(np.shape(tokens_mb))
    rows = np.asarray(tokens_mb, dtype=float) * model.top_k / (np.asarray(tp) * np.asarray(cp))
    copies = np.asarray(etp) + np.where(np.asarray(flex, dtype=bool), 1.0 / model.top_k, 1.0)
    return copies * rows * model.expert_width * BF16


def microbatches_in_flight(arr, load: RankArrays, *, vp, n_mb) -> np.ndarray:
    """Micro-batches' worth of a rank's model chunks in flight at its peak: its chunks in flight over vp, at most
    n_mb. --overlap-moe-expert-parallel-comm runs one more forward chunk before the steady state (megatron-core
    0.16.1 pipeline_parallel/schedules.py get_pp_rank_microbatches: num_warmup_microbatches + 1, interleaved only)."""
    chunks = load.chunks_in_flight + np.where(arr.moe_a2a_overlap & (vp > 1), 1, 0)
    return np.minimum(chunks / vp, n_mb)


def graph_pool_permuted_bytes(arr, load: RankArrays, saved: SavedElements, *, vp, n_mb, tokens_mb,
                              elements=None) -> np.ndarray:
    """Bytes of the permuted tokens a per-layer CUDA graph over moe_router + moe_preprocess with the alltoall
    dispatcher holds in its graph pool on one rank (layout/recompute.py graph_kept_permuted_tokens): one bf16
    [tokens x top-k, expert width] static output per MoE layer and micro-batch in flight. HBM the allocator keeps
    reserved for the graphs, not allocated: charged with the reserve, beside the activations and the optimizer step.

    Transformer Engine 2.15 (Megatron-Bridge 29ec910's lock, the alltoall run's month) to 2.18 (067f987's)
    pytorch/graph.py _make_graphed_callables captures every graph in one mempool in the schedule's order and, with
    _reuse_graph_input_output_buffers (megatron-core sets it from TE 2.7: e41b370 / 2a75ac1
    transformer/cuda_graphs.py), keeps each forward graph's static outputs until its backward graph is captured,
    then make_weak_ref's them ("These two type of tensors are both in cudagraph mempool, so we just deallocate
    them": v2.15 :719-729): the pool holds the in-flight layers' outputs side by side, while
    torch.cuda.max_memory_allocated, which NVIDIA's peaks report, counts none of it in training (a replay
    allocates nothing; the freed pool blocks are reserved, not allocated). megatron-core e41b370
    transformer_layer.py _te_cuda_graph_replay hands the static hidden_states to the dispatcher uncopied.
    `elements`: saved.graph_permuted_elements() where the caller has it."""
    elements = saved.graph_permuted_elements() if elements is None else elements
    if not np.any(elements):
        return np.zeros(np.shape(elements))
    return tokens_mb * elements * load.counts.moe * microbatches_in_flight(arr, load, vp=vp, n_mb=n_mb) * BF16


def rank_activation_bytes(model: ModelSpec, arr, load: RankArrays, saved: SavedElements, *, vp, n_mb, tokens_mb,
                          logits, fused_offload=0.0, transient=0.0) -> np.ndarray:
    """Activation bytes one pipeline rank (`load`: stage_memory.candidate_arrays) keeps at its peak: its blocks'
    saved tensors for the micro-batches it keeps in flight, less what the fused grouped MLP's offload moves to host
    memory (`fused_offload`: fused_mlp_offload_elements per token per MoE layer, all but the margin's layer), and the
    larger of the `logits` (logits_bytes) where it holds the loss and the backward's working set: under full
    recompute the re-run layer's saved tensors, and on a rank with MoE layers the gradient buffers of a MoE layer's
    backward (`transient`: moe_backward_transient_bytes), which start only once the loss's backward has freed the
    logits."""
    per_mb_rank = tokens_mb * saved.of(load.counts) * BF16              # one micro-batch, all chunks of the rank
    if np.any(np.asarray(fused_offload) > 0):
        per_mb_rank = per_mb_rank - tokens_mb * fused_offload * fused_mlp_offloaded_layers(load.counts.moe) * BF16
    if np.any(arr.cpu_offload_layers):                                  # offloading keeps the other layers'
        per_mb_rank = per_mb_rank * (1.0 - offloaded_share(model, arr, None, layers_local=load.counts.layers))
    mb_equiv = microbatches_in_flight(arr, load, vp=vp, n_mb=n_mb)
    # full recompute: the layer being re-run holds its whole saved activations for one micro-batch. The loss stage's
    # logits are not held then: the loss and output layer's backward consume them (the logits' gradient, written in
    # place by the fused cross entropy, is the output layer's grad_output and is freed with it) before autograd
    # reaches the last layer's checkpoint and megatron-core's CheckpointFunction.backward (tensor_parallel/random.py)
    # re-runs its forward; the last stage runs a micro-batch's forward and backward back to back (1F1B), so no other
    # micro-batch's logits wait beside it. The peak holds the larger of the two, not both.
    working = np.where(load.counts.layers > 0, tokens_mb * saved.recompute_working(load.counts) * BF16, 0.0)
    working = working + np.where(load.counts.moe > 0, transient, 0.0)
    return per_mb_rank * mb_equiv + np.maximum(working, np.where(load.loss, logits, 0.0))


def activation_bytes(model: ModelSpec, arr, *, tp, cp, pp, vp, etp, n_mb, tokens_mb, sp,
                     framework: str = "megatron", loss: str | None = None) -> np.ndarray:
    """The largest pipeline rank's activation bytes (rank_activation_bytes over stage_memory's candidates); `loss`
    as logits_bytes."""
    saved = SavedElements(model, arr, tp=tp, cp=cp, etp=etp, sp=sp, framework=framework)
    logits = logits_bytes(model, tp=tp, cp=cp, tokens_mb=tokens_mb, framework=framework, loss=loss)
    fused_offload = fused_mlp_offload_elements(model, arr, tp=tp, cp=cp, etp=etp, tokens_mb=tokens_mb,
                                               framework=framework)
    transient = moe_backward_transient_bytes(model, tp=tp, cp=cp, etp=etp, tokens_mb=tokens_mb,
                                             flex=np.asarray(arr.dispatcher) == DISPATCHERS.index("flex"))
    return np.max([rank_activation_bytes(model, arr, load, saved, vp=vp, n_mb=n_mb, tokens_mb=tokens_mb,
                                         logits=logits, fused_offload=fused_offload, transient=transient)
                   for load in candidate_arrays(model, pp, vp, tp, framework)], axis=0)




def memory_per_gpu(model: ModelSpec, arr, gpu, cal, *, tp, cp, pp, vp, ep, etp, dense_group, expert_group,
                   n_mb, tokens_mb, sp, framework: str = "megatron",
                   offloaded_bytes=None, mamba_units: bool = False, loss: str | None = None) -> MemoryBytes:
    """Memory of the pipeline rank that holds the most (stage_memory: what each rank's stages build and keep in
    flight); MemoryBytes.rank names it. `loss`: the cross entropy the run runs (loss_memory.py; None: the framework's
    emitted launch's), whose logits the loss stage holds.

    Each candidate rank's weights, gradients and optimizer state are computed once per group of rows that share
    what fixes them (rank_static_bytes), its activations once per group that shares theirs (rank_activation_bytes:
    not the optimizer's or FSDP's flags, nor EP but through the MoE norm's CUDA-graph rule), then spread back to the
    rows (commbench.row_groups), where each row takes its largest rank."""
    n = len(tp)
    capacity = np.full(n, gpu.usable_hbm_bytes)
    # CPU offloading at pp = 1 holds one micro-batch's offloaded activations in host memory at a time.
    host = np.zeros(n) if offloaded_bytes is None else np.asarray(offloaded_bytes, dtype=float)
    host_capacity = np.full(n, np.inf)
    if np.any(host > 0):
        from commbench.planner.step.kernels import host_memory_bytes
        host_capacity[:] = host_memory_bytes(gpu) * (1.0 - cal.host_reserve_fraction)
    graph_full = np.where(arr.cuda_graph == 2, cal.graph_full_fraction, 0.0)  # of the activations

    outer = outer_optim_shards(arr)
    double = fsdp_double_buffer(arr)
    keep_transposes = keep_fp8_transposes(arr)
    static = RowGroups(tp, pp, vp, ep, etp, dense_group, expert_group, arr.precision, arr.distributed_optimizer,
                       arr.fsdp, outer, double, keep_transposes)
    s = static.columns(arr, ("precision", "distributed_optimizer", "fsdp"))
    s.fsdp_double_buffer = static.of(double)
    s.keep_fp8_transpose_cache = static.of(keep_transposes)
    s.outer_optim_shards = static.of(outer)
    s_loads = candidate_arrays(model, static.of(pp), static.of(vp), static.of(tp), framework)
    weights, grads, optimizer = (np.array([np.broadcast_to(x, (len(static),)) for x in term]).reshape(-1, len(static))
                                 for term in static_bytes_per_rank(
                                     model, s, gpu, s_loads, tp=static.of(tp), ep=static.of(ep), etp=static.of(etp),
                                     dense_group=static.of(dense_group), expert_group=static.of(expert_group),
                                     framework=framework, mamba_units=mamba_units))
    held = weights + grads + optimizer   # per rank x group
    step_grads = optimizer_step_grad_bytes(optimizer, s.fsdp, framework)   # per rank x group
    rank = np.array([np.broadcast_to(load.rank, (len(static),)) for load in s_loads]).reshape(-1, len(static))

    # the MoE norm's CUDA-graph rule (layout/recompute.py graph_kept_moe_norm) reads the graph, its scope, the
    # dispatcher and EP: grouped by its answer, not by them
    kept = rc.graph_kept_moe_norm(model, arr) if framework == "megatron" and model.is_moe else np.zeros(n, dtype=bool)
    graph_tokens = graph_permuted_tokens(model, arr, framework)
    graph_tokens = np.broadcast_to(np.asarray(graph_tokens, dtype=float), (n,))
    flex = np.asarray(arr.dispatcher) == DISPATCHERS.index("flex")
    act = RowGroups(tp, cp, pp, vp, etp, sp, n_mb, tokens_mb, arr.precision, arr.recompute, arr.recompute_layers,
                    arr.cpu_offload_layers, arr.moe_a2a_overlap, arr.pp, arr.vp, kept, arr.fused_mlp_offload_min,
                    graph_tokens, flex)
    a = act.columns(arr, ("precision", "recompute", "recompute_layers", "cpu_offload_layers", "moe_a2a_overlap",
                          "pp", "vp", "fused_mlp_offload_min"))
    a_tp, a_cp, a_vp, a_tokens = act.of(tp), act.of(cp), act.of(vp), act.of(tokens_mb)
    saved = SavedElements(model, a, tp=a_tp, cp=a_cp, etp=act.of(etp), sp=act.of(sp), framework=framework,
                          graph_kept_norm=act.of(kept), graph_tokens=act.of(graph_tokens))
    logits = logits_bytes(model, tp=a_tp, cp=a_cp, tokens_mb=a_tokens, framework=framework, loss=loss)
    fused_offload = fused_mlp_offload_elements(model, a, tp=a_tp, cp=a_cp, etp=act.of(etp), tokens_mb=a_tokens,
                                               framework=framework)
    transient = moe_backward_transient_bytes(model, tp=a_tp, cp=a_cp, etp=act.of(etp), tokens_mb=a_tokens,
                                             flex=act.of(flex))
    a_loads = candidate_arrays(model, act.of(pp), a_vp, a_tp, framework)
    activations = np.array([np.broadcast_to(rank_activation_bytes(model, a, load, saved, vp=a_vp, n_mb=act.of(n_mb),
                                                                  tokens_mb=a_tokens, logits=logits,
                                                                  fused_offload=fused_offload, transient=transient),
                                            (len(act),))
                            for load in a_loads])
    activations = activations.reshape(-1, len(act))
    pool_elements = saved.graph_permuted_elements()
    pooled = bool(np.any(pool_elements))
    graph_pool = None
    if pooled:
        graph_pool = np.array([np.broadcast_to(graph_pool_permuted_bytes(a, load, saved, vp=a_vp, n_mb=act.of(n_mb),
                                                                         tokens_mb=a_tokens, elements=pool_elements),
                                               (len(act),))
                               for load in a_loads]).reshape(-1, len(act))
    assert len(activations) == len(held)   # the same (pp, vp, tp) keys: the same candidates, in the same order

    # per row: its largest rank (the first of equal ones)
    in_static, in_act = static.expand(np.arange(len(static))), act.expand(np.arange(len(act)))
    scale = 1.0 + graph_full
    best = np.zeros(n, dtype=np.int64)
    def rank_total(k):
        total = held[k][in_static] + np.maximum(activations[k][in_act] * scale, step_grads[k][in_static])
        return total + graph_pool[k][in_act] if pooled else total
    best_total = rank_total(0)
    for k in range(1, len(held)):
        total = rank_total(k)
        best = np.where(total > best_total, k, best)
        best_total = np.maximum(total, best_total)
    at_static, at_act = best * len(static) + in_static, best * len(act) + in_act
    activations = activations.ravel()[at_act]
    graph_pool = graph_pool.ravel()[at_act] if pooled else 0.0
    # CUDA graph pools (stated assumptions in Calibration): static buffers per captured layer, or
    # for a full-iteration graph a share of the activations the pool cannot reuse; and the permuted tokens an
    # alltoall layer graph over moe_preprocess holds there (graph_pool_permuted_bytes).
    graph_bytes = np.where(arr.cuda_graph == 1, cal.graph_layer_bytes, graph_full * activations) + graph_pool
    # TP-overlap userbuffers: HBM outside PyTorch's allocator, held all run (step/tp_overlap_memory.py)
    ub_bytes = tp_overlap_buffer_bytes(model, tokens_mb=tokens_mb, cp=cp, tp=tp, sp=sp, precision=arr.precision,
                                       tp_comm_overlap=arr.tp_comm_overlap, framework=framework)
    return MemoryBytes(
        weights=weights.ravel()[at_static],
        grads=grads.ravel()[at_static],
        optimizer=optimizer.ravel()[at_static],
        activations=activations,
        reserve=cal.reserve_fixed_bytes + cal.reserve_fraction * capacity + graph_bytes + ub_bytes,
        capacity=capacity,
        host_offload=host,
        host_capacity=host_capacity,
        rank=rank.astype(np.int64).ravel()[at_static],
        optimizer_step=step_grads.ravel()[at_static],
    )


def outer_optim_shards(arr) -> np.ndarray:
    """How many ways Megatron-FSDP's outer (inter-replica) DP splits each shard group's optimizer state: the HSDP
    replicas (fsdp_replicas) with --outer-dp-sharding-strategy optim (layout fsdp_outer_optim; megatron-core
    arguments.py: "optim" (Optimizer State Hybrid Sharding); mcore_fsdp_adapter.py hsdp_outer_dp_shard =
    outer_dp_sharding_strategy != "no_shard"), so the fp32 main parameters and Adam moments of a rank are 1/(shard
    group x replicas) of its parameters, as the distributed optimizer's over all of DP; 1 otherwise (no_shard: each
    replica holds its shard group's state whole)."""
    outer = getattr(arr, "fsdp_outer_optim", None)
    if outer is None:
        return np.ones(np.shape(arr.fsdp))
    return np.where(np.asarray(arr.fsdp, dtype=bool) & np.asarray(outer, dtype=bool),
                    np.maximum(np.asarray(arr.fsdp_replicas), 1), 1).astype(float)


def fsdp_double_buffer(arr) -> np.ndarray:
    """Whether each row's Megatron-FSDP launch double-buffers (layout fsdp_double_buffer; step/fsdp.py "Unit
    buffers"): the plans' default (true) where `arr` has no such column."""
    double = getattr(arr, "fsdp_double_buffer", None)
    return np.ones(np.shape(arr.fsdp), dtype=bool) if double is None else np.asarray(double, dtype=bool)


def keep_fp8_transposes(arr) -> np.ndarray:
    """Whether each row's Megatron-FSDP launch keeps its units' fp8 transposes (layout keep_fp8_transpose_cache;
    step/fsdp.py "Hopper per-tensor fp8 weights"); a column-less stand-in keeps none (megatron-core's default)."""
    keep = getattr(arr, "keep_fp8_transpose_cache", None)
    return np.zeros(np.shape(arr.fsdp), dtype=bool) if keep is None else np.asarray(keep, dtype=bool)


def rank_params_per_gpu(load: RankArrays, *, vocab_params, dense_share, expert_share) -> tuple:
    """(vocabulary, non-expert with the vocabulary, routed-expert) parameters one GPU of pipeline rank `load` holds:
    its `load.vocab_matrices` copies of `vocab_params` and its other non-expert parameters by `dense_share` (1/TP),
    its routed experts by `expert_share` (1/(ETP x EP))."""
    vocab_local = load.vocab_matrices * vocab_params * dense_share
    return vocab_local, load.non_expert_params * dense_share + vocab_local, load.expert_params * expert_share


def fsdp_units_per_gpu(model: ModelSpec, load: RankArrays, dense_local, expert_local, *, vocab_params, dense_share,
                       framework: str = "megatron", mamba_units: bool = False) -> tuple:
    """(non-unit parameters, number of units, all units' parameters) on one GPU of pipeline rank `load` under FSDP,
    before sharding; `dense_local`, `expert_local`: rank_params_per_gpu. Megatron-FSDP's non-unit parameters stay
    gathered all step (fsdp.megatron_non_unit_params) and its units are the TransformerLayers (the Mamba layers too
    where `mamba_units`: fsdp.mamba_units); TorchTitan's units are its blocks (step/fsdp.py)."""
    non_unit = fsdp.megatron_non_unit_params(
        model, vocab_params=vocab_params, vocab_matrices=load.vocab_matrices, loss=load.loss,
        mamba_blocks=0 if mamba_units else load.counts.mamba, mtp_layers=load.mtp_layers, dense_share=dense_share,
        framework=framework)
    units = load.counts.layers - (load.counts.mamba if framework == "megatron" and not mamba_units else 0)
    return non_unit, units, np.maximum(dense_local - non_unit, 0.0) + expert_local


def static_bytes_per_rank(model: ModelSpec, arr, gpu, loads: list[RankArrays], *, tp, ep, etp, dense_group,
                          expert_group, framework: str = "megatron",
                          mamba_units: bool = False) -> tuple[list, list, list]:
    """(weights, gradients, optimizer state) bytes of each pipeline rank in `loads` (stage_memory.candidate_arrays),
    three lists in its order; `arr` needs only precision, distributed_optimizer and fsdp."""
    vocab = step_vocab(model, tp, framework)   # the embedding/output rows it builds
    # fp8 / mxfp8 keep the transformer layers' weights in fp8 (1 B) beside the fp32 master copy (fp8_param_gather;
    # dp_sync.param_gather_bytes has the sources), the embedding and output layer in bf16 (step/module_precision.py);
    # the DP all-gather moves the same bytes, but MXFP8's outside FSDP
    # (bf16, through the gradient buffer it shares: dp_sync.ddp_param_gather_bytes, no memory of its own).
    weight_bytes = param_gather_bytes(arr.precision, arr.distributed_optimizer, (FP8, MXFP8), framework)
    cache_bytes = quantized_weight_cache_bytes(arr.precision, weight_bytes, framework,
                                               fp8_transpose=fp8_transpose_needed(gpu))
    dist = arr.distributed_optimizer
    # bytes per parameter of the rank (non-expert over TP, expert over EP x ETP), before its parameter counts
    dense_share, expert_share = 1.0 / tp, 1.0 / (etp * ep)
    held_bytes = weight_bytes + cache_bytes
    vocab_params = vocab * model.hidden
    # HSDP with outer "optim" sharding: the state of a shard group's shard split again across the replicas
    outer = getattr(arr, "outer_optim_shards", None)
    outer = outer_optim_shards(arr) if outer is None else outer
    optimizer_dense = OPTIMIZER_STATE_BYTES_PER_PARAM * np.where(dist, dense_share / (dense_group * outer), dense_share)
    optimizer_expert = OPTIMIZER_STATE_BYTES_PER_PARAM * np.where(dist, expert_share / (expert_group * outer), expert_share)
    any_fsdp = bool(np.any(arr.fsdp))
    double, keep_transposes = fsdp_double_buffer(arr), keep_fp8_transposes(arr)
    mtp_dense, mtp_expert = _per_kind_params(model, _layer_kinds(model))[3]
    mtp_per_layer = (mtp_dense * dense_share + mtp_expert * expert_share) / max(model.num_mtp_layers, 1)
    out = ([], [], [])
    for load in loads:
        vocab_local, dense_local, expert_local = rank_params_per_gpu(load, vocab_params=vocab_params,
                                                                     dense_share=dense_share, expert_share=expert_share)
        local = dense_local + expert_local
        # the vocabulary matrices (and nvfp4's MTP layers) are bf16 parameters whatever the precision, with no
        # quantized copies (step/module_precision.py); Megatron-FSDP's units hold none of them (step/fsdp.py)
        bf16_local = module_precision.bf16_params_per_gpu(vocab_params_local=vocab_local,
                                                          mtp_params_local=load.mtp_layers * mtp_per_layer,
                                                          precision=arr.precision, framework=framework)
        weights = (local - bf16_local) * held_bytes + bf16_local * module_precision.BF16_BYTES
        grads = local * grad_bytes(framework)   # bf16 under Megatron (--grad-reduce-in-bf16), fp32 under TorchTitan
        if any_fsdp:  # ZeRO-3: weight and gradient shards plus the gathered units (step/fsdp.py)
            non_unit, units, all_units = fsdp_units_per_gpu(model, load, dense_local, expert_local,
                                                            vocab_params=vocab_params, dense_share=dense_share,
                                                            framework=framework, mamba_units=mamba_units)
            shard = dense_local / dense_group + expert_local / expert_group
            kept = fsdp.megatron_kept_gathered_params(non_unit, dense_group)
            # the unit buffers the launch holds: two units with --fsdp-double-buffer, else the prefetch and the
            # reduce-scatter queue, sized by the mean unit (step/fsdp.py megatron_unit_buffers)
            unit = fsdp.unit_params(model, dense_local, expert_local, units, load.counts.moe, non_unit)
            mean_unit = all_units / np.maximum(units, 1)
            f_weights, f_grads = fsdp.fsdp_memory_bytes(shard, unit, grad_bytes(framework), mean_unit=mean_unit,
                                                        double_buffer=double)
            f_weights = f_weights + fsdp.PARAM_BYTES * kept
            if framework == "torchtitan":   # its units and FSDP2's dtypes (step/fsdp.py): the fp32 shard is the
                # optimizer's master copy (in its 12 B), the gathered units bf16, one unit's gradients 6 B
                largest, block = fsdp.titan_unit_params(model, dense_share=dense_share, expert_share=expert_share,
                                                        vocab_params=vocab_params, vocab_matrices=load.vocab_matrices,
                                                        loss=load.loss)
                f_weights, gathered_grads = fsdp.titan_fsdp_memory_bytes(largest, block)
                f_grads = (dense_local / dense_group + expert_local / expert_group) * grad_bytes(framework) \
                    + gathered_grads
            # fp8_param_gather: shards and gathered units in fp8, but the bf16 parameters (module_precision: the
            # vocabulary matrices, non-unit, kept gathered; nvfp4 gathers bf16 anyway) in bf16, their shard too
            bf16_held = bf16_local / dense_group + np.where(non_unit > 0, kept * bf16_local
                                                            / np.maximum(non_unit, 1e-300), 0.0)
            f_weights = f_weights * weight_bytes / 2.0 + bf16_held * (2.0 - weight_bytes)
            # MXFP8: Megatron-FSDP's transpose buffer beside the row-wise one, on the shard and the kept non-unit
            # parameters that are MXFP8 (step/fsdp.py mxfp8_transpose_bytes)
            # and, double-buffered, the persistent pair of transposed units beside the row-wise pair
            f_weights = f_weights + fsdp.mxfp8_transpose_bytes(arr.precision == MXFP8, weight_bytes, framework) \
                * (shard + kept - bf16_held + np.where(double, fsdp.GATHERED_UNITS * unit, 0.0))
            # Hopper per-tensor fp8: the running unit's weight transposes, made in its backward and discarded with it,
            # or with the cache kept every unit's as gathered (step/fsdp.py "Hopper per-tensor fp8 weights")
            f_weights = f_weights + fsdp.fp8_transpose_bytes_per_param(
                arr.precision == FP8, weight_bytes, fp8_transpose_needed(gpu), framework) \
                * np.where(keep_transposes, all_units, unit)
            weights, grads = np.where(arr.fsdp, f_weights, weights), np.where(arr.fsdp, f_grads, grads)
        optimizer = (load.non_expert_params + load.vocab_matrices * vocab_params) * optimizer_dense \
            + load.expert_params * optimizer_expert
        for terms, value in zip(out, (weights, grads, optimizer)):
            terms.append(value)
    return out


def elementwise_bytes_per_microbatch(model: ModelSpec, arr, tp, cp, pp, sp, tokens_mb, fused_moe=None,
                                     framework: str = "megatron") -> np.ndarray:
    """HBM bytes the memory-bound kernels move for one micro-batch on one GPU, forward + backward
    (backward counted as twice the forward). Per token per layer, bf16, counted as reads + writes:
    per block (attention, MLP/MoE, Mamba, ...) one norm (read h, write h: 2h) and one residual add (read 2h,
    write h: 3h; DeepSeek-V4's hyper-connections: models/dsv4.residual_elements), rope on q/k (2 (q + k)),
    activation function (read g-1 FFN-widths, write one), MoE permute + unpermute (2 x 2 x top-k x h), fp8 casts (read 2 B + write 1 B of
    every GEMM input) when the precision is 8- or 4-bit, and the unfused passes a clamped GLU or expert
    biases add (unfused_expert_epilogue_elements). The fused grouped MLP (fused_moe) removes the experts'
    activation pass, those passes and their FC2-input cast, nothing else. With context parallelism, each
    attention layer adds the ring steps' merges (cp_merge_bytes_per_token). Under Megatron (`framework`), the
    passes its code runs outside fused kernels for some models and dispatchers: unfused RoPE where YaRN's
    concentration factor is not 1 (unfused_rope_elements: gpt-oss) and the alltoall dispatcher's sort of the
    received tokens by local expert and back (sort_chunks_elements)."""
    h = model.hidden
    seq_shard = np.where(sp, tp, 1) * cp
    head_shard = tp * cp
    low_precision = arr.precision > 0
    cast = np.where(low_precision, 1.5, 0.0)   # (2 + 1) B per element / 2 B per counted element
    residual = dsv4.residual_elements(model)  # 3 h, or mHC's streams
    megatron = framework == "megatron"
    rope_extra = unfused_rope_elements(model) if megatron else 0.0
    attn = (2 * h + residual) / seq_shard + (2 * model.q_dim + rope_extra) / head_shard \
        + cast * (h / seq_shard + model.attn_out_dim / head_shard)
    dense = (2 * h + residual) / seq_shard + (model.glu_factor * model.dense_ffn) / head_shard \
        + cast * (h / seq_shard + model.dense_ffn / head_shard)
    if model.is_moe:
        k, ffn = model.top_k, model.expert_ffn
        # fused_moe (Transformer Engine's fused grouped MLP, te.ops GroupedLinear + scaled GLU +
        # GroupedLinear): the activation and the FC2-input quantize run in the grouped GEMMs' epilogues
        # (forward_grouped_mlp.py / backward_grouped_mlp.py at v2.16: grouped_gemm_glu / dglu kernels
        # write the fp8 FC2 input / FC1 grad directly). Its input is the already-permuted tokens and
        # it quantizes them itself (tex.group_quantize), so the permute / unpermute and the expert
        # input's cast still touch HBM.
        w = model.expert_width
        permute_and_input_cast = k * (4 * w + cast * w)
        fused = arr.fused_moe if fused_moe is None else fused_moe  # kernels.fused_grouped_mlp: where it runs
        sort = sort_chunks_elements(model, arr.dispatcher, arr.ep) if megatron else 0.0
        routed = (permute_and_input_cast + sort + np.where(
            fused, 0.0, k * (model.glu_factor * ffn + cast * ffn + unfused_expert_epilogue_elements(model)))) / (tp * cp)
        shared = model.num_shared_experts * (model.glu_factor * ffn + cast * (h + ffn)) / head_shard
        moe = (2 * h + residual) / seq_shard + routed + shared
    else:
        moe = np.zeros_like(attn)
    c = block_counts(model)
    per_token = attn * c.attention + dense * c.dense + moe * c.moe
    if c.mamba:
        per_token = per_token + c.mamba * mamba.elementwise_elements(model, tp, cp, sp, cast)
    if c.linear:
        per_token = per_token + c.linear * gdn.elementwise_elements(model, tp, cp, sp, cast)
    per_token_stage = per_token / pp
    merge = c.attention * cp_merge_bytes_per_token(model, tp, cp) / pp
    return tokens_mb * (3.0 * per_token_stage * BF16 + merge)


# Context parallelism's ring attention (Megatron-Core's default cp_comm_type "p2p": Transformer Engine's
# AttnFuncWithCPAndKVP2P, attention/dot_product_attention/context_parallel.py, v2.9 to v2.17; TorchTitan's
# PyTorch ring attention merges the same way, torch.distributed.tensor.experimental._attention._SDPAMerger
# keeping the output and LSE in fp32) runs one flash attention per ring step and merges the partial results
# outside the kernel. Per element of the rank's attention output:
# - forward, each step writes its bf16 partial (2 B) and flash_attn_fwd_out_correction reads it and updates
#   the fp32 output in place (2 + 4 + 4 B: "fwd output correction: out in torch.float32"); the merged output
#   is cast back to bf16 once (4 + 2 B);
# - backward, each step writes its dq partial (2 B) and dq.add_ reads both and writes the sum (bf16
#   dq_buffer = empty_like(q): 2 + 2 + 2 B).
# Causal load balancing (2 x cp chunks) makes a rank's steps after its own half-size: (3 cp + 1) / 4
# full-size steps on average.
CP_FWD_STEP_BYTES = 2 + 2 + 4 + 4
CP_FWD_CAST_BYTES = 4 + 2
CP_BWD_STEP_BYTES = 2 + 2 + 2 + 2


def cp_merge_bytes_per_token(model: ModelSpec, tp, cp) -> np.ndarray:
    """HBM bytes per micro-batch token per attention layer (forward + backward) that merging ring attention's
    per-step partial outputs and dq moves on one GPU; none without context parallelism, and none for attention
    with sinks, whose CP is all-to-all, not a ring (Megatron-Bridge recipes/gpt_oss/gpt_oss.py at v0.3.0:
    cp_comm_type = "a2a", "only a2a cp is supported for sink attention")."""
    return _cp_merge_bytes(model, tp, cp, CP_FWD_STEP_BYTES + CP_BWD_STEP_BYTES)


def _cp_merge_bytes(model: ModelSpec, tp, cp, step_bytes: float) -> np.ndarray:
    """cp_merge_bytes_per_token's bytes with `step_bytes` per ring step (forward, or forward + backward)."""
    cp = np.asarray(cp, dtype=np.float64)
    if model.all_to_all_cp:
        return np.zeros(np.broadcast(cp, np.asarray(tp)).shape)
    steps = (3.0 * cp + 1.0) / 4.0
    return np.where(cp > 1, (steps * step_bytes + CP_FWD_CAST_BYTES) * model.attn_out_dim / (tp * cp), 0.0)


def moe_act_recompute_bytes_per_microbatch(model: ModelSpec, tp, cp, tokens_mb, moe_layers, fused_moe) -> np.ndarray:
    """HBM bytes `--recompute-modules moe_act` re-runs per micro-batch on one GPU: the routed experts' activation
    function, forward once more, over the stage's `moe_layers`. megatron-core 0.16.1 transformer/moe/experts.py
    TEGroupedMLP.forward (736-750, the same in 0.19.0 at 844-856) wraps the whole bias_act_func in
    CheckpointWithoutOutput.checkpoint and re-runs it before FC2's backward: the GLU (read g - 1 FFN-widths, write
    one: glu_factor x ffn, as elementwise_bytes_per_microbatch counts it) and, for a clamped GLU (gpt-oss), its chunk
    + clamp + concatenate passes (680-725: activation_func_clamp_value; 8 ffn, unfused_expert_epilogue_elements), per
    routed token copy (tokens_mb x top-k / (tp x cp)), in bf16. The expert-bias add after FC2 (_apply_bias) is not in
    the checkpointed function. Under fp8/fp4 FC2 keeps the bf16 input (set_save_original_input, 592-595) and quantizes
    it in its backward instead of its forward: moved, not repeated, so no cast is charged here. Where the fused grouped
    MLP runs (fused_moe, megatron-core 0.19.0: activation_recompute_in_mlp passed to Transformer Engine's fused op)
    the activation is a GEMM epilogue with no HBM pass of its own, as elementwise_bytes_per_microbatch counts it: 0."""
    clamp = 8.0 * model.expert_ffn if model.architecture is not None and model.architecture.activation_clamp else 0.0
    per_copy = model.glu_factor * model.expert_ffn + clamp
    copies = tokens_mb * model.top_k / (tp * cp)
    return np.where(fused_moe, 0.0, copies * per_copy * moe_layers * BF16)


def mlp_recompute_bytes_per_microbatch(model: ModelSpec, tp, cp, pp, tokens_mb) -> np.ndarray:
    """HBM bytes `--recompute-modules mlp` re-runs per micro-batch on one GPU outside its GEMMs: each dense MLP
    block's activation function forward once more (megatron-core 0.16.1 transformer_layer.py: the dense MLP under
    tensor_parallel.checkpoint), reading its (g - 1) x FFN input and writing FFN, bf16, on the stage's share of the
    dense blocks (block_counts / pp). Its fused input norm's forward (read h, write h) is counted too."""
    c = block_counts(model)
    ffn = model.dense_ffn * model.glu_factor / (tp * cp) + 2.0 * model.hidden / (tp * cp)
    return tokens_mb * c.dense * ffn * BF16 / pp


def selective_recompute_bytes_per_microbatch(model: ModelSpec, arr, tp, cp, pp, sp, tokens_mb,
                                             graph_kept_norm=None, modules=None) -> np.ndarray:
    """HBM bytes selective recompute re-runs per micro-batch on one GPU outside the attention core's kernel and the
    modules priced on their own (moe_act: moe_act_recompute_bytes_..., mla_up_proj and mlp: their GEMMs), for the
    --recompute-modules `modules` (default: those of layout code "selective", layout/recompute.recompute_modules):
    - core_attn (megatron-core 0.16.1 transformer/attention.py 328-331, 381-420: tensor_parallel.checkpoint around
      core_attention, TE's DotProductAttention, on the layers with a SelfAttention / MLA module only: a hybrid's
      MambaLayer and every MLP / MoE block read no core_attn). Its fused / flash kernel keeps softmax, mask and
      dropout inside the kernel (no s^2 term, as this module counts activations), so the re-run moves no other
      HBM bytes, but for context parallelism's ring: the forward's per-step merges and final cast
      (CP_FWD_STEP_BYTES, CP_FWD_CAST_BYTES) run again;
    - layernorm where it frees a norm output (MEGATRON_FREES: MLA's input norm, the MoE block's pre-MLP norm unless
      a per-layer CUDA graph keeps it, layout/recompute.py graph_kept_moe_norm): the norm's forward once more, read h
      write h per token on the sequence shard (transformer_layer.py 576-611, CheckpointWithoutOutput); the 8/4-bit
      cast of its output moves to the backward (set_for_recompute_input_layernorm: save_original_input), not charged.
    Per stage as elementwise_bytes_per_microbatch counts its blocks (block_counts / pp); bf16."""
    h = model.hidden
    c = block_counts(model)
    seq_shard = np.where(sp, tp, 1) * cp
    merge = _cp_merge_bytes(model, tp, cp, CP_FWD_STEP_BYTES)   # the forward's merges; none for all-to-all CP
    modules = rc.mode_modules(model, "selective") if modules is None else modules
    freed = rc.frees(model, modules)
    if "core_attn" not in modules:
        merge = np.zeros_like(merge)
    norm_elements = np.zeros_like(merge)
    if rc.ATTN_NORM in freed:
        norm_elements = norm_elements + c.attention * 2.0 * h / seq_shard
    if rc.MOE_NORM in freed:
        kept = np.zeros(len(merge), dtype=bool) if graph_kept_norm is None else graph_kept_norm
        norm_elements = norm_elements + np.where(kept, 0.0, c.moe * 2.0 * h / seq_shard)
    return tokens_mb * (norm_elements * BF16 + c.attention * merge) / pp


# Megatron-Core's unfused RoPE (models/common/embeddings/rope_utils.py _apply_rotary_pos_emb_bshd, core_v0.16.0 to
# core_v0.19.0 and main at d98e8a64): per element of the rotated q or k, forward t * cos (read, write), _rotate_half's
# negated half (read and write half) and torch.cat (read, write), x sin (read, write), the sum (read 2, write 1) and
# the closing torch.cat with the empty pass-through part (read, write): 12; its autograd backward x sin and x cos
# (2 each), the negation (1), the chunk's gradient concatenated (2) and the two gradients summed (3): 10. Transformer
# Engine's fused RoPE reads and writes each once per pass (2 forward, 2 backward).
UNFUSED_ROPE_PASSES = 12 + 10


def yarn_concentration(model: ModelSpec) -> float:
    """YaRN's concentration factor (the "mscale" Megatron-Core multiplies cos and sin by) as megatron-core builds
    it: 0.1 ln(factor) + 1, or the ratio of that at mscale and at mscale_all_dim where both are set (core_v0.16.1
    models/common/embeddings/yarn_rotary_pos_embedding.py _yarn_get_concentration_factor, _yarn_get_mscale);
    1 without YaRN."""
    import math
    arch = model.architecture
    if arch is None or arch.rope_scaling != "yarn" or arch.rope_scaling_factor <= 1:
        return 1.0

    def mscale(m: float) -> float:
        return 0.1 * m * math.log(arch.rope_scaling_factor) + 1.0
    if arch.yarn_mscale and arch.yarn_mscale_all_dim:
        return mscale(arch.yarn_mscale) / mscale(arch.yarn_mscale_all_dim)
    return mscale(1.0)


def unfused_rope_elements(model: ModelSpec) -> float:
    """Elements per token per attention layer (all heads, counted as elementwise_bytes_per_microbatch counts: x 3
    for forward + backward) that Megatron-Core's unfused RoPE moves beyond the fused RoPE charged there (2 q_dim),
    where it falls back to it: non-MLA attention with a YaRN concentration factor other than 1. apply_rotary_pos_emb
    (core_v0.16.0 to core_v0.19.0 and main at d98e8a64, rope_utils.py) warns "mscale=... is not supported by TE's
    fused RoPE. Using unfused implementation." for any mscale != 1.0, and SelfAttention passes
    _yarn_get_concentration_factor_from_config(config) to it for query and key (transformer/attention.py). gpt-oss
    (HF rope_scaling factor 32, no mscale: 1.347) takes it; DeepSeek-V3's MLA YaRN (mscale = mscale_all_dim = 1)
    has 1 and stays fused. Rotated: q (heads x head_dim) and k (kv_heads x head_dim); UNFUSED_ROPE_PASSES each."""
    if model.attention in ("mla", "dsv4") or abs(yarn_concentration(model) - 1.0) < 1e-12:
        return 0.0
    rotated = model.q_dim + model.num_kv_heads * model.head_dim
    return (UNFUSED_ROPE_PASSES * rotated - 3.0 * 2.0 * model.q_dim) / 3.0


# Megatron-Core's alltoall dispatcher sorts the tokens it receives by local expert after the all-to-all and back
# before the combine (MoEAlltoAllTokenDispatcher dispatch_postprocess / combine_preprocess, sort_chunks_by_idxs,
# "Permutation 2" / "Unpermutation 2", only where num_local_experts > 1: core_v0.16.0 to core_v0.19.0
# transformer/moe/token_dispatcher.py), fused or not (moe_permute_fusion: one read and one write per element) and
# their backward the same sorts of the gradient: 2 sorts x (read + write) forward and again backward. The flex
# dispatcher (DeepEP, HybridEP) permutes once on each side, the permute / unpermute charged for every dispatcher.
SORT_CHUNKS_PASSES = 2 * 2 * 2


def sort_chunks_elements(model: ModelSpec, dispatcher, ep) -> np.ndarray:
    """Elements per token per MoE layer (counted as elementwise_bytes_per_microbatch counts: x 3 for forward +
    backward) the alltoall dispatcher's sorts by local expert move: SORT_CHUNKS_PASSES over its top-k copies,
    where the layout's dispatcher is alltoall and a rank holds more than one expert."""
    dispatcher = np.asarray(dispatcher)
    local_experts = model.num_routed_experts / np.asarray(ep, dtype=np.float64)
    sorts = (dispatcher == DISPATCHERS.index("alltoall")) & (local_experts > 1)
    return np.where(sorts, SORT_CHUNKS_PASSES * model.top_k * model.expert_width / 3.0, 0.0)


def unfused_expert_epilogue_elements(model: ModelSpec) -> float:
    """Elements per routed token copy that megatron-core's TEGroupedMLP moves outside its fused
    activation when the model clamps its GLU inputs or biases its experts (gpt-oss), forward only
    (megatron-core 0.16.1 to 0.19.0 transformer/moe/experts.py and fusions/fused_bias_geglu.py; Transformer
    Engine's fused grouped MLP, 2.15 on, fuses the clamped GeGLU and the biases: fused_moe pays none):
    - activation_clamp: weighted_bias_quick_geglu_impl chunks the FC1 output, clamps each half (read
      and write ffn each) and concatenates them (read and write 2 ffn) before the fused kernel: 8 ffn;
    - linear_bias: FC2 runs with skip_bias_add, and TEGroupedMLP._apply_bias adds each expert's bias
      scaled by the token's routing prob per expert (b * p written: h; t + b * p: read 2h, write h)
      and concatenates the pieces (read and write h): 6 h."""
    arch = model.architecture
    if arch is None:
        return 0.0
    clamp = 8.0 * model.expert_ffn if arch.activation_clamp else 0.0
    bias = 6.0 * model.expert_width if arch.linear_bias else 0.0
    return clamp + bias
