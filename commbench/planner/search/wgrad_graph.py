"""Per-layer CUDA graphs with delayed weight gradients (--delay-wgrad-compute), as a release's Megatron-LM takes them.

The emitter writes --delay-wgrad-compute with every EP all-to-all overlap (--overlap-moe-expert-parallel-comm, EP > 1;
emit/megatron.py) and --overlap-grad-reduce with every dp_overlap. From Megatron-LM 1934391a95 ("fix cg missing wgrad
hook (#3074)", 2026-02-05; first in megatron-core 0.17.0: release 26.04's d7288711ba27 and every later table release,
not 26.02.01's core_v0.16.1 55ac7082517c) validate_args checks that combination when a per-layer graph holds a weight
gradient it delays (arguments.py: core_v0.17.0 :1507-1537, core_v0.18.0 :1683-1713, core_v0.19.0 :1822-1852, 26.08's
cd4afffa6484 :1805-1835), the whole block:

    if args.delay_wgrad_compute:
        if args.overlap_grad_reduce:
            wgrad_in_graph_scope = attn in cuda_graph_modules or (moe_router in cuda_graph_modules
                and moe_shared_expert_intermediate_size is not None and not moe_shared_expert_overlap)
            if wgrad_in_graph_scope:
                assert is_te_min_version("2.12.0")         # "... requires TE version >= 2.12.0."
                assert args.gradient_accumulation_fusion  # "... requires gradient_accumulation_fusion to be enabled"
                if attn in cuda_graph_modules:
                    assert not args.add_bias_linear and not args.add_qkv_bias
                    # "CUDA graph with delay_wgrad_compute doesn't support attn bias for now."

What a plan can answer: the bias (the model's architecture: linear_bias -> add_bias_linear, qkv_bias ->
add_qkv_bias), refused (wgrad_graph_refused, in the search; wgrad_graph_pin_refusal, for pins). gradient accumulation
fusion is on in every launch (the emitter never writes --no-gradient-accumulation-fusion; Megatron-FSDP rows run no
graph, frameworks.MEGATRON_FSDP_NO_GRAPHS). The TE version is the container's: recipes.json releases
transformer_engine (each release's Megatron-Bridge uv.lock, beside its release notes;
tools/recipes_from_megatron_bridge.py):
2.12.0 in 26.02 / 26.02.01, 2.14 in 26.04 / 26.04.01, 2.16 in 26.06 / 26.06.01, 2.17.1 in 26.08. The plan names the
TE a combination needs beside the container's (wgrad_graph_te_note); a layout that needs more than its release's
container ships (or a table release whose TE is unknown) is refused (wgrad_graph_te_short). An empty scope (the whole
layer) lists no module, so the block does not fire for it (and the EP overlap refuses the whole layer anyway:
candidates.py).

Beside the block, megatron-core's TransformerConfig asks TE >= 2.10 of any per-layer (transformer_engine) graph with
--delay-wgrad-compute ("TE version >= 2.10.0 is required for delay_wgrad_compute with partial cuda graph"; Megatron-LM
1501c0f33a "Partial CUDA Graph support for EP Overlap (#2184)"): in megatron-core 0.16.0 (26.02's b0cc2706
transformer_config.py:1916-1920), core_v0.16.1 and every later table release, not in 25.11's 0.16.0rc0 (0d8e0714) or
25.09's core_v0.14.0.
"""

from __future__ import annotations

import re

import numpy as np

from commbench.planner.layout.graph_scope import BIT, WHOLE_LAYER, default_scope, resolved_masks, scope_mask
from commbench.planner.layout.spec import CODE_FIELDS
from commbench.planner.models.spec import ModelSpec

WGRAD_GRAPH_CORE = (0, 17, 0)   # megatron-core of the first table release whose validate_args has the block
WGRAD_GRAPH_SOURCE = ("'CUDA graph with delay_wgrad_compute doesn't support attn bias for now.' (Megatron-LM 1934391a95 "
                      "'fix cg missing wgrad hook (#3074)', first in megatron-core 0.17.0)")


WGRAD_GRAPH_TE = (2, 12, 0)     # the block's TE (module docstring)
PARTIAL_GRAPH_TE = (2, 10, 0)   # TransformerConfig's, for any per-layer graph with delayed wgrad
PARTIAL_GRAPH_TE_CORE = (0, 16, 0, 1)   # megatron-core 0.16.0 final (an rc before it: 25.11's 0.16.0rc0 has no check)


def version_key(version: str) -> tuple[int, int, int, int]:
    """A version ('2.14.0+71bbefbf', '0.16.0rc0', '0.14') as (major, minor, patch, 0 for a pre-release else 1); a
    local '+...' part is the build's commit, not a pre-release."""
    found = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?(\S*)", version)
    assert found, version
    pre = found[4].split("+")[0]
    return int(found[1]), int(found[2]), int(found[3] or 0), 0 if pre else 1


def checks_partial_graph_te(release: str | None) -> bool:
    """Whether the megatron-core of `release` (None: the target core_v0.16.1) asks TE >= 2.10 of a per-layer graph with
    delayed wgrad (module docstring)."""
    from commbench.planner.search.frameworks import megatron_release_name
    return version_key(megatron_release_name(release)[1]) >= PARTIAL_GRAPH_TE_CORE


def container_te(release: str | None) -> tuple[str, str] | None:
    """(Transformer Engine version, source) the container of table release `release` runs (recipes.json releases
    transformer_engine), or None: no release (the target core_v0.16.1 names no container) or none recorded."""
    from commbench.planner.layout.recipes import recipes_json_releases
    entry = recipes_json_releases().get(release, {}).get("transformer_engine") if release is not None else None
    return (entry["version"], entry["source"]) if entry else None


def checks_wgrad_graph(release: str | None) -> bool:
    """Whether the Megatron-LM of `release` (None: the target core_v0.16.1, which has no such check) has the block."""
    from commbench.planner.search.frameworks import release_core_at_least
    return release_core_at_least(release, WGRAD_GRAPH_CORE)


def attention_bias(model: ModelSpec) -> str:
    """The attention bias Megatron-LM would build for `model` ('' for none): the flag that sets it."""
    arch = model.architecture
    if arch is None:
        return ""
    return "add_bias_linear" if arch.linear_bias else "add_qkv_bias" if arch.qkv_bias else ""


def wgrad_graph_refused(model: ModelSpec, release: str | None, cuda_graph: np.ndarray, scope: np.ndarray,
                        moe_a2a_overlap: np.ndarray, ep: np.ndarray, dp_overlap: np.ndarray) -> np.ndarray:
    """Per layout, whether `release`'s validate_args refuses it for the attention bias (the module docstring): delayed
    wgrad (EP overlap at EP > 1) with --overlap-grad-reduce and a per-layer graph over attn, on a biased model."""
    n = len(cuda_graph)
    if not attention_bias(model) or not checks_wgrad_graph(release):
        return np.zeros(n, dtype=bool)
    attn = (resolved_masks(model, scope) & BIT["attn"]) != 0
    layer = np.asarray(cuda_graph) == CODE_FIELDS["cuda_graph"].index("layer")
    delayed = np.asarray(moe_a2a_overlap, dtype=bool) & (np.asarray(ep) > 1)
    return delayed & np.asarray(dp_overlap, dtype=bool) & layer & attn


def wgrad_graph_pin_refusal(model: ModelSpec, release: str | None, pins: dict[str, object]) -> str | None:
    """One line where the pins themselves make every layout wgrad_graph_refused's: the rule on the one row of the pins,
    moe_a2a_overlap and cuda_graph as pinned (unpinned: the search may leave them off), the scope pinned or the
    recipes', dp_overlap and ep as pinned or else the values it refuses (on; > 1)."""
    overlap = pins.get("moe_a2a_overlap") is True
    graph = CODE_FIELDS["cuda_graph"].index("layer" if pins.get("cuda_graph") == "layer" else "none")
    scope = str(pins.get("cuda_graph_scope", "") or "") or "+".join(default_scope(model))
    ep, dp_overlap = int(pins.get("ep", 2) or 2), bool(pins.get("dp_overlap", True))
    row = (np.array([graph]), np.array([scope_mask(scope)]), np.array([overlap]), np.array([ep]),
           np.array([dp_overlap]))
    if overlap and wgrad_graph_te_short(model, release, *row)[0][0]:
        shipped = container_te(release)
        have = f"ships Transformer Engine {shipped[0]} ({shipped[1]})" if shipped else "has no Transformer Engine " \
            "version in the release table (recipes.json releases transformer_engine)"
        return (f"moe_a2a_overlap=true with cuda_graph='layer' (scope {scope}) is invalid for {model.name} with "
                f"--framework megatron at release {release}: the EP overlap writes --delay-wgrad-compute, "
                f"{wgrad_graph_te_note(model, release, 'layer', scope, True, dp_overlap).split('; release')[0]}, and "
                f"the release's container {have}; pin moe_a2a_overlap=false or cuda_graph=none")
    if not (overlap and wgrad_graph_refused(model, release, row[0], row[1], row[2], row[3], row[4])[0]):
        return None
    bias = attention_bias(model)
    from commbench.planner.search.frameworks import megatron_release_name
    name, _ = megatron_release_name(release)
    return (f"moe_a2a_overlap=true with cuda_graph='layer' over attn (scope {scope}) is invalid for {model.name} with "
            f"--framework megatron at release {release}: the EP overlap writes --delay-wgrad-compute, and with "
            f"--overlap-grad-reduce the validate_args of {name} refuses a graph over an attention with biases ({bias}): "
            f"{WGRAD_GRAPH_SOURCE}; pin moe_a2a_overlap=false, cuda_graph=none, a cuda_graph_scope without attn, or "
            "dp_overlap=false")


def _in_graph(model: ModelSpec, release: str | None, masks: np.ndarray, dp_overlap: np.ndarray) -> np.ndarray:
    """Per layout (its resolved scope mask), whether the block holds a delayed weight gradient in the graph."""
    shared = model.is_moe and model.num_shared_experts > 0   # no plan writes --moe-shared-expert-overlap
    held = ((masks & BIT["attn"]) != 0) | (((masks & BIT["moe_router"]) != 0) & shared)
    return np.asarray(dp_overlap, dtype=bool) & checks_wgrad_graph(release) & ((masks & WHOLE_LAYER) == 0) & held


def wgrad_graph_te_short(model: ModelSpec, release: str | None, cuda_graph: np.ndarray, scope: np.ndarray,
                         moe_a2a_overlap: np.ndarray, ep: np.ndarray,
                         dp_overlap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(per layout, whether it needs a Transformer Engine newer than `release`'s container ships, or one of a table
    release whose TE is unknown; the scope bits that set the need): a per-layer graph with delayed wgrad (EP overlap
    at EP > 1) needs 2.10 where checks_partial_graph_te, 2.12 where the block holds a delayed wgrad in the graph. No
    release (the target, no container): none refused, the plan names the need (wgrad_graph_te_note)."""
    n = len(cuda_graph)
    refused, drop = np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64)
    if release is None:
        return refused, drop
    shipped = container_te(release)
    have = version_key(shipped[0]) if shipped else (0, 0, 0, 0)
    masks = resolved_masks(model, scope)
    layer = np.asarray(cuda_graph) == CODE_FIELDS["cuda_graph"].index("layer")
    delayed = layer & np.asarray(moe_a2a_overlap, dtype=bool) & (np.asarray(ep) > 1)
    if checks_partial_graph_te(release) and have < version_key("%d.%d.%d" % PARTIAL_GRAPH_TE):
        refused |= delayed
        drop = np.where(delayed, masks, drop)   # no scope without a graph: the twins drop the overlap or the graph
    if have < version_key("%d.%d.%d" % WGRAD_GRAPH_TE):
        block = delayed & _in_graph(model, release, masks, dp_overlap) & ~refused
        refused |= block
        shared = BIT["moe_router"] if model.is_moe and model.num_shared_experts > 0 else 0
        drop = np.where(block, BIT["attn"] | shared, drop)
    return refused, drop


def wgrad_graph_te_note(model: ModelSpec, release: str | None, cuda_graph: str, scope: str, delayed: bool,
                        dp_overlap: bool) -> str | None:
    """The Transformer Engine a per-layer graph with --delay-wgrad-compute needs at `release` (None where the layout
    has neither), beside the one `release`'s container ships (container_te): >= 2.10 where TransformerConfig checks it
    (checks_partial_graph_te), >= 2.12 where the block (module docstring) holds a delayed weight gradient in the
    graph. A layout whose need the container does not meet is refused before it is emitted (wgrad_graph_te_short)."""
    if cuda_graph != "layer" or not delayed:
        return None
    from commbench.planner.search.frameworks import megatron_release_name
    name = megatron_release_name(release)[0]
    mask = resolved_masks(model, np.array([scope_mask(scope)]))
    if _in_graph(model, release, mask, np.array([dp_overlap]))[0]:
        need = ("per-layer CUDA graphs with --delay-wgrad-compute and --overlap-grad-reduce over "
                + ("attn" if int(mask[0]) & BIT["attn"] else "moe_router with shared experts")
                + f" need Transformer Engine >= 2.12 and gradient accumulation fusion (on: the launch does not disable "
                  f"it) at {name} (validate_args, 1934391a95)")
        least = WGRAD_GRAPH_TE
    elif checks_partial_graph_te(release):
        need = (f"per-layer CUDA graphs with --delay-wgrad-compute need Transformer Engine >= 2.10 at {name} "
                "(TransformerConfig: 'TE version >= 2.10.0 is required for delay_wgrad_compute with partial cuda "
                "graph')")
        least = PARTIAL_GRAPH_TE
    else:
        return None
    shipped = container_te(release)
    if release is None or shipped is None:
        return need + "; the target names no container: the launch's Transformer Engine must be that new"
    met = "met" if version_key(shipped[0]) >= version_key("%d.%d.%d" % least) else "NOT met"
    return need + f"; release {release}'s container ships Transformer Engine {shipped[0]} ({shipped[1]}): {met}"
