"""A model's architecture facts (ModelSpec): sizes, layer kinds, attention, experts, hybrid blocks.
Its FLOPs and parameter counts are in counts.py; the zoo (models.toml, --model-file) in zoo.py."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from commbench.errors import CommbenchError, invalid
from commbench.planner.models import dsv4
from commbench.planner.models.architecture import Architecture
from commbench.planner.models.gdn import num_full_attention_layers
from commbench.planner.models.mamba import check_hybrid

ATTENTION_KINDS = ("gqa", "mla", "dsv4")
# MLA's sizes (DeepSeek-V2/V3): read with attention = "mla" (dsv4 reads q_lora_rank and qk_rope_head_dim its own way)
MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def _group_limit(groups: int, group_topk: int) -> tuple[int, int]:
    """Group-limited routing as it routes (step/ep_traffic.py): (groups, picked) only where 0 < picked < groups; one
    group, or every group picked, limits nothing (Kimi-K2's n_group = topk_group = 1)."""
    return (groups, group_topk) if 0 < group_topk < groups else (0, 0)
MAX_MODEL_COUNT = 10_000_000  # any layer count, width or vocabulary beyond this is a typo, not a model
# Decoder layers: 8x the deepest model in the zoo (Llama 3.1 405B, 126; models.toml) and above the deepest
# transformer published (DeepNet, 1,000 layers: arXiv:2203.00555). The pipeline split weighs every uneven
# first/last-stage pair Megatron accepts, quadratic in the layers (layout/split.py uneven_pairs): 1,000,000
# layers kept `plan` busy for minutes; 1,024 answers in under half a minute on 2 loaded CPU cores.
MAX_MODEL_LAYERS = 1024


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
    q_lora_rank: int = 0  # MLA: 0 = no query low-rank projection (DeepSeek-V2-Lite, Moonlight; Megatron's None)
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
    # DeepSeek-V4's hybrid attention (attention = "dsv4"; models/dsv4.py): per decoder layer W / C / H
    # (window-only, compressed sparse, heavily compressed), the window, the indexer of C layers, the grouped
    # low-rank output projection; hc_mult residual streams (mHC; 0: a plain residual); the first
    # hash_layers MoE layers choose experts by token id (their gate weight still scores them).
    csa_pattern: str = ""
    csa_window: int = 0
    index_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    o_lora_rank: int = 0
    o_groups: int = 0
    hc_mult: int = 0
    hash_layers: int = 0
    published_params_total_b: float | None = None
    published_params_active_b: float | None = None
    published_flops_per_token_gflop: float | None = None
    architecture: Architecture | None = None  # None: a user model file without an [arch] table
    # Not the network: whether the Megatron-LM that builds it takes uneven first/last-stage layer counts for a hybrid
    # stack (False where its MambaStack slices num_layers // pp per rank: release_flags.release_model sets it per
    # release; layout/split.py then offers even splits only). Not written into plan.json's model_spec.
    hybrid_uneven_split: bool = field(default=True, repr=False)
    # Not the network: whether that Megatron-LM takes a hybrid pattern cut into pipeline segments by '|' (one per
    # virtual stage, megatron-core 0.17 on: release_flags.HYBRID_PIPE_SEGMENTS_CORE), which builds virtual pipeline
    # stages for a hybrid stack; release_model sets it per release. Not in plan.json.
    hybrid_pipe_segments: bool = field(default=False, repr=False)
    # Not the network either: whether that Megatron-LM splits Gated DeltaNet layers over context parallelism
    # (megatron-core 0.18.0 on: release_flags.GDN_CP_CORE; release_model sets it per release). Not in plan.json.
    gdn_context_parallel: bool = field(default=False, repr=False)
    # Not the network: the pipeline split a measured run ran (a calibration row's pipeline_layout, its Megatron-LM
    # log's split arguments), as a --pipeline-model-parallel-layout string; layout/split.py best_split returns it at its
    # pp x vp instead of its own optimum, so the row is priced as it ran. '' (plans, searches): best_split's own.
    pinned_split: str = field(default="", repr=False)
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._check_magnitudes()
        if self.attention not in ATTENTION_KINDS:
            raise invalid(f"{self.name}.attention", self.attention, f"one of {', '.join(ATTENTION_KINDS)}")
        for name in ("num_layers", "hidden", "num_heads", "vocab", "seq_len"):
            if getattr(self, name) <= 0:
                raise invalid(f"{self.name}.{name}", getattr(self, name), "must be > 0")
        if self.num_layers > MAX_MODEL_LAYERS:
            raise invalid(f"{self.name}.layers", self.num_layers, f"1..{MAX_MODEL_LAYERS:,} (commbench's bound on "
                          "decoder layers: about 8x the deepest published LLM's 126; the pipeline split's search grows with "
                          "their square)")
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
        if self.is_moe and self.num_moe_layers == 0:   # transformers then builds every layer dense: not a MoE model
            raise invalid(f"{self.name}.dense_layers", self.num_dense_layers,
                          f"0..{self.num_layers - 1} for a model with routed experts (at least one MoE layer; a "
                          "model whose every layer is dense is a dense model: give it without routed experts)")
        if not self.is_moe:   # MoE fields without routed experts: the model was planned dense, the fields unread
            for name in ("num_shared_experts", "top_k", "expert_ffn"):
                if getattr(self, name):
                    raise invalid(f"{self.name}.{name.removeprefix('num_')}", getattr(self, name),
                                  "0 without routed experts (routed_experts = 0: a dense model)")
            if not self.layer_pattern and self.num_dense_layers != self.num_layers:
                raise invalid(f"{self.name}.dense_layers", self.num_dense_layers,
                              f"{self.num_layers} (= layers) without routed experts: every layer of a dense model is "
                              "dense")
        if self.is_moe and self.expert_ffn <= 0:
            raise invalid(f"{self.name}.expert_ffn", self.expert_ffn, "MoE models need expert_ffn > 0")
        if self.is_moe and (self.top_k <= 0 or self.top_k > self.num_routed_experts):
            raise invalid(f"{self.name}.top_k", self.top_k, "MoE models need 0 < top_k <= routed_experts and expert_ffn > 0")
        if self.num_dense_layers and self.dense_ffn <= 0:
            raise invalid(f"{self.name}.dense_ffn", self.dense_ffn, "dense layers need dense_ffn > 0")
        if self.attention == "gqa" and (self.num_kv_heads <= 0 or self.head_dim <= 0):
            raise invalid(f"{self.name}.kv_heads", self.num_kv_heads, "GQA needs kv_heads > 0 and head_dim > 0")
        if self.attention == "gqa" and self.num_heads % self.num_kv_heads:  # Megatron: heads % query groups == 0
            raise invalid(f"{self.name}.kv_heads", self.num_kv_heads, f"a divisor of heads ({self.num_heads})")
        if self.attention == "mla" and min(self.kv_lora_rank, self.qk_nope_head_dim, self.qk_rope_head_dim,
                                           self.v_head_dim) <= 0:
            raise invalid(f"{self.name}.attention", "mla", "MLA needs a kv lora rank and nope/rope/v head dims > 0")
        if self.attention == "gqa":   # MLA's sizes on a GQA model were read and never used: its attention was GQA's
            mla = next((f for f in MLA_FIELDS if getattr(self, f)), None)
            if mla:
                raise invalid(f"{self.name}.{mla}", getattr(self, mla),
                              '0 with attention = "gqa" (an MLA size: set attention = "mla" for multi-head latent '
                              "attention)")
        if (self.attention == "dsv4") != bool(self.csa_pattern):
            raise invalid(f"{self.name}.csa_pattern", self.csa_pattern or '""', 'set exactly when attention = "dsv4"')
        if self.attention == "dsv4" and (bad := dsv4.check(self)):
            raise invalid(f"{self.name}.{bad[0]}", bad[1], bad[2])
        if self.num_mtp_layers > self.num_layers:   # a typo: the plan would build and price them all (minutes)
            raise invalid(f"{self.name}.mtp_layers", self.num_mtp_layers,
                          f"0..{self.num_layers} (at most the decoder layers: each MTP depth is one more layer that "
                          "predicts one token further ahead; published models use 1 or 2)")
        if self.hash_layers > self.num_moe_layers:
            raise invalid(f"{self.name}.hash_layers", self.hash_layers, f"0..{self.num_moe_layers} (the MoE layers)")
        arch = self.architecture
        if arch is not None and arch.glu != self.glu:
            raise invalid(f"{self.name}.glu", self.glu, f"{arch.glu} (architecture.activation = {arch.activation})")
        if arch is not None and arch.sliding_window != self.sliding_window:
            raise invalid(f"{self.name}.sliding_window", self.sliding_window, f"arch.sliding_window = {arch.sliding_window}")
        if arch is not None and arch.router_groups and (not self.is_moe or self.num_routed_experts % arch.router_groups):
            raise invalid(f"{self.name}.arch.router_groups", arch.router_groups, "a divisor of routed_experts")
        if arch is None:
            self._check_extra_router_groups()
        elif ("n_group" in self.extra or "topk_group" in self.extra) and \
                _group_limit(*self._extra_router_groups()) != _group_limit(arch.router_groups, arch.router_group_topk):
            groups, group_topk = self._extra_router_groups()
            raise CommbenchError(
                f"model {self.name!r}: n_group={groups} / topk_group={group_topk} beside an [arch] table are not read: "
                f"the plan routes by arch.router_groups / arch.router_group_topk ({arch.router_groups} / "
                f"{arch.router_group_topk}); set arch.router_groups = {groups} and arch.router_group_topk = "
                f"{group_topk} there (cited in arch_sources), or leave n_group / topk_group out")

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

    def _check_extra_router_groups(self) -> None:
        """A model file's n_group / topk_group without an [arch] table (group-limited routing, ep_traffic.py): as
        architecture.router_groups / router_group_topk are checked: both or neither, topk_group <= n_group, n_group a
        divisor of routed_experts."""
        groups, group_topk = (self.extra.get(k) or 0 for k in ("n_group", "topk_group"))
        if not (groups or group_topk):
            return
        if not self.is_moe or not groups or self.num_routed_experts % groups:
            raise invalid(f"{self.name}.n_group", groups, "a divisor of routed_experts "
                          f"({self.num_routed_experts}), with topk_group; or both 0")
        if not 0 < group_topk <= groups:
            raise invalid(f"{self.name}.topk_group", group_topk, f"0 < topk_group <= n_group ({groups}), or both 0")

    def _extra_router_groups(self) -> tuple[int, int]:
        return int(self.extra.get("n_group", 0) or 0), int(self.extra.get("topk_group", 0) or 0)

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
    def all_to_all_cp(self) -> bool:
        """Whether Megatron runs this model's context parallelism as all-to-all (cp_comm_type "a2a"), not the ring:
        attention with sinks (softmax_type other than vanilla: gpt-oss). Megatron-Bridge recipes/gpt_oss/gpt_oss.py at
        v0.3.0 / v0.3.1 (lines 63 and 181): `cfg.model.cp_comm_type = "a2a"  # only a2a cp is supported for sink
        attention.`; gpt-oss's sliding window is refused by the ring too (Transformer Engine attention/
        dot_product_attention/context_parallel.py attn_forward_func_with_cp: "The context parallel running configs
        cannot support sliding window attetnion!" unless cp_comm_type is a2a or, without fused attention, all_gather)."""
        return self.architecture is not None and self.architecture.softmax_type != "vanilla"

    @property
    def q_dim(self) -> int:
        """Query width (all heads); for MLA, nope + rope per head."""
        if self.attention == "dsv4":
            return self.num_heads * self.head_dim
        if self.attention == "mla":
            return self.num_heads * (self.qk_nope_head_dim + self.qk_rope_head_dim)
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of K plus V per token as the attention core sees it (what CP rings exchange)."""
        if self.attention == "dsv4":
            return self.head_dim  # one KV head, shared by K and V
        if self.attention == "mla":
            return self.num_heads * (self.qk_nope_head_dim + self.qk_rope_head_dim + self.v_head_dim)
        return 2 * self.num_kv_heads * self.head_dim

    @property
    def attn_out_dim(self) -> int:
        return self.num_heads * (self.v_head_dim if self.attention == "mla" else self.head_dim)

    @property
    def residual_streams(self) -> int:
        """Residual streams a layer reads and writes (DeepSeek-V4's mHC: hc_mult; else 1)."""
        return max(self.hc_mult, 1)


# ---------------------------------------------------------------- FLOPs (FLOPS.md)
