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
graph, frameworks.MEGATRON_FSDP_NO_GRAPHS). The TE version is the container's, not in the table: the plan names it
(wgrad_graph_te_note). An empty scope (the whole layer) lists no module, so the block does not fire for it (and the EP
overlap refuses the whole layer anyway: candidates.py).
"""

from __future__ import annotations

import numpy as np

from commbench.planner.layout.graph_scope import BIT, WHOLE_LAYER, default_scope, resolved_masks, scope_mask
from commbench.planner.layout.spec import CODE_FIELDS
from commbench.planner.models.spec import ModelSpec

WGRAD_GRAPH_CORE = (0, 17, 0)   # megatron-core of the first table release whose validate_args has the block
WGRAD_GRAPH_SOURCE = ("'CUDA graph with delay_wgrad_compute doesn't support attn bias for now.' (Megatron-LM 1934391a95 "
                      "'fix cg missing wgrad hook (#3074)', first in megatron-core 0.17.0)")


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
    if not (overlap and wgrad_graph_refused(model, release, np.array([graph]), np.array([scope_mask(scope)]),
                                            np.array([overlap]), np.array([ep]), np.array([dp_overlap]))[0]):
        return None
    bias = attention_bias(model)
    from commbench.planner.search.frameworks import megatron_release_name
    name, _ = megatron_release_name(release)
    return (f"moe_a2a_overlap=true with cuda_graph='layer' over attn (scope {scope}) is invalid for {model.name} with "
            f"--framework megatron at release {release}: the EP overlap writes --delay-wgrad-compute, and with "
            f"--overlap-grad-reduce the validate_args of {name} refuses a graph over an attention with biases ({bias}): "
            f"{WGRAD_GRAPH_SOURCE}; pin moe_a2a_overlap=false, cuda_graph=none, a cuda_graph_scope without attn, or "
            "dp_overlap=false")


def wgrad_graph_te_note(model: ModelSpec, release: str | None, cuda_graph: str, scope: str, delayed: bool,
                        dp_overlap: bool) -> str | None:
    """The Transformer Engine a per-layer graph with --delay-wgrad-compute needs at `release` (None where the layout
    has neither): >= 2.10 for any (megatron-core TransformerConfig, core_v0.16.1 transformer_config.py:1916-1920,
    0.19.0 :2753-2757), >= 2.12 where the block (module docstring) holds a delayed weight gradient in the graph."""
    if cuda_graph != "layer" or not delayed:
        return None
    mask = int(resolved_masks(model, np.array([scope_mask(scope)]))[0])
    shared = model.is_moe and model.num_shared_experts > 0   # no plan writes --moe-shared-expert-overlap
    in_graph = dp_overlap and checks_wgrad_graph(release) and not mask & WHOLE_LAYER and bool(
        mask & BIT["attn"] or (mask & BIT["moe_router"] and shared))
    if in_graph:
        from commbench.planner.search.frameworks import megatron_release_name
        return ("per-layer CUDA graphs with --delay-wgrad-compute and --overlap-grad-reduce over "
                + ("attn" if mask & BIT["attn"] else "moe_router with shared experts")
                + f" need Transformer Engine >= 2.12 and gradient accumulation fusion (on: the launch does not disable "
                  f"it) at {megatron_release_name(release)[0]} (validate_args, 1934391a95); the container's TE version "
                  "is not in the plan")
    return ("per-layer CUDA graphs with --delay-wgrad-compute need Transformer Engine >= 2.10 (megatron-core "
            "TransformerConfig: 'TE version >= 2.10.0 is required for delay_wgrad_compute with partial cuda graph')")
