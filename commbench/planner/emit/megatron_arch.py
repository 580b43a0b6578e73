"""A model's whole architecture as Megatron-LM flags (pretrain_gpt.py, Megatron-LM core_v0.16.1).

Sizes come from ModelSpec, everything else from its Architecture (models/architecture.py), so nothing
architectural is left to the user: activation and GLU variant, norm and epsilon, qk-norm, zero-centred
norm weights (`--apply-layernorm-1p`), biases, rotary base and scaling (Llama 3.1 `--use-rope-scaling`,
MLA YaRN `--rotary-scaling-factor --mscale --mscale-all-dim`), sliding-window pattern and attention
sinks, the router (score function, pre-softmax, top-k scaling, groups and group top-k, expert bias,
load balancing, capacity), shared experts and their gate (`--moe-shared-expert-gate`), MTP, the
vocabulary (`--vocab-size` with `--make-vocab-size-divisible-by`) and untied
embeddings. Flag names: Megatron-LM core_v0.16.1 megatron/training/arguments.py, whose
TransformerConfig flags are generated from megatron-core 0.16's dataclass fields.

YaRN on non-MLA attention (gpt-oss) is megatron-core 0.19.0's (`--position-embedding-type yarn` with
`--rotary-scaling-factor`, `--yarn-original-max-position-embeddings`, `--yarn-beta-fast/slow` and
`--[no-]yarn-correction-range-round-to-int`, Megatron-LM cd4afffa6484 arguments.py / argument_utils.py): emitted for a
plan whose release runs it (26.08); for one whose release does not, that release's Megatron-LM and megatron-core are
named (search/frameworks.py MEGATRON_NON_MLA_YARN_CORE) in the plan's note in place of the launch where its
Megatron-Bridge builds gpt-oss in Python (megatron_cannot_launch: the prediction stands), else in a one-line refusal
(`unbuildable`): core_v0.16.1's
--position-embedding-type has no 'yarn', 0.18's sets no config.yarn_* for GPTModel, and the ModelOpt
`--enable-gpt-oss` switch sets a 131072-token original context where gpt-oss has 4096.
What it builds differently is said in the plan's notes (`architecture_notes`): MLA YaRN betas or original context
other than megatron-core's (Kimi-K2's beta_fast 1; a config's original_max_position_embeddings other than 4096), which
no flag of that release sets, a Llama 3 RoPE scaling
factor other than 8 (Llama 3.2's 32), which its pretrain_gpt.py parses and never passes to GPTModel, and MLA latent
q/kv norms built at --norm-epsilon where Hugging Face builds them at 1e-6 (Moonlight, GLM-4.7-Flash: 1e-5).
"""

from __future__ import annotations

from commbench.planner.emit.torchtitan_mla import LATENT_NORM_EPS
from commbench.planner.models.architecture import Architecture
from commbench.planner.models.counts import megatron_vocab_divisor
from commbench.planner.models.spec import ModelSpec
from commbench.planner.search.frameworks import MEGATRON_LM_RELEASE, megatron_unbuildable as unbuildable

__all__ = ["MEGATRON_LM_RELEASE", "architecture_args", "architecture_notes", "max_positions", "positions_notes",
           "router_args", "unbuildable"]

# megatron-core 0.16.1 MLATransformerConfig's YaRN betas (transformer_config.py: beta_fast = 32,
# beta_slow = 1). Megatron-LM core_v0.16.1's arguments.py adds no --beta-fast / --beta-slow, and
# core_transformer_config_from_args copies only the dataclass fields that have a parsed argument,
# so pretrain_gpt.py always trains MLA YaRN with these.
MCORE_MLA_YARN_BETA_FAST, MCORE_MLA_YARN_BETA_SLOW = 32.0, 1.0
# ... and its YaRN original context (original_max_position_embeddings = 4096), which no core_v0.16.1 flag sets either
# (arguments.py has no --original-max-position-embeddings): DeepSeek-V2/V3's 4096, another model's is not built
MCORE_MLA_YARN_ORIGINAL_POSITIONS = 4096


def _num(value: float) -> str:
    return f"{value:g}"


def _activation(arch: Architecture) -> list[str]:
    out = {"swiglu": ["--swiglu"], "quick_geglu": ["--quick-geglu"], "squared_relu": ["--squared-relu"],
           "gelu": []}[arch.activation]
    if arch.glu_linear_offset:
        out += ["--glu-linear-offset", _num(arch.glu_linear_offset)]
    if arch.activation_clamp:
        out += ["--activation-func-clamp-value", _num(arch.activation_clamp)]
    return out


def _position(model: ModelSpec, arch: Architecture) -> list[str]:
    if arch.position_embedding == "none":       # hybrid Mamba models: the Mamba layers carry position
        return ["--position-embedding-type", "none"]
    if arch.position_embedding == "yarn" and model.attention != "mla":
        return _non_mla_yarn(arch)
    out = ["--position-embedding-type", "rope", "--rotary-base", str(arch.rotary_base),
           "--rotary-percent", _num(arch.rotary_percent)]
    if model.attention == "mla":
        out += ["--rope-type", "yarn" if arch.rope_scaling == "yarn" else "rope"]
        if arch.rope_scaling == "yarn":
            out += ["--rotary-scaling-factor", _num(arch.rope_scaling_factor), "--mscale", _num(arch.yarn_mscale),
                    "--mscale-all-dim", _num(arch.yarn_mscale_all_dim)]
    elif arch.rope_scaling == "llama3":
        out += ["--use-rope-scaling", "--rope-scaling-factor", _num(arch.rope_scaling_factor)]
    elif arch.rope_scaling == "linear":   # megatron-core 0.19.0 on: search/frameworks.py MEGATRON_LINEAR_ROPE_CORE
        out += ["--rotary-seq-len-interpolation-factor", str(int(arch.rope_scaling_factor))]
    return out


def _non_mla_yarn(arch: Architecture) -> list[str]:
    """YaRN on non-MLA attention as megatron-core 0.19.0's pretrain_gpt.py takes it (Megatron-LM cd4afffa6484
    arguments.py; argument_utils._apply_yarn_config_from_args copies them to the config.yarn_* GPTModel's
    YarnRotaryEmbedding reads). Its concentration factor is transformers' (_compute_yarn_parameters: get_mscale(factor,
    mscale) / get_mscale(factor, mscale_all_dim) where the config gives both, else get_mscale(factor)): megatron-core's
    _yarn_get_concentration_factor with --mscale 1 --mscale-all-dim 0 (the flags' defaults) is get_mscale(factor), so
    the mscales are written only where the config gives both. The correction range is rounded to whole dimensions
    unless the config's truncate is false (gpt-oss)."""
    out = ["--position-embedding-type", "yarn", "--rotary-base", str(arch.rotary_base),
           "--rotary-percent", _num(arch.rotary_percent), "--rotary-scaling-factor", _num(arch.rope_scaling_factor),
           "--yarn-original-max-position-embeddings", str(arch.rope_original_max_positions),
           "--yarn-beta-fast", _num(arch.yarn_beta_fast), "--yarn-beta-slow", _num(arch.yarn_beta_slow)]
    if arch.yarn_mscale and arch.yarn_mscale_all_dim:
        out += ["--mscale", _num(arch.yarn_mscale), "--mscale-all-dim", _num(arch.yarn_mscale_all_dim)]
    return out + ["--yarn-correction-range-round-to-int" if arch.yarn_truncate
                  else "--no-yarn-correction-range-round-to-int"]


def _attention(arch: Architecture) -> list[str]:
    out = ["--normalization", arch.normalization, "--norm-epsilon", _num(arch.norm_epsilon)]
    if arch.qk_norm:
        out.append("--qk-layernorm")
    if arch.norm_zero_centered_gamma:
        out.append("--apply-layernorm-1p")
    if not arch.linear_bias:
        out.append("--disable-bias-linear")
    if arch.qkv_bias and not arch.linear_bias:
        out.append("--add-qkv-bias")
    if arch.sliding_window:
        out += ["--window-size", f"{arch.sliding_window - 1},0"]
        if arch.window_skip_freq:
            out += ["--window-attn-skip-freq", str(arch.window_skip_freq)]
    if arch.softmax_type != "vanilla":
        out += ["--softmax-type", arch.softmax_type]
    return out


def router_args(model: ModelSpec, arch: Architecture) -> list[str]:
    out = ["--moe-router-score-function", arch.router_score, "--moe-router-dtype", arch.router_dtype,
           "--moe-router-load-balancing-type", arch.load_balancing, "--moe-aux-loss-coeff", _num(arch.aux_loss_coeff)]
    if arch.router_pre_softmax:
        out.append("--moe-router-pre-softmax")
    if arch.router_topk_scaling:
        out += ["--moe-router-topk-scaling-factor", _num(arch.router_topk_scaling)]
    if arch.router_groups:
        out += ["--moe-router-num-groups", str(arch.router_groups), "--moe-router-group-topk", str(arch.router_group_topk)]
    if arch.router_expert_bias:
        out += ["--moe-router-enable-expert-bias", "--moe-router-bias-update-rate", _num(arch.router_bias_update_rate)]
    if arch.capacity_factor:
        out += ["--moe-expert-capacity-factor", _num(arch.capacity_factor)]
    if arch.shared_expert_gate and model.num_shared_experts:
        out.append("--moe-shared-expert-gate")
    return out


# megatron-core 0.16.1 GPTModel's rope_scaling_factor default; Megatron-LM core_v0.16.1 gpt_builders.gpt_builder passes
# rope_scaling=args.use_rope_scaling and no factor, so pretrain_gpt.py builds Llama 3.1 scaling with this one.
MCORE_LLAMA3_ROPE_FACTOR = 8.0


def architecture_notes(model: ModelSpec) -> list[str]:
    """What the emitted flags cannot say about the architecture (plan.json megatron.notes): MLA YaRN
    betas or original context other than megatron-core's, which no Megatron-LM core_v0.16.1 flag sets (Kimi-K2's beta_fast 1), a
    Llama 3.x RoPE scaling factor other than 8, which pretrain_gpt.py parses and does not build (Llama 3.2's 32), and
    MLA's latent q/kv norm epsilon where the model's norm epsilon is another (Moonlight's 1e-5; _latent_norm_note)."""
    return window_notes(model) + _dropout_notes(model) + _arch_notes(model)


def _dropout_notes(model: ModelSpec) -> list[str]:
    """The model's dropout is launched (--attention-dropout / --hidden-dropout); the step model charges none."""
    arch = model.architecture
    if arch is None or not (arch.attention_dropout or arch.hidden_dropout):
        return []
    embedding = (" megatron-core 0.16.1 also drops the embedding output at the hidden dropout (LanguageModelEmbedding"
                 ".embedding_dropout), which transformers' Phi-3 does not (its embd_pdrop is never applied);"
                 if arch.hidden_dropout else "")
    return [f"{model.name} trains with attention dropout {_num(arch.attention_dropout)} and hidden dropout "
            f"{_num(arch.hidden_dropout)} (its config's; the launch sets them):{embedding} the predicted step time and "
            "memory charge no dropout (its random masks, their memory and kernels)"]


def window_notes(model: ModelSpec) -> list[str]:
    """What the model's reader noted (extra["notes"]: hf_task.multimodal_notes) and a window on every layer planned as
    full attention (hf_config._every_layer_window; longer sequences are refused by search/frameworks.
    check_window_seq_len): the plan says so, for Megatron and TorchTitan alike."""
    notes = list(model.extra.get("notes", ()))   # the reader's own (hf_task.multimodal_notes: Qwen3.5's vision part)
    window = model.extra.get("every_layer_window")
    if not window:
        return notes
    return notes + [f"{model.name}'s {model.extra['every_layer_window_key']} (a window on every layer) is planned as "
            f"full attention: this plan's sequences are at most {window} tokens, so each token's window holds every token "
            f"before it, the window masks nothing and the launch sets none (a --seq-len over {window} is refused)"]


def _arch_notes(model: ModelSpec) -> list[str]:
    arch = model.architecture
    if arch is not None and arch.rope_scaling == "llama3" and arch.rope_scaling_factor != MCORE_LLAMA3_ROPE_FACTOR:
        return [f"{model.name}'s Llama 3 RoPE scaling has rope_scaling_factor {_num(arch.rope_scaling_factor)}: "
                f"Megatron-LM {MEGATRON_LM_RELEASE}'s pretrain_gpt.py parses --rope-scaling-factor but its "
                "gpt_builders.gpt_builder passes GPTModel no factor, so it trains GPTModel's default "
                f"{_num(MCORE_LLAMA3_ROPE_FACTOR)}; pass rope_scaling_factor to GPTModel in the model provider (e.g. "
                f"Megatron-Bridge) to train {model.name}'s"]
    if arch is None or model.attention != "mla":
        return []
    return _latent_norm_note(model) + _mla_yarn_note(model)


def _latent_norm_note(model: ModelSpec) -> list[str]:
    """MLA's latent q/kv RMSNorms: Hugging Face builds them at its RMSNorm's default eps 1e-6 (modeling_deepseek_v3.py
    DeepseekV3RMSNorm(q_lora_rank) / (kv_lora_rank), as torchtitan_mla.LATENT_NORM_EPS), megatron-core 0.16.1 at the
    model's norm epsilon (multi_latent_attention.py MLASelfAttention.__init__: q_layernorm and kv_layernorm with
    eps=self.config.layernorm_epsilon, the one --norm-epsilon); no core_v0.16.1 flag sets them apart."""
    arch = model.architecture
    if arch.norm_epsilon == LATENT_NORM_EPS:
        return []
    norms = "q_a_layernorm / kv_a_layernorm" if model.q_lora_rank else "kv_a_layernorm"
    return [f"{model.name}'s MLA latent norms ({norms}) have eps {_num(LATENT_NORM_EPS)} (the Hugging Face RMSNorm "
            f"default) and its other norms {_num(arch.norm_epsilon)}: megatron-core {MEGATRON_LM_RELEASE.removeprefix('core_v')}"
            " builds q_layernorm / kv_layernorm with eps=config.layernorm_epsilon (multi_latent_attention.py), the "
            f"one --norm-epsilon {_num(arch.norm_epsilon)}, and no Megatron-LM {MEGATRON_LM_RELEASE} flag sets them "
            "apart, so the launch trains them at that eps; set their eps in the model provider's layer spec to train "
            f"{model.name}'s"]


def _mla_yarn_note(model: ModelSpec) -> list[str]:
    arch = model.architecture
    if arch.rope_scaling != "yarn":
        return []
    off = [(name, f"{name} = {_num(have)} (megatron-core uses {_num(default)})")
           for name, have, default in (("beta_fast", arch.yarn_beta_fast, MCORE_MLA_YARN_BETA_FAST),
                                       ("beta_slow", arch.yarn_beta_slow, MCORE_MLA_YARN_BETA_SLOW),
                                       ("original_max_position_embeddings", arch.rope_original_max_positions,
                                        MCORE_MLA_YARN_ORIGINAL_POSITIONS))
           if have and have != default]
    if not off:
        return []
    return [f"{model.name}'s YaRN RoPE has {', '.join(text for _, text in off)}: Megatron-LM {MEGATRON_LM_RELEASE} "
            "has no flag for it (arguments.py defines no --beta-fast/--beta-slow/--original-max-position-embeddings; "
            "MLATransformerConfig keeps its default), so pretrain_gpt.py with these arguments trains a different RoPE; "
            f"set MLATransformerConfig.{'/'.join(name for name, _ in off)} in the model provider (e.g. "
            "Megatron-Bridge) to train this model's"]


def architecture_args(model: ModelSpec, seq_len: int, tp: int = 1) -> list[str]:
    """The flags beyond sizes (empty for a user model without an [arch] table; the plan notes it); `tp` picks the
    --make-vocab-size-divisible-by that keeps the model's vocabulary (models/counts.megatron_vocab_divisor)."""
    arch = model.architecture
    if arch is None:
        return ["--normalization", "RMSNorm", "--disable-bias-linear",
                "--position-embedding-type", "none" if model.is_hybrid else "rope"] + \
            (["--swiglu"] if model.glu else ["--squared-relu"] if model.is_hybrid else [])
    out = _activation(arch) + _attention(arch) + _position(model, arch)
    out += ["--vocab-size", str(model.vocab), "--make-vocab-size-divisible-by",
            str(megatron_vocab_divisor(model, tp))]
    if model.is_moe:
        out += router_args(model, arch)
    return out


def max_positions(model: ModelSpec, seq_len: int) -> int:
    arch = model.architecture
    return max(seq_len, arch.max_position_embeddings if arch is not None else seq_len)


def positions_notes(model: ModelSpec, seq_len: int, release: str | None) -> list[str]:
    """A sequence longer than the model's own max_position_embeddings: the launch's --max-position-embeddings is the
    sequence length (max_positions), since Megatron-LM's validate_args asserts max_position_embeddings >= seq_length
    (hf_core_rules.CORE_RULES "max_positions"); the plan says so rather than launching more positions silently."""
    arch = model.architecture
    if arch is None or model.is_hybrid or not 0 < arch.max_position_embeddings < seq_len:
        return []
    from commbench.planner.models.hf_core_rules import core_line, core_name
    own = arch.max_position_embeddings
    return [f"{model.name}'s max_position_embeddings is {own:,}, shorter than the {seq_len:,}-token sequences planned: "
            f"the launch gives --max-position-embeddings {seq_len} (validate_args asserts max_position_embeddings >= "
            f"seq_length: {core_line('max_positions', release)}, {core_name(release)}), so the model trains at "
            f"positions past the {own:,} its config gives, with its RoPE as configured (the plan extends nothing): "
            "a context extension, priced as the model at this sequence length"]
