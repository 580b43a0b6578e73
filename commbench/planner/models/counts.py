"""Model FLOPs per token and parameter counts per layer kind, of a ModelSpec.

FLOPs follow Megatron-LM `training.py::num_floating_point_operations` as transcribed in
commbench/data/FLOPS.md (forward + backward = 3 x forward, 2 FLOPs per multiply-add, causal
attention, top-k routed + shared experts, logits per output head, MTP): the work the step model charges, and the
count a Megatron plan's model TFLOP/s is in. A TorchTitan plan's is TorchTitan 0.3.0's own count
(titan_flops_per_token; framework_flops_per_token picks per framework). Parameter counts are
every parameter the Hugging Face transformers module of the architecture creates (weight matrices, norms, router,
biases, q/k norms, attention sinks, shared-expert gates), per layer kind; biases, norms and sinks are not GEMMs and
add no FLOPs. Buffers are not parameters: the aux-loss-free router's correction bias (DeepSeek-V3, GLM-4.5,
Nemotron-H: `register_buffer("e_score_correction_bias", ...)` in transformers modeling_deepseek_v3.py /
modeling_glm4_moe.py, as megatron-core's TopKRouter expert_bias) is left out.

Vocabulary: the model's own (`ModelSpec.vocab`, the model card's) unless `vocab=` says otherwise. The step
model passes the rows the framework builds (`step_vocab`): Megatron-LM pads the vocabulary to a multiple of
make_vocab_size_divisible_by x TP (the emitted divisor keeps the model's vocabulary wherever TP divides it:
megatron_vocab_divisor), TorchTitan does not. Parameter counts that describe the model (what `plan`
reports as its size) stay unpadded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from commbench.planner.models import dsv4
from commbench.planner.models.gdn import gdn_macs_per_token, gdn_params_per_layer
from commbench.planner.models.mamba import mamba_flops_fwd_per_token, mamba_params_per_layer
from commbench.planner.models.spec import ModelSpec


# Megatron-LM core_v0.16.1 megatron/training/arguments.py: --make-vocab-size-divisible-by defaults to 128 (what a
# plan without an [arch] table runs: emit/megatron_arch.py passes no --make-vocab-size-divisible-by then).
MEGATRON_VOCAB_DIVISIBLE_BY = 128


def megatron_vocab_divisor(m: ModelSpec, tp: int) -> int:
    """--make-vocab-size-divisible-by the emitted Megatron launch passes at this TP: the model's own divisor
    (`Architecture.vocab_divisible_by`) where Megatron-LM's padding to divisor x TP keeps the vocabulary, else the
    largest divisor of it whose multiple by TP divides the vocabulary, so the launch builds the vocabulary asked for
    (Qwen's 151,936 = 128 x 1187: 128 at TP1, 64 at TP2, 16 at TP8); the own divisor where no such one exists (TP
    does not divide the vocabulary: Megatron-LM must pad, megatron_vocab_padding_note says so).

    Megatron-LM (26.02's b0cc2706 megatron/training/tokenizer/tokenizer.py:117-123 `_vocab_size_with_padding`) pads
    to a multiple of make_vocab_size_divisible_by x TP; Megatron-Bridge builds a vocabulary its provider sets (an
    HF-converted model's, a recipe provider's: Qwen3MoEModelProvider, DeepSeekV3ModelProvider vocab_size) unpadded
    at every TP (v0.3.0 training/setup.py:177-180 `_validate_and_set_vocab_size`: an explicit vocab_size gives
    should_pad_vocab False; gpt_provider.py:247-252 then builds `self.vocab_size` rows). A model without an [arch]
    table launches without --make-vocab-size-divisible-by: Megatron-LM's default 128."""
    if m.architecture is None:
        return MEGATRON_VOCAB_DIVISIBLE_BY
    own, tp = m.architecture.vocab_divisible_by, int(tp)
    if m.vocab % (own * tp) == 0:
        return own
    keeping = [d for d in range(own, 0, -1) if own % d == 0 and m.vocab % (d * tp) == 0]
    return keeping[0] if keeping else own


def step_vocab(m: ModelSpec, tp, framework: str = "megatron"):
    """Rows of the embedding and output layer the framework builds, per TP size (array in, array out).

    megatron: Megatron-LM core_v0.16.1 megatron/training/tokenizer/tokenizer.py `_vocab_size_with_padding` pads
      the vocabulary to ceil(vocab / (make_vocab_size_divisible_by x TP)) x that multiple; gpt_builders.py builds
      the embedding and output layer with `args.padded_vocab_size`, and training.py num_floating_point_operations
      counts the logits with it. The divisor is the one the emitted plan passes at that TP (megatron_vocab_divisor),
      which keeps the model's vocabulary wherever TP divides it: DeepSeek-V3 (129,280, divisor 1280) builds 129,280
      rows at TP1 (1280), TP2 (640), TP4 (320) and TP8 (160), as Megatron-Bridge builds it.
    torchtitan: 0.3.0 builds Embedding(num_embeddings=vocab_size) and the lm_head Linear(out_features=vocab_size)
      with the model's vocabulary (emit/torchtitan_dense.py, torchtitan_mla.py; the loss's global_vocab_size is
      config_utils.decoder_vocab_size, the same number): no padding."""
    tp = np.asarray(tp)
    if framework != "megatron":
        return np.full(tp.shape, float(m.vocab)) if tp.ndim else float(m.vocab)
    if tp.ndim:
        sizes = tp.astype(np.int64)
        present = np.flatnonzero(np.bincount(sizes.ravel()))   # the few TP sizes, without a sort of every row
        rows = np.zeros(present[-1] + 1 if len(present) else 1)
        rows[present] = [_megatron_rows(m, int(t)) for t in present]
        return rows[sizes]
    return _megatron_rows(m, int(tp))


def _megatron_rows(m: ModelSpec, tp: int) -> float:
    multiple = megatron_vocab_divisor(m, tp) * tp
    return float(math.ceil(m.vocab / multiple) * multiple)


def megatron_vocab_padding_note(m: ModelSpec, tp: int) -> list[str]:
    """The plan's note where Megatron-LM must pad the vocabulary at this TP (TP does not divide it): the rows it
    builds, which the plan prices (step_vocab)."""
    rows = _megatron_rows(m, tp)
    if rows == m.vocab:
        return []
    return [f"{m.name}'s vocabulary of {m.vocab:,} is not divisible by TP{tp}: Megatron-LM pads it to {rows:,.0f} "
            f"rows (make_vocab_size_divisible_by {megatron_vocab_divisor(m, tp)} x TP{tp}, tokenizer.py "
            f"_vocab_size_with_padding), {rows - m.vocab:,.0f} rows no token reads; the plan prices the padded "
            "embedding, output layer and logits; a checkpoint converted to or from the model's own keeps "
            f"{m.vocab:,}"]


def framework_model(m: ModelSpec, framework: str = "megatron") -> ModelSpec:
    """The network the framework's emitted launch trains, which the step model charges. torchtitan: 0.3.0's launches
    train no MTP layer (emit/torchtitan.py TitanModel.trains_mtp; the plan's generated deepseek_v3 model sets
    mtp_layers=[]; its MTP needs a config with num_mtp_layers and MTPLoss, models/deepseek_v3/config_registry.py
    deepseek_v3_debugmodel_mtp), so `m` without them; megatron: `m` (--mtp-num-layers)."""
    if framework == "torchtitan" and m.num_mtp_layers:
        return replace(m, num_mtp_layers=0)
    return m


def _mla_query_weights(m: ModelSpec) -> float:
    """MLA's query projection, its weights = its multiply-adds per token: h -> q_lora_rank (+ that norm's weight)
    -> heads x (nope + rope), or without the low rank (q_lora_rank 0, Megatron's --q-lora-rank unset: linear_q_proj)
    h -> heads x (nope + rope); Megatron-LM core_v0.16.1 training.py's q_term counts either so."""
    q = m.num_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
    if not m.q_lora_rank:
        return float(m.hidden * q)
    return float(m.q_lora_rank * (m.hidden + q + 1))


def _attention_macs_per_layer(m: ModelSpec, seq_len: int) -> tuple[float, float]:
    """(projection MACs, core MACs) per token per layer, averaged over layers for sliding windows."""
    h, s = m.hidden, seq_len
    if m.attention == "mla":
        nope, rope, dv, H = m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim, m.num_heads
        proj = (_mla_query_weights(m) + m.kv_lora_rank * (h + H * (nope + dv) + 1)
                + h * rope + H * dv * h)
        core = s * H * (nope + rope) / 2 + s * H * dv / 2
        return proj, core
    q, kv = m.num_heads * m.head_dim, m.num_kv_heads * m.head_dim
    proj = h * (q * (2 if m.attention_gate else 1) + 2 * kv) + q * h
    core = 2 * q * mean_keys_per_query(m, s)  # QK^T plus AV over the keys a query attends
    return proj, core


def mean_keys_per_query(m: ModelSpec, seq_len: int) -> float:
    """Keys a query attends, averaged over positions and layers: s/2 under a causal mask; with a sliding window
    of w tokens (Megatron window_size (w-1, 0)) on every other layer (window_attn_skip_freq 2, gpt-oss) those
    layers' queries see w - w(w-1)/(2s) keys (the first w positions fewer). The core's tensor-core FLOPs (above)
    and its softmax exponentials (step.kernels.attention_exps_per_token) both count these keys: a kernel that skips
    the masked tiles for one skips them for the other."""
    keys = seq_len / 2.0
    if m.sliding_window:
        w = min(float(m.sliding_window), float(seq_len))
        keys = (keys + (w - w * (w - 1.0) / (2.0 * seq_len))) / 2.0   # every other layer is windowed
    return keys


@dataclass(frozen=True, kw_only=True)
class FlopsPerToken:
    """Model FLOPs per token (fwd + bwd) by kind; `total` is Megatron's figure."""

    attention_proj: float
    attention_core: float
    dense_mlp: float
    routed_experts: float
    shared_experts: float
    mtp_proj: float
    logits: float
    mamba: float = 0.0  # Mamba-2 layers (in/out projections + SSD scan; models/mamba.py)
    moe_latent_proj: float = 0.0  # latent MoE: the h -> latent and latent -> h projections
    linear_attention: float = 0.0  # Gated DeltaNet layers (models/gdn.py)
    # What Megatron's Mamba formula counts beyond the layers' own FLOPs (it takes d_inner = 2 h):
    # part of the published TFLOP/s currency, never of the compute time.
    mamba_accounting: float = 0.0

    @property
    def total(self) -> float:
        return (self.attention_proj + self.attention_core + self.dense_mlp + self.routed_experts
                + self.shared_experts + self.mtp_proj + self.logits + self.mamba + self.mamba_accounting
                + self.moe_latent_proj + self.linear_attention)

    @property
    def gemm(self) -> float:
        """Everything that runs as a (dense or grouped) GEMM: in the training precision, but for the output layer
        (`logits`) and, under nvfp4, the MTP layers, which Megatron runs in bf16 (step/module_precision.py)."""
        return self.total - self.attention_core - self.mamba_accounting


def flops_breakdown(m: ModelSpec, seq_len: int | None = None, include_mtp: bool = True,
                    vocab=None) -> FlopsPerToken:
    """FLOPs per token by kind, exactly FLOPS.md's formula. MTP layers count as extra MoE layers, or as extra dense
    layers in a dense model (Qwen3.5-27B): Megatron-LM core_v0.16.1 training.py num_floating_point_operations adds
    them to the MoE layers when the last decoder layer is MoE, to the dense ones otherwise (last_layer_is_moe).
    `vocab`: the output layer's rows (default the model's; the step model passes `step_vocab`, an array per
    layout, and then `logits` and the totals are arrays)."""
    s = seq_len or m.seq_len
    n_mtp = m.num_mtp_layers if include_mtp else 0
    n_layers = m.num_attention_layers + n_mtp
    n_moe = m.num_moe_layers + n_mtp
    n_dense = m.num_dense_layers + (0 if m.is_moe else n_mtp)
    h, g = m.hidden, m.glu_factor
    if m.attention == "dsv4":  # every layer's kind differs: the sums over layers (models/dsv4.py)
        proj_total, core_total = dsv4.attention_macs_per_token(m, s, include_mtp)
    else:
        proj, core = _attention_macs_per_layer(m, s)
        proj_total, core_total = n_layers * proj, n_layers * core
    return FlopsPerToken(
        attention_proj=6.0 * proj_total,
        attention_core=6.0 * core_total,
        dense_mlp=6.0 * h * m.dense_ffn * g * n_dense,
        routed_experts=6.0 * m.expert_width * m.expert_ffn * m.top_k * g * n_moe if m.is_moe else 0.0,
        shared_experts=6.0 * h * m.expert_ffn * m.num_shared_experts * g * n_moe if m.is_moe else 0.0,
        mtp_proj=6.0 * n_mtp * (3 * h + 2 * h * h),
        logits=6.0 * h * (m.vocab if vocab is None else vocab) * (n_mtp + 1),
        mamba=3.0 * m.num_mamba_layers * mamba_flops_fwd_per_token(m),
        moe_latent_proj=6.0 * 2 * h * m.moe_latent_size * n_moe if m.is_moe else 0.0,
        linear_attention=6.0 * m.num_linear_attention_layers * gdn_macs_per_token(m),
        mamba_accounting=3.0 * m.num_mamba_layers * (mamba_flops_fwd_per_token(m, megatron=True)
                                                     - mamba_flops_fwd_per_token(m)),
    )


def up_projection_flops(m: ModelSpec, fl: FlopsPerToken) -> float:
    """Model FLOPs per token (fwd + bwd) of the up-projections `mla_up_proj` recompute repeats the forward of.
    MLA: what megatron-core 0.16.1's qkv_up_proj_and_rope_apply checkpoints (transformer/
    multi_latent_attention.py, recompute_up_proj): linear_q_up_proj (q_lora_rank -> heads x (nope + rope)), or
    linear_q_proj from h without the query low rank, and linear_kv_up_proj (kv_lora_rank -> heads x (nope + v)),
    their share of the layer's projection MACs (DeepSeek-V3: 54.5M of 187.1M, 29%); DeepSeek-V4's query
    up-projection (models/dsv4.py)."""
    if m.attention == "mla":
        heads = m.num_heads
        q_in = m.q_lora_rank or m.hidden
        up_macs = (q_in * heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
                   + m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim))
        proj_macs, _ = _attention_macs_per_layer(m, m.seq_len)
        return fl.attention_proj * up_macs / proj_macs
    if m.attention == "dsv4":
        return 6.0 * dsv4.q_up_macs_per_token(m)
    return 0.0


def flops_per_token(m: ModelSpec, seq_len: int | None = None, include_mtp: bool = True) -> float:
    """Megatron model FLOPs per token (forward + backward) at `seq_len` (default: the model's)."""
    return flops_breakdown(m, seq_len, include_mtp).total


def titan_flops_per_token(m: ModelSpec, seq_len: int | None = None) -> float:
    """Model FLOPs per token as TorchTitan 0.3.0 counts them: `model_config.get_nparams_and_flops(model, seq_len)`,
    which trainer.py hands to MetricsProcessor, whose log line reads tflops = this x tps / 1e12 and mfu = tflops over
    the GPU's peak (components/metrics.py). models/utils.py get_dense_model_nparams_and_flops (llama3) and
    get_moe_model_nparams_and_flops (qwen3 dense and MoE, deepseek_v3, gpt_oss, qwen3_5):
      6 x (every parameter but the input embedding, routed experts at top_k / num_experts: norms, router, shared
           experts, biases, sinks and the output layer included; a tied embedding counted once, as the output layer)
      + 6 x (full-attention layers) x heads x head_dims x seq_len,
    "we follow the convention and do not account for sparsity in causal attention" (twice Megatron's causal term,
    every layer at the full sequence: no sliding-window discount). head_dims is the query/key plus the value head
    dimension: 2 x head_dim (llama3: 2 x dim // n_heads; qwen3, gpt_oss, qwen3_5: 2 x head_dim), MLA's
    qk_nope + qk_rope + v_head_dim (deepseek_v3). The model TorchTitan builds: framework_model's (no MTP), the
    unpadded vocabulary (step_vocab), the parameters param_counts counts (its builds match them exactly:
    tests/test_titan_flops.py). Linear-attention and Mamba layers count by their parameters alone (qwen3_5's rule:
    only layers with attention add the quadratic term). A model TorchTitan has no module for (a Mamba hybrid,
    DeepSeek-V4: `plan --framework torchtitan` refuses it, a calibrate row may still name TorchTitan) is counted by
    that shared helper's rule, head_dims 2 x head_dim."""
    m = framework_model(m, "torchtitan")
    s = seq_len or m.seq_len
    input_embedding = 0 if m.tied_embeddings else m.vocab * m.hidden
    head_dims = (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim if m.attention == "mla"
                 else 2 * m.head_dim)
    return 6.0 * (active_params(m) - input_embedding) + 6.0 * m.num_attention_layers * m.num_heads * head_dims * s


# Whose model-FLOPs count a plan's model TFLOP/s and MFU are in, per framework (framework_flops_per_token): its name
# and what it counts.
FLOPS_COUNTS = {
    "megatron": ("Megatron-LM core_v0.16.1's count", "training.py num_floating_point_operations: causal attention "
                 "halved, the padded vocabulary, MTP layers; no norms or router"),
    "torchtitan": ("TorchTitan 0.3.0's count", "get_nparams_and_flops: 6 x the non-embedding parameters a token uses, "
                   "norms, router and biases included, + attention not halved for the causal mask"),
}


def framework_flops_per_token(m: ModelSpec, seq_len: int | None = None, framework: str = "megatron", vocab=None):
    """Model FLOPs per token in the framework's own currency, the count its log's TFLOP/s and MFU are in, for the
    network its launch trains (framework_model). megatron: flops_breakdown's total (FLOPS.md; `vocab`: the rows it
    builds, step_vocab, an array per layout), torchtitan: titan_flops_per_token."""
    if framework == "torchtitan":
        return titan_flops_per_token(m, seq_len)
    return flops_breakdown(framework_model(m, framework), seq_len, vocab=vocab).total


# ---------------------------------------------------------------- parameters

@dataclass(frozen=True, kw_only=True)
class ParamCounts:
    """Parameters by kind. `routed_experts` is all experts; MTP counts its own layer + projection."""

    attention: float
    dense_mlp: float
    routed_experts: float
    shared_experts: float
    router: float
    norms: float
    embeddings: float  # input embedding + output layer (once if tied)
    mtp: float
    mtp_routed_experts: float = 0.0
    mamba: float = 0.0
    moe_latent_proj: float = 0.0
    linear_attention: float = 0.0
    hyper_connections: float = 0.0  # DeepSeek-V4's mHC mixing weights (models/dsv4.py)

    @property
    def total(self) -> float:
        """Total without MTP (how model cards count, e.g. DeepSeek-V3 671B)."""
        return (self.attention + self.dense_mlp + self.routed_experts + self.shared_experts + self.router
                + self.norms + self.embeddings + self.mamba + self.moe_latent_proj + self.linear_attention
                + self.hyper_connections)

    @property
    def expert(self) -> float:
        """Parameters sharded over EP x ETP (routed experts, including the MTP layer's)."""
        return self.routed_experts + self.mtp_routed_experts

    @property
    def non_expert(self) -> float:
        """Parameters sharded over TP (replicated over DP x CP), MTP included."""
        return self.total + self.mtp - self.mtp_routed_experts - self.routed_experts


def _gqa_extra_params(m: ModelSpec) -> float:
    """A GQA block's parameters beside its projection weights, as the transformers modules create them:
      q/k norms of head_dim each (qk_norm: modeling_qwen3.py / modeling_qwen3_moe.py Qwen3*Attention q_norm, k_norm;
        modeling_qwen3_next.py and modeling_qwen3_5.py inherit them; modeling_glm4_moe.py with use_qk_norm),
      Q, K, V biases (qkv_bias: modeling_qwen2.py / modeling_qwen2_moe.py q/k/v_proj bias=True, o_proj none;
        modeling_glm4_moe.py bias=config.attention_bias on q/k/v, o_proj bias=False),
      and with linear_bias (gpt-oss, modeling_gpt_oss.py GptOssAttention: q/k/v/o_proj bias=config.attention_bias) the
        output projection's bias too,
      attention sinks, one per head (softmax_type learnable: GptOssAttention.sinks of num_attention_heads).
    MLA's latent norms are in _attention_params; Nemotron-H's attention has none of these (attention_bias false)."""
    a = m.architecture
    if a is None or m.attention != "gqa":
        return 0.0
    q, kv = m.num_heads * m.head_dim, m.num_kv_heads * m.head_dim
    return float((q + 2 * kv if a.qkv_bias or a.linear_bias else 0) + (m.hidden if a.linear_bias else 0)
                 + (2 * m.head_dim if a.qk_norm else 0) + (m.num_heads if a.softmax_type == "learnable" else 0))


def _attention_params(m: ModelSpec, kind: str = "W") -> float:
    """One attention block's parameters (`kind`: a DeepSeek-V4 layer's attention kind, models/dsv4.py)."""
    h = m.hidden
    if m.attention == "dsv4":
        return dsv4.attention_params(m, kind)
    if m.attention == "mla":
        H = m.num_heads
        return (_mla_query_weights(m) + h * (m.kv_lora_rank + m.qk_rope_head_dim)
                + m.kv_lora_rank * H * (m.qk_nope_head_dim + m.v_head_dim) + H * m.v_head_dim * h + m.kv_lora_rank)
    q, kv = m.num_heads * m.head_dim, m.num_kv_heads * m.head_dim
    return h * (q * (2 if m.attention_gate else 1) + 2 * kv) + q * h + _gqa_extra_params(m)


def _mlp_bias(m: ModelSpec, ffn: int, width: int) -> int:
    """An MLP's biases with linear_bias (gpt-oss, modeling_gpt_oss.py GptOssExperts: gate_up_proj_bias of
    2 x intermediate_size and down_proj_bias of hidden_size per expert): the up (and gate) and the down projection's."""
    a = m.architecture
    return (m.glu_factor - 1) * ffn + width if a is not None and a.linear_bias else 0


def _router_params(m: ModelSpec) -> int:
    """One router: its h x experts weight, + a bias per expert with linear_bias (modeling_gpt_oss.py
    GptOssTopKRouter.bias), + the shared expert's h -> 1 sigmoid gate (shared_expert_gate: modeling_qwen2_moe.py
    Qwen2MoeSparseMoeBlock.shared_expert_gate = Linear(hidden_size, 1, bias=False); Qwen3-Next and Qwen3.5 MoE inherit
    it). The correction bias of an aux-loss-free router is a buffer, not a parameter (module docstring)."""
    a = m.architecture
    return (m.hidden * m.num_routed_experts + (m.num_routed_experts if a is not None and a.linear_bias else 0)
            + (m.hidden if a is not None and a.shared_expert_gate and m.num_shared_experts else 0))


def param_counts(m: ModelSpec, vocab=None) -> ParamCounts:
    """Parameters by kind. `vocab`: the embedding's and output layer's rows (default the model's, as model cards
    count; the step model passes `step_vocab` for the weights, gradients and optimizer state a framework holds)."""
    h, g = m.hidden, m.glu_factor
    per_expert = g * m.expert_width * m.expert_ffn + _mlp_bias(m, m.expert_ffn, m.expert_width)
    shared_expert = g * h * m.expert_ffn + _mlp_bias(m, m.expert_ffn, h)
    dense_mlp = g * h * m.dense_ffn + _mlp_bias(m, m.dense_ffn, h)
    latent_proj = 2 * h * m.moe_latent_size
    router = _router_params(m) if m.is_moe else 0
    moe_layer = (m.num_routed_experts * per_expert + m.num_shared_experts * shared_expert + latent_proj
                 + router + 2 * h + _attention_params(m) + dsv4.hyper_connection_params(m))
    mtp_weight_layers = min(m.num_mtp_layers, 1) if m.mtp_shared_weights else m.num_mtp_layers
    # an MTP layer is a MoE layer, or in a dense model a dense one (its MLP of dense_ffn; Megatron-LM core_v0.16.1
    # gpt_builders.py builds it from the last decoder layer's spec), + its h <-> 2h projection and three norms
    mtp_mlp = 0 if m.is_moe else dense_mlp
    mtp = mtp_weight_layers * (moe_layer + mtp_mlp + 2 * h * h + 3 * h)
    return ParamCounts(
        attention=(sum(_attention_params(m, kind) for kind in m.csa_pattern) if m.attention == "dsv4"
                   else m.num_attention_layers * _attention_params(m)),
        dense_mlp=m.num_dense_layers * dense_mlp,
        routed_experts=m.num_moe_layers * m.num_routed_experts * per_expert,
        shared_experts=m.num_moe_layers * m.num_shared_experts * shared_expert,
        # hash-routed layers (DeepSeek-V4) choose their experts by token id but keep the learned gate weight that
        # scores them (transformers 5.25.0 modeling_deepseek_v4.py DeepseekV4HashRouter.weight): every MoE layer
        router=m.num_moe_layers * router,
        norms=(1 if m.is_hybrid else 2) * h * m.num_layers + h,  # a hybrid layer has one pre-norm
        embeddings=(m.vocab if vocab is None else vocab) * h * (1 if m.tied_embeddings else 2),
        mtp=mtp,
        mtp_routed_experts=mtp_weight_layers * m.num_routed_experts * per_expert,
        mamba=m.num_mamba_layers * mamba_params_per_layer(m),
        moe_latent_proj=m.num_moe_layers * latent_proj,
        linear_attention=m.num_linear_attention_layers * gdn_params_per_layer(m),
        hyper_connections=m.num_layers * dsv4.hyper_connection_params(m) + dsv4.hyper_connection_head_params(m),
    )


def active_params(m: ModelSpec) -> float:
    """Parameters one token touches (top-k of the routed experts), MTP excluded."""
    p = param_counts(m)
    if not m.is_moe:
        return p.total
    return p.total - p.routed_experts * (1 - m.top_k / m.num_routed_experts)


# ---------------------------------------------------------------- zoo
