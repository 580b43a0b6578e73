"""A Hugging Face `config.json` read into the planner's model description (`--model hf:PATH`).

Keys are those of the transformers configuration classes (configuration_<model_type>.py) for
each model_type below (READERS; Qwen3.5's vision-language config's text_config is its language model, any other
multimodal config and a head other than a causal LM's are refused: hf_task.py); a key the
reader has a fallback for is taken, where config.json leaves it out, at the class's default (hf_defaults.py, which
also says where an explicit null is derived), any other missing key is one line naming it. A key is read under either
name of its class's attribute_map (ATTRIBUTE_MAPS), and the layouts transformers 5.x's save_pretrained writes (its
names, its per-layer lists, DeepSeek-V4's split rope_parameters: tests/data/hf-resaved) read as the hub files
they came from. What the planner
does not model is refused by name (e.g. a sliding window on every layer over a longer sequence than the window, dense
layers after MoE ones, an MTP pattern other than attention + MoE), never approximated silently; so are the model types people train
that it would have to approximate (hf_refused.py, each with what it lacks), a class in `architectures` that is not
model_type's (hf_classes.py) and a key the reader never looks up unless known to change nothing (hf_unread.py).

Parameters are counted as the transformers modules create them (models/counts.py): Qwen2's and GLM-4.5's QKV
biases, gpt-oss's attention, expert and router biases and attention sinks, q/k norms, shared-expert gates. The
aux-loss-free router's correction bias (DeepSeek-V3, GLM-4.5, Nemotron-H) is a buffer there, not a parameter.
Nemotron-H's MTP layer (num_nextn_predict_layers with mtp_hybrid_override_pattern "*E") is an
attention + MoE layer, as the planner's MTP layers are.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

from commbench.errors import CommbenchError, read_user_file
from commbench.planner.models import dsv4
from commbench.planner.models.hf_arch import architecture_from_hf, rope_table
from commbench.planner.models.hf_checks import check_sizes
from commbench.planner.models.hf_classes import class_refusal
from commbench.planner.models.hf_core_rules import core_line, core_name
from commbench.planner.models.hf_defaults import class_default, null_is_derived
from commbench.planner.models.hf_refused import NOT_MODELLED, architecture_key_refusal, not_modelled, refused_class
from commbench.planner.models.hf_router import router_value
from commbench.planner.models.hf_task import head_refusal, multimodal_notes
from commbench.planner.models.hf_unread import ReadKeys, unread_key_refusal
from commbench.planner.models.spec import ModelSpec

PREFIX = "hf:"
DEFAULT_SEQ_LEN = 4096  # config.json holds the context window, not a training sequence length
# Nemotron-H layers_block_type entries as hybrid_override_pattern letters: transformers 5.25.0
# configuration_nemotron_h.py (_pattern_to_list: M linear_attention, E moe, * full_attention, - mlp; validate_layer_type
# allows those four) and the legacy names configuration_utils.py _LEGACY_LAYER_TYPE_REMAP turns into them before
# validating (mamba -> linear_attention, attention -> full_attention), which the remote code's configs hold
HYBRID_BLOCKS = {"linear_attention": "M", "full_attention": "*", "mlp": "-", "moe": "E", "mamba": "M", "attention": "*"}


# transformers 5.25.0 configuration classes' attribute_map (configuration_<type>.py): a key the class reads under
# another name, which config.json may spell either way; save_pretrained writes the right-hand one (a Qwen3-MoE config
# re-saved by transformers 5.x holds num_local_experts, not num_experts). Two spellings given with different values
# are refused: which one the class keeps depends on the order it sets them.
ATTRIBUTE_MAPS: dict[str, dict[str, str]] = {
    "qwen3_moe": {"num_experts": "num_local_experts"},
    "mixtral": {"num_experts": "num_local_experts"},
    "gpt_oss": {"num_experts": "num_local_experts"},
    "deepseek_v2": {"num_experts": "n_routed_experts"},
    "deepseek_v3": {"num_local_experts": "n_routed_experts", "num_mtp_layers": "num_nextn_predict_layers"},
    "glm4_moe": {"num_local_experts": "n_routed_experts", "num_mtp_layers": "num_nextn_predict_layers"},
    "glm4_moe_lite": {"num_local_experts": "n_routed_experts", "head_dim": "qk_rope_head_dim"},
    "deepseek_v4": {"num_local_experts": "n_routed_experts", "intermediate_size": "moe_intermediate_size"},
    "nemotron_h": {"num_local_experts": "n_routed_experts", "layer_types": "layers_block_type"},
}


def _spellings(model_type: str, key: str) -> tuple[str, ...]:
    """`key` and the other names model_type's class reads it under (ATTRIBUTE_MAPS), `key` first."""
    amap = ATTRIBUTE_MAPS.get(model_type, {})
    target = amap.get(key, key)
    return (key,) + tuple(k for k in (target, *amap) if k != key and amap.get(k, k) == target)


class _Config:
    """config.json's keys with the one-line error for a missing or ill-typed one. A top-level key config.json leaves
    out is its model type's configuration-class default where hf_defaults.CLASS_DEFAULTS has one, else the `default`
    the reader passes; an explicit null is `default` where the class derives it (hf_defaults.NULL_DERIVED)."""

    def __init__(self, raw: dict[str, Any], where: str, prefix: str = "", release: str | None = None) -> None:
        self.raw, self.where, self.prefix = raw, where, prefix   # prefix: "rope_scaling." for a nested object
        self.release = release   # the plan's --software (None: the newest table release), which refusals cite
        self.model_type = str(raw.get("model_type", ""))

    def fail(self, what: str) -> CommbenchError:
        return CommbenchError(f"{self.where}: {what}")

    def spelled(self, key: str) -> str:
        """The name config.json gives `key` under (ATTRIBUTE_MAPS; `key` itself if it gives none); two names given
        with different values are one line naming both."""
        if self.prefix:
            return key
        given = [k for k in _spellings(self.model_type, key) if self.raw.get(k) is not None]
        for other in given[1:]:
            if self.raw[other] != self.raw[given[0]]:
                target = ATTRIBUTE_MAPS[self.model_type].get(key, key)
                raise self.fail(f"{given[0]}={self.raw[given[0]]!r} and {other}={self.raw[other]!r} are one setting "
                                f"of model_type {self.model_type!r} ({target}: transformers' configuration class reads "
                                "either name as it, attribute_map), given twice: give one")
        return given[0] if given else key

    def absent(self, key: str, default: Any) -> Any:
        """What a key config.json leaves out reads as: the class default (hf_defaults.py), else `default`."""
        return default if self.prefix else class_default(self.model_type, key, default)

    def _value(self, key: str, default: Any) -> Any:
        """config.json's `key`; left out, absent(); null, `default` (num and flag) or None (int, unless derived)."""
        spelled = self.spelled(key)
        if spelled not in self.raw:
            return self.absent(key, default)
        return self.raw[spelled]

    def int(self, key: str, default: int | None = None) -> int:
        value = self._value(key, default)
        key = self.spelled(key)   # named as config.json names it
        if value is None and key in self.raw and not self.prefix and null_is_derived(self.model_type, key):
            value = default   # __post_init__ derives the null (num_attention_heads, hidden_size // heads)
        if value is None:
            raise self.fail(f"lacks {self.prefix}{key!r} (needed for model_type {self.model_type!r})")
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(f"{self.prefix}{key}={value!r} is invalid: a whole number >= 0")
        return value

    def num(self, key: str, default: float) -> float:
        """A finite number (null: `default`; absent: absent()); "1e-6", true and 1e400 are refused by name."""
        value, key = self._value(key, default), self.spelled(key)
        value = default if value is None else value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(f"{self.prefix}{key}={value!r} is invalid: a finite number")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        """A JSON boolean (null: `default`; absent: absent()); a string such as "false" would read as true."""
        value, key = self._value(key, default), self.spelled(key)
        value = default if value is None else value
        if not isinstance(value, bool):
            raise self.fail(f"{self.prefix}{key}={value!r} is invalid: true or false")
        return value

    def table(self, key: str) -> "_Config":
        """A nested object (null or absent: an empty one), its keys named `key.NAME` in errors."""
        value = self.get(key, {})
        if not isinstance(value, dict):
            raise self.fail(f"{self.prefix}{key}={value!r} is invalid: an object (or null)")
        return _Config(dict(value, model_type=self.model_type), self.where, f"{self.prefix}{key}.", self.release)

    def seq(self, key: str) -> list[Any]:
        """A JSON list (null or absent: an empty one); a string or number was iterated or a TypeError traceback."""
        value = self.get(key, [])
        if not isinstance(value, list):
            raise self.fail(f"{self.prefix}{key}={value!r} is invalid: a list")
        return value

    def get(self, key: str, default: Any = None) -> Any:
        value = self.raw.get(self.spelled(key))
        return default if value is None else value


# Model types whose checkpoints' own modeling code takes the head width from attention_head_dim: Nemotron-H's remote
# code (NemotronHAttention: head_dim = config.attention_head_dim; vLLM's nemotron_h.py reads head_dim first, then
# attention_head_dim). transformers 5.25.0 NemotronHConfig reads head_dim (default 128), so both must agree. Among
# transformers' classes only zamba, zamba2, hunyuan_vl and edgetam_video read attention_head_dim, none of the types
# here: on any other type the key changes nothing (LlamaConfig ignores it; it set a Llama's head_dim before).
ATTENTION_HEAD_DIM_TYPES = ("nemotron_h",)


def _common(c: _Config, name: str, layers: int | None = None) -> dict[str, Any]:
    """The keys every reader takes; `layers`: num_hidden_layers where config.json leaves it out (Nemotron-H's)."""
    heads = c.int("num_attention_heads")
    hidden = c.int("hidden_size")
    if heads == 0:
        raise c.fail("num_attention_heads=0 is invalid: > 0")
    # head_dim and num_key_value_heads left out: the class default (Qwen3Config head_dim 128), else derived as
    # __post_init__ or the modeling code's getattr does (hidden_size // num_attention_heads, num_attention_heads)
    head_dim = c.int("head_dim", hidden // heads)
    if c.model_type in ATTENTION_HEAD_DIM_TYPES and c.get("attention_head_dim") is not None \
            and c.int("attention_head_dim") != head_dim:
        key, says = (f"head_dim={head_dim}", "per head") if c.get("head_dim") is not None else \
            ("head_dim", f"left out: the class's {head_dim}")
        raise _disagree(c, key, says, f"attention_head_dim={c.int('attention_head_dim')}",
                        "the checkpoints' remote code reads this one", "head_dim")
    positions = c.int("max_position_embeddings", DEFAULT_SEQ_LEN)
    if positions == 0:   # was read as DEFAULT_SEQ_LEN and launched as --max-position-embeddings 4096, silently
        raise c.fail("max_position_embeddings=0 is invalid: > 0 (the positions the model is built for)")
    return dict(
        name=name, num_layers=c.int("num_hidden_layers", layers), hidden=hidden, num_heads=heads,
        num_kv_heads=c.int("num_key_value_heads", heads), head_dim=head_dim,
        vocab=c.int("vocab_size"), tied_embeddings=c.flag("tie_word_embeddings", False),
        seq_len=min(DEFAULT_SEQ_LEN, positions),
        glu=True,
    )


# model types whose attention layers all take config.sliding_window, with the configuration class's default where
# config.json leaves the key out (hf_defaults.py: MistralConfig sliding_window=4096, Mistral-7B-v0.1's; MixtralConfig
# none; modeling_mistral.py MistralAttention and modeling_mixtral.py MixtralAttention pass it on every layer); null is
# full attention
WINDOW_ON_EVERY_LAYER = ("mistral", "mixtral")


def _every_layer_window(c: _Config) -> dict[str, Any]:
    """A window on every layer (WINDOW_ON_EVERY_LAYER): token i attends to the `sliding_window` tokens up to itself
    (transformers masking_utils sliding_window_overlay: kv_idx > q_idx - sliding_window; Megatron-Bridge
    mistral_bridge.py window_size = (sliding_window - 1, 0)). Over a sequence of at most that many tokens it masks
    nothing: the model is planned as full attention with the window kept in `extra` (search/frameworks.py
    check_window_seq_len refuses a longer sequence, whose windows the step model does not price; the plan's notes say
    it). {} where there is none."""
    if c.model_type not in WINDOW_ON_EVERY_LAYER:
        return {}
    given = "sliding_window" in c.raw
    window = c.raw["sliding_window"] if given else c.absent("sliding_window", None)
    if window is None:
        return {}
    shown = repr(window) if given else f"absent (the configuration class's {window})"
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise c.fail(f"sliding_window={window!r} is invalid: a whole number of tokens > 0, or null (full attention)")
    return {"every_layer_window": window, "every_layer_window_key": f"sliding_window={shown}"}


def _dense(c: _Config, name: str) -> dict[str, Any]:
    if c.get("use_sliding_window", False):
        raise c.fail("use_sliding_window=true is not modelled (only gpt-oss's alternating windows are)")
    out = _common(c, name)
    window = _every_layer_window(c)
    return dict(out, num_dense_layers=out["num_layers"], dense_ffn=c.int("intermediate_size"),
                **({"extra": window} if window else {}))


def _phi3(c: _Config, name: str) -> dict[str, Any]:
    """Phi-3 / Phi-3.5 / Phi-4 (model_type phi3): Llama's network with q/k/v fused into one qkv_proj and gate/up
    into one gate_up_proj, neither biased (transformers 5.25.0 modeling_phi3.py Phi3Attention, Phi3MLP: the same
    parameters, the same SwiGLU). Read only where it is exactly that: plain RoPE on the whole head, and no sliding
    window, or one no shorter than max_position_embeddings (which masks nothing a sequence of at most that many
    tokens attends to). Phi3Config reads rope type "su" and "yarn" as "longrope" (configuration_phi3.py
    convert_rope_params_to_dict) and allows only "default" and "longrope"."""
    rope = rope_table(c)
    key = "rope_type" if rope.get("rope_type") is not None else "type"
    kind = rope.get(key, "default")
    if kind != "default":
        what = ("LongRoPE (Phi3Config reads 'su' and 'yarn' as 'longrope'): per-frequency short/long rescale factors "
                "that no Megatron-LM RoPE flag gives" if kind in ("su", "yarn", "longrope") else
                "Phi3Config allows only 'default' and 'longrope'")
        raise c.fail(f"{rope.prefix}{key}={kind!r} is not modelled for model_type 'phi3': {what} (plain RoPE, "
                     "rope_scaling null or rope_type 'default', is read)")
    rotary = rope.num("partial_rotary_factor", c.num("partial_rotary_factor", 1.0))
    if rotary != 1.0:
        raise c.fail(f"partial_rotary_factor={rotary:g} is not modelled for model_type 'phi3': RoPE on the whole "
                     "head (1.0) is read")
    positions = c.int("max_position_embeddings", 4096)   # Phi3Config: max_position_embeddings 4096
    if c.get("sliding_window") is not None and c.int("sliding_window") < positions:
        raise c.fail(f"sliding_window={c.get('sliding_window')!r} is not modelled for model_type 'phi3': a window on "
                     f"every layer shorter than max_position_embeddings={positions} (null, or a window of at least "
                     "max_position_embeddings, is read as full attention)")
    return _dense(c, name)


def _leading_dense(c: _Config, key: str) -> int:
    """Dense layers of a MoE model; the planner places them first, so any other placement is refused."""
    layers = sorted(c.int(f"{key}[{n}]", i) for n, i in enumerate(c.seq(key)))
    if layers != list(range(len(layers))):
        raise c.fail(f"{key}={layers} is not modelled: dense layers must be the first ones")
    if c.int("decoder_sparse_step", 1) != 1:
        raise c.fail(f"decoder_sparse_step={c.get('decoder_sparse_step')!r} is not modelled: 1 (every layer MoE)")
    return len(layers)


def _kinds(c: _Config, key: str, allowed: tuple[str, ...], layers: int, truncated: bool = False) -> list[Any] | None:
    """Per-layer list `key` (None: left out or null) as transformers validates it (configuration_utils.py
    PreTrainedConfig.validate_layer_type): one entry per layer (`truncated`: at least one, those past
    num_hidden_layers not read, as DeepseekV4Config.__post_init__ cuts its lists), each one of `allowed`."""
    if c.get(key) is None:
        return None
    kinds = c.seq(key)
    if len(kinds) < layers or (len(kinds) > layers and not truncated):
        raise c.fail(f"{key} has {len(kinds)} entries for num_hidden_layers={layers}: one per layer")
    kinds = kinds[:layers]
    bad = [k for k in kinds if not isinstance(k, str) or k not in allowed]
    if bad:
        raise c.fail(f"{key} entry {bad[0]!r} is invalid: one of {', '.join(allowed)}")
    return kinds


def _leading(c: _Config, key: str, kinds: list[Any], kind: str, what: str) -> int:
    """How many of list `key`'s first entries are `kind`; `kind` after any other is refused."""
    n = next((i for i, k in enumerate(kinds) if k != kind), len(kinds))
    if kind in kinds[n:]:
        raise c.fail(f"{key} is not modelled unless the {what} come first")
    return n


def _disagree(c: _Config, key: str, says: str, other: str, other_says: str, reads: str) -> CommbenchError:
    """Two spellings of one per-layer fact that config.json gives differently: the class builds from `reads`, another
    tool (or transformers before 5) from the other, so which model is meant is the user's to say."""
    return c.fail(f"{key} ({says}) and {other} ({other_says}) disagree: transformers 5.25.0 builds model_type "
                  f"{c.model_type!r} from {reads} alone; give one of them, or make them agree")


def _shared_count(c: _Config, shared_ffn: int, expert_ffn: int, key: str) -> int:
    if expert_ffn == 0:   # no expert width: the model's own check names it (was a ZeroDivisionError traceback)
        return 0
    if shared_ffn % expert_ffn:
        raise c.fail(f"{key}={shared_ffn} is not modelled: a multiple of the expert width {expert_ffn}")
    return shared_ffn // expert_ffn


# Qwen MoE types whose MoE block has no shared expert: transformers 5.25.0 modeling_qwen3_moe.py
# Qwen3MoeSparseMoeBlock is `gate` and `experts` alone and Qwen3MoeConfig has no shared_expert_intermediate_size
# (Megatron-Bridge's Qwen3MoEBridge sets none either); a config carrying the key builds no shared expert
NO_SHARED_EXPERT_TYPES = ("qwen3_moe",)


def _unbuilt_shared_expert(c: _Config) -> list[str]:
    """The note for a non-zero shared_expert_intermediate_size on a type that builds no shared expert ([] if none)."""
    value = c.get("shared_expert_intermediate_size")
    if c.model_type not in NO_SHARED_EXPERT_TYPES or value in (None, 0):
        return []
    return [f"config.json's shared_expert_intermediate_size={value!r} is ignored for model_type {c.model_type!r}: "
            "its MoE block has no shared expert (transformers 5.25.0 Qwen3MoeSparseMoeBlock: the router and the routed "
            "experts alone; Qwen3MoeConfig has no such key), so none is planned or launched"]


def _noted(fields: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """`fields` with `notes` added to extra["notes"] (what the plan says of how the config was read)."""
    if not notes:
        return fields
    extra = dict(fields.get("extra", {}))
    extra["notes"] = list(extra.get("notes", ())) + notes
    return dict(fields, extra=extra)


def _qwen_moe(c: _Config, name: str) -> dict[str, Any]:
    if c.get("use_sliding_window", False):  # Qwen2/3-MoE have it as the dense Qwen models do (read as none)
        raise c.fail("use_sliding_window=true is not modelled (only gpt-oss's alternating windows are)")
    # Qwen2MoeDecoderLayer / Qwen3MoeDecoderLayer (transformers): a layer is sparse where num_experts > 0 and
    # (layer + 1) % decoder_sparse_step == 0, else a dense MLP of intermediate_size; only every layer sparse is read
    if c.int("num_experts", 1) == 0:
        raise c.fail(f"num_experts=0 is not modelled as model_type {c.model_type!r}: every layer is then a dense MLP "
                     "of intermediate_size (Qwen MoE decoder layers); give the dense model's config (model_type "
                     f"{c.model_type.replace('_moe', '')!r})")
    if c.int("decoder_sparse_step", 1) != 1:
        raise c.fail(f"decoder_sparse_step={c.get('decoder_sparse_step')!r} is not modelled: 1 (every layer MoE, but "
                     "mlp_only_layers); other steps interleave dense MLP layers")
    out = _common(c, name)
    ffn = c.int("moe_intermediate_size")
    # left out: the class default (hf_defaults.py: Qwen2MoeConfig 5632, Qwen3NextConfig 512, Qwen3_5MoeTextConfig
    # 512); Qwen3-MoE has none (NO_SHARED_EXPERT_TYPES)
    shared = (0 if c.model_type in NO_SHARED_EXPERT_TYPES else
              _shared_count(c, c.int("shared_expert_intermediate_size", 0), ffn, "shared_expert_intermediate_size"))
    dense = _leading_dense(c, "mlp_only_layers")
    # the key as config.json gives it, for a framework's refusal to name (search/frameworks.py titan_moe_misfits)
    named = {"extra": {"dense_layers_key": f"mlp_only_layers={c.seq('mlp_only_layers')!r}"}} if dense else {}
    return _noted(dict(out, num_dense_layers=dense, dense_ffn=c.int("intermediate_size") if dense else 0,
                       num_routed_experts=c.int("num_experts"), top_k=c.int("num_experts_per_tok"), expert_ffn=ffn,
                       num_shared_experts=shared, **named), _unbuilt_shared_expert(c))


def _qwen3_next(c: _Config, name: str) -> dict[str, Any]:
    """Qwen3-Next and Qwen3.5 MoE: Qwen3 MoE with Gated DeltaNet layers and gated full attention every
    full_attention_interval-th layer (layer_types, when given, must say the same; Qwen3.5's configs give
    layer_types, its configuration class defaults the interval to 4), and their MTP layers (mtp_num_hidden_layers:
    gated full attention + MoE, as Megatron-Bridge's qwen3_next_bridge.py and qwen35_bridge.py map them)."""
    return _gated_deltanet(c, _qwen_moe(c, name))


def _qwen3_5(c: _Config, name: str) -> dict[str, Any]:
    """Qwen3.5 dense (Qwen3.5-27B, -9B and smaller; model_type qwen3_5, its text_config qwen3_5_text): Qwen3.5 MoE's
    network with a dense SwiGLU MLP of intermediate_size on every layer (transformers modular_qwen3_5.py: Qwen3_5MLP
    from Qwen3NextMLP, Qwen3_5TextConfig deletes the MoE keys), its MTP layer gated full attention + that dense MLP
    (Megatron-Bridge qwen35_bridge.py _get_dense_mtp_mappings: mtp.layers.0.mlp.gate_proj/up_proj/down_proj)."""
    return _gated_deltanet(c, _dense(c, name))


def _gated_deltanet(c: _Config, out: dict[str, Any]) -> dict[str, Any]:
    """Gated DeltaNet layers with gated full attention every full_attention_interval-th layer (layer_types, when
    given, must say the same; Qwen3.5's configs give layer_types, their configuration classes default the interval to
    4: configuration_qwen3_next.py, configuration_qwen3_5.py, configuration_qwen3_5_moe.py `kwargs.pop(
    "full_attention_interval", 4)`; a Qwen3-Next config without either was refused), the GDN head sizes and the MTP
    layers."""
    kinds = c.seq("layer_types") if c.get("layer_types") is not None else None
    first_full = kinds.index("full_attention") + 1 if kinds and "full_attention" in kinds else 4
    freq = c.int("full_attention_interval", first_full)
    if freq == 0:
        raise c.fail("full_attention_interval=0 is invalid: > 0")
    if kinds is not None:
        want = ["full_attention" if (i + 1) % freq == 0 else "linear_attention" for i in range(out["num_layers"])]
        if kinds != want:
            raise c.fail(f"layer_types is not modelled unless every {freq}-th layer is full attention "
                         "(full_attention_interval)")
    return dict(out, linear_attention_freq=freq, num_mtp_layers=c.int("mtp_num_hidden_layers", 0),
                gdn_num_key_heads=c.int("linear_num_key_heads"),
                gdn_num_value_heads=c.int("linear_num_value_heads"), gdn_key_head_dim=c.int("linear_key_head_dim"),
                gdn_value_head_dim=c.int("linear_value_head_dim"), gdn_conv_kernel=c.int("linear_conv_kernel_dim", 4),
                attention_gate=True)


def _mixtral(c: _Config, name: str) -> dict[str, Any]:
    out = _common(c, name)
    window = _every_layer_window(c)
    return dict(out, num_dense_layers=0, num_routed_experts=c.int("num_local_experts"),
                top_k=c.int("num_experts_per_tok"), expert_ffn=c.int("intermediate_size"),
                **({"extra": window} if window else {}))


def _gpt_oss(c: _Config, name: str) -> dict[str, Any]:
    out = _common(c, name)
    kinds = c.seq("layer_types")
    window = c.int("sliding_window", 0)
    # which layers, not only how many: TorchTitan 0.3.0's gpt_oss flavors window the even-indexed layers
    # (models/gpt_oss/__init__.py: sliding_window_size=128 if layer_id % 2 == 0), as megatron-core 0.16.1's
    # window_attn_skip_freq 2 does (transformer/utils.py is_layer_window_attention: 1-based layer_number % 2 != 0),
    # and the released configs (layer 0 sliding); half the layers sliding elsewhere was launched as that pattern
    if kinds and len(kinds) != out["num_layers"]:
        raise c.fail(f"layer_types has {len(kinds)} entries for num_hidden_layers={out['num_layers']}: one per layer")
    alternation = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(len(kinds))]
    if window and kinds and kinds != alternation:
        sliding = [i for i, kind in enumerate(kinds) if kind == "sliding_attention"]
        shown = ", ".join(map(str, sliding[:6])) + (", ..." if len(sliding) > 6 else "") if sliding else "none"
        raise c.fail(f"layer_types is not modelled for model_type 'gpt_oss' with sliding layers {shown}: gpt-oss's "
                     "alternation, 'sliding_attention' on layers 0, 2, 4, ... and 'full_attention' on 1, 3, 5, ... "
                     "(where TorchTitan 0.3.0's gpt_oss flavors and Megatron's --window-attn-skip-freq 2 put the "
                     "windows), is read")
    return dict(out, num_dense_layers=0, num_routed_experts=c.int("num_local_experts"),
                top_k=c.int("num_experts_per_tok") if c.get("num_experts_per_tok") is not None
                else c.int("experts_per_token"),   # either key (the other one's default read lazily)
                expert_ffn=c.int("intermediate_size"), sliding_window=window)


def _mla_class_int(c: _Config, key: str) -> int:
    """config.json's `key`, else the MLA model type's class default (hf_defaults.py: DeepseekV3Config
    n_shared_experts 1, first_k_dense_replace 3; DeepseekV2Config 2 and 0; Glm4MoeLiteConfig n_shared_experts 1);
    null, or left out where the type has no class (kimi_k2: its hub remote code), is one line naming it."""
    if c.get(key) is not None:
        return c.int(key)
    if key in c.raw:   # transformers keeps an explicit null, on which its MoE block fails
        raise c.fail(f"{key}=null is invalid for model_type {c.model_type!r}: a whole number")
    default = c.absent(key, None)
    if default is None:
        raise c.fail(f"lacks {key!r} (needed for model_type {c.model_type!r}: transformers has no configuration class "
                     "for it to default from)")
    return default


# MLA types whose transformers class builds each layer's MLP from mlp_layer_types alone, with the leading dense layers
# of the list it defaults to: transformers 5.25.0 configuration_glm4_moe_lite.py Glm4MoeLiteConfig has no
# first_k_dense_replace and sets mlp_layer_types None to ['dense'] + ['sparse'] * (layers - 1);
# modeling_glm4_moe_lite.py Glm4MoeLiteDecoderLayer builds a MoE where the layer's entry is 'sparse', a dense MLP
# otherwise. DeepseekV2Config and
# DeepseekV3Config (and Kimi-K2's remote code, DeepSeek-V3's) read first_k_dense_replace alone.
DENSE_FROM_MLP_LAYER_TYPES = {"glm4_moe_lite": 1}


def _dense_first(n: int, what: str = "dense") -> str:
    return f"{n} leading {what} layer{'' if n == 1 else 's'}"


def _mla_dense_layers(c: _Config, layers: int) -> int:
    """The leading dense layers, from the key the type's class builds from; the other spelling, where config.json
    gives it too (transformers 5.x writes both for glm4_moe_lite), must say the same."""
    listed = _kinds(c, "mlp_layer_types", ("dense", "sparse"), layers)
    from_list = None if listed is None else _leading(c, "mlp_layer_types", listed, "dense", "dense layers")
    if from_list == layers:
        raise c.fail("mlp_layer_types is invalid: every entry 'dense' (a model with routed experts needs at least one "
                     "'sparse' layer; give a dense model's config for an all-dense network)")
    if c.model_type in DENSE_FROM_MLP_LAYER_TYPES:
        built = DENSE_FROM_MLP_LAYER_TYPES[c.model_type] if from_list is None else from_list
        if c.get("first_k_dense_replace") is not None and c.int("first_k_dense_replace") != built:
            says = _dense_first(built) if from_list is not None else \
                f"left out: the class's ['dense'] + ['sparse'] * {layers - 1}, {_dense_first(built)}"
            given = c.int("first_k_dense_replace")
            raise _disagree(c, "mlp_layer_types", says, f"first_k_dense_replace={given}", _dense_first(given),
                            "mlp_layer_types")
        return built
    dense = _mla_class_int(c, "first_k_dense_replace")
    if from_list is not None and from_list != dense:
        raise _disagree(c, f"first_k_dense_replace={dense}", _dense_first(dense), "mlp_layer_types",
                        _dense_first(from_list), "first_k_dense_replace")
    return dense


def _deepseek_v3(c: _Config, name: str) -> dict[str, Any]:
    """MLA + MoE (DeepSeek-V2 / V3, Kimi-K2, Moonlight, GLM-4.7-Flash): the first first_k_dense_replace layers
    (GLM-4.7-Flash: mlp_layer_types' leading "dense") dense; q_lora_rank null is MLA without the query low rank
    (V2-Lite, Moonlight)."""
    if c.int("moe_layer_freq", 1) != 1:
        raise c.fail(f"moe_layer_freq={c.get('moe_layer_freq')!r} is not modelled: 1")
    if c.get("topk_method") == "group_limited_greedy" and c.get("n_group") is None:
        raise c.fail("topk_method='group_limited_greedy' lacks 'n_group' (DeepseekV2Config defaults it to null, on "
                     "which DeepseekV2TopkRouter fails): give n_group and topk_group")
    if c.get("topk_method") == "group_limited_greedy" and c.int("n_group", 1) > 1:
        raise c.fail(f"topk_method='group_limited_greedy' is not modelled: it picks topk_group={c.get('topk_group')!r} "
                     f"of n_group={c.get('n_group')!r} expert groups by each group's best score, "
                     f"{core_name(c.release)} by the sum of each group's top (top_k / topk_group) scores "
                     f"(group_limited_topk, {core_line('group_scores', c.release)}), another router")
    out = _common(c, name)
    out.pop("head_dim"), out.pop("num_kv_heads")
    extra = {k: router_value(c, k) for k in ("n_group", "topk_group")}   # absent: the class default
    return dict(out, attention="mla", num_dense_layers=_mla_dense_layers(c, out["num_layers"]),
                q_lora_rank=0 if "q_lora_rank" in c.raw and c.raw["q_lora_rank"] is None else c.int("q_lora_rank"),
                kv_lora_rank=c.int("kv_lora_rank"),
                qk_nope_head_dim=c.int("qk_nope_head_dim"), qk_rope_head_dim=c.int("qk_rope_head_dim"),
                v_head_dim=c.int("v_head_dim"), dense_ffn=c.int("intermediate_size"),
                num_routed_experts=c.int("n_routed_experts"), num_shared_experts=_mla_class_int(c, "n_shared_experts"),
                top_k=c.int("num_experts_per_tok"), expert_ffn=c.int("moe_intermediate_size"),
                num_mtp_layers=c.int("num_nextn_predict_layers", 0), extra=extra)


# DeepseekV4Config's attention kinds (configuration_deepseek_v4.py DEEPSEEK_V4_LAYER_TYPES,
# _COMPRESS_RATIO_TO_LAYER_TYPE) and compress_rates' default (default_compress_rates)
DSV4_LAYER_TYPES = {"sliding_attention": "W", "compressed_sparse_attention": "C", "heavily_compressed_attention": "H"}
DSV4_DEFAULT_RATES = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}


def _csa_pattern(c: _Config, layers: int, mtp: int) -> str:
    """DeepSeek-V4's attention kind per decoder layer (models/dsv4.py) from the native `layer_types` (+
    `compress_rates`, left out: the class's 4 and 128) or the legacy `compress_ratios` (one per layer, then 0 per MTP
    layer), as Megatron-Bridge reads either. DeepseekV4Config.__post_init__ reads compress_ratios only where
    layer_types is left out: both given must agree."""
    kind = {ratio: k for k, ratio in dsv4.KINDS.items()}
    legacy = None
    if c.get("compress_ratios") is not None:
        ratios = c.seq("compress_ratios")
        if len(ratios) not in (layers, layers + mtp) or any(r not in dsv4.KINDS.values() for r in ratios) \
                or any(ratios[layers:]):
            raise c.fail(f"compress_ratios={ratios!r} is not modelled: one of 0, 4, 128 per layer ({layers}), then 0 "
                         f"per MTP layer ({mtp})")
        legacy = "".join(kind[r] for r in ratios[:layers])
    listed = _kinds(c, "layer_types", tuple(DSV4_LAYER_TYPES), layers, truncated=True)
    if listed is None:
        if legacy is None:
            raise c.fail("lacks 'compress_ratios' (or 'layer_types' with 'compress_rates'), needed for model_type "
                         "'deepseek_v4'")
        return legacy
    rates = c.table("compress_rates")
    for name, ratio in DSV4_DEFAULT_RATES.items():
        if rates.int(name, ratio) != ratio:
            raise rates.fail(f"compress_rates.{name}={rates.get(name)!r} is not modelled: {ratio} (the compression "
                             "ratios megatron-core's dsv4_hybrid attention builds)")
    pattern = "".join(DSV4_LAYER_TYPES[t] for t in listed)
    if legacy is not None and legacy != pattern:
        i = next(i for i, (a, b) in enumerate(zip(pattern, legacy)) if a != b)
        raise _disagree(c, "layer_types", f"layer {i} {listed[i]!r}", "compress_ratios",
                        f"layer {i} ratio {dsv4.KINDS[legacy[i]]}", "layer_types")
    return pattern


def _hash_layers(c: _Config, layers: int) -> int:
    """The leading hash-routed MoE layers: the prefix of mlp_layer_types, else the legacy num_hash_layers (left out:
    DeepseekV4Config's 3, hf_defaults.py), which DeepseekV4Config.__post_init__ reads only where mlp_layer_types is
    left out: both given must agree."""
    listed = _kinds(c, "mlp_layer_types", ("hash_moe", "moe"), layers, truncated=True)
    if listed is None:
        return c.int("num_hash_layers", 0)
    n = _leading(c, "mlp_layer_types", listed, "hash_moe", "hash-routed MoE layers")
    if c.get("num_hash_layers") is not None and c.int("num_hash_layers") != n:
        given = c.int("num_hash_layers")
        raise _disagree(c, "mlp_layer_types", _dense_first(n, "hash-routed MoE"), f"num_hash_layers={given}",
                        _dense_first(given, "hash-routed MoE"), "mlp_layer_types")
    return n


def _dsv4_rope_dim(c: _Config, out: dict[str, Any]) -> int:
    """The rotated part of DeepSeek-V4's head: DeepseekV4Config (transformers 5.25.0) derives qk_rope_head_dim as
    int(head_dim * partial_rotary_factor) and reads the published config's qk_rope_head_dim only where
    partial_rotary_factor is left out (then the class's 64 / 512): both given must agree."""
    if c.get("partial_rotary_factor") is None:
        return c.int("qk_rope_head_dim", out["head_dim"] // 8)
    derived = int(out["head_dim"] * c.num("partial_rotary_factor", 0.125))
    if c.get("qk_rope_head_dim") is not None and c.int("qk_rope_head_dim") != derived:
        raise _disagree(c, f"partial_rotary_factor={c.get('partial_rotary_factor')!r}", f"{derived} of head_dim "
                        f"{out['head_dim']}", f"qk_rope_head_dim={c.int('qk_rope_head_dim')}",
                        f"{c.int('qk_rope_head_dim')}", "partial_rotary_factor")
    return derived


def _deepseek_v4(c: _Config, name: str) -> dict[str, Any]:
    """DeepSeek-V4: every layer MoE, multi-query compressed attention (one KV head of head_dim), mHC streams."""
    if c.int("num_key_value_heads", 1) != 1:
        raise c.fail(f"num_key_value_heads={c.get('num_key_value_heads')!r} is not modelled: 1 (DeepSeek-V4's one KV head)")
    out = _common(c, name)
    layers, mtp = out["num_layers"], c.int("num_nextn_predict_layers", 0)
    return dict(out, attention="dsv4", num_kv_heads=1, num_dense_layers=0, qk_rope_head_dim=_dsv4_rope_dim(c, out),
                q_lora_rank=c.int("q_lora_rank"), o_lora_rank=c.int("o_lora_rank"), o_groups=c.int("o_groups"),
                csa_pattern=_csa_pattern(c, layers, mtp), csa_window=c.int("sliding_window"),
                index_heads=c.int("index_n_heads"), index_head_dim=c.int("index_head_dim"),
                index_topk=c.int("index_topk"), hc_mult=c.int("hc_mult", 0), hash_layers=_hash_layers(c, layers),
                num_routed_experts=c.int("n_routed_experts"), num_shared_experts=c.int("n_shared_experts", 0),
                top_k=c.int("num_experts_per_tok"), expert_ffn=c.int("moe_intermediate_size"), num_mtp_layers=mtp)


# The key each model type's MTP depth is read from (the readers above), named by a refusal of MTP with YaRN
# (search/frameworks.py _non_mla_yarn_missing)
MTP_KEYS = {"qwen3_next": "mtp_num_hidden_layers", "qwen3_5_moe": "mtp_num_hidden_layers",
            "qwen3_5": "mtp_num_hidden_layers"}


def _named_mtp_rope(c: _Config, fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` with the config keys that gave its MTP depth and its YaRN RoPE in extra (mtp_layers_key,
    rope_kind_key), so a refusal of the two together on non-MLA attention (Megatron's --position-embedding-type yarn)
    names them as config.json has them."""
    arch = fields["architecture"]
    if not fields.get("num_mtp_layers") or arch.position_embedding != "yarn":
        return fields
    table = rope_table(c)
    key = "rope_type" if table.get("rope_type") is not None else "type"
    extra = dict(fields.get("extra", {}),
                 mtp_layers_key=f"{MTP_KEYS.get(c.model_type, 'num_nextn_predict_layers')}={fields['num_mtp_layers']}",
                 rope_kind_key=f"{table.prefix}{key}='yarn'")
    return dict(fields, extra=extra)


def _glm4_moe(c: _Config, name: str) -> dict[str, Any]:
    """GLM-4.5 / 4.6 / 4.7 (model_type glm4_moe): GQA attention, the first first_k_dense_replace layers dense,
    the rest routed + shared experts (DeepSeek-V3's MoE block), MTP layers."""
    if (c.int("moe_layer_freq", 1) or 1) != 1:
        raise c.fail(f"moe_layer_freq={c.get('moe_layer_freq')!r} is not modelled: 1")
    out = _common(c, name)
    extra = {k: router_value(c, k) for k in ("n_group", "topk_group")}   # absent: the class default
    # absent keys at Glm4MoeConfig's defaults (hf_defaults.py: first_k_dense_replace 1, n_shared_experts 1,
    # num_nextn_predict_layers 1; the first two were read as 0)
    if c.int("first_k_dense_replace"):   # named by a framework's refusal (search/frameworks.py titan_moe_misfits)
        extra["dense_layers_key"] = f"first_k_dense_replace={c.int('first_k_dense_replace')}"
    return dict(out, num_dense_layers=c.int("first_k_dense_replace"), dense_ffn=c.int("intermediate_size"),
                num_routed_experts=c.int("n_routed_experts"), num_shared_experts=c.int("n_shared_experts"),
                top_k=c.int("num_experts_per_tok"), expert_ffn=c.int("moe_intermediate_size"),
                num_mtp_layers=c.int("num_nextn_predict_layers", 0), extra=extra)


def _nemotron_h_pattern(c: _Config, key: str, pattern_key: str, default: str | None) -> str | None:
    """A Nemotron-H layer pattern ("M-M*E", hybrid_override_pattern's letters) from the list `key` and the string
    `pattern_key` (None: neither given, and no `default`). NemotronHConfig (transformers 5.25.0) builds from the
    list, reading the older string only where the list is left out (or, for the MTP layers, is its default); the
    checkpoints' remote code reads the string: both given must agree."""
    pattern = c.get(pattern_key)
    if pattern is not None and not isinstance(pattern, str):
        letters = ", ".join(sorted(set(HYBRID_BLOCKS.values())))
        raise c.fail(f"{pattern_key}={pattern!r} is invalid: a string of {letters}")
    if c.get(key) is None:
        return pattern if pattern is not None else default
    blocks = c.seq(key)
    unknown = [b for b in blocks if not isinstance(b, str) or b not in HYBRID_BLOCKS]
    if unknown:
        raise c.fail(f"{c.spelled(key)} entry {unknown[0]!r} is invalid: one of {', '.join(HYBRID_BLOCKS)}")
    listed = "".join(HYBRID_BLOCKS[b] for b in blocks)
    if pattern is not None and pattern != listed:
        i = next((i for i, (a, b) in enumerate(zip(listed, pattern)) if a != b), None)
        says = (f"layer {i} {blocks[i]!r}", f"layer {i} {pattern[i]!r}") if i is not None else \
            (f"{len(listed)} layers", f"{len(pattern)} layers")
        raise _disagree(c, c.spelled(key), says[0], pattern_key, says[1], key)
    return listed


NO_DT_LIMIT = (0.0, math.inf)   # mamba_ssm ssd_combined.py mamba_split_conv1d_scan_combined's dt_limit default


def _tagged_float(value: Any) -> Any:
    """A non-finite float as transformers 5.25.0 writes it in a config.json ({"__float__": "Infinity"}: the
    Nemotron-H files it resaves, tests/data/hf-resaved) as that float; any other value as it is."""
    if isinstance(value, dict) and set(value) == {"__float__"} and value["__float__"] in ("Infinity", "-Infinity"):
        return float(value["__float__"])
    return value


def _nemotron_h_mamba_numerics(c: _Config) -> None:
    """Nemotron-H keys that change the network the checkpoints' code runs but that the emitted pretrain_mamba.py
    launch does not build, refused by name (the model would be another one), and the one such key that nothing
    reads, accepted:
    - time_step_limit (transformers 5.25.0's __post_init__ also takes the older mamba_dt_limit): transformers'
      NemotronHMamba2Mixer (modeling_nemotron_h.py cuda_kernels_forward) and the checkpoints' remote code pass it as
      dt_limit to mamba_ssm's mamba_split_conv1d_scan_combined, which clamps every time step into it; megatron-core's
      MambaMixer passes none to it in training (ssm/mamba_mixer.py: 25.09's core_v0.14.0 :426, 26.02.01's 55ac7082
      :659, 26.08's cd4afffa :755; cd4afffa's inference path passes the kernel default, :1019), so only (0, inf),
      the default, is the model the launch builds.
    - residual_in_fp32: the checkpoints' remote code (NemotronHBlock.forward: residual.to(torch.float32)) keeps the
      residual stream in fp32 and Megatron-Bridge maps it to fp32_residual_connection (nemotron_h_bridge.py
      CONFIG_MAPPING, v0.3.1 to v0.6.0), while transformers 5.25.0's NemotronHBlock ignores it; the launch builds a
      bf16 stream and the step model prices one, so true is refused (every released Nemotron-H config says false).
    - mamba_proj_bias: declared by NemotronHConfig but read by neither transformers' NemotronHMamba2Mixer nor the
      remote code (both build in_proj / out_proj with bias=config.use_bias, checked above) nor Megatron-Bridge's
      NemotronHBridge (maps use_bias to add_bias_linear): any value builds the same model, so it is accepted."""
    key = "mamba_dt_limit" if "mamba_dt_limit" in c.raw and "time_step_limit" not in c.raw else "time_step_limit"
    limit = c.raw.get(key, list(NO_DT_LIMIT))
    bounds = tuple(map(_tagged_float, limit)) if isinstance(limit, list) and len(limit) == 2 else None
    if bounds is None or not all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds):
        raise c.fail(f"{key}={limit!r} is invalid: a list of two numbers [low, high]")
    if tuple(float(b) for b in bounds) != NO_DT_LIMIT:
        raise c.fail(f"{key}={limit!r} is not modelled: [0.0, Infinity] (megatron-core's MambaMixer clamps no time "
                     "step, while transformers and the checkpoints' code clamp every time step into the given range, "
                     "mamba_split_conv1d_scan_combined's dt_limit)")
    if c.flag("residual_in_fp32", False):
        raise c.fail("residual_in_fp32=true is not modelled: the launch keeps the residual stream in bf16 and the step "
                     "model prices that, while the checkpoints' code and Megatron-Bridge (fp32_residual_connection) "
                     "build an fp32 one; set it to false, as every released Nemotron-H config has")


def _nemotron_h(c: _Config, name: str) -> dict[str, Any]:
    mtp = c.int("num_nextn_predict_layers", 0)
    mtp_pattern = _nemotron_h_pattern(c, "mtp_layers_block_type", "mtp_hybrid_override_pattern", "*E")
    if mtp and mtp_pattern != "*E":
        key = "mtp_layers_block_type" if c.get("mtp_layers_block_type") is not None else "mtp_hybrid_override_pattern"
        raise c.fail(f"{key}={c.get(key)!r} is not modelled: '*E' (['full_attention', 'moe']: an MTP layer of "
                     "attention + MoE)")
    pattern = _nemotron_h_pattern(c, "layers_block_type", "hybrid_override_pattern", None)
    if not pattern:
        raise c.fail("lacks 'hybrid_override_pattern' (or 'layers_block_type'), needed for model_type 'nemotron_h'")
    # NemotronHConfig (transformers 5.25.0): num_hidden_layers is len(layers_block_type) (a property; configs it
    # writes leave the key out); the remote code's config takes both and must have them agree
    layers = c.int("num_hidden_layers", len(pattern))
    if layers != len(pattern):
        key = "layers_block_type" if c.get("layers_block_type") is not None else "hybrid_override_pattern"
        raise _disagree(c, f"num_hidden_layers={layers}", f"{layers} layers", f"the layer pattern ({key})",
                        f"{len(pattern)} layers", "layers_block_type")
    out = _common(c, name, layers)
    # transformers NemotronHConfig defaults (use_conv_bias True, use_bias False, mlp_bias False) are the layers
    # megatron-core builds at every table release (MambaMixer conv_bias=True, bias=False; no MLP bias: hf_core_rules.py
    # "mamba_bias"); others are not modelled
    for key, built in (("use_conv_bias", True), ("use_bias", False), ("mlp_bias", False)):
        if c.flag(key, built) != built:
            raise c.fail(f"{key}={c.get(key)!r} is not modelled: Nemotron-H as {core_name(c.release)} builds it has "
                         f"{key}={str(built).lower()} (MambaMixer bias=False, conv_bias=True: "
                         f"{core_line('mamba_bias', c.release)}; MLPs without bias)")
    _nemotron_h_mamba_numerics(c)
    # NemotronHAttention (the checkpoints' remote code) passes sliding_window=config.sliding_window to its attention:
    # a window shorter than max_position_embeddings is one the step model does not price and the emitted
    # pretrain_mamba.py arguments would not set
    positions = c.int("max_position_embeddings", 4096)   # NemotronHConfig: max_position_embeddings 4096
    if c.get("sliding_window") is not None and c.int("sliding_window") < positions:
        raise c.fail(f"sliding_window={c.get('sliding_window')!r} is not modelled for model_type 'nemotron_h': a "
                     f"window on its attention layers shorter than max_position_embeddings={positions} (null, as the "
                     "released Nemotron-H configs have, or a window of at least max_position_embeddings, is read as "
                     "full attention)")
    # transformers 5.25.0 never ties Nemotron-H's output layer to its embedding (modeling_nemotron_h.py
    # NemotronHForCausalLM._tied_weights_keys = {}), while Megatron-Bridge ties any config that says so
    # (model_bridge.py maps tie_word_embeddings to share_embeddings_and_output_weights): two models, so neither is
    # picked silently; every released Nemotron-H config says false
    if c.flag("tie_word_embeddings", False):
        raise c.fail("tie_word_embeddings=true is not read for model_type 'nemotron_h': transformers 5.25.0 builds a "
                     "separate output layer whatever it says (modeling_nemotron_h.py _tied_weights_keys = {}) while "
                     "Megatron-Bridge ties it (model_bridge.py); set it to false, as every released Nemotron-H "
                     "config has")
    moe = "E" in pattern
    ffn = c.int("moe_intermediate_size") if moe else 0
    shared = (_shared_count(c, c.int("moe_shared_expert_intermediate_size", 0), ffn,
                            "moe_shared_expert_intermediate_size") if moe else 0)
    # Nemotron-H MLPs and experts are up + down projections (squared ReLU), no gate
    return dict(out, glu=False, layer_pattern=pattern,
                num_dense_layers=pattern.count("-"),
                dense_ffn=c.int("intermediate_size") if "-" in pattern else 0,
                num_routed_experts=c.int("n_routed_experts") if moe else 0,
                top_k=c.int("num_experts_per_tok") if moe else 0, expert_ffn=ffn, num_shared_experts=shared,
                mamba_num_heads=c.int("mamba_num_heads"), mamba_head_dim=c.int("mamba_head_dim"),
                mamba_state_dim=c.int("ssm_state_size"), mamba_num_groups=c.int("n_groups"),
                mamba_conv_kernel=c.int("conv_kernel", 4), moe_latent_size=c.int("moe_latent_size", 0) if moe else 0,
                num_mtp_layers=mtp)


CONFIG_MAX_BYTES = 16 << 20   # a config.json is kilobytes; a path to weights (GBs) or /dev/zero is refused unread


READERS: dict[str, Callable[[_Config, str], dict[str, Any]]] = {
    "llama": _dense, "qwen2": _dense, "qwen3": _dense, "mistral": _dense, "phi3": _phi3,
    "qwen2_moe": _qwen_moe, "qwen3_moe": _qwen_moe,
    "mixtral": _mixtral, "gpt_oss": _gpt_oss,
    # MLA + MoE: Kimi-K2 and Moonlight ship DeepSeek-V3's architecture; DeepSeek-V2(-Lite) its softmax-routed
    # predecessor (Megatron-Bridge deepseek_v2_bridge.py); GLM-4.7-Flash DeepSeek-V3's attention with GLM-4.5's
    # MoE (transformers modular_glm4_moe_lite.py, Megatron-Bridge glm47_flash_bridge.py)
    "deepseek_v2": _deepseek_v3, "deepseek_v3": _deepseek_v3, "kimi_k2": _deepseek_v3, "glm4_moe_lite": _deepseek_v3,
    "deepseek_v4": _deepseek_v4, "glm4_moe": _glm4_moe,
    "nemotron_h": _nemotron_h,
    # Qwen3.5 MoE is Qwen3-Next's network with MTP (transformers modular_qwen3_5_moe.py builds it from Qwen3-Next's
    # attention, Gated DeltaNet, MoE block and norms; Megatron-Bridge qwen35_bridge.py)
    "qwen3_next": _qwen3_next, "qwen3_5_moe": _qwen3_next, "qwen3_5": _qwen3_5,
}
# Model types whose reader builds each layer's attention from layer_types (gpt-oss's windows, Qwen3-Next's and Qwen3.5's
# Gated DeltaNet, DeepSeek-V4's compressed attention; Nemotron-H's is layers_block_type's other name). The other
# types' attention is full on every layer (a window where the type's own keys give one): their layer_types is checked
# as transformers 5.25.0 checks every config's (configuration_utils.py PreTrainedConfig.validate_layer_type: one entry
# per layer; an invalid one is refused on loading), with the kinds their modeling code tells apart
# (modeling_qwen2.py / modeling_qwen3.py / modeling_qwen2_moe.py look each layer's kind up in a table of
# 'full_attention' and 'sliding_attention' masks; Llama, Mistral, Phi-3, Mixtral, Qwen3-MoE, DeepSeek and GLM ignore
# the list), and 'attention', which transformers reads as 'full_attention' (_LEGACY_LAYER_TYPE_REMAP).
LAYER_TYPES_READERS = ("gpt_oss", "qwen3_next", "qwen3_5_moe", "qwen3_5", "deepseek_v4", "nemotron_h")
FULL_ATTENTION_KINDS = ("full_attention", "sliding_attention", "attention")
# a VL config's text_config names its language model so
ALIASES = {"qwen3_5_moe_text": "qwen3_5_moe", "qwen3_5_text": "qwen3_5"}


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict; a key given twice (which json.loads resolves to the last, silently) is refused."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def config_path(path: str) -> Path:
    p = Path(path)
    return p / "config.json" if p.is_dir() else p


def load_hf_model(spec: str, seq_len: int | None = None, release: str | None = None) -> ModelSpec:
    """`hf:PATH` (a config.json, or a folder holding one) as a ModelSpec; `release`: the plan's --software, whose
    megatron-core a refusal cites (None: the newest table release, the plan's default)."""
    path = config_path(spec[len(PREFIX):] if spec.lower().startswith(PREFIX) else spec)
    where = f"--model hf:{path}"
    try:
        raw = json.loads(read_user_file(path, "--model hf:", max_bytes=CONFIG_MAX_BYTES),
                         object_pairs_hook=_no_duplicate_keys)
    except _DuplicateKey as exc:
        raise CommbenchError(f"{where}: key {exc.args[0]!r} appears twice in one object (json takes the last one "
                             "silently): keep one") from None
    except json.JSONDecodeError as exc:
        raise CommbenchError(f"{where}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(raw, dict):
        raise CommbenchError(f"{where}: a JSON object (a Hugging Face config.json) is needed")
    head_refusal(raw, where)
    top = raw
    if isinstance(raw.get("text_config"), dict) and "hidden_size" not in raw:
        text = raw["text_config"]
        # a VL model's tie_word_embeddings is the top-level key (Megatron-Bridge qwen35_vl_bridge.py: "For VLMs,
        # tie_word_embeddings lives on the top-level config, not text_config"; Qwen3.5-4B ties, -9B and -27B do not)
        tied = {"tie_word_embeddings": raw["tie_word_embeddings"]} if raw.get("tie_word_embeddings") is not None else {}
        raw = dict(text, model_type=text.get("model_type", raw.get("model_type")), **tied)
    raw = dict(raw, model_type=ALIASES.get(str(raw.get("model_type", "")), raw.get("model_type")))
    c = _Config(ReadKeys(raw), where, release=release)   # records the keys read (hf_unread.py)
    reader = READERS.get(c.model_type)
    if reader is None and c.model_type in NOT_MODELLED:
        raise c.fail(f"model_type={c.model_type!r} is not modelled: {not_modelled(c.model_type, release)}")
    named = refused_class(top.get("architectures"))
    if named is not None:   # the class of a refused type under another model_type (DeepSeek-V3.2 as deepseek_v3)
        raise c.fail(f"architectures={top['architectures']!r} is not modelled: {named[0]} is the class of "
                     f"model_type {named[1]!r} (not of model_type={c.model_type!r} as given), which is refused: "
                     f"{not_modelled(named[1], release)}")
    name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    notes = multimodal_notes(top, where, f"hf:{name}")   # a multimodal config: refused, or Qwen3.5's noted
    if reader is None:
        raise c.fail(f"model_type={c.model_type!r} is not known: the planner reads {', '.join(sorted(READERS))} "
                     "(config.json's model_type, or its text_config's)")
    other_class = class_refusal(top.get("architectures"), c.model_type)   # another model's class (hf_classes.py)
    if other_class:
        raise c.fail(other_class)
    stray = architecture_key_refusal(c.raw, c.model_type)   # a key of another architecture (hf_refused.py)
    if stray:
        raise c.fail(stray)
    fields = reader(c, f"hf:{name}")
    if c.model_type not in LAYER_TYPES_READERS:   # checked as transformers does, though these types build no other kind
        _kinds(c, "layer_types", FULL_ATTENTION_KINDS, fields["num_layers"])
    fields = _noted(fields, notes)   # after the reader's own notes
    # the architecture's family (calibrate.fit.model_family: the path's name says nothing of it)
    fields = dict(fields, extra=dict(fields.get("extra", {}), model_type=c.model_type))
    quantization = top.get("quantization_config", raw.get("quantization_config"))
    if quantization is not None:   # the checkpoint's format, not the network: the plan says how it meets the precision
        extra = dict(fields.get("extra", {}))
        extra["checkpoint_quantization"] = json.dumps(quantization, sort_keys=True, default=str)
        fields = dict(fields, extra=extra)
    if seq_len:
        fields["seq_len"] = seq_len
    check_sizes(c, fields)
    fields["architecture"] = architecture_from_hf(c, fields, path)
    fields = _named_mtp_rope(c, fields)
    unread = unread_key_refusal(c.raw, c.model_type)   # a key no reader looked up that may change the network
    if unread:
        raise c.fail(unread)
    try:
        return ModelSpec(**fields)
    except (CommbenchError, TypeError, ValueError) as exc:
        raise CommbenchError(f"{where}: {exc}") from None
