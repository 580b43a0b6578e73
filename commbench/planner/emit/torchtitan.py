"""A layout as a TorchTitan launch: 0.3.x command-line overrides (default) or the 0.2.x TOML.

TorchTitan 0.3 (PyPI torchtitan 0.3.0) configures a run with a Python config function
(`--module llama3 --config llama3_8b`, torchtitan/models/*/config_registry.py) plus frozen
`--section.option` overrides parsed by tyro (torchtitan/config/manager.py). Quantization converters
live inside the config function's model spec, so the emitter picks the shipped config whose
converters match the precision (`deepseek_v3_671b_float8`, `llama3_8b_mxfp8`, ...) and refuses a
precision no shipped config trains in. TorchTitan 0.2 (torchtitan 0.2.2) reads a TOML job config:
[model] name/flavor/converters (quantize.linear.float8, quantize.grouped_mm.mx, ...).

Layer split (both versions, torchtitan/distributed/pipeline_parallel.py): the emitter names every
stage's modules in `module_fqns_per_model_part` (tok_embeddings, layers.N, norm, lm_head/output),
the same split Megatron builds (split.py) for the model without MTP, instead of
`pipeline_parallel_layers_per_stage`, whose ceil((layers + first_less + last_less) / per_stage)
stages cannot reach pp x vp for many models (DeepSeek-V3's 61 layers over 4 x 16). Schedules:
1F1B for vp = 1, Interleaved1F1B otherwise; micro-batches = local_batch_size /
pipeline_parallel_microbatch_size.
EP in 0.3 borrows ranks from FSDP and TP with experts unsharded by TP (etp = 1); 0.2 has
expert_tensor_parallel_degree (1 or tp). The distributed optimizer maps to FSDP
(data_parallel_shard_degree): TorchTitan's FSDP also shards parameters (ZeRO-3).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
from dataclasses import dataclass, field
from typing import Any

from commbench.errors import CommbenchError, invalid
from commbench.planner.layout.quant_dims import quant_token_misfit, quant_tp_refusal
from commbench.planner.layout.spec import Layout, check_layout
from commbench.planner.models.counts import FLOPS_COUNTS, framework_flops_per_token, step_vocab
from commbench.planner.models.spec import ModelSpec
from commbench.planner.layout.split import best_split
from commbench.planner.emit.torchtitan_assets import tokenizer_folder, tokenizer_note
from commbench.planner.search.frameworks import (TITAN_ARCH_SETTABLE, TITAN_DP_WITHOUT_PP, TITAN_NO_RECOMPUTE_LAYERS,
                                                 AC_MODES_02, TORCHTITAN_MAX_SEQ_LEN, TORCHTITAN_VERSIONS,
                                                 graphs_allowed,
                                                 titan_limit_why,
                                                 titan_own_positions, titan_arch_misfits,
                                                 titan_dense_family, titan_dense_refusal, titan_mla_refusal,
                                                 titan_nearest_flavor, titan_runs_otherwise,
                                                 TITAN_ETP, titan_etp, titan_cp_refusal,
                                                 titan_seq_len_limit, titan_unemitted, titan_zoo_name)
from commbench.planner.emit.torchtitan_mla import (LATENT_NORM_EPS, MLA_BASE, MLA_MODULE, mla_function,
                                                   mla_model_lines, mla_rope, mla_router)
from commbench.planner.emit.torchtitan_dense import dense_base, dense_function, dense_model_lines
from commbench.planner.emit.megatron_arch import window_notes
from commbench.planner.emit.torchtitan_config import (MODULE_FILE, MODULE_NAME, config_module_text, config_name,
                                                      converter_refusal, mxfp8_experts_refusal)
from commbench.planner.emit.torchtitan_v02 import (TITAN_COMPILE_02, TITAN_COMPILE_NOTE_02, compile_refusal_02,
                                                   data_note_02, FEATURES_03_ONLY, fp8_recipe_note_02,
                                                   linear_filter_note_02, linear_quantize_02, parallel_limits_02,
                                                   runs_otherwise_02)



def torchtitan_version_key(version: str) -> str:
    """The TORCHTITAN_VERSIONS key for --torchtitan-version: the short name (0.3) or the release it stands for (0.3.0),
    as plan.json and the notes name it; any other value is refused in one line."""
    for key, full in TORCHTITAN_VERSIONS.items():
        if version in (key, full):
            return key
    raise invalid("--torchtitan-version", version,
                  "one of " + ", ".join(f"{key} (or {full})" for key, full in TORCHTITAN_VERSIONS.items()))


# TorchTitan 0.3.0 components/quantization/float8.py: Float8LinearConverter.Config.recipe_name is
# Literal["rowwise", "rowwise_with_gw_hp"] = "rowwise" (no tensorwise recipe), and every shipped float8 config
# (llama3_405b, deepseek_v3_671b_float8) and the plan's generated function leave it at the default.
# Float8GroupedExpertsConverter converts the MoE experts "to use dynamic float8 rowwise quantization".
def titan_fp8_note(is_moe: bool) -> str:
    """The fp8 recipe TorchTitan 0.3.0 runs, beside the one the Megatron arguments and the prediction name."""
    where = "its Linear layers and MoE experts' grouped GEMMs" if is_moe else "its Linear layers"
    return (f"fp8 recipe: TorchTitan 0.3.0 trains {where} with torchao's float8 rowwise scaling (per-row dynamic "
            "scales; Float8LinearConverter offers only rowwise and rowwise_with_gw_hp), not the per-tensor current "
            "scaling of the Megatron arguments (--fp8-recipe tensorwise); the prediction charges the same fp8 GEMM "
            "rate for both (no sourced figure for rowwise's own cost)")
DEFAULT_TORCHTITAN = "0.3"


@dataclass(frozen=True, kw_only=True)
class TitanModel:
    """Where TorchTitan keeps a zoo model (module, flavor), its 0.3 config function per precision,
    and whether that version's model spec has a pipelining function."""

    module: str
    flavor: str
    configs_03: dict[str, str] = field(default_factory=dict)
    base_03: str = ""              # the shipped config function a generated one starts from
    flavor_config_03: str | None = None  # a generated function for a flavor with no shipped config
    hf_assets_03: str | None = None
    pipeline_02: bool = True
    pipeline_03: bool = True
    trains_mtp: bool = False
    # What the 0.3 flavor builds (RoPE base, scaling as models/architecture.py names it and its factor, RMSNorm
    # epsilon), compared with the model asked for (titan_architecture_notes).
    rope_03: tuple[float, str, float] = (0.0, "none", 1.0)
    norm_epsilon_03: float = 1e-5
    # Its MoE router: (score function, top-k weights renormalised to sum to 1, scale); None for a dense model.
    router_03: tuple[str, bool, float] | None = None
    # Its MoE layers' expert-bias update rate (MoE.Config.load_balance_coeff; None: no expert bias): 1e-3 in every
    # shipped MoE flavor (models/common/config_utils.py make_moe_config default, gpt_oss/__init__.py _20b / _120b).
    load_balance_03: float | None = 1e-3
    # An MLA model no flavor is: the generated config function builds it (torchtitan_mla.py); flavor = its name.
    mla: bool = False
    # A qwen3 / llama3 model no flavor is: the generated config function builds it (torchtitan_dense.py).
    dense: bool = False
    in_02: bool = True             # torchtitan 0.2.2 has the flavor (its llama3 has no 1B / 3B)
    tied: bool = False             # enable_weight_tying: Decoder.Config.update_from_config refuses it with PP > 1
    # The shipped config function (configs_03 / base_03) turns on TorchTitan's async TP (CompileConfig
    # enable_async_tensor_parallel=True: llama3_405b, torchtitan 0.3.0 models/llama3/config_registry.py); the launch
    # turns it off (torchtitan_plan), as the step model charges TorchTitan's TP unoverlapped (tp_comm_overlap=false).
    async_tp_03: bool = False


# Sources: torchtitan 0.3.0 wheel, torchtitan/models/{llama3,qwen3,deepseek_v3,gpt_oss}/config_registry.py
# (function names; llama3_405b and deepseek_v3_671b_float8 apply Float8 converters, llama3_8b_mxfp8 MXFP8)
# and __init__.py (pipelining_fn); torchtitan 0.2.2 wheel, torchtitan/models/*/__init__.py (flavors;
# qwen3 and gpt_oss have pipelining_fn=None).
# RoPE and norm epsilon per flavor: torchtitan 0.3.0 wheel, torchtitan/models/*/__init__.py (ComplexRoPE /
# CosSinRoPE theta, scaling "llama" (Llama 3.1's, factor 8 over 8192 tokens) or "yarn" with rope_factor;
# RMSNorm eps: qwen3's _EPS 1e-6, else models/common/nn_modules.py's default 1e-5).
# Routers: torchtitan 0.3.0 wheel, models/{qwen3,gpt_oss}/__init__.py make_router_config(score_func="softmax",
# route_norm=True) and models/deepseek_v3/__init__.py 671B (router_score_func="sigmoid", router_route_norm=True,
# router_route_scale=2.5).
_LLAMA31_ROPE = (500000.0, "llama3", 8.0)
_SOFTMAX_RENORMALISED = ("softmax", True, 1.0)
TITAN_MODELS = {
    # deepseek_v3_671b_float8 is not used as-is: it keeps deepseek_v3_671b's CompileConfig(components=["loss"]), so its
    # float8 model runs uncompiled (components/quantization/float8.py Float8GroupedExpertsConverter warns "Compile is
    # required for high performance float8 MoE training"), where the prediction charges the compiled fp8 rate: fp8 is a
    # generated function from deepseek_v3_671b with the same converters and the model compiled (torchtitan_config.py)
    "deepseek-v3": TitanModel(module="deepseek_v3", flavor="671B", base_03="deepseek_v3_671b",
                              configs_03={"bf16": "deepseek_v3_671b"},
                              rope_03=(10000.0, "yarn", 40.0), router_03=("sigmoid", True, 2.5)),
    "qwen3-30b-a3b": TitanModel(module="qwen3", flavor="30B-A3B", configs_03={"bf16": "qwen3_30b_a3b"},
                                base_03="qwen3_30b_a3b", pipeline_02=False, rope_03=(1e6, "none", 1.0),
                                norm_epsilon_03=1e-6, router_03=_SOFTMAX_RENORMALISED),
    "qwen3-235b-a22b": TitanModel(module="qwen3", flavor="235B-A22B", base_03="qwen3_30b_a3b",
                                  flavor_config_03="qwen3_235b_a22b", hf_assets_03="./assets/hf/Qwen3-235B-A22B",
                                  pipeline_02=False, rope_03=(5e6, "none", 1.0), norm_epsilon_03=1e-6,
                                  router_03=_SOFTMAX_RENORMALISED),
    "llama3-8b": TitanModel(module="llama3", flavor="8B", configs_03={"bf16": "llama3_8b", "mxfp8": "llama3_8b_mxfp8"},
                            base_03="llama3_8b", rope_03=_LLAMA31_ROPE),
    "llama3.1-70b": TitanModel(module="llama3", flavor="70B", configs_03={"bf16": "llama3_70b"}, base_03="llama3_70b",
                               rope_03=_LLAMA31_ROPE),
    # llama3_405b applies Float8 converters itself: a bf16 / mxfp8 / nvfp4 405B starts from llama3_405b's recipe
    # (lr 8e-5, warmup 600, compile with async TP, which the launch turns off: async_tp_03) with the converter-free
    # model_registry("405B") in its place
    "llama3.1-405b": TitanModel(module="llama3", flavor="405B", configs_03={"fp8": "llama3_405b"}, base_03="llama3_405b",
                                flavor_config_03="llama3_405b", hf_assets_03="./assets/hf/Llama-3.1-405B",
                                rope_03=_LLAMA31_ROPE, async_tp_03=True),
    "gpt-oss-120b": TitanModel(module="gpt_oss", flavor="120b", configs_03={"bf16": "gpt_oss_120b"},
                               base_03="gpt_oss_120b", pipeline_02=False, rope_03=(150000.0, "yarn", 32.0),
                               router_03=_SOFTMAX_RENORMALISED),
    "gpt-oss-20b": TitanModel(module="gpt_oss", flavor="20b", configs_03={"bf16": "gpt_oss_20b"},
                              base_03="gpt_oss_20b", pipeline_02=False, rope_03=(150000.0, "yarn", 32.0),
                              router_03=_SOFTMAX_RENORMALISED),
    # Dense flavors no zoo model is, matched to an hf: model by their sizes (search/frameworks.py TITAN_DENSE_FLAVORS).
    # Shipped config functions: qwen3_0_6b, qwen3_1_7b, qwen3_14b, qwen3_32b (torchtitan 0.3.0
    # models/qwen3/config_registry.py); none for qwen3 4B / 8B (sft_qwen3_8b_math is a fine-tuning recipe) or llama3
    # 1B / 3B: the generated function swaps the flavor into the nearest shipped pre-training recipe. torchtitan 0.2.2
    # has the qwen3 flavors (models/qwen3/__init__.py qwen3_configs) and no llama3 1B / 3B.
    "qwen3-0.6b": TitanModel(module="qwen3", flavor="0.6B", configs_03={"bf16": "qwen3_0_6b"}, base_03="qwen3_0_6b",
                             pipeline_02=False, rope_03=(1e6, "none", 1.0), norm_epsilon_03=1e-6, tied=True),
    "qwen3-1.7b": TitanModel(module="qwen3", flavor="1.7B", configs_03={"bf16": "qwen3_1_7b"}, base_03="qwen3_1_7b",
                             pipeline_02=False, rope_03=(1e6, "none", 1.0), norm_epsilon_03=1e-6, tied=True),
    "qwen3-4b": TitanModel(module="qwen3", flavor="4B", base_03="qwen3_1_7b", flavor_config_03="qwen3_4b",
                           hf_assets_03="./assets/hf/Qwen3-4B", pipeline_02=False, rope_03=(1e6, "none", 1.0),
                           norm_epsilon_03=1e-6, tied=True),
    "qwen3-8b": TitanModel(module="qwen3", flavor="8B", base_03="qwen3_14b", flavor_config_03="qwen3_8b",
                           hf_assets_03="./assets/hf/Qwen3-8B", pipeline_02=False, rope_03=(1e6, "none", 1.0),
                           norm_epsilon_03=1e-6),
    "qwen3-14b": TitanModel(module="qwen3", flavor="14B", configs_03={"bf16": "qwen3_14b"}, base_03="qwen3_14b",
                            pipeline_02=False, rope_03=(1e6, "none", 1.0), norm_epsilon_03=1e-6),
    "qwen3-32b": TitanModel(module="qwen3", flavor="32B", configs_03={"bf16": "qwen3_32b"}, base_03="qwen3_32b",
                            pipeline_02=False, rope_03=(1e6, "none", 1.0), norm_epsilon_03=1e-6),
    "llama3.2-1b": TitanModel(module="llama3", flavor="1B", base_03="llama3_8b", flavor_config_03="llama3_1b",
                              hf_assets_03="./assets/hf/Llama-3.2-1B", rope_03=_LLAMA31_ROPE, in_02=False, tied=True),
    "llama3.2-3b": TitanModel(module="llama3", flavor="3B", base_03="llama3_8b", flavor_config_03="llama3_3b",
                              hf_assets_03="./assets/hf/Llama-3.2-3B", rope_03=_LLAMA31_ROPE, in_02=False, tied=True),
}


# What every TorchTitan 0.3 launch sets on CompileConfig (torchtitan 0.3.0 config/configs.py), whatever its config
# function sets: torch.compile on the model and the loss, async TP off (torchtitan_plan).
TITAN_COMPILE = {"enable": True, "components": ["model", "loss"], "enable_async_tensor_parallel": False}
TITAN_COMPILE_NOTE = ("the launch compiles the model and the loss with torch.compile (--compile.enable "
                      "--compile.components model,loss), whatever the config function sets (TorchTitan's shipped bf16 "
                      "functions run the model eager): the prediction charges fused kernels and no eager term; "
                      "compile time before the first step is not priced")


def router_renormalises(arch, top_k: int) -> bool:
    """Whether megatron-core's router makes a token's top-k weights sum to 1 (moe_utils.py
    topk_routing_with_score_function, core_v0.16.1): softmax over the top-k logits unless pre-softmax;
    sigmoid scores divided by their sum when top-k > 1."""
    if arch.router_score == "softmax":
        return not arch.router_pre_softmax
    return arch.router_score == "sigmoid" and top_k > 1


def _flavor_misfits(titan: TitanModel, model: ModelSpec) -> list[tuple[str, Any, Any]]:
    """(what, the model's, the flavor's) where TorchTitan 0.3's flavor builds another RoPE, norm epsilon, MoE router or
    settable architecture field (TITAN_ARCH_SETTABLE: gpt_oss's swiglu limit) than the model asked for (its shipped
    flavors are not always the published model: llama3 8B is Llama 3.1's, 235B-A22B the 2507 release's rope base,
    deepseek_v3 671B's RMSNorms eps 1e-5; an hf: model is matched to a flavor by its sizes)."""
    arch = model.architecture
    if arch is None:
        return []
    theta, scaling, factor = titan.rope_03
    have = (float(arch.rotary_base), arch.rope_scaling, float(arch.rope_scaling_factor) if arch.rope_scaling != "none"
            else 1.0)
    pairs = [("rotary base", have[0], theta), ("RoPE scaling", have[1], scaling), ("RoPE scaling factor", have[2], factor),
             ("norm epsilon", float(arch.norm_epsilon), titan.norm_epsilon_03)]
    if titan.router_03 is not None and model.is_moe:
        score, renormalised, scale = titan.router_03
        pairs += [("router score", arch.router_score, score),
                  ("top-k weights renormalised", router_renormalises(arch, model.top_k), renormalised),
                  ("router scale", float(arch.router_topk_scaling or 1.0), scale)]
    pairs += [(field, a, b) for field, a, b in titan_arch_misfits(model, titan.module)
              if (titan.module, field) in TITAN_ARCH_SETTABLE]
    return [(name, a, b) for name, a, b in pairs if a != b]


def _misfit_phrases(titan: TitanModel, model: ModelSpec) -> list[str]:
    """_flavor_misfits as `what flavor's (the model: model's)`."""
    return [f"{name} {b:g} (the model: {a:g})" if isinstance(a, float) else f"{name} {b} (the model: {a})"
            for name, a, b in _flavor_misfits(titan, model)]


# TorchTitan 0.3.0 models/common/rope.py: RoPE.Config.scaling is "none", "llama" (Llama 3.1's, factor scaling_factor)
# or "yarn" (factor rope_factor); the config function sets a field of the model asked for on every layer's config.
_TITAN_SCALING = {"none": "none", "llama3": "llama"}


def positions_lines(model: ModelSpec, seq_len: int | None) -> list[str]:
    """Lines of the generated config function giving every layer's RoPE an hf: model's own max_position_embeddings
    where the sequence is longer than the flavor's RoPE (frameworks.titan_own_positions); [] otherwise."""
    own, name = titan_own_positions(model), titan_zoo_name(model)
    if not own or (seq_len or model.seq_len) <= TORCHTITAN_MAX_SEQ_LEN[name]:
        return []
    return [f"    # {model.name}'s max_position_embeddings ({own}); the flavor's RoPE is precomputed for "
            f"{TORCHTITAN_MAX_SEQ_LEN[name]} tokens",
            "    for layer in config.model_spec.model.layers:",
            f"        layer.attention.rope.max_seq_len = {own}"]


def flavor_fix_lines(titan: TitanModel, model: ModelSpec) -> list[str] | None:
    """Lines of the generated config function that set the model asked for's RoPE, norm epsilons and router on the
    flavor's model config (TorchTitan 0.3.0 model configs are mutable dataclasses; every layer holds its own
    attention.rope, norms and moe.router), or None where a difference has no such line (YaRN against another
    scaling: its other parameters are not the model's). [] where the flavor is the model."""
    off = {name: a for name, a, _ in _flavor_misfits(titan, model)}
    if not off:
        return []
    arch = model.architecture
    theta, scaling, _ = titan.rope_03
    rope: dict[str, Any] = {}
    if "rotary base" in off:
        rope["theta"] = float(arch.rotary_base)
    if "RoPE scaling" in off:
        if arch.rope_scaling not in _TITAN_SCALING or scaling not in _TITAN_SCALING:
            return None
        rope["scaling"] = _TITAN_SCALING[arch.rope_scaling]
        if arch.rope_scaling == "llama3":
            rope["scaling_factor"] = float(arch.rope_scaling_factor)
    elif "RoPE scaling factor" in off:
        rope["scaling_factor" if scaling == "llama3" else "rope_factor"] = float(arch.rope_scaling_factor)
    router = {"score_func": off.get("router score"), "route_norm": off.get("top-k weights renormalised"),
              "route_scale": off.get("router scale")}
    router = {k: v for k, v in router.items() if v is not None}
    eps = float(arch.norm_epsilon)
    lines = [f"    # {model.name}, where TorchTitan 0.3.0's {titan.module} {titan.flavor} builds another "
             + ", ".join(off), "    model = config.model_spec.model"]
    if "norm epsilon" in off:
        lines.append(f"    model.norm.eps = {eps!r}")
    lines.append("    for layer in model.layers:")
    lines += [f"        layer.attention.rope.{k} = {v!r}" for k, v in rope.items()]
    if "norm epsilon" in off:
        lines += [f"        layer.attention_norm.eps = layer.ffn_norm.eps = {eps!r}",
                  "        if getattr(layer.attention, 'qk_norm', None) is not None:",
                  f"            layer.attention.qk_norm.eps = {eps!r}"]
        if model.attention == "mla":  # HF DeepseekV3RMSNorm's default on q_a/kv_a_layernorm (torchtitan_mla.py)
            lines += ["        if layer.attention.q_norm is not None:",
                      f"            layer.attention.q_norm.eps = {LATENT_NORM_EPS!r}",
                      f"        layer.attention.kv_norm.eps = {LATENT_NORM_EPS!r}"]
    settable = [(TITAN_ARCH_SETTABLE[titan.module, name], a) for name, a in off.items()
                if (titan.module, name) in TITAN_ARCH_SETTABLE]
    if router or settable:
        lines.append("        if getattr(layer, 'moe', None) is not None:")
        lines += [f"            layer.moe.router.{k} = {v!r}" for k, v in router.items()]
        lines += [f"            layer.{attr} = {v!r}" for attr, v in settable]
    if lines[-1] == "    for layer in model.layers:":
        lines.pop()
    return lines


TITAN_BALANCE_COEFF = 1e-3   # make_moe_config's load_balance_coeff, every shipped MoE flavor's


def model_balance_coeff(model: ModelSpec) -> float | None:
    """The load_balance_coeff that balances as the model does where TorchTitan 0.3.0 can: its expert bias's update
    rate (models/common/moe.py MoE: the router picks the top-k of scores + expert_bias_E; components/optimizer/
    optimizer.py _update_expert_bias adds coeff * sign(mean - tokens) before each step). A model balanced by an
    auxiliary loss alone (Qwen3's aux_loss) keeps TorchTitan's expert bias in its place: TorchTitan has no auxiliary
    loss, and a run with no balancing at all can collapse its routing (and is not the balanced routing the step model
    prices), so the flavors' stand-in is kept and noted. None where the model balances by neither (gpt-oss: MoE.__init__
    then builds no expert_bias_E, the router picks on its scores alone)."""
    arch = model.architecture
    if arch.router_expert_bias:
        return float(arch.router_bias_update_rate)
    return TITAN_BALANCE_COEFF if arch.aux_loss_coeff and arch.load_balancing != "none" else None


def balancing_lines(titan: TitanModel, model: ModelSpec) -> list[str]:
    """Config-function lines that set every MoE layer's load_balance_coeff to the model's (model_balance_coeff) where
    the flavor's is another; [] where they agree or TorchTitan cannot express it (an expert bias that is never updated:
    MoE.__init__ asserts load_balance_coeff > 0)."""
    want = model_balance_coeff(model) if model.is_moe and model.architecture is not None else titan.load_balance_03
    if want == titan.load_balance_03 or want == 0.0:
        return []
    has = "has no expert bias" if want is None else f"updates its expert bias by {want:g} a step"
    return [f"    # {model.name} {has} (TorchTitan 0.3.0's {titan.module} {titan.flavor}: load_balance_coeff "
            f"{titan.load_balance_03!r})",
            "    for layer in config.model_spec.model.layers:",
            "        if getattr(layer, 'moe', None) is not None:",
            f"            layer.moe.load_balance_coeff = {want!r}"]


def titan_balancing_notes(titan: TitanModel, model: ModelSpec) -> list[str]:
    """TorchTitan 0.3.0's MoE balances experts by an expert bias alone, and has no auxiliary loss anywhere: one line
    saying where the config function sets the model's expert bias (balancing_lines), where it cannot, and the
    balancing loss the launch trains without."""
    arch = model.architecture
    if not model.is_moe or arch is None:
        return []
    want, flavor, said = model_balance_coeff(model), f"{titan.module} {titan.flavor}'s", []
    if balancing_lines(titan, model):
        said.append(f"{model.name} has no expert bias, so the plan's config function ({MODULE_FILE}) sets "
                    f"load_balance_coeff None on every MoE layer ({flavor}: {titan.load_balance_03:g})" if want is None
                    else f"the plan's config function ({MODULE_FILE}) sets load_balance_coeff {want:g} on every MoE "
                    f"layer, {model.name}'s expert-bias update rate ({flavor}: {titan.load_balance_03})")
    elif want == 0.0:
        said.append(f"the launch updates an expert bias by {titan.load_balance_03:g} a step where {model.name}'s is "
                    "fixed (load_balance_coeff must be > 0)")
    if arch.aux_loss_coeff and arch.load_balancing != "none":
        said.append(f"the launch trains {model.name} without its {arch.load_balancing} (coefficient "
                    f"{arch.aux_loss_coeff:g})" + ("" if arch.router_expert_bias else
                                                    f", balanced in its place by an expert bias {model.name} does not "
                                                    f"have (load_balance_coeff {want:g}): the bias steers training's "
                                                    "routing and is not in the model's Hugging Face weights"))
    return [("TorchTitan 0.3.0's MoE balances experts only by an expert bias (MoE.Config.load_balance_coeff; no "
             "auxiliary loss): " + "; ".join(said))] if said else []


def titan_architecture_notes(titan: TitanModel, model: ModelSpec) -> list[str]:
    """Where TorchTitan 0.3.0's flavor builds another RoPE, norm epsilon or MoE router than the model asked for: the
    plan's config function sets the model's (flavor_fix_lines), or, where no line can, the launch trains the flavor's.
    A 0.2 TOML names the flavor and sets none of them: such a model is refused at 0.2 (_model_refusal_02)."""
    off = _misfit_phrases(titan, model)
    if not off:
        return []
    if flavor_fix_lines(titan, model) is not None:
        return [f"TorchTitan 0.3.0's {titan.module} {titan.flavor} builds {', '.join(off)}: the plan's config function "
                f"({MODULE_FILE}) sets {model.name}'s values on it"]
    return [f"TorchTitan 0.3.0's {titan.module} {titan.flavor} builds {', '.join(off)}: the launch trains that, not "
            f"{model.name}'s; set it in the config function's model spec to train {model.name}"]


def titan_stages(model: ModelSpec, pp: int, vp: int, version: str) -> list[list[str]] | None:
    """module_fqns_per_model_part for pp x vp stages: the layer split Megatron builds (split.py) for the
    model without MTP (TorchTitan's configs train none), in TorchTitan's module names."""
    split = best_split(dataclasses.replace(model, num_mtp_layers=0), pp, vp)
    if split is None:
        return None
    output = "lm_head" if version == "0.3" else "output"
    stages, layer = [], 0
    for stage in split.stages:
        names = ["tok_embeddings"] if "E" in stage else []
        names += [f"layers.{i}" for i in range(layer, layer + stage.count("t"))]
        layer += stage.count("t")
        stages.append(names + (["norm", output] if "L" in stage else []))
    return stages


def titan_model_of(model: ModelSpec) -> TitanModel | None:
    """TorchTitan's model for a zoo name, or for a model with a TorchTitan zoo model's sizes (titan_zoo_name), or
    for a dense model of its qwen3 / llama3 family at other sizes (titan_dense_refusal; torchtitan_dense.py), or for an
    MLA model its deepseek_v3 model builds exactly (titan_mla_refusal; torchtitan_mla.py)."""
    name = titan_zoo_name(model)
    if name is not None:
        return TITAN_MODELS[name]
    family = titan_dense_family(model)
    if family is not None and not titan_dense_refusal(model):
        arch = model.architecture
        return TitanModel(module=family, flavor=model.name, base_03=dense_base(family, model.is_moe),
                          flavor_config_03=dense_function(model),
                          hf_assets_03=f"./assets/hf/{model.name.removeprefix('hf:')}", pipeline_02=False,
                          rope_03=(float(arch.rotary_base), "none", 1.0), norm_epsilon_03=float(arch.norm_epsilon),
                          router_03=_SOFTMAX_RENORMALISED if model.is_moe else None,
                          in_02=False, tied=bool(model.tied_embeddings), dense=True)
    if model.attention != "mla" or titan_mla_refusal(model):
        return None
    return TitanModel(module=MLA_MODULE, flavor=model.name, base_03=MLA_BASE, flavor_config_03=mla_function(model),
                      hf_assets_03=f"./assets/hf/{model.name.removeprefix('hf:')}", pipeline_02=False,
                      rope_03=mla_rope(model), norm_epsilon_03=float(model.architecture.norm_epsilon),
                      router_03=mla_router(model) if model.is_moe else None, mla=True)


def _no_model(model: ModelSpec, version: str) -> str:
    """Why TorchTitan `version` has no model for `model` (titan_model_of gave None)."""
    mla = titan_mla_refusal(model) if model.attention == "mla" else None
    return mla or titan_dense_refusal(model) or (titan_unemitted(model) if version == "0.3" else None) or \
        f"TorchTitan {TORCHTITAN_VERSIONS[version]} has no {model.name} model{titan_nearest_flavor(model)}"


def _model_refusal_02(titan: TitanModel, model: ModelSpec) -> str | None:
    """Why a TorchTitan 0.2.2 TOML, which names a shipped flavor, cannot train `model` whatever the layout, or None."""
    full = TORCHTITAN_VERSIONS["0.2"]
    if not titan.in_02:
        return (f"TorchTitan {full} has no {titan.module} flavor {titan.flavor} (its TOML names a shipped one; "
                "torchtitan 0.2.2's llama3 has 8B, 70B, 405B): plan it with --torchtitan-version 0.3")
    if titan.mla:
        return (f"TorchTitan {full} has no {model.name} flavor (its TOML names a shipped one): plan it with "
                "--torchtitan-version 0.3")
    # A 0.2 TOML names the flavor and sets none of its RoPE, norm epsilons or router, so any difference trains another
    # model. torchtitan 0.2.2's flavors build what rope_03 / norm_epsilon_03 / router_03 record for 0.3.0 (v0.2.2
    # models/llama3/model/model.py precompute_freqs_cis scales by RoPEScalingArgs' factor 8 always; qwen3/__init__.py
    # rope_theta, 235B-A22B 5000000, args.py norm_eps 1e-6; deepseek_v3/model/args.py:62 norm_eps 1e-5, rope_theta
    # 10000, rope_factor 40; gpt_oss 150000, 32, 1e-5)
    off = _misfit_phrases(titan, model)
    if off:
        fix = ("plan it with --torchtitan-version 0.3 (its config function sets the model's values)"
               if flavor_fix_lines(titan, model) is not None else "no TorchTitan launch trains it")
        return (f"TorchTitan {full}'s {titan.module} {titan.flavor} builds {', '.join(off)}, and its TOML names the "
                f"flavor and sets none of these, so it would train another model than {model.name}: {fix}")
    return None


def titan_02_pins(model: ModelSpec, pins: dict[str, object], precision: str) -> dict[str, object]:
    """`pins` plus what a TorchTitan 0.2.2 launch fixes, so a --framework torchtitan --torchtitan-version 0.2 search
    proposes only layouts its TOML can write (what _refusal refuses of a layout at 0.2): no HSDP for a MoE model,
    tp=1 under mxfp8 (compile_refusal_02), pp=1 where the 0.2 model has no pipelining function, pp=1 and cp=1 for a
    MoE model in fp8 and cp=1 for gpt_oss (parallel_limits_02), no CUDA graph and sequence parallel with TP
    (FEATURES_03_ONLY: options only 0.3.0 has). A model 0.2 cannot
    train at all (no flavor, MLA, another RoPE, norm epsilon or router), nvfp4, or a pin against these: a CommbenchError, one line, before
    the search."""
    titan = titan_model_of(model)
    reason = _no_model(model, "0.2") if titan is None else _model_refusal_02(titan, model)
    if titan is None and "--framework megatron" not in reason:
        reason += ": plan it with --framework megatron"
    if reason is None and precision == "nvfp4":
        reason = (f"--precision nvfp4 is invalid with --torchtitan-version 0.2: TorchTitan "
                  f"{TORCHTITAN_VERSIONS['0.2']} has no nvfp4 converter; plan with fp8, mxfp8 or bf16, or "
                  "--torchtitan-version 0.3")
    if reason:
        raise CommbenchError(reason)
    full = TORCHTITAN_VERSIONS["0.2"]
    fixed: dict[str, tuple[int, str, bool]] = {}   # key -> (the value 0.2 runs, why, whether 0.3 runs others)
    if precision == "mxfp8":
        fixed["tp"] = (1, compile_refusal_02("mxfp8", 2).split(", and the prediction")[0], True)
    if not titan.pipeline_02:
        fixed["pp"] = (1, f"TorchTitan {full} cannot pipeline {model.name} (its model spec has no pipelining function)",
                       True)
    for key, (why, in_03) in parallel_limits_02(titan.module, model.is_moe, precision).items():
        fixed.setdefault(key, (1, why, in_03))
    if model.is_moe:
        fixed["fsdp_replicas"] = (1, f"TorchTitan {full}'s MoE HSDP (EP with data_parallel_replicate_degree > 1) is "
                                     "not checked against its ParallelDims here", True)
    out = dict(pins)
    for key, (runs, why) in FEATURES_03_ONLY.items():   # options only 0.3.0 has: fixed at what 0.2.2 runs
        if key in out and out[key] != runs and not (key == "sequence_parallel" and out.get("tp") == 1):
            raise CommbenchError(f"{key}={str(out[key]).lower()} is invalid with --torchtitan-version 0.2: {why}; pin "
                                 f"{key}={str(runs).lower()} or plan with --torchtitan-version 0.3")
        out[key] = runs
    for key, (value, why, in_03) in fixed.items():
        if int(out.get(key, value) or value) != value:
            raise CommbenchError(f"{key}={out[key]} is invalid with --torchtitan-version 0.2 for {model.name}: {why}; "
                                 f"pin {key}={value}" + (" or plan with --torchtitan-version 0.3" if in_03 else ""))
        out[key] = value
    return out


def _refusal(layout: Layout, model: ModelSpec, version: str,
             seq_len: int | None = None) -> tuple[TitanModel | None, str | None]:
    full = TORCHTITAN_VERSIONS[version]
    titan = titan_model_of(model)
    if titan is None:
        return None, _no_model(model, version)
    limit = titan_seq_len_limit(model) if version == "0.3" else None
    if limit is not None and (seq_len or model.seq_len) > limit:
        return titan, (f"{titan_limit_why(model)}, and TorchTitan {full} refuses training.seq_len "
                       f"{seq_len or model.seq_len}: plan with --seq-len <= {limit}")
    if version == "0.2" and _model_refusal_02(titan, model):
        return titan, _model_refusal_02(titan, model)
    if titan.tied and version == "0.3" and layout.pp > 1:
        return titan, (f"TorchTitan {full}'s {titan.module} {titan.flavor} ties its embeddings and refuses pipeline "
                       "parallelism with weight tying (models/common/decoder.py: 'Weight tying is not supported with "
                       "Pipeline Parallel'): plan with pp=1")
    if layout.pp > 1 and not (titan.pipeline_03 if version == "0.3" else titan.pipeline_02):
        return titan, f"TorchTitan {full} cannot pipeline {model.name} (its model spec has no pipelining function): plan with pp=1"
    if version == "0.2":
        for key, (why, in_03) in parallel_limits_02(titan.module, model.is_moe, layout.precision).items():
            if getattr(layout, key) > 1:
                return titan, (f"{why}: plan with {key}=1" + (" or --torchtitan-version 0.3" if in_03 else "")
                               + f" ({key}={getattr(layout, key)})")
    if version == "0.3" and layout.precision not in titan.configs_03:
        problem = converter_refusal(layout.precision, model.is_moe)
        if problem:
            return titan, f"TorchTitan {full} {problem}: {model.name} cannot train in {layout.precision}"
    if version == "0.3" and layout.precision == "mxfp8" and mxfp8_experts_refusal(model):
        return titan, f"{mxfp8_experts_refusal(model)}: plan it with --precision fp8 or bf16"
    if version == "0.2" and layout.precision == "nvfp4":
        return titan, f"TorchTitan {full} has no nvfp4 converter"
    if version == "0.2" and compile_refusal_02(layout.precision, layout.tp):
        return titan, compile_refusal_02(layout.precision, layout.tp)
    if model.is_moe and version == "0.3" and layout.etp != titan_etp(layout.tp, layout.ep):
        return titan, (f"{TITAN_ETP}: with tp = {layout.tp} and ep = {layout.ep} it runs etp = "
                       f"{titan_etp(layout.tp, layout.ep)}, the layout has etp = {layout.etp}")
    if model.is_moe and version == "0.2" and layout.etp not in (1, layout.tp):
        return titan, f"TorchTitan {full} supports etp = 1 or etp = tp, the layout has etp = {layout.etp}"
    if version == "0.3" and quant_tp_refusal(model, "torchtitan", layout.precision, layout.tp, layout.etp):
        return titan, quant_tp_refusal(model, "torchtitan", layout.precision, layout.tp, layout.etp)
    tokens = quant_token_misfit("torchtitan", layout.precision, seq_len or model.seq_len, layout.mbs, layout.cp,
                                layout.tp, layout.sequence_parallel) if version == "0.3" else None
    if tokens:   # a layout searched for Megatron-LM, whose token rule differs (layout/quant_dims.py)
        return titan, f"TorchTitan {full} cannot train it in {layout.precision}: {tokens}"
    if version == "0.3" and layout.cp > 1 and titan.module == "gpt_oss":
        return titan, titan_cp_refusal(model, layout.cp)
    if version == "0.2" and model.is_moe and layout.fsdp and layout.fsdp_replicas > 1:
        return titan, (f"TorchTitan {full}'s MoE HSDP (EP with data_parallel_replicate_degree > 1) is not checked against "
                       "its ParallelDims here: plan it with --torchtitan-version 0.3")
    dp_shard = layout.dp // (layout.fsdp_replicas if layout.fsdp else 1)  # HSDP: the rest is dp_replicate
    if model.is_moe and (dp_shard * layout.cp * layout.tp) % (layout.ep * (layout.etp if version == "0.2" else 1)):
        return titan, f"TorchTitan {full} needs ep to divide dp_shard*cp*tp = {dp_shard * layout.cp * layout.tp}"
    if layout.recompute_layers:
        return titan, (f"TorchTitan {full} {TITAN_NO_RECOMPUTE_LAYERS} (recompute_layers={layout.recompute_layers}): "
                       "plan with recompute_layers=0")
    if layout.fused_mlp_offload_min:
        return titan, (f"TorchTitan {full} has no module-level activation offload (megatron-core's "
                       f"fine_grained_activation_offloading): plan with fused_mlp_offload_min=0")
    if layout.fsdp_outer_optim:
        return titan, (f"TorchTitan {full}'s HSDP replicates the optimizer state across data_parallel_replicate_degree "
                       "(no outer optimizer sharding as Megatron-FSDP's --outer-dp-sharding-strategy optim): plan with "
                       "fsdp_outer_optim=false")
    if layout.cpu_offload_layers:
        return titan, (f"TorchTitan {full} has no activation offloading (training.enable_cpu_offload offloads FSDP2's "
                       f"parameters and optimizer state): the layout offloads {layout.cpu_offload_layers} layers' "
                       "activations; plan with cpu_offload_layers=0")
    if layout.pp > 1 and titan_stages(model, layout.pp, layout.vp, version) is None:
        return titan, (f"TorchTitan {full} cannot split {model.num_layers} layers (its configs train no MTP) into non-empty pp={layout.pp} x "
                       f"vp={layout.vp} stages")
    # the layout rules as TorchTitan checks them (its 1F1B needs as many micro-batches as stages, its sequence
    # split 2 x cp chunks): a Megatron plan's layout may pass Megatron's and break these, and its TorchTitan section
    # then wrote a launch TorchTitan refuses at start-up (torch Schedule1F1B: 4 micro-batches, 9 stages; found from
    # outside)
    try:
        check_layout(model, layout, layout.world, seq_len, framework="torchtitan")
    except CommbenchError as exc:
        return titan, f"TorchTitan {full}: {exc}"
    return titan, None


def _parallelism(layout: Layout, model: ModelSpec, version: str) -> dict[str, Any]:
    a = layout
    replicas = a.fsdp_replicas if a.fsdp else 1  # HSDP: FSDP2 over dp/replicas, replicated across
    out: dict[str, Any] = {"data_parallel_replicate_degree": replicas, "data_parallel_shard_degree": a.dp // replicas,
                           "tensor_parallel_degree": a.tp, "pipeline_parallel_degree": a.pp,
                           "context_parallel_degree": a.cp, "expert_parallel_degree": a.ep if model.is_moe else 1}
    if a.fsdp:  # the layout's FSDP gathers parameters again for backward (step/fsdp.py)
        out["fsdp_reshard_after_forward"] = "always"
    if version == "0.3":  # 0.2 always applies sequence parallel with TP
        # TorchTitan 0.3.0 shards the sequence over the TP mesh axis (models/common/decoder_sharding.py
        # dense_sequence_parallel_placement; trainer.py divides seq_len by tp only with it): at tp=1 it does nothing,
        # and the launch says it is off, as the Megatron arguments leave out --sequence-parallel at tp=1
        out["enable_sequence_parallel"] = bool(a.sequence_parallel) and a.tp > 1
    else:
        out["expert_tensor_parallel_degree"] = a.etp if model.is_moe else 1
    if a.pp > 1:
        out["pipeline_parallel_schedule"] = "Interleaved1F1B" if a.vp > 1 else "1F1B"
        out["module_fqns_per_model_part"] = titan_stages(model, a.pp, a.vp, version)
        out["pipeline_parallel_microbatch_size"] = a.mbs
    return out


def _training(layout: Layout, model: ModelSpec, seq_len: int | None) -> dict[str, Any]:
    """With PP the pipeline cuts the local batch into micro-batches of pipeline_parallel_microbatch_size;
    without PP TorchTitan accumulates gradients over global / (local x dp) steps of local_batch_size."""
    local = layout.gbs // layout.dp if layout.pp > 1 else layout.mbs
    return {"local_batch_size": local, "global_batch_size": layout.gbs, "seq_len": seq_len or model.seq_len}


def torchtitan_plan(layout: Layout, model: ModelSpec, *, seq_len: int | None = None,
                    version: str = DEFAULT_TORCHTITAN, framework: str = "megatron", gpu=None) -> dict[str, Any]:
    """The plan.json "torchtitan" section: target version, and either the launch (0.3 overrides or
    0.2 TOML sections, the stage split, notes) or a one-line refusal. `framework`: what the prediction was
    charged for (--framework torchtitan leaves out the MTP layers the launch does not train); `gpu`: the plan's
    (a GpuSpec), for the MFU TorchTitan's log prints (logged_mfu.py)."""
    version = torchtitan_version_key(version)
    doc: dict[str, Any] = {"version": TORCHTITAN_VERSIONS[version]}
    titan, refused = _refusal(layout, model, version, seq_len)
    if refused:
        return doc | {"refused": refused}
    notes = [_data_parallel_note(layout)] + window_notes(model)
    if model.num_mtp_layers and not titan.trains_mtp:
        notes.append(f"TorchTitan's {model.name} config trains without the {model.num_mtp_layers} MTP layer(s) "
                     + ("the model has; the prediction leaves them out too (--framework torchtitan)"
                        if framework == "torchtitan" else
                        "the prediction includes (plan with --framework torchtitan to charge what TorchTitan runs)"))
    sections = {"parallelism": _parallelism(layout, model, version), "training": _training(layout, model, seq_len)}
    if version == "0.3":
        graphed = layout.cuda_graph == "full" and bool(graphs_allowed("torchtitan", np.array([layout.pp]),
                                                                       np.array([layout.ep if model.is_moe else 1]))[0])
        sections["training"]["disable_cuda_graphs"] = not graphed
        if layout.cuda_graph != "none" and not graphed:
            notes.append(f"TorchTitan 0.3 runs this layout without CUDA graphs (it graphs only the whole forward-backward, "
                         f"and refuses that with PP > 1 or EP > 1); the prediction assumed cuda_graph={layout.cuda_graph} "
                         "(plan with --framework torchtitan to charge what TorchTitan runs)")
        notes.append("activation checkpointing stays as the config function sets it; "
                     f"the prediction assumed recompute={layout.recompute}"
                     + (TITAN_SELECTIVE_AC_PRICED if layout.recompute == "selective" else ""))
        # One compile rule for every precision and config function, shipped or generated: the model and the loss
        # compiled (TITAN_COMPILE). TorchTitan 0.3.0's shipped bf16 functions run the model eager (llama3_8b,
        # llama3_70b, qwen3_*, gpt_oss_*: CompileConfig's default enable=False, config/configs.py; deepseek_v3_671b /
        # _16b: components=["loss"]), where the quantized ones compile it (llama3_8b_mxfp8, llama3_405b); the step
        # model has no eager term: its memory-bound time is fused kernels' (calibrated on Megatron's).
        # TorchTitan's async TP (torch.compile's micro-pipelined all-gather / reduce-scatter matmuls, distributed/
        # compile.py _maybe_enable_async_tp: on where compile.enable_async_tensor_parallel and tp > 1) is not what the
        # step model charges (TP unoverlapped: _TITAN_FIXED tp_comm_overlap=False), so every launch sets it off
        sections["compile"] = dict(TITAN_COMPILE)
        notes.append(TITAN_COMPILE_NOTE)
        if titan.async_tp_03 and layout.tp > 1:
            notes.append(f"TorchTitan's {titan.configs_03.get(layout.precision) or titan.base_03}() enables async TP "
                         "(compile.enable_async_tensor_parallel=True); the launch turns it off "
                         "(--compile.no_enable_async_tensor_parallel): the prediction charges TP unoverlapped "
                         "(tp_comm_overlap=false) and does not price TorchTitan's async TP")
        dropped = titan_runs_otherwise(layout, model)
        if dropped:
            notes.append("TorchTitan 0.3.0 runs " + ", ".join(f"{k}={str(v).lower()}" for k, _, v in dropped)
                         + " where the layout has " + ", ".join(f"{k}={str(x).lower()}" for k, x, _ in dropped)
                         + ": the prediction is the layout's (plan with --framework torchtitan to charge what "
                         "TorchTitan runs)")
        notes += titan_architecture_notes(titan, model)
        notes += titan_balancing_notes(titan, model)
        if framework != "torchtitan":
            notes.append(titan_count_note(model, layout, seq_len, gpu))
        if layout.precision == "fp8":
            notes.append(titan_fp8_note(model.is_moe))
        shipped = titan.configs_03.get(layout.precision) or titan.base_03
        tokenizer = tokenizer_note(model, repr(titan.hf_assets_03) if titan.hf_assets_03 and (
            titan.mla or titan.dense or titan.flavor_config_03) else f"the one {shipped}() sets")
        notes += [tokenizer] if tokenizer else []
        doc |= _config_03(titan, model, layout.precision, seq_len) | {"sections": sections}
    else:
        sections = {"model": {"name": titan.module, "flavor": titan.flavor,
                              "converters": converters_02(layout.precision, model)}} | sections
        if layout.recompute in AC_MODES_02:
            # selective: op-level, as 0.3.0's SelectiveAC; 0.2.2's default selective_ac_option "2" checkpoints every
            # second layer whole (config/job_config.py:655-658)
            sections["activation_checkpoint"] = {"mode": layout.recompute} | (
                {"selective_ac_option": "op"} if layout.recompute == "selective" else {})
        else:  # a Megatron light-module recompute (mla_up_proj, moe_act): no such mode in TorchTitan 0.2
            sections["activation_checkpoint"] = {"mode": "selective", "selective_ac_option": "op"}
            notes.append(f"TorchTitan 0.2 has no {layout.recompute} activation checkpointing (its modes: none, "
                         "selective, full, memory_budget): op-level selective AC stands in; the prediction assumed "
                         f"recompute={layout.recompute}")
        notes += runs_otherwise_02(layout)
        sections["compile"] = dict(TITAN_COMPILE_02)
        notes.append(TITAN_COMPILE_NOTE_02)
        sections |= quantize_02(layout.precision, model)
        filtered = linear_filter_note_02(layout.precision, model.is_moe)
        notes += [filtered] if filtered else []
        notes += [fp8_recipe_note_02(model.is_moe)] if layout.precision == "fp8" else []
        # an hf: model's folder holding its tokenizer is the launch's hf_assets_path, as with 0.3 (torchtitan_assets.py)
        folder = tokenizer_folder(model)
        if folder:
            sections["model"]["hf_assets_path"] = folder
        notes.append(data_note_02(model.name, bool(folder)))
        doc |= {"sections": sections}
    return doc | {"notes": notes}


# TorchTitan 0.3.0's op-level selective AC (distributed/activation_checkpoint.py: saves the attention ops, comm outputs
# and compute-intensive ops except every second plain bf16 mm of a block; recomputes the router gate, routed experts'
# torch._grouped_mm and the elementwise ops) is not what the step model prices under recompute=selective (Megatron's
# core-attention recompute, step/evaluate.py): said, not priced (probe AH, session 34).
TITAN_SELECTIVE_AC_PRICED = (", priced as Megatron's selective core-attention recompute: TorchTitan's op-level "
                             "selective AC saves attention and recomputes every second bf16 matmul, the routed "
                             "experts' grouped GEMMs and the elementwise ops, which the prediction does not price")


def titan_count_note(model: ModelSpec, layout: Layout, seq_len: int | None, gpu=None) -> str:
    """A Megatron plan's TorchTitan launch: the FLOPs per token TorchTitan 0.3.0's log counts for it beside the count
    the plan's model TFLOP/s and MFU are in (models/counts.framework_flops_per_token), each named, and what its log
    prints for MFU on the plan's `gpu` (logged_mfu.titan_mfu_logged)."""
    from commbench.planner.emit.logged_mfu import titan_mfu_logged
    s = seq_len or model.seq_len
    titan = framework_flops_per_token(model, s, "torchtitan")
    mega = float(framework_flops_per_token(model, s, "megatron", vocab=step_vocab(model, layout.tp, "megatron")))
    return (f"TorchTitan 0.3.0's log counts {titan / 1e9:.2f} GFLOP/token for this launch "
            f"({FLOPS_COUNTS['torchtitan'][1]}), where this plan's model TFLOP/s and MFU count {mega / 1e9:.2f} "
            f"({FLOPS_COUNTS['megatron'][0]}): its tflops read {titan / mega:.3f}x the plan's model TFLOP/s at the "
            f"same tokens/s; {titan_mfu_logged(gpu, layout.precision, titan / mega)}")


def _data_parallel_note(layout: Layout) -> str:
    """How the layout's data parallelism runs as TorchTitan's FSDP2, beside what the prediction charged."""
    if layout.fsdp and layout.fsdp_replicas > 1:
        return ("HSDP: FSDP2 over data_parallel_shard_degree, replicated over data_parallel_replicate_degree "
                f"(fsdp_replicas={layout.fsdp_replicas}), resharding after forward as the prediction charged")
    if layout.fsdp:
        return "FSDP2 over data_parallel_shard_degree, resharding after forward as the prediction charged (fsdp=true)"
    if layout.pp > 1:
        return ("FSDP2 under PP (what fsdp=false means with --framework torchtitan): the distributed optimizer maps to "
                "FSDP2 (data_parallel_shard_degree): with PP, torch's pipeline stage "
                "gathers the parameters once a step and reduce-scatters gradients at the last micro-batch "
                "(set_requires_gradient_sync), what the prediction charged; TorchTitan's FSDP also shards parameters "
                "(ZeRO-3)")
    return (f"the distributed optimizer maps to FSDP2 (data_parallel_shard_degree): {TITAN_DP_WITHOUT_PP}, where the "
            "prediction charged one gather and one reduce-scatter a step (plan with --framework torchtitan to charge "
            "what TorchTitan runs)")


def _config_03(titan: TitanModel, model: ModelSpec, precision: str, seq_len: int | None = None) -> dict[str, Any]:
    """The shipped config function for (model, precision), or a generated one (torchtitan_config.py)."""
    shipped = titan.configs_03.get(precision)
    fix = (flavor_fix_lines(titan, model) or []) + balancing_lines(titan, model)
    # an hf: model's folder with its tokenizer is the launch's hf_assets_path (torchtitan_assets.py): set by the
    # generated model lines or the flavor's lines where they set one, else by a line of its own
    fix += positions_lines(model, seq_len)
    folder = tokenizer_folder(model)
    assets = folder or titan.hf_assets_03
    if folder and not (titan.mla or titan.dense or (titan.flavor_config_03 and shipped is None)):
        fix.append(f"    config.hf_assets_path = {folder!r}  # {model.name}'s folder: its tokenizer files")
    if shipped is not None and not fix:
        return {"module": titan.module, "config": shipped}
    text = config_module_text(module=titan.module, base=titan.base_03, flavor=titan.flavor,
                              flavor_config=titan.flavor_config_03, precision=precision, is_moe=model.is_moe,
                              hf_assets=assets,
                              model_lines=mla_model_lines(model, assets, seq_len) if titan.mla else
                              dense_model_lines(model, titan.module, assets, seq_len) if titan.dense
                              else None, shipped=shipped, arch_lines=fix)
    return {"module": MODULE_NAME, "config": config_name(titan.base_03, titan.flavor_config_03, precision),
            "config_module": {"file": MODULE_FILE, "text": text,
                              "launch": f"PYTHONPATH=<plan folder>:$PYTHONPATH (TorchTitan imports --module {MODULE_NAME})"}}


def converters_02(precision: str, model: ModelSpec) -> list[str]:
    kind = {"fp8": "float8", "mxfp8": "mx"}.get(precision)
    if kind is None:
        return []
    return [f"quantize.linear.{kind}"] + ([f"quantize.grouped_mm.{kind}"] if model.is_moe else [])


def quantize_02(precision: str, model: ModelSpec) -> dict[str, Any]:
    """[quantize.*] tables for TorchTitan 0.2: the Linear converters' filter_fqns (torchtitan_v02.py: the head and the
    router gate kept BF16 as the prediction prices them) and the grouped-GEMM converters' MoE modules."""
    kind = {"fp8": "float8", "mxfp8": "mx"}.get(precision)
    if kind is None:
        return {}
    linear = linear_quantize_02(precision, model.is_moe)
    return linear | ({f"quantize.grouped_mm.{kind}": {"fqns": ["experts"]}} if model.is_moe else {})


def torchtitan_args(doc: dict[str, Any]) -> list[str]:
    """TorchTitan 0.3 command line (after `torchrun ... -m torchtitan.train`) from a plan section."""
    out = ["--module", doc["module"], "--config", doc["config"]]
    for section, values in doc["sections"].items():
        for key, value in values.items():
            if isinstance(value, bool):
                out.append(f"--{section}.{key}" if value else f"--{section}.no_{key}")
            elif isinstance(value, list) and value and isinstance(value[0], list):  # list[list[str]]: one comma-joined token per stage
                out += [f"--{section}.{key}", *(",".join(v) for v in value)]
            elif isinstance(value, list):  # list[str]: one comma-joined token (torchtitan 0.3.0 config/manager.py
                out += [f"--{section}.{key}", ",".join(value)]  # list_str_rule)
            else:
                out += [f"--{section}.{key}", str(value)]
    return out


def torchtitan_toml(doc: dict[str, Any]) -> str:
    """TorchTitan 0.2 job TOML from a plan section."""
    lines = [f"# commbench plan (predicted) for TorchTitan {doc['version']}"]
    for note in doc.get("notes", []):
        lines.append(f"# {note}")
    for section, values in doc["sections"].items():
        lines.append(f"\n[{section}]")
        for key, value in values.items():
            lines.append(f"{key} = {str(value).lower() if isinstance(value, bool) else json.dumps(value)}")
    return "\n".join(lines) + "\n"
