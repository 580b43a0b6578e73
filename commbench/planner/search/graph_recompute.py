"""CUDA graphs beside recomputed modules, as a release's Megatron-LM takes them.

Megatron-LM 5769804591 ("Unify enable/external cudagraph with cuda-graph-impl", 2025-10-14) made TransformerConfig
refuse every recomputed module that a per-layer graph's scope captures; 2b343d739f ("feat(MoE): Refactor
cuda_graph_scope (#1920)", 2025-12-31) replaced that block. Of the table releases only 25.11 (Megatron-LM 0d8e0714cd29,
megatron-core 0.16.0rc0) runs it, transformer_config.py:1583-1624, the whole block:

    if recompute_granularity:
        if recompute_granularity != "selective" or not cuda_graph_scope:   # full, or the whole layer
            raise "Full-layer CUDA graphs not supported with activation recomputation."
        elif cuda_graph_scope != ["full_iteration"]:
            attn in scope:       core_attn, mla_up_proj recomputed -> "attn cuda graph is not supported with X recompute."
            mlp in scope:        mlp
            moe in scope:        moe_act, moe, shared_experts
            moe_router in scope: moe, shared_experts
            layernorm recomputed with attn, mlp and moe or moe_router all in scope  (attn alone / mlp alone: a warning)

and its validate_args, for any graph: "recompute_granularity must not be full when CUDA Graphs are enabled."
(arguments.py:1238-1240), so 25.11 refuses the full-iteration graph with full recompute too. The block that replaced it
(26.02's b0cc2706 transformer_config.py:1780-1818, 26.02.01's 55ac7082 :1780, 26.04's d7288711 :2009, 26.04.01's
2edffadb :2022, 26.06's d0b3b775 and 26.06.01's 458c8d0e :2297, 26.08's cd4afffa :2521; the same checks, renamed from
0.18 on) refuses full recompute with any graph but the full-iteration one (answered before this: candidates.py runs
those rows eager, the emitter refuses the pin), moe recompute with a moe_router graph (REFACTORED_PAIRS; no plan
recomputes moe) and dropout inside a graphed recompute (frameworks.megatron_dropout_graph_refusal). 25.09
(core_v0.14.0) checks only full recompute under --external-cuda-graph (arguments.py:1109-1115; a per-layer graph with
full recompute is refused in every release, as above) and any recompute under --enable-cuda-graph, which no plan
writes (transformer_config.py:1267-1271).

What a plan can answer: the refused row (graph_recompute_refused, in the search, which replaces it by its allowed
twins as search/wgrad_graph.py's rows are: candidates._without_refused_graphs) and the refused pins
(graph_recompute_pin_refusal: plan, tune and the emitter).
"""

from __future__ import annotations

import numpy as np

from commbench.planner.layout.graph_scope import BIT, MODULES, WHOLE_LAYER, resolved_masks, scope_mask, scope_text
from commbench.planner.layout.recompute import mode_modules
from commbench.planner.layout.spec import CODE_FIELDS
from commbench.planner.models.spec import ModelSpec
from commbench.row_groups import RowGroups

# (graph scope module, recompute module) pairs each block refuses
SCOPED_PAIRS = (("attn", "core_attn"), ("attn", "mla_up_proj"), ("mlp", "mlp"), ("moe", "moe_act"), ("moe", "moe"),
                ("moe", "shared_experts"), ("moe_router", "moe"), ("moe_router", "shared_experts"))
REFACTORED_PAIRS = (("moe_router", "moe"),)
# the megatron-core versions whose Megatron-LM runs 5769804591's block (the module docstring): 25.11's
SCOPED_BLOCK_CORES = ("0.16.0rc0",)
GRAPH_RECOMPUTE_SOURCE = {
    True: "transformer_config.py:1583-1624 at 0d8e0714cd29, from Megatron-LM 5769804591",
    False: "the block of Megatron-LM 2b343d739f, 'Refactor cuda_graph_scope (#1920)'",
}


def runs_scoped_block(release: str | None) -> bool:
    """Whether the Megatron-LM of `release` (None: the target core_v0.16.1, which has the refactored one) runs the
    scoped block of 5769804591 (module docstring)."""
    from commbench.planner.search.frameworks import megatron_release_name
    return release is not None and megatron_release_name(release)[1] in SCOPED_BLOCK_CORES


def graph_recompute_conflict(model: ModelSpec, release: str | None, cuda_graph: str, scope: str | int,
                             recompute: str) -> tuple[str, str] | None:
    """(what the graph captures, what is recomputed) where `release`'s Megatron-LM refuses a CUDA graph `cuda_graph`
    over `scope` ('' the recipes' scope, or its mask) with recompute mode `recompute` (layout RECOMPUTE), else None.
    A per-layer graph with full recompute is refused in every release, and answered apart (module docstring)."""
    if cuda_graph == "none" or recompute in ("none", "full") and cuda_graph == "layer":
        return None
    scoped_block = runs_scoped_block(release)
    if cuda_graph == "full":   # --cuda-graph-impl local --cuda-graph-scope full_iteration
        return ("full_iteration", "full") if scoped_block and recompute == "full" else None
    mask = int(resolved_masks(model, np.array([scope if isinstance(scope, int) else scope_mask(scope)]))[0])
    modules = mode_modules(model, recompute)
    if mask & WHOLE_LAYER:
        return ("the whole layer", " ".join(modules)) if scoped_block and modules else None
    captured = {m for m in MODULES if mask & BIT[m]}
    for graphed, recomputed in SCOPED_PAIRS if scoped_block else REFACTORED_PAIRS:
        if graphed in captured and recomputed in modules:
            return graphed, recomputed
    if scoped_block and "layernorm" in modules and {"attn", "mlp"} <= captured and captured & {"moe", "moe_router"}:
        return scope_text(mask), "layernorm"
    return None


def graph_recompute_refused(model: ModelSpec, release: str | None, cuda_graph: np.ndarray, scope: np.ndarray,
                            recompute: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per layout, whether `release`'s Megatron-LM refuses its graph with its recompute (graph_recompute_conflict),
    and the scope bit a graph kept beside that recompute leaves out (0 where no scope change answers it: the whole
    layer, the full-iteration graph)."""
    if len(cuda_graph) == 0:
        return np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int64)
    groups = RowGroups(np.asarray(cuda_graph, dtype=np.int64), np.asarray(scope, dtype=np.int64),
                       np.asarray(recompute, dtype=np.int64))
    refused, drop = np.zeros(len(groups), dtype=bool), np.zeros(len(groups), dtype=np.int64)
    conflicts: dict[tuple[int, int, int], tuple[str, str] | None] = {}   # runs of one key may head several groups
    for g, key in enumerate(zip(groups.of(cuda_graph).tolist(), groups.of(scope).tolist(),
                                groups.of(recompute).tolist())):
        if key not in conflicts:
            graph, mask, mode = key
            conflicts[key] = graph_recompute_conflict(model, release, CODE_FIELDS["cuda_graph"][graph], mask,
                                                      CODE_FIELDS["recompute"][mode])
        if conflict := conflicts[key]:
            refused[g] = True
            # the layernorm rule asks attn, mlp and a MoE module together: leaving attn out answers it
            drop[g] = BIT[conflict[0]] if conflict[0] in BIT else BIT["attn"] if conflict[1] == "layernorm" else 0
    return groups.expand(refused), groups.expand(drop)


def graph_recompute_pin_refusal(model: ModelSpec, release: str | None, pins: dict[str, object]) -> str | None:
    """One line where the pins themselves make every layout one `release` refuses: recompute and cuda_graph pinned,
    over the pinned scope or the recipes'."""
    graph, recompute = pins.get("cuda_graph"), pins.get("recompute")
    if graph not in CODE_FIELDS["cuda_graph"] or recompute not in CODE_FIELDS["recompute"]:
        return None
    scope = str(pins.get("cuda_graph_scope", "") or "")
    conflict = graph_recompute_conflict(model, release, str(graph), scope, str(recompute))
    if conflict is None:
        return None
    from commbench.planner.search.frameworks import megatron_release_name
    scoped_block = runs_scoped_block(release)
    what = (f"cuda_graph={graph!r}" + (f" (scope {scope or scope_text(int(resolved_masks(model, np.array([0]))[0]))})"
                                       if graph == "layer" else "")
            + f" with recompute={recompute!r}")
    if conflict == ("full_iteration", "full"):
        why = ("its validate_args refuses any CUDA graph with full recompute ('recompute_granularity must not be full "
               "when CUDA Graphs are enabled.', arguments.py:1238-1240)")
        fix = "pin cuda_graph=none or a recompute other than full"
    else:
        why = (f"its TransformerConfig refuses a graph over {conflict[0]} with {conflict[1]} recompute "
               f"({GRAPH_RECOMPUTE_SOURCE[scoped_block]})")
        fix = ("pin cuda_graph=none, recompute=none or a cuda_graph_scope without "
               + ("the whole layer" if conflict[0] == "the whole layer" else conflict[0].split("+")[0]))
    return (f"{what} is invalid for {model.name} with --framework megatron at release {release}: the Megatron-LM it runs, "
            f"{megatron_release_name(release)[0]}, recomputes only what the graph leaves out: {why}; {fix}")


def release_graph_pin_refusal(model: ModelSpec, release: str | None, pins: dict[str, object]) -> str | None:
    """The one line where the pins make every layout one `release`'s Megatron-LM refuses for what its per-layer graph
    captures: an attention with biases beside delayed wgrad (search/wgrad_graph.py), a recomputed module (this
    module); plan, tune and the emitter refuse with it."""
    from commbench.planner.search.wgrad_graph import wgrad_graph_pin_refusal
    return wgrad_graph_pin_refusal(model, release, pins) or graph_recompute_pin_refusal(model, release, pins)
