"""A parallel layout (Megatron-Core names), its validation, and a columnar array of many layouts.

MoE parallel folding (Megatron-Core, "MoE Parallel Folding", arXiv 2504.14960): attention and
dense layers use TP x CP x DP; experts use ETP x EP x EDP over the same GPUs, so ETP x EP must
divide TP x CP x DP and EDP = TP x CP x DP / (ETP x EP). PP is shared. Ranks are ordered
tp-cp-dp-pp (attention) and etp-ep-edp-pp (experts), TP innermost, as Megatron does.

Layer split: a layout is valid only where Megatron can build a split of the model's layers over
its pp x vp stages (split.py chooses it: even, embedding/loss accounting, uneven first/last stage
or an explicit pipeline layout); the step model charges that split's busiest rank.

The rules live once, vectorised, in `layout_violations`; `check_layout` turns the first
violated rule of one layout into a one-line CommbenchError.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Iterable, Mapping

import numpy as np

from commbench.errors import CommbenchError, invalid
from commbench.planner.layout.graph_scope import scope_mask, scope_text
from commbench.planner.models.counts import framework_model
from commbench.planner.models.dsv4 import dsv4_heads_bad
from commbench.planner.models.gdn import gdn_heads_bad
from commbench.planner.models.mamba import mamba_heads_bad
from commbench.planner.models.spec import ModelSpec
from commbench.planner.layout.split import buildable, most_chunk_layers, stage_imbalance  # noqa: F401 - stage_imbalance re-exported (old import path)

# recompute: none; selective = Megatron's default module (core_attn) with the light modules that free something on
# the model's layer specs (layout/recompute.py: the one table of what each module frees); full = every layer's input
# only; then the light modules of the Megatron-Bridge MoE recipes (--recompute-modules):
# mla_up_proj (MLA's q/kv up-projections; DeepSeek-V4's query up-projection), moe_act (the experts' activation function).
# Then the module sets Megatron-Bridge's performance recipes run (recipes.json "recompute", their
# recompute_modules as a set, names joined with "+" in sorted order, as cuda_graph_scope joins its modules): a
# published run or a plan "as the recipe" launches exactly that set (emit/megatron.py) and is priced per module
# (layout/recompute.py); the search enumerates only the modes above (search/candidates.py). core_attn alone is
# Megatron-Core's default module (recompute_modules None), which "selective" extends by the light modules.
RECIPE_MODULE_SETS = ("core_attn", "mlp", "layernorm+moe_act", "mla_up_proj+mlp", "layernorm+mla_up_proj+moe_act",
                      "mla_up_proj+mlp+moe_act")
RECOMPUTE = ("none", "selective", "full", "mla_up_proj", "moe_act", *RECIPE_MODULE_SETS)
DISPATCHERS = ("alltoall", "flex")  # flex = deduplicated per destination rank (DeepEP / HybridEP)
PRECISIONS = ("bf16", "fp8", "mxfp8", "nvfp4")
# CUDA graph scope: none (eager launches); layer = per-layer graphs of attention / router /
# MoE preprocess (Transformer Engine cuda_graph_impl="transformer_engine"); full = the whole
# iteration captured once (cuda_graph_impl="full_iteration": sync-free dropless MoE).
CUDA_GRAPHS = ("none", "layer", "full")

# fsdp_replicas: HSDP, FSDP over part of DP: dp/fsdp_replicas ranks (x cp) shard the parameters, and
# fsdp_replicas such groups hold replicas (Megatron-FSDP --num-distributed-optimizer-instances,
# TorchTitan data_parallel_replicate_degree); 1 = FSDP over the whole DP group (step/fsdp.py).
INT_FIELDS = ("tp", "pp", "vp", "ep", "etp", "cp", "dp", "mbs", "gbs", "fsdp_replicas")
# fp8_attention: the attention core in fp8 (--fp8-dot-product-attention); fused_moe: fused
# permute + grouped MLP kernels (Megatron-Bridge cutedsl_fused_grouped_mlp, moe_permute_fusion).
# fsdp: data parallelism that also shards parameters and gradients (ZeRO-3: Megatron-FSDP
# optim_grads_params, TorchTitan FSDP2), gathered per layer (step/fsdp.py).
# fsdp_outer_optim: under HSDP (fsdp_replicas > 1) the optimizer state is sharded across the replicas too, over all
# of DP (Megatron-FSDP --outer-dp-sharding-strategy optim, megatron-core 0.16.1 on: "Optimizer State Hybrid
# Sharding"; Megatron-Bridge v0.6.0's Nemotron-3-Ultra recipes, perf_recipes/nemotronh/common.py).
# fsdp_double_buffer: Megatron-FSDP's persistent double buffers (--fsdp-double-buffer, Megatron-Bridge
# ddp.fsdp_double_buffer; on with NCCL user buffers): two units' gathered weights and unsharded gradients, where
# without them the reduce-scatter queue and the prefetch hold more (step/fsdp.py megatron_unit_buffers). The plans
# launch with it (emit/megatron.py); a published run has its release recipe's (recipes.json). Read only with fsdp
# (a layout without it keeps the default), and TorchTitan's FSDP2 has no such buffers (not read there).
# keep_fp8_transpose_cache: Megatron-FSDP keeps every unit's fp8 weight transposes across micro-batches
# (--keep-fp8-transpose-cache, Megatron-Bridge ddp.keep_fp8_transpose_cache): on Hopper with per-tensor fp8, 1 B per
# parameter of all units held, where without it the running unit's are made and dropped each micro-batch
# (step/fsdp.py "Hopper per-tensor fp8 weights"). The plans launch without it unless pinned (at their megatron-core it
# saves no transpose pass); a published run has its release recipe's (recipes.json). Read only with fsdp.
BOOL_FIELDS = ("sequence_parallel", "distributed_optimizer", "tp_comm_overlap", "moe_a2a_overlap", "dp_overlap",
               "fp8_attention", "fused_moe", "fsdp", "fsdp_outer_optim", "fsdp_double_buffer",
               "keep_fp8_transpose_cache")
# cpu_offload_layers: transformer layers per rank whose activations Transformer Engine keeps in host
# memory (Megatron-Core --cpu-offloading-num-layers; Megatron-Bridge recipes' cpu_offloading_num_layers).
# Taken from a release's recipe for its published runs; the search leaves it at 0.
# recompute_layers: with recompute=full, how many layers of each model chunk are recomputed, the rest
# stored (Megatron-Core --recompute-method block --recompute-num-layers N: TransformerBlock checkpoints
# the first N layers of its chunk; the recipes' recompute_num_layers, Megatron-Bridge
# scripts/performance/utils/overrides.py _set_recompute_overrides); 0 = every layer (method uniform).
# fused_mlp_offload_min: module-level activation offload of the fused grouped MLP (megatron-core 0.19.0
# --fine-grained-activation-offloading --offload-modules fused_group_mlp): each saved tensor of the routed experts'
# fused MLP with at least this many elements (--min-offloaded-tensor-size) goes to host memory after the layer's
# forward and comes back before its backward (step/memory.py fused_mlp_offload); 0 = off. From a release's recipe
# for its published runs (Megatron-Bridge v0.6.0 Nemotron-3-Ultra: 500M elements on GB300, 350M on GB200); the
# search leaves it at 0 and the Megatron-LM emitter (megatron-core 0.16.1) refuses it.
COUNT_FIELDS = ("cpu_offload_layers", "recompute_layers", "fused_mlp_offload_min")
# The fields that make a layout's structure, its flags aside (what a user choosing a layout compares; the
# search's distinct structures, a published run's layout beside another release's).
STRUCTURE = ("tp", "cp", "pp", "vp", "ep", "etp", "mbs")
CODE_FIELDS = {"recompute": RECOMPUTE, "dispatcher": DISPATCHERS, "precision": PRECISIONS, "cuda_graph": CUDA_GRAPHS}


@dataclass(frozen=True, kw_only=True)
class Layout:
    """One parallel layout. `etp=None` means "same as tp" (Megatron's default)."""

    tp: int = 1
    pp: int = 1
    vp: int = 1
    ep: int = 1
    etp: int | None = None
    cp: int = 1
    dp: int = 1
    mbs: int = 1
    gbs: int = 1
    sequence_parallel: bool = True
    recompute: str = "none"
    dispatcher: str = "alltoall"
    precision: str = "bf16"
    distributed_optimizer: bool = True
    tp_comm_overlap: bool = False
    moe_a2a_overlap: bool = False
    dp_overlap: bool = True
    fp8_attention: bool = False
    fused_moe: bool = False
    cuda_graph: str = "none"
    cuda_graph_scope: str = ""   # per-layer graphs' modules (graph_scope.py); "" = the recipes' scope for the model
    fsdp: bool = False
    fsdp_replicas: int = 1
    cpu_offload_layers: int = 0
    recompute_layers: int = 0
    fsdp_outer_optim: bool = False
    fused_mlp_offload_min: int = 0
    fsdp_double_buffer: bool = True   # read with fsdp only
    keep_fp8_transpose_cache: bool = False   # read with fsdp only

    def __post_init__(self) -> None:
        if self.etp is None:
            object.__setattr__(self, "etp", self.tp)
        for name in INT_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise invalid(name, value, "a positive integer")
        for name in COUNT_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
                raise invalid(name, value, "a non-negative integer")
        for name, allowed in CODE_FIELDS.items():
            if getattr(self, name) not in allowed:
                raise invalid(name, getattr(self, name), f"one of {', '.join(allowed)}")
        object.__setattr__(self, "cuda_graph_scope", scope_text(scope_mask(self.cuda_graph_scope)))
        for name in BOOL_FIELDS:  # a string such as "false" would otherwise read as true
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise invalid(name, getattr(self, name), "true or false")

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    @property
    def edp(self) -> int:
        return self.tp * self.cp * self.dp // (self.etp * self.ep)

    @property
    def num_microbatches(self) -> int:
        return self.gbs // (self.mbs * self.dp)

    @classmethod
    def for_world(cls, num_gpus: int, **kwargs) -> "Layout":
        """Layout with dp derived from the GPU count: dp = num_gpus / (tp cp pp)."""
        model_parallel = kwargs.get("tp", 1) * kwargs.get("cp", 1) * kwargs.get("pp", 1)
        if num_gpus % model_parallel:
            raise invalid("--gpus", num_gpus, f"a multiple of tp*cp*pp = {model_parallel} (tp={kwargs.get('tp', 1)}, "
                          f"cp={kwargs.get('cp', 1)}, pp={kwargs.get('pp', 1)} in --layout)")
        return cls(dp=num_gpus // model_parallel, **kwargs)


def parse_layout(text: str, num_gpus: int, **defaults) -> Layout:
    """Parse 'tp=1,pp=2,vp=8,ep=32,mbs=1,gbs=4096,recompute=selective' (dp derived when absent)."""
    known = {f.name for f in fields(Layout)}
    values: dict[str, object] = dict(defaults)
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = part.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in known:
            raise invalid("--layout", part, f"key=value pairs with keys {', '.join(sorted(known))}")
        raw = raw.strip()
        if key in INT_FIELDS:
            try:
                values[key] = int(raw)
            except ValueError:
                raise invalid(key, raw, "a positive integer") from None
            if not 1 <= values[key] <= 1 << 24:
                raise invalid(key, raw, f"a positive integer up to {1 << 24:,}")
        elif key in BOOL_FIELDS:
            if raw.lower() not in ("1", "0", "true", "false", "on", "off", "yes", "no"):
                raise invalid(key, raw, "true/false (or on/off, 1/0)")
            values[key] = raw.lower() in ("1", "true", "on", "yes")
        elif key in COUNT_FIELDS:
            if not raw.isdecimal():
                raise invalid(key, raw, "a non-negative integer")
            values[key] = int(raw)
        else:
            values[key] = raw.lower()
    if "dp" in values:
        return Layout(**values)  # type: ignore[arg-type]
    return Layout.for_world(num_gpus, **values)


# ---------------------------------------------------------------- columnar layouts

@dataclass(frozen=True, kw_only=True)
class LayoutArrays:
    """Many layouts as equal-length numpy columns (ints; bools; enum codes indexing RECOMPUTE etc.)."""

    tp: np.ndarray
    pp: np.ndarray
    vp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    cp: np.ndarray
    dp: np.ndarray
    mbs: np.ndarray
    gbs: np.ndarray
    sequence_parallel: np.ndarray
    distributed_optimizer: np.ndarray
    tp_comm_overlap: np.ndarray
    moe_a2a_overlap: np.ndarray
    dp_overlap: np.ndarray
    fp8_attention: np.ndarray
    fused_moe: np.ndarray
    fsdp: np.ndarray
    fsdp_replicas: np.ndarray
    recompute: np.ndarray
    dispatcher: np.ndarray
    precision: np.ndarray
    cuda_graph: np.ndarray
    cpu_offload_layers: np.ndarray
    recompute_layers: np.ndarray
    fsdp_outer_optim: np.ndarray
    fused_mlp_offload_min: np.ndarray
    fsdp_double_buffer: np.ndarray
    keep_fp8_transpose_cache: np.ndarray
    cuda_graph_scope: np.ndarray   # graph_scope.scope_mask per layout (0: the recipes' scope for the model)

    @property
    def num_microbatches(self) -> np.ndarray:
        """Micro-batches per step per pipeline, as Layout.num_microbatches (the batch rule makes them whole)."""
        return self.gbs // (self.mbs * self.dp)

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    @classmethod
    def from_columns(cls, **columns) -> "LayoutArrays":
        """Broadcast scalars/arrays to one length; enum columns accept names or codes; etp defaults to tp."""
        columns = dict(columns)
        for name, allowed in CODE_FIELDS.items():
            value = columns.get(name, Layout.__dataclass_fields__[name].default)
            arr = np.asarray(value)
            if arr.dtype.kind in "USO":
                lookup = {v: i for i, v in enumerate(allowed)}
                bad = [v for v in np.unique(arr) if v not in lookup]
                if bad:
                    raise invalid(name, bad[0], f"one of {', '.join(allowed)}")
                arr = np.vectorize(lookup.__getitem__, otypes=[np.int8])(arr)
            columns[name] = arr
        if columns.get("etp") is None:
            columns["etp"] = columns.get("tp", 1)
        scope = np.asarray(columns.get("cuda_graph_scope", 0))
        if scope.dtype.kind in "USO":
            columns["cuda_graph_scope"] = np.vectorize(scope_mask, otypes=[np.int64])(scope)
        defaults = {f.name: f.default for f in fields(Layout)} | {"cuda_graph_scope": 0}
        names = INT_FIELDS + BOOL_FIELDS + tuple(CODE_FIELDS) + COUNT_FIELDS + ("cuda_graph_scope",)
        unknown = set(columns) - set(names)
        if unknown:
            raise invalid("layout column", sorted(unknown)[0], f"one of {', '.join(names)}")
        arrays = np.broadcast_arrays(*(np.atleast_1d(np.asarray(columns.get(n, defaults[n]))) for n in names))
        out = {}
        for name, arr in zip(names, arrays):
            dtype = np.int64 if name in INT_FIELDS + COUNT_FIELDS + ("cuda_graph_scope",) else (bool if name in BOOL_FIELDS else np.int8)
            out[name] = np.ascontiguousarray(arr, dtype=dtype)
        return cls(**out)

    @classmethod
    def from_layouts(cls, layouts: Iterable[Layout]) -> "LayoutArrays":
        rows = list(layouts)
        cols: dict[str, object] = {}
        for name in INT_FIELDS + BOOL_FIELDS + COUNT_FIELDS:
            cols[name] = np.array([getattr(r, name) for r in rows])
        for name in CODE_FIELDS:
            cols[name] = np.array([getattr(r, name) for r in rows])
        cols["cuda_graph_scope"] = np.array([scope_mask(r.cuda_graph_scope) for r in rows], dtype=np.int64)
        return cls.from_columns(**cols)

    def layout(self, index: int) -> Layout:
        kw: dict[str, object] = {n: int(getattr(self, n)[index]) for n in INT_FIELDS + COUNT_FIELDS}
        kw.update({n: bool(getattr(self, n)[index]) for n in BOOL_FIELDS})
        kw.update({n: allowed[int(getattr(self, n)[index])] for n, allowed in CODE_FIELDS.items()})
        kw["cuda_graph_scope"] = scope_text(self.cuda_graph_scope[index])
        return Layout(**kw)  # type: ignore[arg-type]

    def take(self, index: np.ndarray) -> "LayoutArrays":
        return LayoutArrays(**{f.name: getattr(self, f.name)[index] for f in fields(self)})


# ---------------------------------------------------------------- rules

# One bit per rule, in the order check_layout reports them.
RULES: tuple[tuple[str, str], ...] = (
    ("world", "tp*cp*dp*pp must equal the number of GPUs"),
    ("expert_fold", "etp*ep must divide tp*cp*dp (MoE parallel folding)"),
    ("heads", "tp must divide the attention heads (and the KV heads for GQA); for Mamba layers tp the Mamba "
              "heads and groups, and cp the heads per TP rank (so too for attention with sinks, whose CP is all-to-all); for Gated DeltaNet tp its heads, and cp=1 before megatron-core 0.18.0 (release 26.06), tp*cp its heads from it; for DeepSeek-V4's "
              "hybrid attention tp its output-projection groups and cp=1"),
    ("experts", "ep must divide the routed experts (ep=1 for a dense model)"),
    ("pipeline", "the layers must split over pp*vp virtual stages as Megatron builds them (each stage holds a "
                 "layer, the embedding, the MTP or the loss), and vp>1 needs pp>1 (and a model that is not hybrid: "
                 "megatron-core's MambaStack builds no virtual stages)"),
    ("batch", "gbs must be a multiple of mbs*dp"),
    ("schedule", "the pipeline schedule must take the step's gbs/(mbs*dp) micro-batches: under Megatron, with vp>1 "
                 "a multiple of pp and at least pp (megatron-core 0.16.1 schedules.py groups pp micro-batches per "
                 "virtual stage, microbatch_group_size_per_vp_stage = pp, and raises otherwise); under TorchTitan, "
                 "with vp>1 a multiple of its rounds max(1, n // pp) (torch's ScheduleInterleaved1F1B), and with "
                 "vp=1 and pp>1 at least pp (torch's Schedule1F1B)"),
    ("context", "seq_len must be divisible by 2*cp when cp>1 (load-balanced causal CP)"),
    ("sequence", "with sequence parallelism (tp>1) each CP rank's seq_len/cp tokens must split over tp (Megatron-Core "
                 "scatters the sequence over TP ranks); TorchTitan 0.3.0 needs seq_len divisible by tp*2*cp (cp>1) or "
                 "tp (its trainer's sequence/context check)"),
    ("fsdp", "fsdp needs pp=1 and the distributed optimizer (FSDP plans here run without pipeline parallelism)"),
    ("hsdp", "fsdp_replicas > 1 (HSDP) needs fsdp, dp divisible by fsdp_replicas and, for a MoE model, ep*etp dividing "
             "a shard group's dp/fsdp_replicas*cp*tp ranks (TorchTitan 0.3's efsdp mesh; Megatron-FSDP in megatron-core "
             "0.16.1 builds no expert mesh for HSDP, so Megatron plans of a MoE model refuse it); fsdp_outer_optim "
             "needs HSDP (megatron-core --outer-dp-sharding-strategy optim: only with optim_grads_params and an outer "
             "DP group)"),
    ("offload", "cpu_offload_layers needs pp=1, recompute=none, cuda_graph=none and fewer offloaded layers than the "
                "model has (megatron-core 0.16.1 to 0.17.1 TransformerConfig.__post_init__: \"CUDA graphs not supported with "
                "CPU offloading\", transformer_config.py:1952 at d7288711; 0.18.0 on, Megatron-Bridge 26.06's and "
                "26.08's, allow it under the full-iteration graph, transformer_config.py:2243 at d0b3b775, which the "
                "plans here, written in 0.16.1's arguments, do not offer)"),
    ("recompute_layers", "recompute_layers > 0 (layers of each model chunk recomputed) needs recompute=full and at "
                         "most the layers of the layout's largest model chunk (megatron-core 0.16.1 TransformerConfig: "
                         "recompute_num_layers 'between 1 and num_layers_per_pipeline_rank')"),
    ("fused_mlp_offload", "fused_mlp_offload_min > 0 (offload of the fused grouped MLP's saved tensors) needs a MoE model, "
                          "fused_moe and cpu_offload_layers = 0 (megatron-core 0.19.0 TransformerConfig: fused_group_mlp "
                          "requires use_transformer_engine_op_fuser; fine_grained_activation_offloading 'cannot be "
                          "enabled with cpu_offloading')"),
)
RULE_BITS = {name: 1 << i for i, (name, _) in enumerate(RULES)}


def layout_violations(model: ModelSpec, arr: LayoutArrays, num_gpus: int | np.ndarray,
                      seq_len: int | None = None, framework: str = "megatron") -> np.ndarray:
    """Bitmask per layout of the RULES it breaks (0 = valid); `framework` (megatron, torchtitan) for the rules
    whose terms differ between them (schedule, sequence)."""
    model = framework_model(model, framework)   # the layers the framework's launch splits (TorchTitan: no MTP)
    s = seq_len or model.seq_len
    bits = np.zeros(len(arr), dtype=np.int64)
    attn_group = arr.tp * arr.cp * arr.dp
    bits |= np.where(attn_group * arr.pp != num_gpus, RULE_BITS["world"], 0)
    bits |= np.where(attn_group % (arr.etp * arr.ep) != 0, RULE_BITS["expert_fold"], 0)
    heads_bad = model.num_heads % arr.tp != 0
    if model.attention == "gqa":
        heads_bad |= model.num_kv_heads % arr.tp != 0
    heads_bad |= mamba_heads_bad(model, arr.tp, arr.cp) | gdn_heads_bad(model, arr.tp, arr.cp) \
        | dsv4_heads_bad(model, arr.tp, arr.cp)
    if model.all_to_all_cp:   # all-to-all CP hands each CP rank heads/(tp*cp) of the heads: Transformer Engine's
        # flash_attn_a2a_communicate views a TP rank's heads as [cp, heads // cp] (context_parallel.py, "np//cp")
        kv_heads = model.num_kv_heads if model.attention == "gqa" else model.num_heads
        heads_bad |= (arr.cp > 1) & ((model.num_heads % (arr.tp * arr.cp) != 0) | (kv_heads % (arr.tp * arr.cp) != 0))
    bits |= np.where(heads_bad, RULE_BITS["heads"], 0)
    experts_bad = (model.num_routed_experts % arr.ep != 0) if model.is_moe else (arr.ep != 1)
    bits |= np.where(experts_bad, RULE_BITS["experts"], 0)
    bits |= np.where(~buildable(model, arr.pp, arr.vp), RULE_BITS["pipeline"], 0)
    bits |= np.where(arr.gbs % (arr.mbs * arr.dp) != 0, RULE_BITS["batch"], 0)
    bits |= np.where(schedule_bad(arr, framework), RULE_BITS["schedule"], 0)
    bits |= np.where((arr.cp > 1) & (s % (2 * arr.cp) != 0), RULE_BITS["context"], 0)
    bits |= np.where(s % sequence_divisor(arr, framework) != 0, RULE_BITS["sequence"], 0)
    bits |= np.where(arr.fsdp & ((arr.pp > 1) | ~arr.distributed_optimizer), RULE_BITS["fsdp"], 0)
    hsdp = arr.fsdp_replicas > 1
    shard_ranks = arr.dp // np.maximum(arr.fsdp_replicas, 1) * arr.cp * arr.tp
    expert_bad = (shard_ranks % (arr.ep * arr.etp) != 0) if model.is_moe else np.zeros(len(arr), dtype=bool)
    bits |= np.where(hsdp & (~arr.fsdp | (arr.dp % arr.fsdp_replicas != 0) | expert_bad), RULE_BITS["hsdp"], 0)
    bits |= np.where(arr.fsdp_outer_optim & ~(hsdp & arr.fsdp), RULE_BITS["hsdp"], 0)
    offload_bad = (arr.cpu_offload_layers > 0) & ((arr.pp > 1) | (arr.recompute != 0) | (arr.cuda_graph != 0)
                                                  | (arr.cpu_offload_layers >= model.num_layers))
    bits |= np.where(offload_bad, RULE_BITS["offload"], 0)
    counted = arr.recompute_layers > 0
    over = np.zeros(len(arr), dtype=bool)
    if np.any(counted):
        over[counted] = arr.recompute_layers[counted] > most_chunk_layers(model, arr.pp[counted], arr.vp[counted])
    bits |= np.where(counted & ((arr.recompute != RECOMPUTE.index("full")) | over), RULE_BITS["recompute_layers"], 0)
    offload_mlp_bad = (arr.fused_mlp_offload_min > 0) & (~arr.fused_moe | (arr.cpu_offload_layers > 0)
                                                         | (not model.is_moe))
    bits |= np.where(offload_mlp_bad, RULE_BITS["fused_mlp_offload"], 0)
    return bits


def schedule_bad(arr, framework: str = "megatron") -> np.ndarray:
    """Layouts whose micro-batch count the pipeline schedule refuses (rule schedule)."""
    n_mb = arr.num_microbatches
    if framework == "torchtitan":
        # torch 2.13 schedules.py: ScheduleInterleaved1F1B raises unless n % number_of_rounds == 0, number_of_rounds
        # = max(1, n // pp); Schedule1F1B raises for n < its stages. TorchTitan 0.3.0's build_pipeline_schedule
        # only warns for fewer micro-batches than stages.
        rounds = np.maximum(1, n_mb // np.maximum(arr.pp, 1))
        return np.where(arr.vp > 1, n_mb % rounds != 0, (arr.pp > 1) & (n_mb < arr.pp))
    return (arr.vp > 1) & ((n_mb % arr.pp != 0) | (n_mb < arr.pp))


def sequence_divisor(arr, framework: str = "megatron") -> np.ndarray:
    """What seq_len must be a multiple of for sequence parallelism (rule sequence): Megatron-Core tp*cp (each CP
    rank's seq_len/cp tokens scattered over TP), TorchTitan tp*2*cp with cp>1, else tp; 1 without it (tp = 1 or
    sequence parallelism off: the context rule alone then)."""
    sp = np.asarray(arr.sequence_parallel, dtype=bool) & (arr.tp > 1)
    context = np.where(arr.cp > 1, 2 * arr.cp, 1) if framework == "torchtitan" else arr.cp
    return np.where(sp, arr.tp * context, 1)


def rule_detail(name: str, model: ModelSpec, layout: Layout, num_gpus: int, seq_len: int | None = None,
                framework: str = "megatron") -> str:
    """The fields and values by which `layout` breaks the rule `name` of RULES (its words are RULES'), e.g.
    "gbs = 500 is not a multiple of mbs*dp = 32 (4*8)"."""
    a = layout
    fold, attn = a.etp * a.ep, a.tp * a.cp * a.dp
    shard = a.dp // max(a.fsdp_replicas, 1) * a.cp * a.tp
    heads = f"tp = {a.tp}, heads = {model.num_heads}, kv_heads = {model.num_kv_heads}"
    if model.all_to_all_cp:
        heads += f", cp = {a.cp} (all-to-all CP: tp*cp must divide both)"
    if model.num_mamba_layers:
        heads += f", cp = {a.cp}, Mamba heads = {model.mamba_num_heads}, Mamba groups = {model.mamba_num_groups}"
    if model.linear_attention_freq:
        heads += (f", cp = {a.cp}, Gated DeltaNet key heads = {model.gdn_num_key_heads}, value heads = "
                  f"{model.gdn_num_value_heads}")
    if model.attention == "dsv4":
        heads += f", cp = {a.cp}, output-projection groups = {model.o_groups}"
    most = int(most_chunk_layers(framework_model(model, framework), np.array([a.pp]), np.array([a.vp]))[0])
    experts = (f"ep = {a.ep} does not divide routed experts = {model.num_routed_experts}" if model.is_moe
               else f"ep = {a.ep} on a dense model")
    return {
        "world": f"tp*cp*dp*pp = {a.world} ({a.tp}*{a.cp}*{a.dp}*{a.pp}) != {num_gpus} GPUs",
        "expert_fold": f"etp*ep = {fold} ({a.etp}*{a.ep}) does not divide tp*cp*dp = {attn} ({a.tp}*{a.cp}*{a.dp})",
        "heads": heads,
        "experts": experts,
        "pipeline": f"{model.num_layers} layers + {model.num_mtp_layers} MTP over pp = {a.pp} x vp = {a.vp}"
                    + (" (vp > 1 with pp = 1)" if a.vp > 1 and a.pp == 1 else ""),
        "batch": f"gbs = {a.gbs} is not a multiple of mbs*dp = {a.mbs * a.dp} ({a.mbs}*{a.dp})",
        "schedule": f"{a.num_microbatches} micro-batches (gbs/(mbs*dp) = {a.gbs}/({a.mbs}*{a.dp})) with "
                    f"pp = {a.pp}, vp = {a.vp}" + (", framework torchtitan" if framework == "torchtitan" else ""),
        "context": f"seq_len = {seq_len or model.seq_len} is not divisible by 2*cp = {2 * a.cp}",
        "sequence": f"seq_len = {seq_len or model.seq_len} is not divisible by "
                    f"{int(sequence_divisor(LayoutArrays.from_layouts([a]), framework)[0])} (tp = {a.tp}, cp = {a.cp}, "
                    f"sequence_parallel = {a.sequence_parallel}" + (", framework torchtitan)" if framework == "torchtitan"
                                                                    else ")"),
        "fsdp": f"fsdp = {a.fsdp}, pp = {a.pp}, distributed_optimizer = {a.distributed_optimizer}",
        "hsdp": f"fsdp_replicas = {a.fsdp_replicas}, fsdp = {a.fsdp}, fsdp_outer_optim = {a.fsdp_outer_optim}, dp = {a.dp}, "
                f"{'MoE' if model.is_moe else 'dense'} model" + (f", ep*etp = {a.ep * a.etp}, shard group "
                                                                  f"dp/fsdp_replicas*cp*tp = {shard}" if model.is_moe else ""),
        "offload": f"cpu_offload_layers = {a.cpu_offload_layers}, pp = {a.pp}, "
                   f"recompute = {a.recompute}, cuda_graph = {a.cuda_graph}, layers = {model.num_layers}",
        "recompute_layers": f"recompute_layers = {a.recompute_layers}, recompute = {a.recompute}; allowed 1..{most} "
                            f"(the largest model chunk's layers: {model.num_layers} layers over pp = {a.pp} x vp = {a.vp})",
        "fused_mlp_offload": f"fused_mlp_offload_min = {a.fused_mlp_offload_min}, fused_moe = {a.fused_moe}, "
                             f"cpu_offload_layers = {a.cpu_offload_layers}, {'MoE' if model.is_moe else 'dense'} model",
    }[name]


def first_broken_rule(bits: int) -> str:
    """The name of the first rule of RULES set in a layout's violation bits (layout_violations); '' for none."""
    return next((n for n, _ in RULES if bits & RULE_BITS[n]), "")


def check_layout(model: ModelSpec, layout: Layout, num_gpus: int, seq_len: int | None = None, *,
                 given: set[str] | None = None, framework: str = "megatron") -> None:
    """Raise CommbenchError naming the first rule `layout` breaks for `model` on `num_gpus` GPUs.
    `given`: the fields the user wrote (a rule broken by a defaulted field says it defaulted)."""
    bits = int(layout_violations(model, LayoutArrays.from_layouts([layout]), num_gpus, seq_len, framework)[0])
    if not bits:
        return
    name = first_broken_rule(bits)
    if name == "pipeline" and model.is_hybrid and layout.vp > 1 and layout.pp > 1 and not model.hybrid_pipe_segments:
        raise CommbenchError(f"vp={layout.vp} is invalid for {model.name}: a hybrid model is built by megatron-core's "
                             "MambaStack, which refuses virtual pipeline stages (0.16.1 ssm/mamba_block.py asserts "
                             "virtual_pipeline_model_parallel_size is None: 'does not currently support "
                             "virtual/interleaved pipeline parallelism'); pin vp=1, or plan with --software 26.04 or "
                             "newer (megatron-core 0.17 builds them from a '|'-segmented pattern)")
    rule = dict(RULES)[name]
    detail = rule_detail(name, model, layout, num_gpus, seq_len, framework)
    if name == "expert_fold" and given is not None and "etp" not in given:
        detail += f"; etp was not given and defaulted to tp = {layout.tp} (Megatron-LM's default)"
        if (layout.tp * layout.cp * layout.dp) % layout.ep == 0:
            detail += f": pass etp=1 in --layout for etp*ep = {layout.ep}"
    raise CommbenchError(f"layout {name} rule broken for {model.name}: {rule} ({detail})")


def with_fields(layout: Layout, **changes) -> Layout:
    return replace(layout, **changes)


def code_of(name: str, value: str) -> int:
    return CODE_FIELDS[name].index(value)


def names_of(name: str, codes: np.ndarray) -> np.ndarray:
    return np.asarray(CODE_FIELDS[name])[codes]


def as_mapping(layout: Layout) -> Mapping[str, object]:
    return {f.name: getattr(layout, f.name) for f in fields(layout)}
