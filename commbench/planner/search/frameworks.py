"""What each training framework runs, so the search proposes only layouts and features it can launch
and the step model charges what the emitted configuration runs.

Megatron-LM (core_v0.16.1): every Layout feature (its checks live in the search and the emitter) but the
fused grouped MLP (`fused_moe`): Megatron-Core runs Transformer Engine's fused grouped MLP through
TransformerConfig.use_transformer_engine_op_fuser for MoE, which landed after 0.16.1 (Megatron-LM
6815c0f, 2026-05-15, "Combine GEMM + SwiGLU fused MLP PRs"); Megatron-Bridge 26.06's recipes run a newer
Megatron-Core. The search leaves it off and a pin is refused, so a plan never credits what it cannot run.
Nor CUDA graphs under Megatron-FSDP (MEGATRON_FSDP_NO_GRAPHS): FSDP rows are searched eager, a pin of both is
refused.

TorchTitan 0.3.0 (its Trainer.Config and config_registry functions):
- CUDA graphs wrap the whole forward-backward (`training.disable_cuda_graphs`, trainer.py), so the
  only graph it has is the full-iteration one, and `_validate_cuda_graphs` refuses it with PP > 1 and
  with EP > 1 under the shipped configs' token dispatcher (which synchronises with the CPU): the search
  offers graphs only with pp = 1 and ep = 1, and charges host launch overhead elsewhere.
- Expert sharding follows EP (titan_etp): with ep > 1 EP borrows ranks from FSDP and TP and holds whole experts
  (etp = 1); with ep = 1 and tp > 1 TP shards every routed expert (etp = tp). The all-to-all dispatcher
  (no DeepEP in the shipped configs), no Megatron EP/TP communication overlap, no FP8 attention.
- The optimizer is FSDP (ZeRO-3, always sharded, overlapped); activation checkpointing is whatever the
  config function sets (not a command-line option): TORCHTITAN_RECOMPUTE.
- Pipeline schedules 1F1B (vp = 1) and Interleaved1F1B (vp > 1).
- Data parallelism is FSDP2 at every layout, and what it sends depends on PP (TITAN_DP_WITHOUT_PP).
- An MLA model with no shipped flavor's sizes (DeepSeek-V2-Lite, Moonlight) is built exactly by its deepseek_v3
  model (titan_mla_refusal says when not): the plan writes a config function (emit/torchtitan_mla.py).
- An hf: model with exactly a shipped MoE or llama3 flavor's sizes is that flavor only where its architecture is what
  the flavor builds (TITAN_FLAVOR_ARCH; the gpt_oss swiglu limit is set by the plan's config function); otherwise the
  launch is refused naming each field, the model's value and the flavor's.
- A dense hf: model with exactly a qwen3 / llama3 flavor's sizes and attention is that flavor (TITAN_DENSE_FLAVORS);
  a tied one runs at pp = 1 (TorchTitan refuses weight tying with PP). One with a family's layers at other sizes
  (phi-4: Llama's) is built by the family's builder in a generated config function (emit/torchtitan_dense.py).
"""

from __future__ import annotations

import functools

import numpy as np

from commbench.errors import CommbenchError
from commbench.planner.layout.release_flags import (MEGATRON_LM_RELEASE, core_key, megatron_release_name,  # noqa: F401
                                                   release_core_at_least)
# what Megatron-LM runs of a feature on a hybrid (MambaModel) model: one rule for plan's pins (below) and calibration rows
from commbench.planner.layout.hybrid_features import megatron_hybrid_unrun
from commbench.planner.layout.spec import CODE_FIELDS
from commbench.planner.models.spec import ModelSpec

FRAMEWORKS = ("megatron", "torchtitan")
DEFAULT_FRAMEWORK = "megatron"
FRAMEWORK_VERSIONS = {"megatron": "Megatron-LM core_v0.16.1 (megatron-core 0.16.1)", "torchtitan": "torchtitan 0.3.0"}
# The TorchTitan releases a plan's launch may target (--torchtitan-version: the short name -> the release)
TORCHTITAN_VERSIONS = {"0.3": "0.3.0", "0.2": "0.2.2"}
# torchtitan 0.2.2 torchtitan/config/job_config.py:652 ActivationCheckpoint.mode: Literal["selective", "full",
# "memory_budget", "none"]; the layout's recompute values TorchTitan 0.2 has by name, which a 0.2 plan's TOML sets
# ([activation_checkpoint] mode, emit/torchtitan.py), where 0.3.0's launch keeps its config function's
AC_MODES_02 = ("none", "selective", "full")


def flops_count_name(framework: str, torchtitan_version: str = "0.3") -> str:
    """Whose model-FLOPs count a plan's model TFLOP/s and MFU are in (models/counts.FLOPS_COUNTS), naming the
    TorchTitan release the plan targets: 0.2.2's get_nparams_and_flops counts as 0.3.0's does (torchtitan v0.2.2
    models/utils.py:388-431 get_dense_model_nparams_and_flops, :434 get_moe_model_nparams_and_flops: 6 x the
    non-embedding parameters a token uses + 6 x layers x heads x head_dims x seq_len)."""
    from commbench.planner.models.counts import FLOPS_COUNTS
    if framework == "torchtitan":
        return f"TorchTitan {TORCHTITAN_VERSIONS[torchtitan_version]}'s count"
    return FLOPS_COUNTS[framework][0]


def framework_version(framework: str, torchtitan_version: str = "0.3") -> str:
    """The release a plan's framework names, as its text says it: Megatron-LM core_v0.16.1, or the TorchTitan
    release --torchtitan-version targets (a 0.2 plan's text said 'torchtitan 0.3.0')."""
    if framework == "torchtitan":
        return f"torchtitan {TORCHTITAN_VERSIONS[torchtitan_version]}"
    return FRAMEWORK_VERSIONS[framework]

# Activation checkpointing the TorchTitan 0.3.0 config functions set (torchtitan/models/*/config_registry.py:
# llama3_8b SelectiveAC, llama3_70b/llama3_405b FullAC, qwen3_30b_a3b FullAC, deepseek_v3_671b SelectiveAC,
# gpt_oss_20b and gpt_oss_120b FullAC); Qwen3-235B-A22B is built from qwen3_30b_a3b's config (emit/torchtitan.py).
# The dense flavors with no zoo model start from these configs (emit/torchtitan.py): qwen3_0_6b / qwen3_1_7b
# SelectiveAC, qwen3_14b / qwen3_32b FullAC; Qwen3 4B from qwen3_1_7b, 8B from qwen3_14b, Llama 3.2 1B / 3B from
# llama3_8b (TorchTitan 0.3.0 ships no config function for those flavors).
TORCHTITAN_RECOMPUTE = {"llama3-8b": "selective", "llama3.1-70b": "full", "llama3.1-405b": "full",
                        "qwen3-30b-a3b": "full", "qwen3-235b-a22b": "full", "deepseek-v3": "selective",
                        "gpt-oss-120b": "full", "gpt-oss-20b": "full",
                        "qwen3-0.6b": "selective", "qwen3-1.7b": "selective", "qwen3-4b": "selective",
                        "qwen3-8b": "full", "qwen3-14b": "full", "qwen3-32b": "full",
                        "llama3.2-1b": "selective", "llama3.2-3b": "selective"}


def _flavor(module: str, flavor: str, layers: int, hidden: int, heads: int, ffn: int, tied: bool, **more) -> tuple:
    """A TITAN_DENSE_FLAVORS entry: (module, flavor, sizes), 8 KV heads as every one of them has."""
    return module, flavor, dict(num_layers=layers, hidden=hidden, num_heads=heads, num_kv_heads=8, dense_ffn=ffn,
                                tied_embeddings=tied, **more)


# TorchTitan 0.3.0's dense flavors that no zoo model is, by their sizes (torchtitan/models/qwen3/__init__.py
# _0_6b ... _32b: qk_norm RMSNorm, no biases, enable_weight_tying for 0.6B / 1.7B / 4B; torchtitan/models/llama3/
# __init__.py _1b / _3b: hidden_dim compute_ffn_hidden_dim(dim, multiple_of=1024, ffn_dim_multiplier 1.5 / 1.0) =
# 8192, head_dim dim / n_heads, enable_weight_tying). An hf: model with exactly these sizes and the family's attention
# (TITAN_FLAVOR_ARCH) is that flavor; key -> (module, flavor, sizes).
_QWEN3 = dict(head_dim=128, vocab=151936)
_LLAMA3 = dict(vocab=128256)
TITAN_DENSE_FLAVORS = {
    "qwen3-0.6b": _flavor("qwen3", "0.6B", 28, 1024, 16, 3072, True, **_QWEN3),
    "qwen3-1.7b": _flavor("qwen3", "1.7B", 28, 2048, 16, 6144, True, **_QWEN3),
    "qwen3-4b": _flavor("qwen3", "4B", 36, 2560, 32, 9728, True, **_QWEN3),
    "qwen3-8b": _flavor("qwen3", "8B", 36, 4096, 32, 12288, False, **_QWEN3),
    "qwen3-14b": _flavor("qwen3", "14B", 40, 5120, 40, 17408, False, **_QWEN3),
    "qwen3-32b": _flavor("qwen3", "32B", 64, 5120, 64, 25600, False, **_QWEN3),
    "llama3.2-1b": _flavor("llama3", "1B", 16, 2048, 32, 8192, True, head_dim=64, **_LLAMA3),
    "llama3.2-3b": _flavor("llama3", "3B", 28, 3072, 24, 8192, True, head_dim=128, **_LLAMA3),
}
# What each family's layers build besides the sizes (make_gqa_config: bias-free wqkv / wo, qk_norm only in qwen3;
# make_ffn_config: SwiGLU; RMSNorm; full RoPE, no sliding window, no attention sinks or output gate).
_DENSE_ARCH = (("architecture.activation", "swiglu"), ("architecture.normalization", "RMSNorm"),
               ("architecture.norm_zero_centered_gamma", False), ("architecture.linear_bias", False),
               ("architecture.qkv_bias", False), ("architecture.softmax_type", "vanilla"),
               ("architecture.rotary_percent", 1.0), ("architecture.position_embedding", "rope"),
               ("sliding_window", 0), ("attention", "gqa"), ("attention_gate", False), ("glu", True))
# No clamp or offset on the GLU (feed_forward.py FeedForward: w2(silu(w1 x) * w3 x)); an MoE layer's router is
# ungrouped and dropless, with no shared-expert gate (make_router_config / make_moe_config defaults).
_DENSE_ARCH += (("architecture.glu_linear_offset", 0.0), ("architecture.activation_clamp", 0.0),
                ("architecture.router_groups", 0), ("architecture.shared_expert_gate", False),
                ("architecture.capacity_factor", 0.0))
# TorchTitan 0.3.0's decoders (models/common, llama3, qwen3, deepseek_v3, gpt_oss) have no dropout layer.
TITAN_NO_DROPOUT = (("architecture.attention_dropout", 0.0), ("architecture.hidden_dropout", 0.0))
_DENSE_ARCH += TITAN_NO_DROPOUT
# gpt_oss (models/gpt_oss/__init__.py _build_gptoss_layers, both flavors): biased wqkv / wo, router gate and experts
# (linear_bias), learnable attention sinks, a 128-token window on even layers (window_skip_freq 2), YaRN with
# beta_fast 32, beta_slow 1 over 4096 tokens, no qk-norm; experts apply swiglu(alpha 1.702, limit 7.0) to
# (x_linear + 1) (models/gpt_oss/moe.py swiglu: Megatron's quick_geglu with glu_linear_offset 1, clamp 7).
_GPT_OSS_ARCH = (("architecture.activation", "quick_geglu"), ("architecture.glu_linear_offset", 1.0),
                 ("architecture.activation_clamp", 7.0), ("architecture.normalization", "RMSNorm"),
                 ("architecture.norm_zero_centered_gamma", False), ("architecture.qk_norm", False),
                 ("architecture.linear_bias", True), ("architecture.qkv_bias", False),
                 ("architecture.softmax_type", "learnable"), ("architecture.rotary_percent", 1.0),
                 ("architecture.position_embedding", "yarn"), ("architecture.yarn_beta_fast", 32.0),
                 ("architecture.yarn_beta_slow", 1.0), ("architecture.rope_original_max_positions", 4096),
                 ("sliding_window", 128), ("architecture.window_skip_freq", 2), ("attention", "gqa"),
                 ("attention_gate", False), ("glu", True), ("architecture.router_groups", 0),
                 ("architecture.shared_expert_gate", False), ("architecture.capacity_factor", 0.0)) + TITAN_NO_DROPOUT
# deepseek_v3 671B (models/deepseek_v3/__init__.py _671b): what every deepseek_v3 model builds (_TITAN_MLA_FIXED
# below) and its flavor's YaRN (beta_fast 32, beta_slow 1 over 4096 tokens, mscale 1.0) and expert groups
# (router_num_expert_groups 8, router_num_limited_groups 4); its RoPE base and factor, norm eps and router score
# are compared by the emitter (TitanModel.rope_03, norm_epsilon_03, router_03).
_DSV3_671B_ARCH = (("attention", "mla"), ("architecture.qk_norm", True), ("architecture.glu_linear_offset", 0.0),
                   ("architecture.activation_clamp", 0.0), ("architecture.yarn_beta_fast", 32.0),
                   ("architecture.yarn_beta_slow", 1.0), ("architecture.rope_original_max_positions", 4096),
                   ("architecture.yarn_mscale", 1.0), ("architecture.yarn_mscale_all_dim", 1.0),
                   ("architecture.router_groups", 8), ("architecture.router_group_topk", 4))
TITAN_FLAVOR_ARCH = {"qwen3": _DENSE_ARCH + (("architecture.qk_norm", True),),
                     "llama3": _DENSE_ARCH + (("architecture.qk_norm", False),),
                     "gpt_oss": _GPT_OSS_ARCH}
TITAN_DENSE_FAMILIES = ("qwen3", "llama3")   # the families a generated config function builds (torchtitan_dense.py)
# TITAN_FLAVOR_ARCH fields the plan's config function sets on the flavor's model config, by module: each layer's
# attribute (emit/torchtitan.py flavor_fix_lines). gpt_oss's experts read their clamp from GptOssGroupedExperts.Config
# .swiglu_limit (models/gpt_oss/moe.py:80, default 7.0, used by forward at :175).
TITAN_ARCH_SETTABLE = {("gpt_oss", "architecture.activation_clamp"): "moe.routed_experts.inner_experts.swiglu_limit"}
# The shipped models an hf: model is matched to by its sizes (titan_zoo_name): zoo name -> (module, flavor), as
# emit/torchtitan.py TITAN_MODELS names them.
TITAN_ZOO_FLAVORS = {"llama3-8b": ("llama3", "8B"), "llama3.1-70b": ("llama3", "70B"),
                     "llama3.1-405b": ("llama3", "405B"), "qwen3-30b-a3b": ("qwen3", "30B-A3B"),
                     "qwen3-235b-a22b": ("qwen3", "235B-A22B"), "deepseek-v3": ("deepseek_v3", "671B"),
                     "gpt-oss-120b": ("gpt_oss", "120b"), "gpt-oss-20b": ("gpt_oss", "20b")}
# Every model module TorchTitan 0.3.0 ships (torchtitan/models/*/__init__.py; flux is a diffusion model).
TITAN_MODULES = "llama3, qwen3, qwen3_5, deepseek_v3, gpt_oss, kimi_k2_7, muse_glimmer, flux"

# The longest training.seq_len each TorchTitan 0.3.0 model takes: its flavor's RoPE max_seq_len (torchtitan/models/
# {llama3,qwen3,deepseek_v3,gpt_oss}/__init__.py); Decoder.Config.update_from_config refuses a longer one ("Training
# sequence length ... exceeds attention RoPE maximum supported sequence length"). An MLA model built by the generated
# config function precomputes RoPE for max(max_position_embeddings, seq_len) (emit/torchtitan_mla.py): no limit.
TORCHTITAN_MAX_SEQ_LEN = {"llama3-8b": 131072, "llama3.1-70b": 131072, "llama3.1-405b": 131072,
                          "qwen3-30b-a3b": 40960, "qwen3-235b-a22b": 40960, "deepseek-v3": 16384,
                          "gpt-oss-120b": 131072, "gpt-oss-20b": 131072,
                          "qwen3-0.6b": 40960, "qwen3-1.7b": 40960, "qwen3-4b": 40960, "qwen3-8b": 40960,
                          "qwen3-14b": 40960, "qwen3-32b": 40960, "llama3.2-1b": 131072, "llama3.2-3b": 131072}

# TorchTitan 0.3.0's data parallelism is FSDP2 (data_parallel_shard_degree) at every layout. Without PP its trainer
# accumulates gradients with no no_sync (trainer.py train_step) and reshards after forward (distributed/fsdp.py
# get_fsdp_reshard_after_forward_policy "default": not pp_enabled), so every micro-batch gathers the parameters for
# forward and again for backward and reduce-scatters its gradients: the search keeps only FSDP rows there
# (step/fsdp.py charges exactly that). With PP, torch.distributed.pipelining's stage turns gradient sync and
# resharding after backward off but for the last micro-batch (stage.py set_requires_gradient_sync /
# set_reshard_after_backward) and the policy keeps parameters gathered after forward: one gather and one
# reduce-scatter per step, what the distributed optimizer's charge is (step/dp_sync.py).
TITAN_DP_WITHOUT_PP = ("TorchTitan 0.3.0 runs FSDP2 at every layout and, without PP, gathers parameters every micro-batch "
                       "(its trainer accumulates gradients without no_sync)")

# TorchTitan 0.2.2 runs data_parallel_shard_degree 1 (fsdp=false) without PP and CP as DDP over
# data_parallel_replicate_degree (torch's composable replicate), and only where that is the whole mesh: every model's
# parallelize raises otherwise (torchtitan v0.2.2 models/llama3/infra/parallelize.py:148-156, qwen3:177-181,
# deepseek_v3:197-201, gpt_oss:162-166). Its trainer accumulates gradients without no_sync (train.py:561), so DDP
# all-reduces every micro-batch, with the optimizer state whole on every rank: neither is priced nor emitted here.
TITAN_DP_WITHOUT_PP_02 = ("TorchTitan 0.2.2 runs fsdp=false without PP as DDP (data_parallel_replicate_degree), only "
                          "where DP is the whole mesh (models/llama3/infra/parallelize.py:148-151: 'DDP has not "
                          "supported > 1D parallelism'), all-reducing gradients every micro-batch (train.py:561, no "
                          "no_sync) with the optimizer state whole on every rank, which commbench neither prices nor "
                          "emits")

# Why a 0.2 launch (the TOML commbench writes for TorchTitan 0.2.2) runs each _TITAN_FIXED value: torchtitan v0.2.2
# config/job_config.py, the options the TOML leaves at their defaults.
TITAN_FIXED_WHY_02 = {
    "dispatcher": "its parallelism.expert_parallel_comm_backend stays 'standard', the all-to-all (config/job_config.py:474)",
    "moe_a2a_overlap": "the TOML schedules no expert all-to-all overlap (its pipeline schedules are 1F1B / Interleaved1F1B)",
    "tp_comm_overlap": "its parallelism.enable_async_tensor_parallel stays false (config/job_config.py:357)",
    "fp8_attention": "its float8 converters quantize Linear layers and grouped experts only (config/job_config.py:731, 756)",
    "fused_moe": "it has no fused grouped MLP",
    "distributed_optimizer": "FSDP2 (data_parallel_shard_degree, config/job_config.py:324) shards the optimizer state",
    "dp_overlap": "FSDP2 overlaps its gathers and reduce-scatters with compute",
    "cpu_offload_layers": "it offloads no activations (training.enable_cpu_offload, config/job_config.py:270, offloads "
                          "FSDP2's parameters and optimizer state)",
}

# deepseek_v3_16b (torchtitan/models/deepseek_v3/config_registry.py) sets SelectiveAC: the recipe a generated MLA
# config function starts from (emit/torchtitan_mla.py).
TORCHTITAN_MLA_RECOMPUTE = "selective"

SIZE_FIELDS_IGNORED = ("name", "seq_len", "published_params_total_b", "published_params_active_b",
                      "published_flops_per_token_gflop", "architecture", "extra",
                      "hybrid_uneven_split", "gdn_context_parallel", "pinned_split",
                      "hybrid_pipe_segments")


def titan_zoo_name(model) -> str | None:
    """The zoo name of TorchTitan's model for `model`: its own name, or for a model read elsewhere (hf:PATH,
    --model-file) the zoo model whose sizes it has exactly and whose architecture its flavor builds (TITAN_FLAVOR_ARCH;
    a field TITAN_ARCH_SETTABLE names is set by the plan's config function): TorchTitan's config builds that network."""
    if model.name.lower() in TORCHTITAN_RECOMPUTE:
        return model.name.lower()
    name = titan_sized_flavor(model)
    if name is not None and not titan_family_differences(model, TITAN_ZOO_FLAVORS[name][0]):
        return name
    for name, (_, _, flavor) in TITAN_DENSE_FLAVORS.items():
        if _sizes(model) == _dense_sizes(flavor) and not _flavor_differences(model, name):
            return name
    return None


def _sizes(model: ModelSpec) -> dict:
    import dataclasses
    return {f.name: getattr(model, f.name) for f in dataclasses.fields(model) if f.name not in SIZE_FIELDS_IGNORED}


@functools.lru_cache(maxsize=None)
def _zoo_sizes(name: str) -> dict:
    """_sizes of the zoo model `name` (the package's data/models.toml: read once per process)."""
    from commbench.planner.models.zoo import load_model
    return _sizes(load_model(name))


def titan_sized_flavor(model: ModelSpec) -> str | None:
    """The TITAN_ZOO_FLAVORS model whose sizes `model` has exactly, whatever its architecture; None if none."""
    sizes = _sizes(model)
    return next((name for name in TITAN_ZOO_FLAVORS if sizes == _zoo_sizes(name)), None)


def _dense_sizes(flavor: dict) -> dict:
    """A dense TITAN_DENSE_FLAVORS entry as the size fields titan_zoo_name compares (every other one at ModelSpec's
    default: no MoE, MLA, Mamba, MTP, ...)."""
    return _sizes(ModelSpec(name="flavor", num_dense_layers=flavor["num_layers"], seq_len=4096, **flavor))


def _flavor_differences(model: ModelSpec, name: str) -> list[str]:
    """'field value (the flavor: value)' for each size or TITAN_FLAVOR_ARCH field where `model` is not the flavor."""
    module, _, flavor = TITAN_DENSE_FLAVORS[name]
    sizes = _dense_sizes(flavor)
    return titan_family_differences(model, module) + \
        [f"{k} {getattr(model, k)!r} (the flavor: {v!r})" for k, v in sizes.items() if getattr(model, k) != v]


def titan_family_differences(model: ModelSpec, module: str) -> list[str]:
    """'field value (the flavor: value)' for each TITAN_FLAVOR_ARCH field of `module` (what its layers build whatever
    the sizes) where `model` is otherwise and the plan's config function cannot set it (TITAN_ARCH_SETTABLE)."""
    if model.architecture is None:
        return ["architecture not recorded"]
    return [f"{field} {value!r} (the flavor: {built!r}{_TITAN_NO_YARN if value == 'yarn' else ''})"
            for field, value, built in titan_arch_misfits(model, module) if (module, field) not in TITAN_ARCH_SETTABLE]


# Why a config function cannot give a qwen3 / llama3 model YaRN: TorchTitan 0.3.0's RoPE configs take scaling="yarn"
# with rope_factor / beta_fast / beta_slow / original_seq_len (models/common/rope.py _yarn_inv_freq, "mscale is
# intentionally NOT applied here -- ... the model folds mscale into its softmax scale"), but GQAttention scales the
# logits by head_dim ** -0.5 only (models/common/attention.py GQAttention.__init__; only gpt_oss's attention folds
# mscale in), where transformers multiplies cos and sin by the YaRN attention factor 0.1 ln(factor) + 1
# (modeling_rope_utils._compute_yarn_parameters): the launch would train other attention logits.
_TITAN_NO_YARN = ("; its RoPE takes scaling='yarn', but its GQAttention applies no YaRN attention factor (0.1 ln(factor) "
                  "+ 1, which transformers multiplies into cos and sin), so no config function builds it")


def titan_arch_misfits(model: ModelSpec, module: str) -> list[tuple[str, object, object]]:
    """(field, the model's value, what `module` builds) for each TITAN_FLAVOR_ARCH field of `module` where `model` is
    otherwise ([] for a model whose architecture is not recorded)."""
    out, arch = [], model.architecture
    for field, built in TITAN_FLAVOR_ARCH[module] if arch is not None else ():
        value = getattr(arch if field.startswith("architecture.") else model, field.rsplit(".", 1)[-1])
        if value != built:
            out.append((field, value, built))
    return out


# TorchTitan 0.3.0's qwen3_5 flavors by (hidden, layers), vocabulary 248320 (torchtitan/models/qwen3_5/__init__.py
# qwen3_5_configs). Its module imports flash-linear-attention (qwen3_5/model.py: `from fla.modules.conv.triton.ops
# import ...`) and builds the vision encoder with the language model (Qwen35Model.Config.vision_encoder, pipeline_vlm):
# commbench emits no launch for it.
QWEN35_FLAVORS = {(1024, 24): "0.8B", (2048, 24): "2B", (2560, 32): "4B", (4096, 32): "9B", (5120, 64): "27B",
                  (2048, 40): "35B-A3B", (3072, 48): "122B-A10B", (4096, 60): "397B-A17B"}


def titan_unemitted(model: ModelSpec) -> str | None:
    """Why commbench emits no TorchTitan 0.3.0 launch for a model TorchTitan does ship a flavor of, or None."""
    flavor = QWEN35_FLAVORS.get((model.hidden, model.num_layers))
    if flavor is None or model.vocab != 248320 or not model.gdn_num_key_heads:
        return None
    return (f"TorchTitan 0.3.0 ships {model.name}'s family as its qwen3_5 model (flavor {flavor}: a vision-language "
            "model built with its vision encoder, whose module imports flash-linear-attention), and commbench emits no "
            "qwen3_5 launch")


# The recipes a generated qwen3 / llama3 model starts from (emit/torchtitan_dense.py: qwen3_14b and, for MoE,
# qwen3_30b_a3b FullAC, llama3_8b SelectiveAC, torchtitan 0.3.0 config_registry.py).
TORCHTITAN_DENSE_RECOMPUTE = {"qwen3": "full", "llama3": "selective"}


def titan_dense_family(model: ModelSpec) -> str | None:
    """The TorchTitan 0.3.0 family (qwen3, llama3) whose layers are this model's (TITAN_FLAVOR_ARCH), for a model no
    flavor is; None otherwise. An MoE model only as qwen3's MoE layers build it (_build_qwen3_moe_layers: every layer
    MoE, no shared experts)."""
    if model.attention != "gqa" or model.architecture is None or model.layer_pattern or \
            model.linear_attention_freq or titan_zoo_name(model):
        return None
    if model.is_moe and (model.num_dense_layers or model.num_shared_experts or not model.expert_ffn):
        return None
    families = ("qwen3",) if model.is_moe else TITAN_DENSE_FAMILIES
    return next((m for m in families if not titan_family_differences(model, m)), None)


def titan_dense_refusal(model: ModelSpec) -> str | None:
    """Why the family's layers cannot build this model at its sizes (emit/torchtitan_dense.py), or None."""
    module = titan_dense_family(model)
    if module is None:
        return None
    arch, why = model.architecture, None
    if arch.rope_scaling != "none":
        why = (f"architecture.rope_scaling={arch.rope_scaling!r}, a generated {module} model builds unscaled RoPE only "
               "(the generated config function sets no RoPE scaling)")
    elif module == "llama3" and model.head_dim != model.hidden // model.num_heads:
        why = f"head_dim={model.head_dim}, its layers build hidden / heads = {model.hidden // model.num_heads}"
    return None if why is None else \
        f"TorchTitan 0.3.0 cannot build {model.name} with its {module} layers (no flavor has its sizes): {why}"


# TorchTitan 0.3.0's MoE layers for a GQA model (torchtitan/models/qwen3/__init__.py _build_qwen3_moe_layers): a
# MoE block on every one of n_layers, routed experts only (no dense layer, no shared expert).
QWEN3_MOE_LAYERS = "(models/qwen3/__init__.py _build_qwen3_moe_layers: every layer MoE, no shared expert)"


def titan_moe_misfits(model: ModelSpec) -> list[str]:
    """What TorchTitan 0.3.0's qwen3 MoE layers build otherwise for a GQA MoE model: the family's architecture fields
    (TITAN_FLAVOR_ARCH), then dense layers (named by the config.json key the reader kept, e.g. mlp_only_layers=[0])
    and shared experts, which its every-layer routed-only MoE blocks do not have."""
    off = titan_family_differences(model, "qwen3")
    if model.num_dense_layers:
        key = model.extra.get("dense_layers_key", f"num_dense_layers={model.num_dense_layers}")
        off.append(f"{key} ({model.num_dense_layers} dense MLP layer(s) before the MoE ones; it builds every layer MoE)")
    if model.num_shared_experts:
        off.append(f"num_shared_experts {model.num_shared_experts} (it builds routed experts only)")
    return off


def titan_nearest_flavor(model: ModelSpec) -> str:
    """For a model no TorchTitan 0.3.0 flavor is: the shipped flavor of its sizes and the architecture fields it builds
    otherwise; or for a dense model, the dense flavor with the fewest differing fields, and them."""
    sized = titan_sized_flavor(model)
    if sized is not None:
        module, flavor = TITAN_ZOO_FLAVORS[sized]
        return (f"; its flavor of the same sizes, {module} {flavor}, builds it otherwise: "
                + ", ".join(titan_family_differences(model, module)))
    if model.attention != "gqa" or model.layer_pattern or model.linear_attention_freq:
        return ""
    if model.is_moe:
        off = titan_moe_misfits(model)
        more = f" and {len(off) - 4} more" if len(off) > 4 else ""
        return f"; its qwen3 MoE layers {QWEN3_MOE_LAYERS} build it otherwise: {', '.join(off[:4])}{more}" if off else ""
    name = min(TITAN_DENSE_FLAVORS, key=lambda n: len(_flavor_differences(model, n)))
    module, flavor, _ = TITAN_DENSE_FLAVORS[name]
    off = _flavor_differences(model, name)
    more = f" and {len(off) - 4} more" if len(off) > 4 else ""
    return f"; its nearest flavor, {module} {flavor}, differs in {', '.join(off[:4])}{more}"


# Layout fields TorchTitan 0.3 fixes, and the value it runs.
# No activation offloading (its training.enable_cpu_offload is FSDP2's parameter/optimizer offload).
_TITAN_FIXED = {"dispatcher": "alltoall", "moe_a2a_overlap": False, "tp_comm_overlap": False,
                "fp8_attention": False, "fused_moe": False, "distributed_optimizer": True, "dp_overlap": True,
                "cpu_offload_layers": 0}


# TorchTitan 0.3.0's routed-expert sharding (models/common/moe_sharding.py): with EP (ep > 1) the experts are split
# over EP only (expert_param_placement_sparse: EP Shard(0), whole experts; ParallelDims' ep borrows dp_shard x cp x
# tp ranks), with ep = 1 and TP over TP (expert_param_placement_dense: w1/w3 Shard(1), w2 Shard(2) on the dense TP
# axis; their input gathered to Replicate over TP and the output reduce-scattered, _routed_experts_sharding_configs).
TITAN_ETP = ("TorchTitan 0.3.0 shards the routed experts over TP when ep = 1 (etp = tp) and over EP alone when ep > 1 "
             "(etp = 1) (models/common/moe_sharding.py)")


# TorchTitan 0.2.2's routed-expert sharding (torchtitan v0.2.2 config/job_config.py:464-472
# expert_tensor_parallel_degree: "No effect ... when ep = 1" (the experts are sharded over TP then), and with ep > 1
# "etp = tp" or "etp = 1"), which its TOML sets (emit/torchtitan.py expert_tensor_parallel_degree).
TITAN_ETP_02 = ("TorchTitan 0.2.2 shards the routed experts over TP when ep = 1 (etp = tp), and with ep > 1 over "
                "expert_tensor_parallel_degree = tp or 1 (config/job_config.py:464-472)")


def titan_etps(tp, ep, torchtitan_version: str = "0.3"):
    """Whether each (tp, ep, etp) is the expert sharding the TorchTitan release runs: a function of etp arrays (0.3.0:
    TITAN_ETP; 0.2.2: TITAN_ETP_02, also etp = tp with ep > 1)."""
    tp, ep = np.asarray(tp), np.asarray(ep)
    if torchtitan_version == "0.2":
        return lambda etp: (np.asarray(etp) == titan_etp(tp, ep)) | ((ep > 1) & (np.asarray(etp) == tp))
    return lambda etp: np.asarray(etp) == titan_etp(tp, ep)


def titan_etp(tp, ep):
    """The ETP TorchTitan 0.3.0 runs (TITAN_ETP): tp where ep = 1, else 1 (arrays or ints)."""
    return np.where(np.asarray(ep) == 1, tp, 1) if np.ndim(tp) or np.ndim(ep) else (int(tp) if int(ep) == 1 else 1)


# gpt_oss builds VarlenAttention (models/gpt_oss/__init__.py: attn_backend "varlen" in both flavors), and its
# parallelize_fn under the default parallelism.spmd_backend "spmd_types" (config/configs.py) calls validate_config
# (models/gpt_oss/parallelize.py), which refuses CP with ScaledDotProductAttention or VarlenAttention
# (distributed/full_dtensor.py: "spmd_types + CP is not supported ... Use FlexAttention + CP or disable CP").
# Only its debug model ships a flex variant (config_registry.py gpt_oss_debugmodel_flex): cp = 1 only.
TITAN_VARLEN_MODULES = ("gpt_oss",)


def titan_module(model: ModelSpec) -> str | None:
    """The TorchTitan 0.3.0 model module a zoo / sized model is built by (TITAN_ZOO_FLAVORS), or None."""
    name = titan_zoo_name(model)
    return TITAN_ZOO_FLAVORS[name][0] if name in TITAN_ZOO_FLAVORS else None


def titan_cp_refusal(model: ModelSpec, cp: int) -> str:
    """Why TorchTitan 0.3.0 cannot run `model` (a TITAN_VARLEN_MODULES model) with context parallelism, one line."""
    return (f"cp={cp} is invalid for {model.name} with --framework torchtitan: TorchTitan 0.3.0's gpt_oss model uses "
            "VarlenAttention, and its parallelize refuses CP with it (distributed/full_dtensor.py validate_config: "
            "'spmd_types + CP is not supported with ScaledDotProductAttention or VarlenAttention'); pin cp=1")


def titan_runs_otherwise(layout, model: ModelSpec) -> list[tuple[str, object, object]]:
    """(field, the layout's value, what TorchTitan 0.3.0 runs) for each _TITAN_FIXED field (and, for MoE, etp:
    titan_etp) the layout (planned for another framework) sets otherwise: what its TorchTitan launch drops."""
    fixed = dict(_TITAN_FIXED, etp=titan_etp(layout.tp, layout.ep)) if model.is_moe else \
        {k: v for k, v in _TITAN_FIXED.items() if k not in ("dispatcher", "moe_a2a_overlap", "fused_moe")}
    return [(k, getattr(layout, k), v) for k, v in fixed.items() if getattr(layout, k) != v]


MEGATRON_NO_FUSED_MLP = (f"fused_moe=true is invalid with --framework megatron: Megatron-LM {MEGATRON_LM_RELEASE} has no "
                         "fused grouped MLP (TransformerConfig.use_transformer_engine_op_fuser for MoE came after it, "
                         "Megatron-LM 6815c0f); Megatron-Bridge's recipes run it from 26.06 on (megatron-core 0.18.0; 26.08: "
                         "0.19.0), which the plans here, written in megatron-core 0.16.1's arguments, do not launch")

# A full-iteration CUDA graph needs static shapes; dropless MoE's per-expert token counts change every step, and
# megatron-core 0.16.1's dispatchers and grouped GEMMs read them on the host (token_dispatcher.py: the all-to-all
# splits .tolist(), HybridEP's num_permuted_tokens = tokens_per_expert.sum(); DeepEP refuses padding). Megatron-Bridge's
# recipes capture it by padding every expert to a fixed capacity with Megatron-Core's paged stashing (MCore PR #4247:
# moe_paged_stash, moe_expert_rank_capacity_factor; Megatron-Bridge scripts/performance/configs/deepseek/
# deepseek_llm_pretrain.py set_full_iter_cg_configs at fcbb603: "Dropless MoE produces variable-shaped per-expert
# tensors that CG cannot capture"), which megatron-core 0.16.1 does not have.
MEGATRON_NO_FULL_GRAPH_MOE = (f"Megatron-LM {MEGATRON_LM_RELEASE} (megatron-core 0.16.1) cannot capture dropless MoE in a "
                              "full-iteration CUDA graph (its per-expert token counts change every step; Megatron-Bridge's "
                              "recipes pad them with Megatron-Core's paged stashing, which came after 0.16.1)")


# Megatron-FSDP runs no CUDA graph in megatron-core 0.16.1, per-layer or full-iteration: Megatron-LM issue #2371
# (2025-12-15, an NVIDIA maintainer: with Megatron-FSDP "CUDA Graphs support is currently broken"); full-iteration
# replay needs DDPConfig.megatron_fsdp_cuda_graph_mode (Megatron-LM PR #4663, merged 2026-05-06: "Fixes code
# (`param.grad = None`) blocking Megatron-FSDP from working with full-iteration CUDA graph replay"), which 0.16.1 has
# not (megatron_fsdp/param_and_grad_buffer.py:2476 still sets param.grad = None); Transformer Engine's per-layer
# capture gets FSDP's forward hooks (Megatron-LM PR #4232, unmerged: "numerical divergence and illegal memory access
# during graph replay"). Megatron-Bridge v0.6.0 turns graphs off in its FSDP recipe (perf_recipes/nemotronh/gb200/
# nemotronh.py:552-557: "Megatron FSDP registers module hooks that Transformer Engine CUDA graph capture rejects"),
# and every fsdp recipe in commbench/data/recipes.json runs cuda_graph none but 26.08's DeepSeek-V3 GB300 one, which
# sets megatron_fsdp_cuda_graph_mode. The search keeps FSDP rows eager, a pin of both is refused, the emitter refuses
# the pair.
MEGATRON_FSDP_NO_GRAPHS = (f"Megatron-FSDP in Megatron-LM {MEGATRON_LM_RELEASE} (megatron-core 0.16.1) runs no CUDA "
                           "graph (Megatron-LM issue #2371: 'CUDA Graphs support is currently broken'; full-iteration "
                           "replay needs DDPConfig.megatron_fsdp_cuda_graph_mode, Megatron-LM PR #4663, after 0.16.1; "
                           "Megatron-Bridge's FSDP recipes run none)")


def megatron_fsdp_graph_refusal(fsdp: object, cuda_graph: object) -> str | None:
    """A CUDA graph (per-layer or full-iteration) with Megatron-FSDP, in one line (MEGATRON_FSDP_NO_GRAPHS); None
    where the layout is not that."""
    if not fsdp or cuda_graph not in ("layer", "full"):
        return None
    return (f"cuda_graph={cuda_graph!r} with fsdp=true is invalid with --framework megatron: {MEGATRON_FSDP_NO_GRAPHS}; "
            "pin cuda_graph=none, or fsdp=false")


def check_framework(framework: str) -> str:
    value = framework.lower()
    if value not in FRAMEWORKS:
        raise CommbenchError(f"--framework={framework!r} is invalid: one of {', '.join(FRAMEWORKS)}")
    return value


def _num(value: float) -> str:
    return f"{value:g}"


# What TorchTitan 0.3.0's DeepSeek-V3 MLA + MoE model builds, where a model could ask for other (field, what it builds,
# where): models/deepseek_v3/__init__.py make_mla_attention_config (bias-free Linear layers, RMSNorm q/kv norms),
# build_mla_moe_layers (make_ffn_config: SwiGLU FeedForward, ungated shared experts), DeepSeekV3Model.Config
# (models/common/decoder.py: untied lm_head unless enable_weight_tying, no sliding window or attention sinks).
_TITAN_MLA_FIXED = (("architecture.activation", "swiglu"), ("architecture.normalization", "RMSNorm"),
                    ("architecture.norm_zero_centered_gamma", False), ("architecture.linear_bias", False),
                    ("architecture.qkv_bias", False), ("architecture.softmax_type", "vanilla"),
                    ("architecture.rotary_percent", 1.0), ("architecture.shared_expert_gate", False),
                    ("architecture.capacity_factor", 0.0), ("sliding_window", 0),
                    ("tied_embeddings", False)) + TITAN_NO_DROPOUT
TITAN_FLAVOR_ARCH["deepseek_v3"] = _TITAN_MLA_FIXED + _DSV3_671B_ARCH


def titan_mla_refusal(model: ModelSpec) -> str | None:
    """Why TorchTitan 0.3.0's deepseek_v3 model cannot build this MLA model exactly (field, value, what it builds), or
    None. Beyond _TITAN_MLA_FIXED: RoPE none or YaRN (models/common/rope.py RoPE.Config.scaling; ComplexRoPE's YaRN
    is a pure rotation, _yarn_inv_freq "mscale is intentionally NOT applied here"), and one mscale, folded into the
    softmax scale as (0.1 mscale ln(rope_factor) + 1)^2 (models/deepseek_v3/model.py Attention.__init__): HF's
    DeepSeek-V2/V3 multiplies that scale by yarn_get_mscale(factor, mscale_all_dim)^2 and cos/sin by
    yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim), so mscale must equal mscale_all_dim;
    a softmax or sigmoid router (models/common/moe.py TokenChoiceTopKRouter.Config.score_func) whose expert groups
    divide the experts into groups of >= 2 (_get_node_limited_routing_scores)."""
    arch = model.architecture
    head = f"TorchTitan 0.3.0's deepseek_v3 model (DeepSeekV3Model.Config) cannot build {model.name} exactly:"
    if arch is None:
        return f"{head} its architecture (RoPE, norms, router) is not recorded; plan it with --framework megatron"
    for name, built in _TITAN_MLA_FIXED:
        value = getattr(arch if name.startswith("architecture.") else model, name.rsplit(".", 1)[-1])
        if value != built:
            return f"{head} {name}={value!r}, it builds {name}={built!r} only; plan it with --framework megatron"
    problems = []
    if arch.rope_scaling not in ("none", "yarn"):
        problems.append(f"architecture.rope_scaling={arch.rope_scaling!r}, it builds none or yarn (ComplexRoPE)")
    elif arch.rope_scaling == "yarn" and arch.yarn_mscale != arch.yarn_mscale_all_dim:
        problems.append(f"architecture.yarn_mscale={arch.yarn_mscale!r} with yarn_mscale_all_dim="
                        f"{arch.yarn_mscale_all_dim!r}, it builds yarn_mscale = yarn_mscale_all_dim only (its RoPE "
                        "applies no mscale; Attention.mscale scales the softmax alone)")
    if model.is_moe and arch.router_score not in ("softmax", "sigmoid"):
        problems.append(f"architecture.router_score={arch.router_score!r}, it builds softmax or sigmoid")
    groups = arch.router_groups
    if model.is_moe and groups and (model.num_routed_experts % groups or model.num_routed_experts // groups < 2):
        problems.append(f"architecture.router_groups={groups!r}, it builds groups that divide the "
                        f"{model.num_routed_experts} experts into groups of >= 2")
    return f"{head} {problems[0]}; plan it with --framework megatron" if problems else None


# Llama 3.1 RoPE scaling's bands as both frameworks build them, whatever the config says: megatron-core 0.16.1
# models/common/embeddings/rotary_pos_embedding.py RotaryEmbedding calls _apply_scaling(inv_freq, factor=...) and
# takes its defaults low_freq_factor=1, high_freq_factor=4, original_max_position_embeddings=8192 (Megatron-LM
# core_v0.16.1 arguments.py: --use-rope-scaling and --rope-scaling-factor only); TorchTitan 0.3.0
# models/common/rope.py RoPE.Config defaults low_freq_factor 1.0, high_freq_factor 4.0,
# original_max_position_embeddings 8192, which no llama3 flavor (models/llama3/__init__.py) sets otherwise.
LLAMA3_ROPE_BUILT = (("low_freq_factor", "llama3_low_freq_factor", 1.0),
                     ("high_freq_factor", "llama3_high_freq_factor", 4.0),
                     ("original_max_position_embeddings", "llama3_original_positions", 8192))
_LLAMA3_ROPE_WHERE = {
    "megatron": f"Megatron-LM {MEGATRON_LM_RELEASE} (megatron-core 0.16.1 RotaryEmbedding._apply_scaling's default; "
                "pretrain_gpt.py sets only --rope-scaling-factor)",
    "torchtitan": "TorchTitan 0.3.0 (models/common/rope.py RoPE.Config's default; no llama3 flavor sets it)"}


def llama3_rope_refusal(model: ModelSpec, framework: str) -> str | None:
    """Why `framework` cannot build this model's Llama 3.1 RoPE scaling (a band other than the one it builds,
    LLAMA3_ROPE_BUILT), or None."""
    arch = model.architecture
    if arch is None or arch.rope_scaling != "llama3":
        return None
    for key, name, built in LLAMA3_ROPE_BUILT:
        value = getattr(arch, name)
        if value != built:
            return (f"{model.name}: rope_scaling.{key}={value:g} is invalid with --framework {framework}: "
                    f"{_LLAMA3_ROPE_WHERE[framework]} builds {built:g}, so its launch would train another model")
    return None


# YaRN RoPE on non-MLA attention (gpt-oss; an hf: GQA model with YaRN rope_scaling) from pretrain_gpt.py's flags: first
# in megatron-core 0.19.0 (release 26.08's Megatron-LM cd4afffa6484): megatron/training/arguments.py has
# --position-embedding-type yarn, --yarn-original-max-position-embeddings, --yarn-beta-fast / --yarn-beta-slow and
# --[no-]yarn-correction-range-round-to-int beside --rotary-scaling-factor / --mscale / --mscale-all-dim, and
# argument_utils.core_transformer_config_from_args sets them on the config (_apply_yarn_config_from_args: the yarn_*
# attributes GPTModel's yarn branch reads with getattr and no default, models/gpt/gpt_model.py). core_v0.16.1 and 0.17's
# --position-embedding-type offer no 'yarn'; 0.18.0 / 0.18.2's (releases 26.06, 26.06.01) offer it, but nothing on
# their pretrain_gpt.py path sets config.yarn_* (only ModelOpt's --enable-gpt-oss builder, with a 131072-token original
# context), so GPTModel raises AttributeError on getattr(config, "yarn_rotary_scaling_factor").
MEGATRON_NON_MLA_YARN_CORE = (0, 19, 0)


# Linear RoPE interpolation (an hf: config's rope_scaling type 'linear') from pretrain_gpt.py's flags: every table
# release's parse_args has --rotary-seq-len-interpolation-factor (type=int; hf_core_rules.CORE_RULES
# "rotary_interpolation"), and megatron-core's RotaryEmbedding divides the positions by it, but pretrain_gpt.py passes
# it to GPTModel only from megatron-core 0.19.0 (release 26.08's Megatron-LM cd4afffa6484: pretrain_gpt.py:521
# gpt_config_from_args, argument_utils.py:466 kwargs["seq_len_interpolation_factor"], training/models/gpt.py:321
# GPTModel(seq_len_interpolation_factor=...)). Before it pretrain_gpt.py's GPTModel(...) call (its own at 25.09,
# gpt_builders.py's from 25.11 to 26.06.01) passes none (only the legacy model and, from 0.18.0, the hybrid model
# read the flag): the flag parses and the launch trains unscaled RoPE.
MEGATRON_LINEAR_ROPE_CORE = (0, 19, 0)


# Megatron-FSDP with expert parallelism: first in megatron-core 0.16 (release 25.11's Megatron-LM 0d8e0714cd29,
# mcore_fsdp_adapter.py:217-264 builds the expert-DP mesh from get_expert_data_parallel_group). megatron-core 0.14
# (release 25.09: core_v0.14.0, and 0.15.0 alike) has none: MegatronFSDP.__init__ (fsdp/src/megatron_fsdp/
# megatron_fsdp.py:229-241) calls self.dist_index.get_expert_dp_group() once any parameter has allreduce=False, which
# FSDPDistributedIndex (megatron_fsdp/utils.py) does not define (its get_dp_group / get_fsdp_group return None for
# expert parameters: "Expert parallel is not supported"), so the launch fails with AttributeError. Expert parameters
# are allreduce=False only at EP > 1 (extensions/transformer_engine.py:319 and :1063 expert_parallel =
# expert_model_parallel_size > 1, :371 / :1102), so a MoE model at EP 1 runs: its experts shard as dense parameters.
MEGATRON_FSDP_EXPERT_PARALLEL_CORE = (0, 16, 0)


def megatron_fsdp_runs_expert_parallel(framework: str, release: str | None) -> bool:
    """Whether `release`'s Megatron-LM runs Megatron-FSDP at EP > 1 (MEGATRON_FSDP_EXPERT_PARALLEL_CORE; no release:
    the target core_v0.16.1, which does). TorchTitan's FSDP2 folds EP into its expert mesh in every version."""
    return framework != "megatron" or release_core_at_least(release, MEGATRON_FSDP_EXPERT_PARALLEL_CORE)


def megatron_builds_non_mla_yarn(release: str | None) -> bool:
    """Whether `release`'s pretrain_gpt.py builds YaRN RoPE on non-MLA attention from its flags
    (MEGATRON_NON_MLA_YARN_CORE); no release: the target core_v0.16.1, which does not."""
    return release_core_at_least(release, MEGATRON_NON_MLA_YARN_CORE)


# The architecture features of a non-MLA YaRN model besides the YaRN, each with the Megatron-LM flag that builds it (the
# emitter writes these: emit/megatron_arch.py _activation / _attention; tests/test_gpt_oss_megatron_releases.py checks
# they agree): a release whose parse_args lacks one (commbench/data/megatron-release-flags.json: 25.09's core 0.14 lacks
# them all) cannot build the model.
NON_MLA_YARN_FEATURE_FLAGS = (
    ("its quick-GELU GLU", lambda arch: arch.activation == "quick_geglu", "--quick-geglu"),
    ("its GLU linear offset", lambda arch: bool(arch.glu_linear_offset), "--glu-linear-offset"),
    ("its GLU input clamp", lambda arch: bool(arch.activation_clamp), "--activation-func-clamp-value"),
    ("its sliding window", lambda arch: bool(arch.sliding_window), "--window-size"),
    ("its window pattern", lambda arch: bool(arch.window_skip_freq), "--window-attn-skip-freq"),
    ("its attention sinks", lambda arch: arch.softmax_type != "vanilla", "--softmax-type"))


# MTP beside YaRN on non-MLA attention: every table release's validate_args asserts position_embedding_type rope or
# none with --mtp-num-layers (megatron/training/arguments.py: core_v0.14.0 :1095, 25.11's 0d8e0714 :1221, core_v0.16.1
# :1231, 26.02's d7288711 :731, 26.06's d0b3b775 :873, 26.08's cd4afffa :857, which also has a second such assertion at
# :1846 taking learned_absolute, rope, mrope or none), so pretrain_gpt.py builds the YaRN (megatron-core 0.19.0) or the
# MTP head, never both. MLA's YaRN is --position-embedding-type rope with --rope-type yarn (emit/megatron_arch.py
# _position), which both assertions take.
MTP_YARN_ASSERTION = "Multi-Token Prediction (MTP) is not supported with yarn position embedding type"


def _mtp_with_yarn(model: ModelSpec) -> str:
    """Why no release's pretrain_gpt.py builds `model`'s MTP head beside its YaRN (MTP_YARN_ASSERTION), naming the
    config keys that ask for the two (hf_config._named_mtp_rope) and the way out."""
    mtp = model.extra.get("mtp_layers_key") or f"num_mtp_layers={model.num_mtp_layers}"
    rope = model.extra.get("rope_kind_key") or "rope_scaling='yarn'"
    without = mtp.split("=")[0]
    return (f"its MTP head ({mtp}) with its YaRN RoPE ({rope}) on non-MLA attention: validate_args refuses "
            f"--mtp-num-layers with --position-embedding-type yarn ('{MTP_YARN_ASSERTION}', megatron/training/"
            f"arguments.py), in every release; {without} 0 trains the model without the MTP head")


def _non_mla_yarn_missing(model: ModelSpec, release: str | None) -> list[str]:
    """What `release`'s pretrain_gpt.py lacks to build this non-MLA YaRN model: the YaRN itself (see
    MEGATRON_NON_MLA_YARN_CORE) and each other feature whose flag its parse_args lacks (NON_MLA_YARN_FEATURE_FLAGS)."""
    from commbench.planner.layout.release_flags import lacking
    arch = model.architecture
    _, version = megatron_release_name(release)
    key = core_key(version)
    missing = []
    if key < MEGATRON_NON_MLA_YARN_CORE:
        yarn = f"its YaRN RoPE (x{_num(arch.rope_scaling_factor)} over {arch.rope_original_max_positions} tokens) on non-MLA attention"
        if key >= (0, 18, 0):
            missing.append(f"{yarn}: --position-embedding-type yarn parses, but nothing on the pretrain_gpt.py path sets "
                           "the config's yarn_* attributes GPTModel's yarn branch reads (no --yarn-* flags; "
                           "core_transformer_config_from_args sets them from megatron-core 0.19.0), so GPTModel raises "
                           "AttributeError")
        else:
            missing.append(f"{yarn}: no pretrain_gpt.py flag (--position-embedding-type offers no 'yarn'; ModelOpt's "
                           "--enable-gpt-oss sets a 131072-token original context)")
    if model.num_mtp_layers:
        missing.append(_mtp_with_yarn(model))
    lacks = lacking(release) if release is not None else set()
    absent = [f"{what} ({flag})" for what, has, flag in NON_MLA_YARN_FEATURE_FLAGS if has(arch) and flag in lacks]
    if absent:
        missing.append(f"its parse_args has no flag for {', '.join(absent)} (commbench/data/megatron-release-flags.json)")
    return missing


def megatron_unbuildable(model: ModelSpec, point: bool = True, release: str | None = None) -> str | None:
    """Why the Megatron-LM of `release` (the plan's recipe-table release; None: the target core_v0.16.1 the arguments
    are checked against) cannot build this model with pretrain_gpt.py, or None: YaRN RoPE on non-MLA attention
    (gpt-oss) before megatron-core 0.19.0 (MEGATRON_NON_MLA_YARN_CORE), or any other architecture flag of such a model
    the release's parse_args refuses (_non_mla_yarn_missing), naming the release's Megatron-LM and megatron-core. With
    `point`, the YaRN refusal says where else to plan it: a release that builds it, and TorchTitan where it builds the
    model (gpt-oss), else that it does not either (Qwen3 / GLM with YaRN; each refusal pointed at the other
    framework)."""
    arch = model.architecture
    name, _ = megatron_release_name(release)
    if arch is not None and arch.position_embedding == "yarn" and model.attention != "mla":
        missing = _non_mla_yarn_missing(model, release)
        if missing:
            why = f"{name} cannot build {model.name}: {'; and '.join(missing)}"
            return f"{why}; {_yarn_pointer(model, release)}" if point else why
        return None
    if arch is not None and arch.rope_scaling == "linear" and not release_core_at_least(release,
                                                                                     MEGATRON_LINEAR_ROPE_CORE):
        return (f"{name} cannot build {model.name}: its linear RoPE interpolation (x{int(arch.rope_scaling_factor)}): "
                "parse_args takes --rotary-seq-len-interpolation-factor, but the GPTModel its pretrain_gpt.py builds "
                "(gpt_builders.py from 25.11) gets no seq_len_interpolation_factor, so the launch would train "
                "unscaled RoPE; megatron-core 0.19.0 (--software 26.08) builds it")
    if model.is_hybrid and "M" in (model.layer_pattern or "") and model.mamba_conv_kernel != MCORE_MAMBA_CONV_KERNEL:
        return (f"{name} cannot build {model.name}: its Mamba convolution kernel is "
                f"{model.mamba_conv_kernel} wide, and megatron-core's MambaMixer builds {MCORE_MAMBA_CONV_KERNEL} "
                "(ssm/mamba_mixer.py d_conv=4; no TransformerConfig field or flag sets it)")
    return llama3_rope_refusal(model, "megatron")


# megatron-core 0.16.1 ssm/mamba_mixer.py MambaMixer.__init__(d_conv=4, conv_bias=True, bias=False): the hybrid
# stack builds it with no other values (mamba_layer passes only config and d_model), so no config reaches them
MCORE_MAMBA_CONV_KERNEL = 4


def _megatron_pointer(model: ModelSpec, release: str | None = None) -> str:
    """The end of a TorchTitan refusal: plan it with Megatron-LM, unless `release`'s Megatron-LM cannot build it
    either."""
    if model.attention == "dsv4" or _bridge_only(model, release):   # megatron_cannot_launch, without its pointers
        return "--framework megatron predicts it, though Megatron-LM cannot launch it either"
    why = megatron_unbuildable(model, point=False, release=release)
    if why:
        name, _ = megatron_release_name(release)
        return f"{name} cannot build it either ({why.split(': ', 1)[-1]})"
    return "plan it with --framework megatron"


def _titan_pointer(model: ModelSpec, release: str | None = None) -> str:
    """The end of a Megatron-LM refusal: plan it with TorchTitan where TorchTitan 0.3.0 builds it, else its reason."""
    try:
        framework_pins("torchtitan", model, {}, release=release)
    except CommbenchError as exc:
        why = str(exc)
        for end in (f"; {_megatron_pointer(model, release)}", f": {_megatron_pointer(model, release)}"):
            why = why[:-len(end)] if why.endswith(end) else why
        return f"TorchTitan 0.3.0 cannot build it either ({why})"
    return "plan it with --framework torchtitan"


def _yarn_pointer(model: ModelSpec, release: str | None) -> str:
    """Where else a non-MLA YaRN model `release`'s pretrain_gpt.py cannot build is planned: a release whose
    Megatron-LM builds it, and TorchTitan where it builds the model, else that it does not either."""
    from commbench.planner.layout.recipes import releases
    building = [r for r in releases() if not _non_mla_yarn_missing(model, r)]
    where = (f"plan it with --software {' or '.join(building)} (megatron-core "
             f"{'.'.join(map(str, MEGATRON_NON_MLA_YARN_CORE))} builds it)" if building else "")
    return f"{where + ', or ' if where else ''}{_titan_pointer(model, release)}"


# Megatron-Bridge's GPT-OSS model at each recipe-table release (recipes.json: the release's Megatron-Bridge commit),
# as (file, line, what starts there): the Python that builds gpt-oss on Megatron-Core's GPTModel by setting the
# TransformerConfig's yarn_* (x32 over 4096, betas 32 / 1, no rounding), softmax_type 'learnable', window_size with
# window_attn_skip_freq 2 and the clamped quick-GELU GLU (glu_linear_offset 1, activation_func_clamp_value 7) directly,
# not through pretrain_gpt.py's flags. Each release's performance recipe (recipes/gpt_oss/gpt_oss.py
# gpt_oss_120b_pretrain_config) builds it through AutoBridge.from_hf_pretrained, i.e. GPTOSSBridge.provider_bridge
# (models/gpt_oss/gpt_oss_bridge.py), which up to v0.3.0 returns the GPTOSSProvider dataclass whose defaults set them
# (gpt_oss_provider.py) and from v0.3.1 sets them itself. 25.09's Megatron-Bridge v0.1.0rc3 has no models/gpt_oss.
# tests/test_gpt_oss_predicted_without_launch.py reads each at its commit (MEGATRON_BRIDGE_GIT).
_PROVIDER = ("src/megatron/bridge/models/gpt_oss/gpt_oss_provider.py", 39, "GPTOSSProvider")
BRIDGE_GPT_OSS_BUILDER = {
    "25.11": _PROVIDER, "26.02": _PROVIDER,
    "26.02.01": ("src/megatron/bridge/models/gpt_oss/gpt_oss_bridge.py", 63, "GPTOSSBridge.provider_bridge"),
    **{r: ("src/megatron/bridge/models/gpt_oss/gpt_oss_bridge.py", 56, "GPTOSSBridge.provider_bridge")
       for r in ("26.04", "26.04.01", "26.06", "26.06.01", "26.08")},
}
# What that Python sets besides the sizes (which it reads from the Hugging Face config), as Architecture fields: a model
# that differs in one of them is not the model Megatron-Bridge builds, so a release it is needed at refuses it.
BRIDGE_GPT_OSS_ARCH = {"activation": "quick_geglu", "glu_linear_offset": 1.0, "activation_clamp": 7.0,
                       "normalization": "RMSNorm", "linear_bias": True, "qkv_bias": False, "position_embedding": "yarn",
                       "rope_scaling_factor": 32.0, "rope_original_max_positions": 4096, "yarn_beta_fast": 32.0,
                       "yarn_beta_slow": 1.0, "yarn_truncate": False, "softmax_type": "learnable",
                       "sliding_window": 128, "window_skip_freq": 2}


def bridge_builds_gpt_oss(model: ModelSpec, release: str | None) -> tuple[str, str, int, str] | None:
    """(Megatron-Bridge version and commit, file, line, what) of the Python that builds `model` at `release`
    (BRIDGE_GPT_OSS_BUILDER), where `model` is gpt-oss's architecture (BRIDGE_GPT_OSS_ARCH: a non-MLA MoE with
    untied embeddings) and that release's Megatron-Bridge has a GPT-OSS model; else None."""
    arch = model.architecture
    if release not in BRIDGE_GPT_OSS_BUILDER or arch is None or model.attention == "mla" or not model.is_moe \
            or model.tied_embeddings or any(getattr(arch, k) != v for k, v in BRIDGE_GPT_OSS_ARCH.items()):
        return None
    from commbench.planner.layout.recipes import recipes_json_releases
    entry = recipes_json_releases()[release]
    return (f"{entry['megatron_bridge']} ({entry['commit'][:12]})", *BRIDGE_GPT_OSS_BUILDER[release])


def megatron_cannot_launch(model: ModelSpec, release: str | None = None) -> str | None:
    """Why the Megatron-LM of `release` (None: the target core_v0.16.1) cannot launch a model the step model still
    predicts (the plan says so in place of the launch, one line), or None: DeepSeek-V4's hybrid attention and
    hyper-connections are Megatron-Core development code; gpt-oss at a release whose pretrain_gpt.py cannot build it
    (megatron_unbuildable) but whose Megatron-Bridge builds it in Python (bridge_builds_gpt_oss), as NVIDIA's published
    runs at that release trained it."""
    if model.attention == "dsv4":
        return (f"Megatron-LM {MEGATRON_LM_RELEASE} cannot build {model.name}: its hybrid compressed attention "
                "(Megatron-Core experimental_attention_variant dsv4_hybrid) and hyper-connections are not in that "
                "release (Megatron-Bridge 0.6.0 trains it on a Megatron-Core development build); the prediction "
                "models them")
    if not _bridge_only(model, release):
        return None
    version, path, line, symbol = bridge_builds_gpt_oss(model, release)
    name, _ = megatron_release_name(release)
    missing = "; and ".join(_non_mla_yarn_missing(model, release))   # megatron_unbuildable's reasons
    return (f"{name} cannot launch {model.name}, so no Megatron-LM launch is emitted: its pretrain_gpt.py cannot "
            f"build it ({missing}); the prediction stands for the model as release {release}'s Megatron-Bridge "
            f"{version} builds and trains it, in Python, setting the YaRN, attention sinks, window and clamped GLU on "
            f"the TransformerConfig itself ({path}:{line} {symbol}); for a launch, {_yarn_pointer(model, release)}")


def _bridge_only(model: ModelSpec, release: str | None) -> bool:
    """Whether `release`'s pretrain_gpt.py cannot build `model` and its Megatron-Bridge does (megatron_cannot_launch's
    gpt-oss case), with no pointer text (the pointers ask TorchTitan, whose refusals ask this)."""
    return bridge_builds_gpt_oss(model, release) is not None and bool(
        megatron_unbuildable(model, point=False, release=release))


def megatron_refusal(model: ModelSpec, release: str | None = None) -> str | None:
    """Why --framework megatron cannot plan `model` at `release` at all (one line), or None: a model `release`'s
    Megatron-LM cannot build (megatron_unbuildable) and nothing at that release builds, as opposed to one it cannot
    launch and the step model still predicts (megatron_cannot_launch)."""
    return None if _bridge_only(model, release) else megatron_unbuildable(model, release=release)


def titan_own_positions(model: ModelSpec) -> int | None:
    """An hf: model's max_position_embeddings where it is longer than the RoPE of the TorchTitan 0.3.0 flavor it is
    matched to (Qwen3-30B-A3B-Instruct-2507: 262144, the flavor 40960), else None. Decoder.Config.update_from_config
    checks training.seq_len against the first attention layer's rope.max_seq_len only (models/common/decoder.py) and
    then sets every layer's to seq_len; the RoPE config's max_seq_len is the length of its precomputed cache
    (models/common/rope.py _precompute_cache), so the plan's config function sets the model's own length
    (emit/torchtitan.py positions_lines)."""
    name = titan_zoo_name(model)
    flavor = TORCHTITAN_MAX_SEQ_LEN.get(name) if name else None
    own = model.architecture.max_position_embeddings if model.architecture is not None else 0
    return own if flavor is not None and model.name.startswith("hf:") and own > flavor else None


def titan_seq_len_limit(model: ModelSpec) -> int | None:
    """The longest sequence TorchTitan 0.3.0's model for `model` trains (TORCHTITAN_MAX_SEQ_LEN, or an hf: model's
    own longer max_position_embeddings: titan_own_positions), or None: no limit."""
    name = titan_zoo_name(model)
    return (titan_own_positions(model) or TORCHTITAN_MAX_SEQ_LEN.get(name)) if name else None


def check_seq_len_runs(framework: str, model: ModelSpec, seq_len: int, release: str | None = None,
                       torchtitan_version: str = "0.3") -> None:
    """TorchTitan 0.3.0 refuses a training.seq_len beyond its flavor's RoPE max_seq_len (DeepSeek-V3 671B: 16384).
    TorchTitan 0.2.2 takes any: each model's update_from_config warns "Sequence length ... exceeds original maximum"
    and sets max_seq_len = seq_len (torchtitan v0.2.2 models/llama3/model/args.py:49-55, qwen3/model/args.py:50-56,
    deepseek_v3/model/args.py:87-93, gpt_oss/model/args.py:75-81), so a 0.2 plan has no such limit."""
    limit = titan_seq_len_limit(model) if framework == "torchtitan" and torchtitan_version == "0.3" else None
    if limit is not None and seq_len > limit:
        raise CommbenchError(f"--seq-len={seq_len} is invalid with --framework torchtitan: {titan_limit_why(model)} and "
                             f"TorchTitan 0.3.0 refuses a longer training.seq_len; plan with --seq-len <= {limit}, "
                             "with --torchtitan-version 0.2 (TorchTitan 0.2.2 sets its RoPE to training.seq_len)"
                             + ("" if megatron_unbuildable(model, release=release) else ", or with --framework megatron"))


def titan_limit_why(model: ModelSpec) -> str:
    """What bounds the sequence of `model`'s TorchTitan 0.3.0 launch, naming the model asked for."""
    name = titan_zoo_name(model)
    module, flavor = TITAN_ZOO_FLAVORS.get(name) or TITAN_DENSE_FLAVORS[name][:2]
    limit, own = TORCHTITAN_MAX_SEQ_LEN[name], titan_own_positions(model)
    if own:
        return (f"{model.name} is TorchTitan 0.3.0's {module} {flavor} with its config.json's max_position_embeddings="
                f"{own}, the RoPE length the plan's config function sets (the flavor's is {limit})")
    if model.name.startswith("hf:"):
        own = model.architecture.max_position_embeddings if model.architecture is not None else None
        return (f"{model.name} is TorchTitan 0.3.0's {module} {flavor}, whose RoPE is precomputed for at most {limit} "
                f"tokens (config.json's max_position_embeddings={own} is no longer)")
    return f"TorchTitan 0.3.0's {name} model precomputes RoPE for at most {limit} tokens"



def check_window_seq_len(model: ModelSpec, seq_len: int) -> None:
    """A window on every layer (an hf: Mistral / Mixtral config's sliding_window; hf_config._every_layer_window) is
    planned as full attention, which it is over at most `window` tokens; over more it masks, and the step model
    prices no window on every layer (models/counts.py: alternate layers only): refused in one line."""
    window = model.extra.get("every_layer_window")
    if window and seq_len > window:
        raise CommbenchError(
            f"--model {model.name}: {model.extra['every_layer_window_key']} (a window on every layer) is not modelled "
            f"at seq_len {seq_len}: the step model prices full attention and windows on alternate layers only; plan "
            f"with --seq-len <= {window}, where a {window}-token window masks nothing (full attention)")


def check_precision_runs(framework: str, model: ModelSpec, precision: str, release: str | None = None,
                         torchtitan_version: str = "0.3") -> None:
    """TorchTitan 0.3.0 has no NVFP4 grouped-experts converter (components/quantization/nvfp4.py converts
    Linear layers only): an MoE model cannot train in NVFP4 there; nor in MXFP8 where its expert GEMMs' K is not a
    multiple of 128 (layout/precision.py mxfp8_experts_refusal: gpt-oss)."""
    if framework == "torchtitan" and precision == "mxfp8":
        from commbench.planner.layout.precision import mxfp8_experts_refusal
        reason = mxfp8_experts_refusal(model, torchtitan_version)
        if reason:
            raise CommbenchError(f"--precision mxfp8 is invalid for {model.name} with "
                                 f"--framework torchtitan: {reason}; "
                                 "plan it with --precision fp8 or bf16")
    if framework == "torchtitan" and precision == "nvfp4" and model.is_moe:
        # only the advice that leads somewhere: Megatron-LM before megatron-core 0.19.0 cannot build gpt-oss, and TorchTitan
        # cannot train gpt-oss's experts in mxfp8. NVFP4 runs only on Blackwell, which runs every precision
        # (hardware.toml): the one advised is TorchTitan's default for the model there (default_precision: fp8 for
        # gpt-oss, mxfp8 otherwise).
        from types import SimpleNamespace

        from commbench.planner.layout.precision import default_precision
        from commbench.planner.layout.spec import PRECISIONS
        advised, _ = default_precision(SimpleNamespace(precisions=PRECISIONS), model=model, framework=framework)
        raise CommbenchError(f"TorchTitan 0.3.0 has no NVFP4 grouped-experts converter: {model.name}'s experts cannot "
                             f"train in nvfp4 (plan it in {advised}" + ("" if megatron_unbuildable(model, release=release) else
                                                                          ", or with --framework megatron") + ")")


def check_precision_tp(framework: str, model: ModelSpec, precision: str, pins: dict[str, object]) -> None:
    """A pinned tp (and, for MoE, etp as the framework runs it) whose per-rank GEMM sizes the precision's kernels
    refuse (layout/quant_dims.py), in one line; the search never proposes one (candidates.py)."""
    from commbench.planner.layout.quant_dims import quant_misfits_sharded, quant_tp_refusal
    if "tp" not in pins or (model.is_moe and "etp" not in pins):
        return
    tp, etp = int(pins["tp"]), int(pins.get("etp") or 1)
    reason = quant_tp_refusal(model, framework, precision, tp, etp)
    if reason:
        sizes = "tp / etp" if model.is_moe else "tp"
        if quant_misfits_sharded(model, framework, precision, tp, etp):
            raise CommbenchError(f"{reason}; pick a {sizes} that leaves multiples, or another --precision")
        # the hidden size is not split by tp: no tp mends it
        raise CommbenchError(f"{reason}, whatever the tp (the hidden size is not split by tp); use --precision bf16 "
                             "or another --precision")


def megatron_light_recompute_refusal(model: ModelSpec, recompute: object) -> str | None:
    """A light-module recompute the model has no module for: megatron-core 0.16.1's TransformerConfig refuses
    --recompute-modules mla_up_proj without multi_latent_attention and moe_act without MoE (moe_grouped_gemm);
    the search proposes each only where it applies (candidates.py), a pin of it elsewhere is refused here."""
    if recompute == "mla_up_proj" and model.attention not in ("mla", "dsv4"):
        return (f"recompute='mla_up_proj' is invalid for {model.name}: it recomputes MLA's up-projections and the "
                f"model has {model.attention} attention (megatron-core's TransformerConfig refuses mla_up_proj without "
                "multi_latent_attention); one of none, selective, full" + (", moe_act" if model.is_moe else ""))
    if recompute == "moe_act" and not model.is_moe:
        return (f"recompute='moe_act' is invalid for {model.name}: it recomputes the experts' activation and the "
                "model has no MoE layers (megatron-core's TransformerConfig refuses moe_act without moe_grouped_gemm); "
                "one of none, selective, full" + (", mla_up_proj" if model.attention in ("mla", "dsv4") else ""))
    return None


# A per-layer graph over a MoE layer's dispatch and experts: the 'moe' scope, or the whole layer (an empty
# --cuda-graph-scope: cuda_graphs.py _layer_is_graphable graphs every layer, MoE layers included). Megatron-Core captures
# them only for drop-and-pad MoE: without --moe-expert-capacity-factor and --moe-pad-expert-input-to-capacity "the
# resulting dynamic shapes make MoE layers uncapturable ... you can still leverage CUDA Graphs for the attention
# layers" (Megatron-LM core_v0.16.1 megatron/core/transformer/moe/README.md:509; NVIDIA/Megatron-LM#1598: the
# dispatcher's tensor.cpu() breaks capture). TransformerConfig refuses the explicit 'moe' scope ("moe cuda graph is only
# supported with drop-padding MoE", transformer_config.py:1763-1770) and lets the whole layer through to fail at
# capture. No plan emits --moe-pad-expert-input-to-capacity, so every MoE model's layers are uncapturable: one rule
# for both scopes, as the full-iteration graph's (MEGATRON_NO_FULL_GRAPH_MOE).
MEGATRON_UNCAPTURABLE_MOE = ("the model's MoE is dropless (no plan pads experts to capacity), whose per-expert token "
                             "counts change every step (Megatron-Core's MoE README: 'the resulting dynamic shapes make "
                             "MoE layers uncapturable'); moe_router (+moe_preprocess) captures its router")


def megatron_graph_scope_refusal(model: ModelSpec, scope: object) -> str | None:
    """A per-layer CUDA-graph scope megatron-core 0.16.1 refuses or cannot capture for this model: its
    TransformerConfig (__post_init__, "Check cuda graph scopes") refuses moe with moe_router; moe_preprocess without
    moe_router; moe or moe_router in a model without MoE ("moe cuda graph is only supported for MoE"); mlp where every
    layer is MoE (moe_layer_freq 1, as the emitter writes it for those and for hybrid models: "mlp cuda graph is only
    supported for dense layers"); and a graph over the MoE block, the moe scope or the whole layer, on a MoE model
    (MEGATRON_UNCAPTURABLE_MOE: TransformerConfig refuses moe, the whole layer fails at capture). The search never
    proposes a scope (it takes the recipes' default_scope); a pin of one of these is refused here, and by the emitter,
    in one line, naming only scopes that are not refused."""
    from commbench.planner.layout.graph_scope import BIT, MODULES, WHOLE_LAYER, WHOLE_LAYER_NAME, scope_mask, scope_text
    mask = scope_mask(str(scope or ""))
    if not mask or (mask & WHOLE_LAYER and not model.is_moe):
        return None
    every_layer_moe = model.is_moe and (model.is_hybrid or model.num_dense_layers == 0)
    refuses = "refuses it"
    if mask & WHOLE_LAYER:
        why = f"the whole layer captures each MoE layer's dispatch and experts, as moe does, and {MEGATRON_UNCAPTURABLE_MOE}"
        refuses = "cannot capture it (its TransformerConfig lets the empty --cuda-graph-scope through)"
    elif mask & BIT["moe"] and mask & BIT["moe_router"]:
        why = "moe and moe_router capture the same MoE block (TransformerConfig: 'must not contain both')"
    elif mask & BIT["moe_preprocess"] and not mask & BIT["moe_router"]:
        why = "moe_preprocess is captured only with moe_router"
    elif not model.is_moe and mask & (BIT["moe"] | BIT["moe_router"] | BIT["moe_preprocess"]):
        why = "the model has no MoE layers (TransformerConfig: 'moe cuda graph is only supported for MoE')"
    elif every_layer_moe and mask & BIT["mlp"]:
        why = "every layer of the model is MoE, with no dense MLP to capture (TransformerConfig: 'mlp cuda graph is " \
              "only supported for dense layers')"
    elif mask & BIT["moe"]:
        why = f"moe captures the MoE block (TransformerConfig: 'moe cuda graph is only supported with drop-padding " \
              f"MoE'), and {MEGATRON_UNCAPTURABLE_MOE}"
    else:
        return None
    allowed = [m for m in MODULES if not (
        (not model.is_moe and m.startswith("moe")) or m == "moe" or (m == "mlp" and every_layer_moe))]
    whole = "" if model.is_moe else f"'{WHOLE_LAYER_NAME}' or "   # a MoE model's whole layer is refused above
    return (f"cuda_graph_scope={scope_text(mask)!r} is invalid for {model.name}: {why}; megatron-core "
            f"{MEGATRON_LM_RELEASE.removeprefix('core_v')} {refuses}. Use '' (the recipes' scope), "
            f"{whole}modules from {', '.join(allowed)}"
            + (" (moe_preprocess only with moe_router)" if model.is_moe else ""))


def megatron_runs_on_hybrid(framework: str, model: ModelSpec) -> dict[str, bool]:
    """What the framework runs for this model that it does not for every model: {'moe_a2a_overlap': ...,
    'full_recompute': ..., 'cpu_offload': ...}; all False for a hybrid (MambaModel) model under Megatron-LM
    core_v0.16.1 (megatron_hybrid_refusal refuses a pin of each)."""
    hybrid = framework == "megatron" and model.is_hybrid
    return {"moe_a2a_overlap": not hybrid, "full_recompute": not hybrid, "cpu_offload": not hybrid}


def megatron_hybrid_refusal(model: ModelSpec, pins: dict[str, object]) -> str | None:
    """A pin Megatron-LM core_v0.16.1 cannot run on a hybrid (MambaModel) model, in one line; None otherwise: the
    first of megatron_hybrid_unrun's, failing or ignored alike (a launch of an ignored flag is not what it says)."""
    unrun = megatron_hybrid_unrun(model, {**pins, "ep": 2})   # a pin of the overlap is refused at any ep
    if not unrun:
        return None
    first = unrun[0]
    instead = {"moe_a2a_overlap=True": "pin moe_a2a_overlap=false or leave it out",
               "cpu_offload": "pin cpu_offload_layers=0 or leave it out"}
    advice = instead.get(first.what) or (instead["cpu_offload"] if first.what.startswith("cpu_offload") else
                                         "pin recompute none or selective" + (", moe_act" if model.is_moe else ""))
    return f"{first.what} is invalid for {model.name} with --framework megatron: {first.why}; {advice}"


# Why TorchTitan runs no recompute_layers (its activation checkpointing has no count per model chunk)
TITAN_NO_RECOMPUTE_LAYERS = ("checkpoints activations per layer with no count per model chunk (Megatron's "
                             "--recompute-method block)")


def _graphed_attention_recompute(model: ModelSpec, cuda_graph: np.ndarray, recompute: np.ndarray,
                                 scope: np.ndarray) -> np.ndarray:
    """Per layout, whether selective recompute (--recompute-modules core_attn ...) runs inside a CUDA graph over
    attention: the full-iteration graph, or a per-layer graph whose scope (0: default_scope's) holds attn or is the
    whole layer."""
    from commbench.planner.layout.graph_scope import BIT, WHOLE_LAYER, resolved_masks
    graphs = CODE_FIELDS["cuda_graph"]
    attn = (resolved_masks(model, scope) & (BIT["attn"] | WHOLE_LAYER)) != 0
    graphed = (cuda_graph == graphs.index("full")) | ((cuda_graph == graphs.index("layer")) & attn)
    from commbench.planner.layout.recompute import codes_running
    return graphed & np.isin(recompute, codes_running(model, "core_attn"))


def megatron_dropout_graph_refusal(model: ModelSpec, cuda_graph: object, recompute: object,
                                   scope: object) -> str | None:
    """Attention dropout with core_attn recomputed inside a CUDA graph over attention: megatron-core 0.16.1's
    TransformerConfig.__post_init__ refuses it ("Graphed recompute module doesn't accept random number": "attention
    dropout is not supported with graphed attention recomputation"). Hidden dropout is refused there only with mlp or
    moe recomputed, which no plan emits. None where the layout is not that."""
    from commbench.planner.layout.graph_scope import scope_mask
    arch = model.architecture
    if arch is None or not arch.attention_dropout or cuda_graph not in CODE_FIELDS["cuda_graph"] \
            or recompute not in CODE_FIELDS["recompute"]:
        return None
    row = _graphed_attention_recompute(
        model, np.array([CODE_FIELDS["cuda_graph"].index(cuda_graph)]),
        np.array([CODE_FIELDS["recompute"].index(recompute)]), np.array([scope_mask(str(scope or ""))]))
    if not row[0]:
        return None
    return (f"cuda_graph={cuda_graph!r} with recompute={recompute!r} is invalid for {model.name}: its attention "
            f"dropout {arch.attention_dropout:g} with core_attn recomputed inside a CUDA graph over attention is "
            "refused by megatron-core 0.16.1 (TransformerConfig: 'attention dropout is not supported with graphed "
            "attention recomputation'); pin cuda_graph=none or recompute=none")


def _version_flag(torchtitan_version: str) -> str:
    return " --torchtitan-version 0.2" if torchtitan_version == "0.2" else ""


def _titan_tied_pp_02(module: str, flavor: str) -> str:
    """Why TorchTitan 0.2.2 pipelines no model with tied embeddings (TorchTitan 0.3.0's reason is the tying)."""
    if module == "qwen3":
        return ("TorchTitan 0.2.2 cannot pipeline its qwen3 model (models/qwen3/__init__.py:199 get_train_spec: "
                "pipelining_fn=None)")
    return (f"TorchTitan 0.2.2's {module} model ties no embeddings and has no {flavor} flavor "
            "(models/llama3/__init__.py: debugmodel, 8B, 70B, 405B)")


def framework_pins(framework: str, model: ModelSpec, pins: dict[str, object],
                   release: str | None = None, *, launch: bool = True,
                   torchtitan_version: str = "0.3") -> dict[str, object]:
    """The user's pins plus what `framework` fixes; a pin the framework cannot run is refused by name,
    and so is a model the framework cannot build. `launch`: the pins are for the launch commbench emits, so what
    `release`'s Megatron-LM validate_args refuses of them is refused too (graph_recompute.release_graph_pin_refusal:
    wgrad_graph.py and graph_recompute.py; False: a published run's
    layout, which the plan does not launch)."""
    from commbench.planner.search.pin_rules import pin_rule_refusal
    refusal = pin_rule_refusal(framework, model.is_moe, pins, torchtitan_version)   # the rule a pin breaks, named before the search
    if refusal:
        raise CommbenchError(refusal)
    if int(pins.get("fused_mlp_offload_min", 0) or 0) > 0:   # published runs' field (26.08 recipes): never planned
        raise CommbenchError(f"fused_mlp_offload_min={pins['fused_mlp_offload_min']} is invalid with --framework "
                             f"{framework}: " + ("megatron-core 0.16.1 (the plans' Megatron-LM) has no fused_group_mlp "
                                                 "offload module and no --min-offloaded-tensor-size (both first in "
                                                 "megatron-core 0.19.0)" if framework != "torchtitan" else
                                                 f"TorchTitan {TORCHTITAN_VERSIONS[torchtitan_version]} has no "
                                                 "module-level activation offload")
                             + "; plan with fused_mlp_offload_min=0")
    if pins.get("fsdp_outer_optim") and framework == "torchtitan":
        raise CommbenchError("fsdp_outer_optim=true is invalid with --framework torchtitan: its HSDP replicates the "
                             "optimizer state across data_parallel_replicate_degree; plan with fsdp_outer_optim=false")
    if framework != "torchtitan":
        reason = megatron_refusal(model, release)
        if reason:
            raise CommbenchError(reason)
        if pins.get("fused_moe"):
            raise CommbenchError(MEGATRON_NO_FUSED_MLP)
        fsdp_pinned = pins.get("fsdp") is True or int(pins.get("fsdp_replicas", 1) or 1) > 1   # HSDP is FSDP
        graphs = megatron_fsdp_graph_refusal(fsdp_pinned, pins.get("cuda_graph"))
        if graphs:
            raise CommbenchError(graphs)
        if pins.get("cuda_graph") == "full" and model.is_moe:
            raise CommbenchError(f"cuda_graph='full' is invalid for {model.name} with --framework megatron: "
                                 f"{MEGATRON_NO_FULL_GRAPH_MOE}; pin cuda_graph=layer or none")
        dropout = megatron_dropout_graph_refusal(model, pins.get("cuda_graph"), pins.get("recompute"),
                                                 pins.get("cuda_graph_scope"))
        if dropout:
            raise CommbenchError(dropout)
        if pins.get("cuda_graph") == "layer" and pins.get("recompute") == "full":
            raise CommbenchError("cuda_graph='layer' is invalid with recompute='full': megatron-core 0.16.1 runs full "
                                 "recompute only under the full-iteration graph (TransformerConfig: 'full recompute is "
                                 "only supported with full iteration CUDA graph'); pin cuda_graph=full or none, or "
                                 "recompute none or selective")
        light = megatron_hybrid_refusal(model, pins) or megatron_light_recompute_refusal(model, pins.get("recompute")) \
            or megatron_graph_scope_refusal(model, pins.get("cuda_graph_scope"))
        if light:
            raise CommbenchError(light)
        if launch:   # what the release refuses of a per-layer graph: biased attention + delayed wgrad, recomputed modules
            from commbench.planner.search.graph_recompute import release_graph_pin_refusal
            refusal = release_graph_pin_refusal(model, release, pins)
            if refusal:
                raise CommbenchError(refusal)
        return dict(pins)
    titan = titan_zoo_name(model)   # hf:PATH or --model-file models with a TorchTitan model's sizes too
    reason = llama3_rope_refusal(model, "torchtitan")
    if reason:
        raise CommbenchError(reason)
    family = titan_dense_family(model)   # a qwen3 / llama3 model at other sizes: built by the family's layers
    if titan is None and model.attention == "mla":   # built by TorchTitan's deepseek_v3 model, or refused by field
        reason = titan_mla_refusal(model)
        if reason:
            raise CommbenchError(reason)
    elif family is not None:
        if titan_dense_refusal(model):
            raise CommbenchError(f"{titan_dense_refusal(model)}; {_megatron_pointer(model, release)}")
    elif titan not in TORCHTITAN_RECOMPUTE:
        if titan_unemitted(model):
            raise CommbenchError(f"{titan_unemitted(model)}: {_megatron_pointer(model, release)}")
        raise CommbenchError(f"TorchTitan 0.3.0 has no {model.name} model (its modules: {TITAN_MODULES}"
                             f"{titan_nearest_flavor(model)}): {_megatron_pointer(model, release)}")
    if titan_module(model) in TITAN_VARLEN_MODULES:
        if int(pins.get("cp", 1) or 1) > 1 and torchtitan_version == "0.2":
            raise CommbenchError(f"cp={pins['cp']} is invalid for {model.name} with --framework torchtitan "
                                 "--torchtitan-version 0.2: TorchTitan 0.2.2's gpt_oss refuses context parallelism "
                                 "(models/gpt_oss/model/args.py update_from_config: 'CP support for gpt-oss model is "
                                 "still in progress.'); pin cp=1")
        if int(pins.get("cp", 1) or 1) > 1:
            raise CommbenchError(titan_cp_refusal(model, pins["cp"]))
        pins = dict(pins, cp=1)
    if int(pins.get("fsdp_replicas", 1) or 1) > 1:   # HSDP: data_parallel_replicate_degree over FSDP2 shards
        if pins.get("fsdp") is False:
            raise CommbenchError(f"fsdp_replicas={pins['fsdp_replicas']} with fsdp=false is invalid with --framework "
                                 "torchtitan: its replicas are FSDP2's data_parallel_replicate_degree (HSDP); pin "
                                 "fsdp=true or leave fsdp out")
        pins = dict(pins, fsdp=True)
    if pins.get("fsdp") is False and pins.get("pp") == 1:
        why = TITAN_DP_WITHOUT_PP_02 if torchtitan_version == "0.2" else TITAN_DP_WITHOUT_PP
        raise CommbenchError(f"fsdp=false with pp=1 is invalid with --framework torchtitan{_version_flag(torchtitan_version)}: "
                             f"{why}; pin fsdp=true, or pp > 1")
    recompute = TORCHTITAN_RECOMPUTE[titan] if titan else \
        TORCHTITAN_DENSE_RECOMPUTE[family] if family else TORCHTITAN_MLA_RECOMPUTE
    fixed = dict(_TITAN_FIXED, recompute=recompute)
    if (titan in TITAN_DENSE_FLAVORS or family) and model.tied_embeddings:
        module, flavor, _ = TITAN_DENSE_FLAVORS[titan] if titan else (family, model.name, None)
        if int(pins.get("pp", 1) or 1) > 1 and torchtitan_version == "0.2":
            raise CommbenchError(f"pp={pins['pp']} is invalid with --framework torchtitan --torchtitan-version 0.2 for "
                                 f"{model.name}: {_titan_tied_pp_02(module, flavor)}; pin pp=1")
        if int(pins.get("pp", 1) or 1) > 1:
            raise CommbenchError(f"pp={pins['pp']} is invalid with --framework torchtitan for {model.name}: TorchTitan "
                                 f"0.3.0's {module} {flavor} ties its embeddings and refuses pipeline parallelism with "
                                 "weight tying (models/common/decoder.py); pin pp=1")
        fixed["pp"] = 1
    out = dict(pins)
    for key, value in fixed.items():
        if key == "recompute" and torchtitan_version == "0.2" and out.get(key) in AC_MODES_02:
            continue   # 0.2's TOML sets the mode pinned (AC_MODES_02); 0.3.0's launch keeps its config function's
        if key == "recompute" and key in out and out[key] != value and torchtitan_version == "0.2":
            raise CommbenchError(f"recompute={out[key]!r} is invalid with --framework torchtitan --torchtitan-version "
                                 "0.2: TorchTitan 0.2.2's [activation_checkpoint] mode, which its TOML sets, checkpoints "
                                 "selective, full or none of a layer (config/job_config.py:652; memory_budget is no "
                                 "layout's); pin recompute " + ", ".join(AC_MODES_02) + " or leave recompute out")
        if key == "recompute" and key in out and out[key] != value:
            raise CommbenchError(titan_recompute_refusal(model, out[key], value))
        if key in out and out[key] != value and torchtitan_version == "0.2":
            raise CommbenchError(f"{key}={out[key]!r} is invalid with --framework torchtitan --torchtitan-version 0.2: "
                                 f"TorchTitan 0.2.2's launch runs {key}={value!r} ({TITAN_FIXED_WHY_02[key]})")
        if key in out and out[key] != value:
            raise CommbenchError(f"{key}={out[key]!r} is invalid with --framework torchtitan: TorchTitan 0.3.0 runs "
                                 f"{key}={value!r}")
        out[key] = value
    if model.is_moe:
        _titan_etp_pin(out, torchtitan_version)
    if out.get("cuda_graph") == "layer" and torchtitan_version == "0.2":
        raise CommbenchError("cuda_graph='layer' is invalid with --framework torchtitan --torchtitan-version 0.2: "
                             "TorchTitan 0.2.2 has no CUDA-graph option (config/job_config.py); pin cuda_graph=none")
    if out.get("cuda_graph") == "layer":
        raise CommbenchError("cuda_graph='layer' is invalid with --framework torchtitan: TorchTitan 0.3.0 graphs "
                             "the whole forward-backward (cuda_graph=full) or nothing")
    if int(out.get("recompute_layers", 0) or 0) > 0:   # the emitter refuses it (emit/torchtitan.py): not searched
        raise CommbenchError(f"recompute_layers={out['recompute_layers']} is invalid with --framework torchtitan: "
                             f"TorchTitan {TORCHTITAN_VERSIONS[torchtitan_version]} {TITAN_NO_RECOMPUTE_LAYERS}; plan "
                             "with recompute_layers=0")
    return out


def titan_recompute_refusal(model: ModelSpec, asked: object, runs: str) -> str:
    """A recompute pin other than the activation checkpointing the TorchTitan launch keeps: TorchTitan takes other
    modes (its activation_checkpoint config: SelectiveAC, FullAC, ...), but the launch is the config function
    (TORCHTITAN_RECOMPUTE's sources) and commbench writes no override of its activation_checkpoint."""
    ac = {"selective": "SelectiveAC", "full": "FullAC"}.get(runs, runs)
    return (f"recompute={asked!r} is invalid with --framework torchtitan: the launch keeps the activation "
            f"checkpointing TorchTitan 0.3.0's config function for {model.name} sets ({ac}, recompute={runs!r}: its "
            "models/*/config_registry.py), and commbench writes no activation_checkpoint override of it; pin "
            f"recompute={runs!r} or leave recompute out")


def _titan_etp_pin(pins: dict[str, object], torchtitan_version: str = "0.3") -> None:
    """A pinned etp TorchTitan does not run with the pinned tp / ep, refused in one line (0.3.0: TITAN_ETP; 0.2.2:
    TITAN_ETP_02, etp = tp also with ep > 1); with tp and ep pinned and one etp allowed, etp is set to it. etp=0 reads
    as not given."""
    etp, tp, ep = pins.get("etp") or None, pins.get("tp"), pins.get("ep")
    if etp is None:
        pins.pop("etp", None)
    v02 = torchtitan_version == "0.2"
    if tp is not None and ep is not None:
        allowed = {1, int(tp)} if v02 and int(ep) > 1 else {titan_etp(tp, ep)}
    elif ep is not None:   # ep = 1: etp is the tp the search picks
        allowed = ({1} if not v02 else None) if int(ep) > 1 else None
    else:
        allowed = {1, tp} if tp is not None else None
    if etp is not None and allowed is not None and etp not in allowed:
        runs = " or ".join(f"etp={v}" for v in sorted(allowed))
        given = ", ".join(f"{k}={pins[k]}" for k in ("tp", "ep") if k in pins)
        flag, full, why = (" --torchtitan-version 0.2", "0.2.2", TITAN_ETP_02) if v02 else ("", "0.3.0", TITAN_ETP)
        raise CommbenchError(f"etp={etp!r} is invalid with --framework torchtitan{flag}: with {given} TorchTitan {full} "
                             f"runs {runs}: {why}; leave etp out")
    if tp is not None and ep is not None and len(allowed) == 1:
        pins["etp"] = allowed.pop()


def runs_fused_grouped_mlp(framework: str) -> bool:
    """Whether the framework's emitted configuration can run Transformer Engine's fused grouped MLP
    (neither Megatron-LM core_v0.16.1 nor TorchTitan 0.3.0 can: see the module docstring)."""
    return False


def graph_fallback(framework: str, model: ModelSpec, release: str, gpu: str | None, precision: str,
                   domain_size: int | None = None) -> str:
    """Why per-layer CUDA graphs stand in for a full-iteration graph the framework cannot run ('' where they do not):
    where the release's recipes for the model (recipes.release_features) run a full-iteration graph and no per-layer
    one, and Megatron-LM core_v0.16.1 cannot capture the model's dropless MoE in a full-iteration graph
    (MEGATRON_NO_FULL_GRAPH_MOE), the strongest graph it runs with the model is the per-layer graph, taken where the
    release's recipes for MoE models run per-layer graphs on that GPU at that precision (other models': what a
    --layout pin may ask for there, check_pins_in_release). TorchTitan 0.3.0 graphs no single layer: none stands in.
    No graph is made up where the release runs none there (no B200 NVFP4 recipe of any release runs one)."""
    if framework != "megatron" or not model.is_moe:
        return ""
    from commbench.planner.layout.recipe_model import recipe_model
    from commbench.planner.layout.recipes import gpu_key, release_features
    own = release_features(release, gpu, precision, recipe_model(model), model.is_moe, domain_size)["cuda_graph"]
    if "full" not in own or "layer" in own:
        return ""
    if "layer" not in release_features(release, gpu, precision, None, True, domain_size)["cuda_graph"]:
        return ""
    where = (f" on {gpu_key(gpu).upper()}" if gpu else "") + f" at {str(precision).upper()}"
    return (f"per-layer CUDA graphs stand in for the full-iteration graph release {release}'s recipes for "
            f"{recipe_model(model)}{where} run: {MEGATRON_NO_FULL_GRAPH_MOE}, and the release's MoE recipes run "
            f"per-layer graphs{where} (other models'), the strongest graph it runs with dropless MoE there")


def graphs_allowed(framework: str, pp: np.ndarray, ep: np.ndarray, moe: bool = False,
                   fsdp: np.ndarray | None = None) -> np.ndarray:
    """Where the framework runs a full-iteration CUDA graph (TorchTitan: pp = 1 and ep = 1; Megatron-LM: not for
    a MoE model, MEGATRON_NO_FULL_GRAPH_MOE, nor under Megatron-FSDP, MEGATRON_FSDP_NO_GRAPHS)."""
    if framework == "torchtitan":
        return (pp == 1) & (ep == 1)
    eager = np.zeros(len(pp), dtype=bool) if fsdp is None else np.asarray(fsdp, dtype=bool)
    return np.full(len(pp), not moe, dtype=bool) & ~eager


def _megatron_fsdp_eager(cols: dict[str, np.ndarray], pinned_graph: bool) -> dict[str, np.ndarray]:
    """Megatron-FSDP rows without a CUDA graph (MEGATRON_FSDP_NO_GRAPHS): eager where the graph is the search's
    choice, dropped where it is pinned (a pin of both is refused in framework_pins)."""
    graphed = cols["fsdp"] & (cols["cuda_graph"] != CODE_FIELDS["cuda_graph"].index("none"))
    if not graphed.any():
        return cols
    if pinned_graph:
        return {k: v[~graphed] for k, v in cols.items()}
    cols["cuda_graph"] = np.where(graphed, np.int8(CODE_FIELDS["cuda_graph"].index("none")),
                                  cols["cuda_graph"]).astype(np.int8)
    return cols


def restrict_columns(framework: str, cols: dict[str, np.ndarray], pinned_graph: bool,
                     model: ModelSpec | None = None, torchtitan_version: str = "0.3") -> dict[str, np.ndarray]:
    """Megatron-LM: FSDP rows eager (_megatron_fsdp_eager), no graphed attention recompute with attention dropout.
    TorchTitan: no per-layer graphs (the full-iteration variant is tried later where allowed); a pinned
    full graph keeps only the layouts its validation accepts; only pp x vp splits TorchTitan can build
    from the model's layers without MTP (its configs train none; emit/torchtitan.py splits the same way);
    and without PP only FSDP rows (TITAN_DP_WITHOUT_PP)."""
    if framework != "torchtitan":
        cols = _megatron_fsdp_eager(cols, pinned_graph)
        arch = model.architecture if model is not None else None
        if arch is None or not arch.attention_dropout:
            return cols
        # megatron_dropout_graph_refusal's layouts, which megatron-core refuses, are not proposed
        keep = ~_graphed_attention_recompute(model, cols["cuda_graph"], cols["recompute"], cols["cuda_graph_scope"])
        return cols if keep.all() else {k: v[keep] for k, v in cols.items()}
    keep = cols["fsdp"] | (cols["pp"] > 1)
    if model is not None and model.is_moe:   # the expert sharding TorchTitan runs (TITAN_ETP)
        keep &= titan_etps(cols["tp"], cols["ep"], torchtitan_version)(cols["etp"])
    if model is not None and model.num_mtp_layers:
        import dataclasses

        from commbench.planner.layout.split import buildable
        keep &= buildable(dataclasses.replace(model, num_mtp_layers=0), cols["pp"], cols["vp"])
    if not pinned_graph:
        cols["cuda_graph"] = np.full(len(cols["tp"]), CODE_FIELDS["cuda_graph"].index("none"), dtype=np.int8)
    else:
        keep &= (cols["cuda_graph"] != CODE_FIELDS["cuda_graph"].index("full")) | graphs_allowed(framework, cols["pp"], cols["ep"])
    return cols if keep.all() else {k: v[keep] for k, v in cols.items()}
