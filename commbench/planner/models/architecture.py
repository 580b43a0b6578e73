"""A model's architecture beyond its sizes: what the frameworks need to build *that* model.

ModelSpec (spec.py) holds the sizes the step model charges (layers, widths, heads, experts, top-k,
shared experts, MTP layers, vocabulary, tied embeddings). `Architecture` holds everything else a
framework must be told to build the same network: activation and GLU variant, norms, rotary
embedding, attention variant (window pattern, sinks, biases) and the router. Field names follow
megatron-core 0.16's TransformerConfig where one exists (docstrings name it).

Every field of a zoo model cites where its value comes from (`sources`: field -> Source), read from
commbench/data/models.toml's `[model.NAME.arch]` and `[model.NAME.arch_sources]` tables with the
files listed under `[source.KEY]` (repository, path, commit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from commbench.errors import CommbenchError

ACTIVATIONS = ("swiglu", "quick_geglu", "squared_relu", "gelu")  # Megatron-LM --swiglu / --quick-geglu / ...
GLU_ACTIVATIONS = ("swiglu", "quick_geglu")
NORMALIZATIONS = ("RMSNorm", "LayerNorm")
POSITION_EMBEDDINGS = ("rope", "yarn", "none")  # none: hybrid Mamba models (HybridModelProvider default)
ROPE_SCALINGS = ("none", "llama3", "yarn", "linear")   # linear: --rotary-seq-len-interpolation-factor
SOFTMAX_TYPES = ("vanilla", "learnable", "off-by-one")  # "learnable" = per-head attention sinks
ROUTER_SCORES = ("softmax", "sigmoid", "sqrtsoftplus")  # sqrtsoftplus: DeepSeek-V4 (sqrt of softplus)
LOAD_BALANCING = ("aux_loss", "seq_aux_loss", "global_aux_loss", "sinkhorn", "none")
# megatron-core core_v0.16.1 transformer/transformer_config.py:629 `moe_router_dtype: Optional[Literal['fp32', 'fp64']]`
ROUTER_DTYPES = ("fp32", "fp64")
NORM_EPSILON_RANGE = (1e-12, 0.1)   # [low, high): Architecture.__post_init__ says why
# group-limited routing as a model table (and a Hugging Face config) names it -> the arch field that is read
MODEL_ROUTER_KEYS = {"n_group": "router_groups", "topk_group": "router_group_topk"}


@dataclass(frozen=True)
class Source:
    """A file a value was read from: `repo` (owner/name or a registry package), `path`, `commit`
    (a 40-hex commit, or a package version such as `pypi:torchtitan==0.3.0`)."""

    key: str
    repo: str
    path: str
    commit: str

    def cite(self) -> str:
        return f"{self.repo}@{self.commit[:12]}:{self.path}"


@dataclass(frozen=True, kw_only=True)
class Architecture:
    """The architecture fields (megatron-core names in brackets)."""

    # activation [activation_func, gated_linear_unit, glu_linear_offset, activation_func_clamp_value]
    activation: str                      # one of ACTIVATIONS; swiglu and quick_geglu are GLUs
    glu_linear_offset: float = 0.0       # gpt-oss: (x_linear + 1) * act(x_glu)
    activation_clamp: float = 0.0        # gpt-oss clamps the GLU inputs to +-7; 0 = no clamp
    # norms [normalization, layernorm_epsilon, qk_layernorm, layernorm_zero_centered_gamma]
    normalization: str = "RMSNorm"
    norm_epsilon: float
    qk_norm: bool = False
    norm_zero_centered_gamma: bool = False  # Qwen3-Next: the norms scale by (1 + weight)
    # biases [add_bias_linear, add_qkv_bias]
    linear_bias: bool = False            # every linear layer (attention and MLP/experts)
    qkv_bias: bool = False               # only the QKV projection (Qwen2-style)
    # rotary embedding [position_embedding_type, rotary_base, rotary_percent, rope scaling / YaRN]
    position_embedding: str = "rope"
    rotary_base: int
    rotary_percent: float = 1.0
    rope_scaling: str = "none"           # llama3 (Llama 3.1 frequency scaling), yarn or linear (positions / factor)
    rope_scaling_factor: float = 1.0
    rope_original_max_positions: int = 0  # YaRN's original context
    # Llama 3.1 scaling's frequency bands (rope_scaling.low_freq_factor, high_freq_factor,
    # original_max_position_embeddings); read with rope_scaling llama3. The defaults are every Llama 3.x config's
    # and what megatron-core 0.16.1 and TorchTitan 0.3.0 build (search/frameworks.py LLAMA3_ROPE_BUILT)
    llama3_low_freq_factor: float = 1.0
    llama3_high_freq_factor: float = 4.0
    llama3_original_positions: int = 8192
    yarn_beta_fast: float = 0.0
    yarn_beta_slow: float = 0.0
    yarn_mscale: float = 0.0             # MLA YaRN [mscale, mscale_all_dim]
    yarn_mscale_all_dim: float = 0.0
    # [yarn_correction_range_round_to_int] YaRN's correction range rounded to whole dimensions (transformers'
    # rope_scaling.truncate, default true); gpt-oss: false
    yarn_truncate: bool = True
    max_position_embeddings: int
    # attention variant [window_size, window_attn_skip_freq, softmax_type]
    sliding_window: int = 0              # tokens seen incl. the current one; Megatron's window_size = (w-1, 0)
    window_skip_freq: int = 0            # every N-th layer is full attention (gpt-oss: 2, alternating)
    softmax_type: str = "vanilla"        # learnable = attention sinks
    # router [moe_router_*; moe_aux_loss_coeff; moe_expert_capacity_factor]
    router_score: str = "softmax"
    router_pre_softmax: bool = False     # softmax over all experts before top-k (else over the top-k)
    router_topk_scaling: float = 0.0     # 0 = none
    router_groups: int = 0               # group-limited (node-limited) routing: groups ...
    router_group_topk: int = 0           # ... of which each token may use this many
    router_expert_bias: bool = False     # aux-loss-free balancing (DeepSeek-V3)
    router_bias_update_rate: float = 0.0
    load_balancing: str = "aux_loss"
    aux_loss_coeff: float = 0.0
    capacity_factor: float = 0.0         # 0 = dropless
    router_dtype: str = "fp32"
    shared_expert_gate: bool = False     # [moe_shared_expert_gate] a sigmoid gate on the shared expert (Qwen3-Next)
    # dropout [attention_dropout, hidden_dropout]: probabilities in [0, 1); 0 = none, what LLM pre-training recipes
    # train (and the step model charges: no dropout masks or kernels)
    attention_dropout: float = 0.0       # on the attention probabilities
    hidden_dropout: float = 0.0          # on the attention and MLP outputs before the residual add, and the embedding
    # vocabulary padding [make_vocab_size_divisible_by]
    vocab_divisible_by: int = 128
    sources: Mapping[str, Source] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        for name, allowed in (("activation", ACTIVATIONS), ("normalization", NORMALIZATIONS),
                              ("position_embedding", POSITION_EMBEDDINGS), ("rope_scaling", ROPE_SCALINGS),
                              ("softmax_type", SOFTMAX_TYPES), ("router_score", ROUTER_SCORES),
                              ("load_balancing", LOAD_BALANCING), ("router_dtype", ROUTER_DTYPES)):
            if getattr(self, name) not in allowed:
                raise CommbenchError(f"architecture.{name}={getattr(self, name)!r} is invalid: one of {', '.join(allowed)}")
        for f in fields(self):  # every size, rate and coefficient is finite and >= 0 (a nan or -5 was emitted)
            value = getattr(self, f.name)
            if f.type in ("int", "float") and not (math.isfinite(value) and value >= 0):
                raise CommbenchError(f"architecture.{f.name}={value!r} is invalid: a finite number >= 0")
        for name in ("attention_dropout", "hidden_dropout"):
            if getattr(self, name) >= 1:
                raise CommbenchError(f"architecture.{name}={getattr(self, name)!r} is invalid: 0 <= {name} < 1")
        # megatron-core core_v0.16.1 models/common/embeddings/rotary_pos_embedding.py:73 rotates int(dim * rotary_percent)
        # dimensions below 1 and the whole head above: 0 rotates none, 2.0 builds 1.0
        if not 0 < self.rotary_percent <= 1:
            raise CommbenchError(f"architecture.rotary_percent={self.rotary_percent!r} is invalid: 0 < rotary_percent <= 1")
        if self.rope_scaling != "none" and self.rope_scaling_factor <= 0:
            raise CommbenchError(f"architecture.rope_scaling_factor={self.rope_scaling_factor!r} is invalid: > 0 with "
                                 f"rope_scaling {self.rope_scaling!r}")
        # an RMSNorm / LayerNorm epsilon is added to the mean square (about 1 for normalised activations): published
        # models use 1e-6 and 1e-5 (every zoo model; Megatron-LM's layernorm_epsilon default 1e-5), the smallest in
        # common use 1e-12 (transformers BertConfig.layer_norm_eps); 0 divides by zero on a zero row, 1e-30 is a typo
        # for no epsilon, and 0.1 or more rescales the normalisation itself
        if not NORM_EPSILON_RANGE[0] <= self.norm_epsilon < NORM_EPSILON_RANGE[1]:
            raise CommbenchError(f"architecture.norm_epsilon={self.norm_epsilon!r} is invalid: {NORM_EPSILON_RANGE[0]:g} "
                                 f"<= norm_epsilon < {NORM_EPSILON_RANGE[1]:g} (published models: 1e-6, 1e-5)")
        if self.vocab_divisible_by < 1:
            raise CommbenchError(f"architecture.vocab_divisible_by={self.vocab_divisible_by!r} is invalid: >= 1")
        if (self.router_groups == 0) != (self.router_group_topk == 0) or self.router_group_topk > self.router_groups:
            raise CommbenchError(f"architecture.router_group_topk={self.router_group_topk} is invalid: "
                                 f"0 < group_topk <= groups ({self.router_groups}), or both 0")
        if self.rope_scaling == "yarn" and self.rope_original_max_positions <= 0:
            raise CommbenchError("architecture.rope_original_max_positions is invalid: YaRN needs the original context")
        if self.window_skip_freq and not self.sliding_window:
            raise CommbenchError("architecture.window_skip_freq is invalid without a sliding_window")

    @property
    def glu(self) -> bool:
        return self.activation in GLU_ACTIVATIONS

    def source(self, name: str) -> Source:
        return self.sources[name]


ARCH_FIELDS = tuple(f.name for f in fields(Architecture) if f.name != "sources")
_TYPES = {f.name: f.type for f in fields(Architecture)}


def _typed(model: str, name: str, value: Any) -> Any:
    kind = _TYPES[name]
    ok = (isinstance(value, bool) if kind == "bool" else isinstance(value, str) if kind == "str" else
          isinstance(value, int) and not isinstance(value, bool) if kind == "int" else
          isinstance(value, (int, float)) and not isinstance(value, bool))
    if not ok:
        raise CommbenchError(f"model {model!r}: arch.{name}={value!r} is invalid: a {kind}")
    return float(value) if kind == "float" else value


def sources_from_toml(doc: Mapping[str, Any]) -> dict[str, Source]:
    """The `[source.KEY]` tables of models.toml."""
    out = {}
    for key, row in (doc.get("source") or {}).items():
        try:
            out[key] = Source(key=key, repo=row["repo"], path=row["path"], commit=row["commit"])
        except (KeyError, TypeError):
            raise CommbenchError(f"models.toml [source.{key}] needs repo, path and commit") from None
    return out


def architecture_from_row(model: str, arch: Mapping[str, Any], cited: Mapping[str, Any],
                          known_sources: Mapping[str, Source]) -> Architecture:
    """An Architecture from a model's `arch` table and its `arch_sources` table (field -> source key;
    `"*"` names the source of every field not listed). Every field set must have a source."""
    unknown = sorted(set(arch) - set(ARCH_FIELDS))
    if unknown and unknown[0] in MODEL_ROUTER_KEYS:   # the model table's names (Hugging Face's) in the arch table
        raise CommbenchError(f"model {model!r}: arch key {unknown[0]!r} is not an architecture field: the arch table "
                             f"names it {MODEL_ROUTER_KEYS[unknown[0]]!r}")
    if unknown:
        raise CommbenchError(f"model {model!r}: arch key {unknown[0]!r} is not an architecture field "
                             f"(known: {', '.join(ARCH_FIELDS)})")
    sources: dict[str, Source] = {}
    for name in ARCH_FIELDS:
        key = cited.get(name, cited.get("*"))
        if key is None:
            if name in arch:
                raise CommbenchError(f"model {model!r}: arch.{name} cites no source (arch_sources)")
            continue
        if key not in known_sources:
            raise CommbenchError(f"model {model!r}: arch_sources.{name}={key!r} is not a [source.*] table")
        sources[name] = known_sources[key]
    try:
        return Architecture(**{k: _typed(model, k, v) for k, v in arch.items()}, sources=sources)
    except TypeError as exc:
        raise CommbenchError(f"model {model!r}: arch is incomplete ({exc})") from None


def architecture_from_json(data: Mapping[str, Any]) -> Architecture:
    """The Architecture a plan.json's `inputs.model_spec.architecture` holds (dataclasses.asdict form)."""
    from commbench.typed_json import check_fields
    sources = data.get("sources") or {}
    if not isinstance(sources, dict):
        raise ValueError("architecture.sources: expected a JSON object")
    values = check_fields(Architecture, {k: v for k, v in data.items() if k != "sources"}, "architecture")
    return Architecture(**values, sources={k: Source(**check_fields(Source, v, f"architecture.sources.{k}"))
                                           for k, v in sources.items()})
