"""Model zoo: architecture facts, Megatron model-FLOPs per token and parameter counts per layer kind.

FLOPs follow Megatron-LM `training.py::num_floating_point_operations` as transcribed in
commbench/data/FLOPS.md (forward + backward = 3 x forward, 2 FLOPs per multiply-add, causal
attention, top-k routed + shared experts, logits per output head, MTP). Parameter counts are
the weight matrices plus norms and router, per layer kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from commbench.errors import CommbenchError, invalid, read_user_file
from commbench.data.reference import models_toml
from commbench.planner.models.architecture import Architecture, architecture_from_row, sources_from_toml
from commbench.planner.models.gdn import gdn_macs_per_token, gdn_params_per_layer, num_full_attention_layers
from commbench.planner.models.mamba import check_hybrid, mamba_flops_fwd_per_token, mamba_params_per_layer

ATTENTION_KINDS = ("gqa", "mla")


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """One transformer (dense or MoE). Dims in elements; `num_moe_layers` excludes MTP layers."""

    name: str
    num_layers: int
    num_dense_layers: int
    hidden: int
    num_heads: int
    attention: str = "gqa"
    num_kv_heads: int = 0
    head_dim: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    dense_ffn: int = 0
    num_routed_experts: int = 0
    num_shared_experts: int = 0
    top_k: int = 0
    expert_ffn: int = 0
    vocab: int
    num_mtp_layers: int = 0
    # Megatron --mtp-use-repeated-layer (Nemotron-3 Ultra's recipe): the MTP depths run one shared layer's
    # weights, so they cost num_mtp_layers layers of compute but one layer of parameters.
    mtp_shared_weights: bool = False
    tied_embeddings: bool = False
    glu: bool = True
    sliding_window: int = 0  # on every other layer when > 0
    seq_len: int
    # Hybrid models (Megatron-LM MambaStack, Nemotron-H): one character per layer, M = Mamba-2,
    # * = attention, - = dense MLP, E = MoE; "" = every layer is attention + MLP/MoE.
    layer_pattern: str = ""
    mamba_num_heads: int = 0
    mamba_head_dim: int = 0
    mamba_state_dim: int = 0
    mamba_num_groups: int = 0
    mamba_conv_kernel: int = 4
    # Latent MoE (Megatron moe_latent_size, Nemotron-3 Super): tokens are projected h -> latent before
    # dispatch, routed experts run on the latent width, and back latent -> h after combine.
    moe_latent_size: int = 0
    # Gated DeltaNet linear attention (Qwen3-Next; models/gdn.py): every layer but each N-th, N =
    # linear_attention_freq (0: none); attention_gate: full attention's sigmoid output gate.
    linear_attention_freq: int = 0
    gdn_num_key_heads: int = 0
    gdn_num_value_heads: int = 0
    gdn_key_head_dim: int = 0
    gdn_value_head_dim: int = 0
    gdn_conv_kernel: int = 4
    attention_gate: bool = False
    published_params_total_b: float | None = None
    published_params_active_b: float | None = None
    published_flops_per_token_gflop: float | None = None
    architecture: Architecture | None = None  # None: a user model file without an [arch] table
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._check_magnitudes()
        if self.attention not in ATTENTION_KINDS:
            raise invalid(f"{self.name}.attention", self.attention, f"one of {', '.join(ATTENTION_KINDS)}")
        for name in ("num_layers", "hidden", "num_heads", "vocab", "seq_len"):
            if getattr(self, name) <= 0:
                raise invalid(f"{self.name}.{name}", getattr(self, name), "must be > 0")
        if self.layer_pattern:
            check_hybrid(self)
        if self.linear_attention_freq and (self.layer_pattern or min(
                self.gdn_num_key_heads, self.gdn_num_value_heads, self.gdn_key_head_dim, self.gdn_value_head_dim) <= 0
                or self.gdn_num_value_heads % self.gdn_num_key_heads):
            raise invalid(f"{self.name}.linear_attention_freq", self.linear_attention_freq,
                          "Gated DeltaNet layers need key/value heads and dims > 0 (value heads a multiple of key "
                          "heads) and no hybrid layer pattern")
        if not 0 <= self.num_dense_layers <= self.num_layers:
            raise invalid(f"{self.name}.dense_layers", self.num_dense_layers, f"0..{self.num_layers}")
        if self.is_moe and (self.top_k <= 0 or self.expert_ffn <= 0 or self.top_k > self.num_routed_experts):
            raise invalid(f"{self.name}.top_k", self.top_k, "MoE models need 0 < top_k <= routed_experts and expert_ffn > 0")
        if self.num_dense_layers and self.dense_ffn <= 0:
            raise invalid(f"{self.name}.dense_ffn", self.dense_ffn, "dense layers need dense_ffn > 0")
        if self.attention == "gqa" and (self.num_kv_heads <= 0 or self.head_dim <= 0):
            raise invalid(f"{self.name}.kv_heads", self.num_kv_heads, "GQA needs kv_heads > 0 and head_dim > 0")
        if self.attention == "mla" and min(self.q_lora_rank, self.kv_lora_rank, self.qk_nope_head_dim,
                                           self.qk_rope_head_dim, self.v_head_dim) <= 0:
            raise invalid(f"{self.name}.attention", "mla", "MLA needs q/kv lora ranks and nope/rope/v head dims > 0")
        arch = self.architecture
        if arch is not None and arch.glu != self.glu:
            raise invalid(f"{self.name}.glu", self.glu, f"{arch.glu} (architecture.activation = {arch.activation})")
        if arch is not None and arch.sliding_window != self.sliding_window:
            raise invalid(f"{self.name}.sliding_window", self.sliding_window, f"arch.sliding_window = {arch.sliding_window}")
        if arch is not None and arch.router_groups and (not self.is_moe or self.num_routed_experts % arch.router_groups):
            raise invalid(f"{self.name}.arch.router_groups", arch.router_groups, "a divisor of routed_experts")

    def _check_magnitudes(self) -> None:
        """Every count a whole number in 0..MAX_MODEL_COUNT and every published figure finite and > 0,
        whichever file the spec came from (a model file or a plan.json's model_spec)."""
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "int" and (isinstance(value, bool) or not isinstance(value, int)
                                    or not 0 <= value <= MAX_MODEL_COUNT):
                raise invalid(f"{self.name}.{f.name}", value, f"a whole number from 0 to {MAX_MODEL_COUNT:,}")
            if f.name.startswith("published_") and value is not None and (
                    isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e12):
                raise invalid(f"{self.name}.{f.name[len('published_'):]}", value, "a finite number > 0 (below 1e12)")

    @property
    def router_groups(self) -> tuple[int, int]:
        """(groups, groups each token may use) of group-limited routing; (0, 0) without it."""
        if self.architecture is not None:
            return self.architecture.router_groups, self.architecture.router_group_topk
        return int(self.extra.get("n_group", 0) or 0), int(self.extra.get("topk_group", 0) or 0)

    @property
    def is_moe(self) -> bool:
        return self.num_routed_experts > 0

    @property
    def num_moe_layers(self) -> int:
        if self.layer_pattern:
            return self.layer_pattern.count("E")
        return self.num_layers - self.num_dense_layers

    @property
    def expert_width(self) -> int:
        """Width routed experts read and the dispatcher moves: the latent size, or the hidden size."""
        return self.moe_latent_size or self.hidden

    @property
    def is_hybrid(self) -> bool:
        return bool(self.layer_pattern)

    @property
    def num_attention_layers(self) -> int:
        """Layers with a full attention block (all of them unless a hybrid pattern or linear attention
        says otherwise)."""
        if self.layer_pattern:
            return self.layer_pattern.count("*")
        return num_full_attention_layers(self.num_layers, self.linear_attention_freq)

    @property
    def num_linear_attention_layers(self) -> int:
        return self.num_layers - self.num_attention_layers if self.linear_attention_freq else 0

    @property
    def num_mamba_layers(self) -> int:
        return self.layer_pattern.count("M")

    @property
    def glu_factor(self) -> int:
        return 3 if self.glu else 2

    @property
    def q_dim(self) -> int:
        """Query width (all heads); for MLA, nope + rope per head."""
        if self.attention == "mla":
            return self.num_heads * (self.qk_nope_head_dim + self.qk_rope_head_dim)
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of K plus V per token as the attention core sees it (what CP rings exchange)."""
        if self.attention == "mla":
            return self.num_heads * (self.qk_nope_head_dim + self.qk_rope_head_dim + self.v_head_dim)
        return 2 * self.num_kv_heads * self.head_dim

    @property
    def attn_out_dim(self) -> int:
        return self.num_heads * (self.v_head_dim if self.attention == "mla" else self.head_dim)


# ---------------------------------------------------------------- FLOPs (FLOPS.md)

def _attention_macs_per_layer(m: ModelSpec, seq_len: int) -> tuple[float, float]:
    """(projection MACs, core MACs) per token per layer, averaged over layers for sliding windows."""
    h, s = m.hidden, seq_len
    if m.attention == "mla":
        nope, rope, dv, H = m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim, m.num_heads
        proj = (m.q_lora_rank * (h + H * (nope + rope) + 1) + m.kv_lora_rank * (h + H * (nope + dv) + 1)
                + h * rope + H * dv * h)
        core = s * H * (nope + rope) / 2 + s * H * dv / 2
        return proj, core
    q, kv = m.num_heads * m.head_dim, m.num_kv_heads * m.head_dim
    proj = h * (q * (2 if m.attention_gate else 1) + 2 * kv) + q * h
    core = q * s  # 2 * q * (s/2): causal half of QK^T plus AV
    if m.sliding_window:
        w = m.sliding_window
        window_core = 2 * q * (w - w * (w - 1) / (2 * s))
        core = (core + window_core) / 2  # every other layer is windowed
    return proj, core


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
        """Everything that runs as a (dense or grouped) GEMM in the training precision."""
        return self.total - self.attention_core - self.mamba_accounting


def flops_breakdown(m: ModelSpec, seq_len: int | None = None, include_mtp: bool = True) -> FlopsPerToken:
    """FLOPs per token by kind, exactly FLOPS.md's formula (MTP layers count as extra MoE layers)."""
    s = seq_len or m.seq_len
    n_mtp = m.num_mtp_layers if include_mtp else 0
    n_layers = m.num_attention_layers + n_mtp
    n_moe = m.num_moe_layers + n_mtp
    h, g = m.hidden, m.glu_factor
    proj, core = _attention_macs_per_layer(m, s)
    return FlopsPerToken(
        attention_proj=6.0 * n_layers * proj,
        attention_core=6.0 * n_layers * core,
        dense_mlp=6.0 * h * m.dense_ffn * g * m.num_dense_layers,
        routed_experts=6.0 * m.expert_width * m.expert_ffn * m.top_k * g * n_moe if m.is_moe else 0.0,
        shared_experts=6.0 * h * m.expert_ffn * m.num_shared_experts * g * n_moe if m.is_moe else 0.0,
        mtp_proj=6.0 * n_mtp * (3 * h + 2 * h * h),
        logits=6.0 * h * m.vocab * (n_mtp + 1),
        mamba=3.0 * m.num_mamba_layers * mamba_flops_fwd_per_token(m),
        moe_latent_proj=6.0 * 2 * h * m.moe_latent_size * n_moe if m.is_moe else 0.0,
        linear_attention=6.0 * m.num_linear_attention_layers * gdn_macs_per_token(m),
        mamba_accounting=3.0 * m.num_mamba_layers * (mamba_flops_fwd_per_token(m, megatron=True)
                                                     - mamba_flops_fwd_per_token(m)),
    )


def flops_per_token(m: ModelSpec, seq_len: int | None = None, include_mtp: bool = True) -> float:
    """Megatron model FLOPs per token (forward + backward) at `seq_len` (default: the model's)."""
    return flops_breakdown(m, seq_len, include_mtp).total


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

    @property
    def total(self) -> float:
        """Total without MTP (how model cards count, e.g. DeepSeek-V3 671B)."""
        return (self.attention + self.dense_mlp + self.routed_experts + self.shared_experts + self.router
                + self.norms + self.embeddings + self.mamba + self.moe_latent_proj + self.linear_attention)

    @property
    def expert(self) -> float:
        """Parameters sharded over EP x ETP (routed experts, including the MTP layer's)."""
        return self.routed_experts + self.mtp_routed_experts

    @property
    def non_expert(self) -> float:
        """Parameters sharded over TP (replicated over DP x CP), MTP included."""
        return self.total + self.mtp - self.mtp_routed_experts - self.routed_experts


def _attention_params(m: ModelSpec) -> float:
    h = m.hidden
    if m.attention == "mla":
        H = m.num_heads
        return (h * m.q_lora_rank + m.q_lora_rank * H * (m.qk_nope_head_dim + m.qk_rope_head_dim)
                + h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * H * (m.qk_nope_head_dim + m.v_head_dim)
                + H * m.v_head_dim * h + m.q_lora_rank + m.kv_lora_rank)
    q, kv = m.num_heads * m.head_dim, m.num_kv_heads * m.head_dim
    return h * (q * (2 if m.attention_gate else 1) + 2 * kv) + q * h


def param_counts(m: ModelSpec) -> ParamCounts:
    h, g = m.hidden, m.glu_factor
    per_expert = g * m.expert_width * m.expert_ffn
    shared_expert = g * h * m.expert_ffn
    latent_proj = 2 * h * m.moe_latent_size
    moe_layer = (m.num_routed_experts * per_expert + m.num_shared_experts * shared_expert + latent_proj
                 + h * m.num_routed_experts + 2 * h + _attention_params(m))
    mtp_weight_layers = min(m.num_mtp_layers, 1) if m.mtp_shared_weights else m.num_mtp_layers
    mtp = mtp_weight_layers * (moe_layer + 2 * h * h + 3 * h)
    return ParamCounts(
        attention=m.num_attention_layers * _attention_params(m),
        dense_mlp=m.num_dense_layers * g * h * m.dense_ffn,
        routed_experts=m.num_moe_layers * m.num_routed_experts * per_expert,
        shared_experts=m.num_moe_layers * m.num_shared_experts * shared_expert,
        router=m.num_moe_layers * h * m.num_routed_experts,
        norms=(1 if m.is_hybrid else 2) * h * m.num_layers + h,  # a hybrid layer has one pre-norm
        embeddings=m.vocab * h * (1 if m.tied_embeddings else 2),
        mtp=mtp,
        mtp_routed_experts=mtp_weight_layers * m.num_routed_experts * per_expert,
        mamba=m.num_mamba_layers * mamba_params_per_layer(m),
        moe_latent_proj=m.num_moe_layers * latent_proj,
        linear_attention=m.num_linear_attention_layers * gdn_params_per_layer(m),
    )


def active_params(m: ModelSpec) -> float:
    """Parameters one token touches (top-k of the routed experts), MTP excluded."""
    p = param_counts(m)
    if not m.is_moe:
        return p.total
    return p.total - p.routed_experts * (1 - m.top_k / m.num_routed_experts)


# ---------------------------------------------------------------- zoo

def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, dict[str, Any]]:
    """models.toml's `[model.llama3.1-70b]` parses as model -> llama3 -> 1-70b; join the keys back."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in table.items():
        name = f"{prefix}.{key}" if prefix else key
        # a table holding any plain value is a model (a missing `layers` is then reported by name,
        # not read as an unknown model); one holding only tables is a dotted name's prefix
        if isinstance(value, dict) and ("layers" in value or any(not isinstance(v, dict) for v in value.values())):
            out[name] = value
        elif isinstance(value, dict):
            out.update(_flatten(value, name))
    return out


MAX_MODEL_COUNT = 10_000_000  # any layer count, width or vocabulary beyond this is a typo, not a model


def _count(name: str, row: dict[str, Any], key: str, default: int | None = None) -> int:
    """A whole, non-negative number from a model row (8.7, "a", 1e12 and true are refused by name)."""
    value = row[key] if default is None else row.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise CommbenchError(f"model {name!r}: {key}={value!r} is invalid: a whole number")
    if not 0 <= value <= MAX_MODEL_COUNT:
        raise CommbenchError(f"model {name!r}: {key}={value!r} is invalid: allowed 0..{MAX_MODEL_COUNT:,}")
    return value


# The keys a model table may hold (commbench/data/models.toml); any other is a typo that would
# otherwise leave its field at the default without a word.
MODEL_KEYS = frozenset({
    "layers", "dense_layers", "hidden", "heads", "attention", "kv_heads", "head_dim", "q_lora_rank",
    "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "dense_ffn", "routed_experts",
    "shared_experts", "top_k", "expert_ffn", "vocab", "mtp_layers", "tied_embeddings", "glu",
    "sliding_window", "seq_len", "params_total_b", "params_active_b", "flops_per_token_gflop", "n_group",
    "topk_group", "arch", "arch_sources", "layer_pattern", "mamba_num_heads", "mamba_head_dim", "mamba_state_dim",
    "mamba_num_groups", "mamba_conv_kernel", "moe_latent_size", "linear_attention_freq", "gdn_num_key_heads",
    "gdn_num_value_heads", "gdn_key_head_dim", "gdn_value_head_dim", "gdn_conv_kernel", "attention_gate",
    "mtp_shared_weights"})


def _architecture(name: str, row: dict[str, Any], sources: dict) -> Architecture | None:
    arch = row.get("arch")
    if arch is None:
        return None
    if not isinstance(arch, dict) or not isinstance(row.get("arch_sources", {}), dict):
        raise CommbenchError(f"model {name!r}: arch and arch_sources must be tables")
    return architecture_from_row(name, arch, row.get("arch_sources", {}), sources)


def _spec_from_row(name: str, row: dict[str, Any], sources: dict | None = None) -> ModelSpec:
    unknown = sorted(set(row) - MODEL_KEYS)
    if unknown:
        raise CommbenchError(f"model {name!r}: key {unknown[0]!r} is not a model field (known: "
                             f"{', '.join(sorted(MODEL_KEYS))})")
    try:
        num_layers = _count(name, row, "layers")
        return ModelSpec(
            name=name,
            num_layers=num_layers,
            num_dense_layers=_count(name, row, "dense_layers", str(row["layer_pattern"]).count("-")
                                    if row.get("layer_pattern") else 0 if row.get("routed_experts") else num_layers),
            hidden=_count(name, row, "hidden"),
            num_heads=_count(name, row, "heads"),
            attention=str(row.get("attention", "gqa")),
            num_kv_heads=_count(name, row, "kv_heads", 0),
            head_dim=_count(name, row, "head_dim", 0),
            q_lora_rank=_count(name, row, "q_lora_rank", 0),
            kv_lora_rank=_count(name, row, "kv_lora_rank", 0),
            qk_nope_head_dim=_count(name, row, "qk_nope_head_dim", 0),
            qk_rope_head_dim=_count(name, row, "qk_rope_head_dim", 0),
            v_head_dim=_count(name, row, "v_head_dim", 0),
            dense_ffn=_count(name, row, "dense_ffn", 0),
            num_routed_experts=_count(name, row, "routed_experts", 0),
            num_shared_experts=_count(name, row, "shared_experts", 0),
            top_k=_count(name, row, "top_k", 0),
            expert_ffn=_count(name, row, "expert_ffn", 0),
            vocab=_count(name, row, "vocab"),
            num_mtp_layers=_count(name, row, "mtp_layers", 0),
            mtp_shared_weights=bool(row.get("mtp_shared_weights", False)),
            tied_embeddings=bool(row.get("tied_embeddings", False)),
            glu=bool(row.get("glu", True)),
            sliding_window=_count(name, row, "sliding_window", 0),
            seq_len=_count(name, row, "seq_len", 4096),
            layer_pattern=str(row.get("layer_pattern", "")),
            **{k: _count(name, row, k, 4 if k == "mamba_conv_kernel" else 0)
               for k in ("mamba_num_heads", "mamba_head_dim", "mamba_state_dim", "mamba_num_groups", "mamba_conv_kernel",
                         "moe_latent_size", "linear_attention_freq", "gdn_num_key_heads", "gdn_num_value_heads",
                         "gdn_key_head_dim", "gdn_value_head_dim")},
            gdn_conv_kernel=_count(name, row, "gdn_conv_kernel", 4),
            attention_gate=bool(row.get("attention_gate", False)),
            published_params_total_b=row.get("params_total_b"),
            published_params_active_b=row.get("params_active_b"),
            published_flops_per_token_gflop=row.get("flops_per_token_gflop"),
            architecture=_architecture(name, row, sources or {}),
            extra={k: v for k, v in row.items() if k in ("n_group", "topk_group")},
        )
    except KeyError as exc:
        raise CommbenchError(f"model {name!r} lacks required key {exc.args[0]!r} "
                             "(needs layers, hidden, heads, vocab; see commbench/data/models.toml)") from None
    except (TypeError, ValueError) as exc:
        if isinstance(exc, CommbenchError):
            raise
        raise CommbenchError(f"model {name!r}: {exc}") from None


def _zoo_rows(model_file: str | Path | None = None) -> tuple[dict[str, dict[str, Any]], dict]:
    """Model rows by name and the [source.*] files their architecture cites."""
    rows = _flatten(models_toml().get("model", {}))
    sources = sources_from_toml(models_toml())
    if model_file is not None:
        path = Path(model_file)
        try:
            user = tomllib.loads(read_user_file(path, "--model-file"))
        except tomllib.TOMLDecodeError as exc:
            raise invalid("--model-file", str(path), f"valid TOML ({exc})") from None
        if not isinstance(user.get("model"), dict):
            raise invalid("--model-file", str(path), "a TOML file with [model.NAME] tables")
        rows.update(_flatten(user["model"]))
        sources.update(sources_from_toml(user))
    return rows, sources


def model_names(model_file: str | Path | None = None) -> list[str]:
    return sorted(_zoo_rows(model_file)[0])


def load_model(name: str, model_file: str | Path | None = None) -> ModelSpec:
    """The zoo model `name` (case-insensitive), one from a user TOML shaped like models.toml, or
    `hf:PATH`, a Hugging Face config.json (or a folder holding one; models/hf_config.py)."""
    if name.lower().startswith("hf:"):
        from commbench.planner.models.hf_config import load_hf_model
        return load_hf_model(name)
    rows, sources = _zoo_rows(model_file)
    by_lower = {k.lower(): k for k in rows}
    key = by_lower.get(name.lower())
    if key is None:
        raise invalid("--model", name, f"known models: {', '.join(sorted(rows))}")
    return _spec_from_row(key, rows[key], sources)


def spec_fields() -> list[str]:
    return [f.name for f in fields(ModelSpec)]
