"""The layouts a search enumerates (space.py's docstring gives the space): structures (tp, cp, pp, vp, ep,
etp, mbs; dp derived) crossed with the flag choices that matter for each (recompute, CUDA graphs,
dispatcher, distributed optimizer, sequence parallel, overlaps where Megatron allows them, FSDP and
HSDP), pins overriding, the framework's and the software release's limits applied."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from commbench.errors import CommbenchError, invalid
from commbench.planner.layout.connections import before_blackwell, needs_more_than_one
from commbench.planner.layout.placement import ep_domains, gpus_per_rack, placement_violations
from commbench.planner.layout.graph_scope import BIT, WHOLE_LAYER, default_scope, resolved_masks, scope_mask
from commbench.planner.layout.recipe_model import recipe_model
from commbench.planner.layout.recipes import (ep_overlap_measured_slower, flex_backend, release_features,
                                              tp_overlap_unrun)
from commbench.planner.layout.spec import CODE_FIELDS, RULES, LayoutArrays, layout_violations
from commbench.planner.models.spec import ModelSpec
from commbench.planner.layout.quant_dims import quant_tokens_ok, quant_tp_ok
from commbench.planner.search.frameworks import (graph_fallback, megatron_fsdp_runs_expert_parallel,
                                                 megatron_release_name, megatron_runs_on_hybrid, restrict_columns,
                                                 runs_fused_grouped_mlp)
from commbench.planner.search.quant_gap import quant_gap_message
from commbench.planner.search.graph_recompute import graph_recompute_refused
from commbench.planner.search.hybridep_split import refusal as hybridep_refusal, uneven_rows
from commbench.planner.search.wgrad_graph import wgrad_graph_refused, wgrad_graph_te_short

if TYPE_CHECKING:
    from commbench.planner.search.space import SearchRequest

MBS_CHOICES = (1, 2, 4, 8)
CP_CHOICES = (1, 2, 4, 8)
MAX_TP = 8  # tp and etp above one 8-GPU baseboard's worth are searched only when pinned


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _grid(**axes: np.ndarray) -> dict[str, np.ndarray]:
    mesh = np.meshgrid(*axes.values(), indexing="ij")
    return {name: m.ravel() for name, m in zip(axes, mesh)}


def _pinned(values, pins: dict, name: str):
    return [pins[name]] if name in pins else values


def even_vps(model: ModelSpec, pp: int) -> list[int]:
    """vp values that split the layers evenly over pp*vp virtual stages, counting the embedding and
    the loss as a layer each or not (Megatron --account-for-embedding/loss-in-pipeline-split); vp=1
    (1F1B, uneven first/last stage) always. Other vp are searched only when pinned."""
    slots = model.num_layers + model.num_mtp_layers
    if pp == 1:
        return [1]
    return sorted({1} | {v for v in range(2, (slots + 2) // pp + 1)
                         if any((slots + extra) % (pp * v) == 0 for extra in (0, 1, 2))})


def _structures(req: SearchRequest, per_rack: int) -> dict[str, np.ndarray]:
    """Structural candidates (tp, cp, pp, vp, ep, etp, mbs, dp) with the GPU count divided exactly, pins applied."""
    m, n, pins = req.model, req.num_gpus, req.pins
    slots = m.num_layers + m.num_mtp_layers + 2
    pairs = [(p, v) for p in _pinned([p for p in _divisors(n) if p <= slots], pins, "pp")
             for v in _pinned(even_vps(m, p), pins, "vp")]
    pairs_arr = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    tps = [d for d in _divisors(per_rack) if d <= MAX_TP]
    axes = {"tp": _pinned(tps, pins, "tp"),
            "cp": _pinned([c for c in CP_CHOICES if c <= n], pins, "cp"),
            "pair": list(range(len(pairs))),
            "ep": _pinned([e for e in _divisors(max(m.num_routed_experts, 1)) if e <= n], pins, "ep"),
            "etp": _pinned(tps if m.is_moe else [0], pins, "etp"),
            "mbs": _pinned(list(MBS_CHOICES), pins, "mbs")}
    g = _grid(**{k: np.asarray(v, dtype=np.int64) for k, v in axes.items()})
    pair = g.pop("pair")
    g["pp"], g["vp"] = pairs_arr[pair, 0], pairs_arr[pair, 1]
    if not m.is_moe:
        g["etp"] = g["tp"]
    model_parallel = g["tp"] * g["cp"] * g["pp"]
    keep = n % model_parallel == 0
    g = {k: v[keep] for k, v in g.items()}
    g["dp"] = n // (g["tp"] * g["cp"] * g["pp"])
    if "dp" in pins:
        keep = g["dp"] == pins["dp"]
        g = {k: v[keep] for k, v in g.items()}
    return g


A2A_OVERLAP_NEEDS = ("Megatron's --overlap-moe-expert-parallel-comm needs ep > 1, no full recompute, vp > 1 when pp > 1, "
                     "at most one MTP layer (and pp > 1 with it), no full-iteration CUDA graph, no per-layer one over "
                     "moe, mlp or the whole layer (megatron-core 0.16.1 TransformerConfig, TransformerLayer) and a "
                     "GPTModel (not a hybrid model)")


TP_OVERLAP_NEEDS = "Megatron's --tp-comm-overlap needs tp > 1 with sequence parallelism (validate_args)"


def _only_where(cols: dict[str, np.ndarray], ok: np.ndarray, key: str, needs: str, pins: dict) -> dict[str, np.ndarray]:
    """The rows where a flag pinned on runs (it used to be turned off there without a word); none: one line."""
    if not ok.any():
        others = ", ".join(f"{k}={v}" for k, v in pins.items() if k != key) or "nothing else pinned"
        raise invalid(key, True, f"{needs}; no layout with {others} allows it")
    return {k: v[ok] for k, v in cols.items()}


def _hybridep_even(cols: dict[str, np.ndarray], req: SearchRequest) -> dict[str, np.ndarray]:
    """Without the flex rows whose HybridEP EP groups split unevenly over NVLink domains (hybridep_split: DeepEP
    asserts on them); a pin that leaves none: one line. The plan priced EP32 on 288 GB200 as 8 + 24 (probe P9)."""
    domain = int(req.fabric.domain_size)
    if flex_backend(domain, req.software, req.gpu_name) != "hybridep":
        return cols
    per_rack = gpus_per_rack(req.num_gpus, domain)
    flex = cols["dispatcher"] == CODE_FIELDS["dispatcher"].index("flex")
    bad = flex & uneven_rows(cols["ep"], cols["etp"], per_rack, req.num_gpus)
    if not bad.any():
        return cols
    if bad.all():
        first = int(np.flatnonzero(bad)[0])
        raise hybridep_refusal(int(cols["ep"][first]), int(cols["etp"][first]), per_rack, req.num_gpus, req.pins)
    return {k: v[~bad] for k, v in cols.items()}


def _with_flags(g: dict[str, np.ndarray], req: SearchRequest) -> dict[str, np.ndarray]:
    """Cross each structure with the flag choices that matter for it (pins override):
    recompute x distributed optimizer x sequence parallel (tp > 1; forced on for MoE, as Megatron
    asserts "When using MoE and tensor parallelism, sequence parallelism must be used"). The
    dispatcher is flex (DeepEP/HybridEP) unless pinned: the step model sends each token once per
    destination rank with it and never more than top-k times with alltoall, memory unchanged, so
    alltoall is dominated."""
    pins = req.pins
    # what the release runs for the model there, less the dispatch this fabric cannot run of it (recipes.py)
    has = release_features(req.software, req.gpu_name, req.precision, recipe_model(req.model), req.model.is_moe,
                           req.domain_size)
    # less, for a launch commbench emits, what the release's Megatron-LM takes in no spelling (SearchRequest.target)
    has = req.searched_features(has, str(pins.get("cuda_graph_scope", "")))
    codes = {k: CODE_FIELDS[k].index(v) for k, v in pins.items() if k in CODE_FIELDS}
    up_proj = req.model.attention in ("mla", "dsv4") and "mla_up_proj" in has["recompute"]
    light = [3] if up_proj else []  # DeepSeek-V3's and V4's recipes
    runs = megatron_runs_on_hybrid(req.framework, req.model)   # a hybrid under Megatron: no full recompute, EP overlap
    rec = _pinned([0, 1] + ([2] if runs["full_recompute"] else []) + light, codes, "recompute")
    # CUDA graphs: per-layer graphs in the enumeration (where the release has them); the full-iteration
    # variant of each kept layout is tried afterwards (with_full_graphs), keeping the enumeration's time.
    # Where the model's recipes run only a full-iteration graph the framework cannot run with it, the per-layer
    # graph the release runs there stands in (frameworks.graph_fallback).
    fallback = graph_fallback(req.framework, req.model, req.software, req.gpu_name, req.precision, req.domain_size)
    spelled = "layer" in req.searched_features({"cuda_graph": frozenset({"layer"})},
                                               str(pins.get("cuda_graph_scope", "")))["cuda_graph"]   # the fallback too
    graph = "layer" if ("layer" in has["cuda_graph"] or fallback) and spelled else "none"
    graphs = _pinned([CODE_FIELDS["cuda_graph"].index(graph)], codes, "cuda_graph")
    disp = _pinned([CODE_FIELDS["dispatcher"].index("flex" if "flex" in has["dispatcher"] else "alltoall")],
                   codes, "dispatcher")
    dist = _pinned([True, False], pins, "distributed_optimizer")
    sp = _pinned([True] if req.model.is_moe else [True, False], pins, "sequence_parallel")
    n = len(g["tp"])
    idx, r, d, o, s, cg = (x.ravel() for x in np.meshgrid(np.arange(n), rec, disp, dist, sp, graphs, indexing="ij"))
    cols = {k: v[idx] for k, v in g.items()}
    cols.update(recompute=np.asarray(r, dtype=np.int8), dispatcher=np.asarray(d, dtype=np.int8),
                distributed_optimizer=o.astype(bool), sequence_parallel=s.astype(bool),
                cuda_graph=np.asarray(cg, dtype=np.int8))
    # Drop choices that cannot differ: sequence parallel without TP.
    redundant = (cols["tp"] == 1) & (cols["sequence_parallel"] != sp[0])
    cols = {k: v[~redundant] for k, v in cols.items()}
    if "dispatcher" not in pins:  # no EP: no dispatcher to choose; keep Megatron's default
        cols["dispatcher"] = np.where(cols["ep"] == 1, np.int8(CODE_FIELDS["dispatcher"].index("alltoall")),
                                      cols["dispatcher"]).astype(np.int8)
    cols = _hybridep_even(cols, req)
    tp, sp_on = cols["tp"], cols["sequence_parallel"]
    # TP comm overlap wherever Megatron allows it, except at a precision no recipe runs it at (NVFP4: recipes.py)
    tp_overlap = pins.get("tp_comm_overlap", not tp_overlap_unrun(req.precision))
    if tp_overlap is True and "tp_comm_overlap" in pins:  # pinned on: only where Megatron runs it
        cols = _only_where(cols, sp_on & (tp > 1), "tp_comm_overlap", TP_OVERLAP_NEEDS, pins)
        tp, sp_on = cols["tp"], cols["sequence_parallel"]
    cols["tp_comm_overlap"] = np.asarray(tp_overlap) & sp_on & (tp > 1)
    a2a_ok = (cols["ep"] > 1) & (cols["recompute"] != 2) & ((cols["pp"] == 1) | (cols["vp"] > 1))
    # Megatron (TransformerConfig): with MTP the EP overlap needs pp > 1 and at most one MTP layer; no
    # full-iteration graph (megatron-core 0.16.1), nor a per-layer one over moe, mlp or the whole layer (a pinned
    # scope; the whole layer: TransformerLayer._te_cuda_graph_replay asserts "EP overlap must be disabled when CUDA
    # graph captures the whole MLP/MoE part" for an empty scope, which TransformerConfig's check does not catch).
    a2a_ok &= (req.model.num_mtp_layers == 0) | ((cols["pp"] > 1) & (req.model.num_mtp_layers == 1))
    a2a_ok &= cols["cuda_graph"] != CODE_FIELDS["cuda_graph"].index("full")
    a2a_ok &= runs["moe_a2a_overlap"]   # MambaModel has no combined 1F1B schedule (frameworks.py)
    if scope_mask(str(pins.get("cuda_graph_scope", ""))) & (BIT["moe"] | BIT["mlp"] | WHOLE_LAYER):
        a2a_ok &= cols["cuda_graph"] != CODE_FIELDS["cuda_graph"].index("layer")
    if pins.get("moe_a2a_overlap"):  # pinned on: only where Megatron runs it (it was turned off, unsaid)
        cols = _only_where(cols, a2a_ok, "moe_a2a_overlap", A2A_OVERLAP_NEEDS, pins)
        tp, a2a_ok = cols["tp"], a2a_ok[a2a_ok]
    elif "moe_a2a_overlap" not in pins:   # not proposed where published runs measured it slower (recipes.py)
        domain = int(req.fabric.domain_size)
        spanned = ep_domains(cols["ep"], cols["etp"], gpus_per_rack(req.num_gpus, domain), req.num_gpus)
        a2a_ok &= ~ep_overlap_measured_slower(domain, spanned,
                                              cols["cuda_graph"] == CODE_FIELDS["cuda_graph"].index("full"))
    cols["moe_a2a_overlap"] = np.asarray(pins.get("moe_a2a_overlap", True in has["moe_a2a_overlap"])) & a2a_ok
    if "cuda_graph" not in pins:  # megatron-core: full recompute only with the full-iteration graph;
        # no CUDA graph with CPU offloading ("CUDA graphs not supported with CPU offloading")
        eager = (cols["recompute"] == 2) | (int(pins.get("cpu_offload_layers", 0)) > 0)
        cols["cuda_graph"] = np.where(eager, np.int8(CODE_FIELDS["cuda_graph"].index("none")),
                                      cols["cuda_graph"]).astype(np.int8)
    elif pins["cuda_graph"] == "layer":   # megatron-core: full recompute only under the full-iteration graph
        graphable = cols["recompute"] != CODE_FIELDS["recompute"].index("full")
        cols = {k: v[graphable] for k, v in cols.items()}
        tp = cols["tp"]
    cols["dp_overlap"] = np.full(len(tp), bool(pins.get("dp_overlap", True)))
    # Fused permute + grouped MLP: on for MoE in MXFP8 on Blackwell (cutedsl_fused_grouped_mlp), where
    # it exists; it only removes HBM traffic. FP8 attention changes numerics: only when pinned.
    gpu = getattr(req.fabric, "gpu", None)
    fusable = req.model.is_moe and req.precision == "mxfp8" and gpu is not None and not str(gpu.name).startswith("h")
    fusable = fusable and True in has["fused_moe"] and runs_fused_grouped_mlp(req.framework)
    cols["fused_moe"] = np.full(len(tp), bool(pins.get("fused_moe", fusable)))
    cols["fp8_attention"] = np.full(len(tp), bool(pins.get("fp8_attention", False)))
    cols["cpu_offload_layers"] = np.full(len(tp), int(pins.get("cpu_offload_layers", 0)))  # only when pinned
    cols["recompute_layers"] = np.full(len(tp), int(pins.get("recompute_layers", 0)))      # only when pinned
    # HSDP's outer optimizer sharding: only when pinned (valid on HSDP rows only: rule hsdp)
    cols["fsdp_outer_optim"] = np.full(len(tp), bool(pins.get("fsdp_outer_optim", False)))
    # Megatron-FSDP's double buffers: every plan launches with them (emit/megatron.py) unless pinned false
    cols["fsdp_double_buffer"] = np.full(len(tp), bool(pins.get("fsdp_double_buffer", True)))
    # Megatron-FSDP's fp8 transpose cache: only when pinned. At the plans' megatron-core (0.16.1) every backward gather
    # makes each unit's transposes anyway, so keeping them saves no pass and costs 1 B a unit parameter (step/fsdp.py
    # fp8_transpose_passes_per_step): the search has nothing to gain from it
    cols["keep_fp8_transpose_cache"] = np.full(len(tp), bool(pins.get("keep_fp8_transpose_cache", False)))
    cols["cuda_graph_scope"] = np.full(len(tp), scope_mask(str(pins.get("cuda_graph_scope", ""))), dtype=np.int64)
    cols = _without_synced_preprocess_graphs(cols, req)
    cols = _without_refused_graphs(cols, req)
    cols = _one_connections_setting(_with_offload(_with_fsdp(cols, pins, req), pins, req, has), req)
    cols = restrict_columns(req.framework, cols, "cuda_graph" in pins, req.model,
                            torchtitan_version=req.torchtitan_version)
    # quantized precisions: only TP / ETP sizes whose per-rank GEMM sizes the kernels take, and mbs / cp (/ tp) whose
    # GEMM token dimension they take (layout/quant_dims.py); none left: the precision's rule, in one line
    dims_ok = quant_tp_ok(req.model, req.framework, req.precision, cols["tp"], cols["etp"], req.torchtitan_version)
    keep = dims_ok & quant_tokens_ok(req.framework, req.precision, req.seq_len or req.model.seq_len, cols["mbs"],
                                     cols["cp"], cols["tp"], cols["sequence_parallel"])
    if len(keep) and not keep.any():
        raise CommbenchError(quant_gap_message(req, cols, dims_ok))
    return cols if keep.all() else {k: v[keep] for k, v in cols.items()}


TP_OVERLAP_ONE_CONNECTION = ("on Hopper --tp-comm-overlap needs CUDA_DEVICE_MAX_CONNECTIONS=1, and Megatron-FSDP and "
                             "EP all-to-all overlap need more than 1 (layout/connections.py); a launch has one value")


def _one_connections_setting(cols: dict[str, np.ndarray], req: SearchRequest) -> dict[str, np.ndarray]:
    """One CUDA_DEVICE_MAX_CONNECTIONS per launch (layout/connections.py): on Hopper a TP > 1 row with Megatron-FSDP
    or EP overlap runs above 1, where TP comm overlap is not to be counted on, so it has none (its TP communication
    is charged exposed). An EP-overlap row keeps its TP overlap in a twin without the EP overlap (run at 1), and the
    step model chooses; a pin keeps its side, both pinned on are refused in one line."""
    if req.framework != "megatron" or not before_blackwell(req.gpu_name):
        return cols
    pins = req.pins
    clash = cols["tp_comm_overlap"] & (cols["tp"] > 1) & needs_more_than_one(cols["fsdp"], cols["moe_a2a_overlap"])
    if not clash.any():
        return cols
    if pins.get("tp_comm_overlap") is True:
        if pins.get("moe_a2a_overlap") is True or pins.get("fsdp") is True:
            both = "fsdp=true" if pins.get("fsdp") is True else "moe_a2a_overlap=true"
            raise invalid("tp_comm_overlap", True, f"with {both} on {req.gpu_name}: {TP_OVERLAP_ONE_CONNECTION}; "
                          "pin one of them false")
        fsdp_rows = clash & cols["fsdp"]     # unpinned FSDP twins: not with a pinned TP overlap
        cols = {k: v[~fsdp_rows] for k, v in cols.items()}
        clash = clash[~fsdp_rows]
        cols["moe_a2a_overlap"] = np.where(clash, False, cols["moe_a2a_overlap"])
        return cols
    twin = np.flatnonzero(clash & ~cols["fsdp"]) if "moe_a2a_overlap" not in pins else np.zeros(0, dtype=np.int64)
    part = {k: v[twin] for k, v in cols.items()}
    part["moe_a2a_overlap"] = np.zeros(twin.size, dtype=bool)
    cols["tp_comm_overlap"] = np.where(clash, False, cols["tp_comm_overlap"])
    return {k: np.concatenate([v, part[k]]) for k, v in cols.items()}


def _without_refused_graphs(cols: dict[str, np.ndarray], req: SearchRequest) -> dict[str, np.ndarray]:
    """Rows the release's Megatron-LM refuses for what their per-layer graph captures, in a launch commbench emits:
    an attention with biases beside delayed wgrad (search/wgrad_graph.py: the EP overlap, --overlap-grad-reduce, a
    graph over attn), a graph with delayed wgrad that needs a Transformer Engine newer than the release's container
    ships (wgrad_graph_te_short), a recomputed module inside the graph's scope (search/graph_recompute.py: 25.11's
    block). Each
    becomes its allowed twins: one without what the graph clashes with (the EP overlap; the recompute: its rows without
    recompute are enumerated already), one without the graph and one whose graph leaves the clashing module out (the
    scope's other modules), and the step model chooses; a pinned field keeps its value (all pinned are refused in
    SearchRequest)."""
    if req.framework != "megatron" or req.target != "launch":
        return cols
    wgrad = wgrad_graph_refused(req.model, req.software, cols["cuda_graph"], cols["cuda_graph_scope"],
                                cols["moe_a2a_overlap"], cols["ep"], cols["dp_overlap"])
    cols = _with_allowed_twins(cols, req, wgrad, np.full(len(wgrad), BIT["attn"]), "moe_a2a_overlap")
    short, drop = wgrad_graph_te_short(req.model, req.software, cols["cuda_graph"], cols["cuda_graph_scope"],
                                       cols["moe_a2a_overlap"], cols["ep"], cols["dp_overlap"])
    cols = _with_allowed_twins(cols, req, short, drop, "moe_a2a_overlap")
    recomputed, drop = graph_recompute_refused(req.model, req.software, cols["cuda_graph"], cols["cuda_graph_scope"],
                                               cols["recompute"])
    return _with_allowed_twins(cols, req, recomputed, drop, None)


def _with_allowed_twins(cols: dict[str, np.ndarray], req: SearchRequest, refused: np.ndarray, drop_bits: np.ndarray,
                        clashing: str | None) -> dict[str, np.ndarray]:
    """`cols` with each `refused` row replaced by its twins (_without_refused_graphs): `clashing` (a bool field) off,
    the graph off, the graph's scope less `drop_bits` (where that leaves a module), each where its field is not
    pinned."""
    if not refused.any():
        return cols
    rows = np.flatnonzero(refused)
    twins = []
    if clashing is not None and clashing not in req.pins:
        twins.append({**{k: v[rows] for k, v in cols.items()}, clashing: np.zeros(rows.size, dtype=bool)})
    if "cuda_graph" not in req.pins:
        eager = np.full(rows.size, CODE_FIELDS["cuda_graph"].index("none"), dtype=np.int8)
        twins.append({**{k: v[rows] for k, v in cols.items()}, "cuda_graph": eager})
    if "cuda_graph_scope" not in req.pins:   # the graph kept over the scope's other modules (router, preprocess)
        drop = drop_bits[rows]
        rest = resolved_masks(req.model, cols["cuda_graph_scope"][rows]) & ~drop
        keep = (drop != 0) & (rest != 0) & (cols["cuda_graph"][rows] == CODE_FIELDS["cuda_graph"].index("layer"))
        if keep.any():
            twins.append({**{k: v[rows[keep]] for k, v in cols.items()},
                          "cuda_graph_scope": rest[keep].astype(np.int64)})
    kept = {k: v[~refused] for k, v in cols.items()}
    return {k: np.concatenate([kept[k], *(t[k] for t in twins)]) for k in cols}


def _without_synced_preprocess_graphs(cols: dict[str, np.ndarray], req: SearchRequest) -> dict[str, np.ndarray]:
    """megatron-core 0.16.1 (TransformerConfig): with a capacity factor (--moe-expert-capacity-factor) the all-to-all
    dispatcher's preprocess copies to the host, and a per-layer graph over moe_preprocess is refused ("moe_preprocess
    cuda graph is not supported when there are DtoH copies and synchronizations in the preprocess step"). Those
    rows run eager, as full recompute's do, unless cuda_graph is pinned: then they are dropped, and when none is
    left the pin is refused in one line."""
    # a --model-file model without an [arch] table states no capacity factor: megatron-core's default, dropless
    if not (req.model.is_moe and req.model.architecture is not None and req.model.architecture.capacity_factor):
        return cols
    layer = CODE_FIELDS["cuda_graph"].index("layer")
    synced = ((cols["cuda_graph"] == layer) & (cols["dispatcher"] == CODE_FIELDS["dispatcher"].index("alltoall"))
              & (resolved_masks(req.model, cols["cuda_graph_scope"]) & BIT["moe_preprocess"] != 0))
    if not synced.any():
        return cols
    if "cuda_graph" not in req.pins:
        cols["cuda_graph"] = np.where(synced, np.int8(CODE_FIELDS["cuda_graph"].index("none")), cols["cuda_graph"]).astype(np.int8)
        return cols
    if synced.all():
        scope = req.pins.get("cuda_graph_scope") or "+".join(default_scope(req.model))
        raise CommbenchError(f"cuda_graph_scope={scope!r} is invalid for {req.model.name} with the alltoall dispatcher: "
                             f"with its capacity factor {req.model.architecture.capacity_factor:g} the dispatcher's "
                             "preprocess copies to the host, and megatron-core 0.16.1 refuses a moe_preprocess CUDA graph "
                             "there; pin dispatcher=flex or a cuda_graph_scope without moe_preprocess (e.g. attn+moe_router)")
    return {k: v[~synced] for k, v in cols.items()}


OFFLOAD_SHARES = (1 / 8, 1 / 4, 3 / 8, 1 / 2, 5 / 8, 3 / 4)  # of the layers; the recipes offload 5-40 of 80, 10-95 of 126


def _with_offload(cols: dict[str, np.ndarray], pins: dict, req: SearchRequest, has: dict) -> dict[str, np.ndarray]:
    """CPU activation offloading (step/kernels.offload_exposed_s) where the release's recipes use it on
    the GPU at the precision (recipes.release_features): each FSDP row without recompute again with
    OFFLOAD_SHARES of the layers offloaded, eager (as every offloading recipe runs: FSDP, no recompute,
    no CUDA graph) and, as they are, for dense transformers only (every one is a Llama; no MoE or hybrid
    recipe offloads). Megatron only (TorchTitan has no activation offloading), and never for a hybrid model
    (frameworks.megatron_runs_on_hybrid: MambaStack offloads nothing); a pinned count is as pinned."""
    runs = megatron_runs_on_hybrid(req.framework, req.model)["cpu_offload"] and req.framework == "megatron"
    dense = not req.model.is_moe and not req.model.is_hybrid
    if "cpu_offload_layers" in pins or not runs or True not in has["cpu_offload"] or not dense:
        return cols
    twin = np.flatnonzero(cols["fsdp"] & (cols["recompute"] == CODE_FIELDS["recompute"].index("none"))
                          & (cols["pp"] == 1))
    if "cuda_graph" in pins:
        twin = twin[cols["cuda_graph"][twin] == CODE_FIELDS["cuda_graph"].index("none")]
    layers = req.model.num_layers   # megatron-core: fewer than TransformerConfig.num_layers
    if not twin.size or layers < 2:
        return cols
    counts = sorted({min(max(round(layers * f), 1), layers - 1) for f in OFFLOAD_SHARES})
    parts = []
    for count in counts:
        part = {k: v[twin] for k, v in cols.items()}
        part["cpu_offload_layers"] = np.full(twin.size, count, dtype=cols["cpu_offload_layers"].dtype)
        part["cuda_graph"] = np.full(twin.size, CODE_FIELDS["cuda_graph"].index("none"), dtype=np.int8)
        part["cuda_graph_scope"] = np.zeros(twin.size, dtype=cols["cuda_graph_scope"].dtype)
        parts.append(part)
    return {k: np.concatenate([v] + [p[k] for p in parts]) for k, v in cols.items()}


def _with_fsdp(cols: dict[str, np.ndarray], pins: dict, req: SearchRequest) -> dict[str, np.ndarray]:
    """FSDP (step/fsdp.py) beside the distributed optimizer: each pp = 1 row with the distributed
    optimizer again as FSDP (the FSDP rule needs both), and for a dense model (a MoE one under TorchTitan,
    whose expert mesh folds EP into each shard group) again as HSDP with the
    shard group of one scale-up domain (fsdp_replicas = dp*tp*cp / GPUs per domain) where that splits
    DP; pinned fsdp=true makes every row FSDP, pinned fsdp_replicas sets the replicas."""
    n = len(cols["tp"])
    replicas = int(pins.get("fsdp_replicas", 1))
    moe_hsdp = not req.model.is_moe or req.framework == "torchtitan"  # megatron-core 0.16.1: no MoE HSDP
    if replicas > 1 and (not moe_hsdp or pins.get("fsdp") is False):
        detail = (f"{req.model.name} is a MoE model and Megatron-FSDP in megatron-core 0.16.1 builds no expert mesh "
                  "for HSDP (--framework torchtitan can)") if not moe_hsdp else "fsdp is pinned false"
        raise CommbenchError(f"layout hsdp rule broken for {req.model.name}: {dict(RULES)['hsdp']} "
                             f"(fsdp_replicas = {replicas}; {detail})")
    if replicas > 1:  # pinned HSDP: keep the structures it splits (an empty search names the rule)
        shard_ranks = cols["dp"] // replicas * cols["cp"] * cols["tp"]
        ok = (cols["dp"] % replicas == 0) & ((shard_ranks % (cols["ep"] * cols["etp"]) == 0) | (not req.model.is_moe))
        if not ok.any():
            raise CommbenchError(f"layout hsdp rule broken for {req.model.name}: {dict(RULES)['hsdp']} (fsdp_replicas = "
                                 f"{replicas}; dp = {sorted(set(cols['dp'].tolist()))}, ep*etp = "
                                 f"{sorted(set((cols['ep'] * cols['etp']).tolist()))})")
        cols, n = {k: v[ok] for k, v in cols.items()}, int(ok.sum())
    cols["fsdp_replicas"] = np.full(n, replicas, dtype=np.int64)
    # a MoE model's FSDP rows at EP > 1 only where the release's Megatron-FSDP has an expert mesh (frameworks.py)
    ep_runs = (cols["ep"] == 1) | (not req.model.is_moe) | megatron_fsdp_runs_expert_parallel(req.framework,
                                                                                             req.software)
    if "fsdp" in pins:
        if pins["fsdp"] and not ep_runs.any():
            raise CommbenchError(
                f"layout fsdp=true with ep > 1 is not run by release {req.software}: its megatron-core "
                f"{megatron_release_name(req.software)[1]} has no Megatron-FSDP expert mesh (MegatronFSDP asks "
                f"for get_expert_dp_group, first in megatron-core 0.16); pin ep=1, or a release from 25.11 on")
        if pins["fsdp"]:
            cols, n = {k: v[ep_runs] for k, v in cols.items()}, int(ep_runs.sum())
        cols["fsdp"] = np.full(n, bool(pins["fsdp"]))
        return cols
    cols["fsdp"] = np.zeros(n, dtype=bool)
    twin = np.flatnonzero((cols["pp"] == 1) & cols["distributed_optimizer"] & ep_runs)
    if not twin.size:
        return cols
    parts = [{k: v[twin] for k, v in cols.items()}]
    parts[0]["fsdp"] = np.ones(twin.size, dtype=bool)
    if "fsdp_replicas" not in pins and moe_hsdp:
        per_rack = gpus_per_rack(req.num_gpus, int(req.fabric.domain_size))
        t = cols["tp"][twin] * cols["cp"][twin]
        replicas = np.maximum(cols["dp"][twin] * t // per_rack, 1)
        experts_fold = (per_rack % (cols["ep"][twin] * cols["etp"][twin]) == 0) if req.model.is_moe else True
        hsdp = np.flatnonzero((replicas > 1) & (per_rack % t == 0) & (cols["dp"][twin] % replicas == 0) & experts_fold)
        if hsdp.size:
            parts.append({k: v[hsdp] for k, v in parts[0].items()})
            parts[1]["fsdp_replicas"] = replicas[hsdp]
    return {k: np.concatenate([v] + [p[k] for p in parts]) for k, v in cols.items()}


def candidates(req: SearchRequest) -> tuple[LayoutArrays, np.ndarray, int]:
    """(enumerated layouts, their violation bits incl. placement, GPUs per rack). Structures that
    break a rule are kept once (flags at their first choice) so an empty search can say which rule."""
    per_rack = gpus_per_rack(req.num_gpus, int(req.fabric.domain_size))
    g = _structures(req, per_rack)
    probe = LayoutArrays.from_columns(gbs=req.gbs, precision=req.precision, **g)
    bits = layout_violations(req.model, probe, req.num_gpus, req.seq_len, req.framework)
    bits |= placement_violations(probe.tp, probe.etp, per_rack)
    ok = bits == 0
    cols = _with_flags({k: v[ok] for k, v in g.items()}, req)
    arr = LayoutArrays.from_columns(gbs=req.gbs, precision=req.precision, **cols)
    if np.any(arr.recompute_layers > 0) or np.any(arr.cpu_offload_layers > 0):
        # pinned counts whose rules depend on the flags (offload, recompute_layers): checked on the layouts
        flag_bits = layout_violations(req.model, arr, req.num_gpus, req.seq_len, req.framework)
        arr = arr.take(np.flatnonzero(flag_bits == 0))
        bits = np.concatenate([bits, flag_bits[flag_bits != 0]])
    return arr, bits, per_rack
