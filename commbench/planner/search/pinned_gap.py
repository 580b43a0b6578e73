"""Why a pinned layout loses (`commbench plan --layout`): the searched best, the pinned layout's rank
among the fitting layouts and its gap, the step terms that differ, and every field the pinned
layout took by default rather than from the user. All figures are predicted.

The per-term difference is the runner-up explanation of explain.py applied to the user's layout:
the same terms (compute, bubble, optimizer, each communication's exposed time), pinned minus best.
"""

from __future__ import annotations

from commbench.planner.layout.spec import Layout
from commbench.planner.search.explain import short, term_deltas
from commbench.planner.search.frameworks import TITAN_DP_WITHOUT_PP, TITAN_ETP
from commbench.planner.search.space import SearchResult, rank_of, structure_rank_of

# Why a field not in --layout got its value (the search's candidates for the pinned structure).
DEFAULT_REASONS = {
    "etp": "expert TP defaults to tp (Megatron-LM's --expert-tensor-parallel-size default)",
    "cp": "context parallelism off unless pinned",
    "dp": "derived: gpus / (tp*cp*pp)",
    "cuda_graph": "the faster of per-layer and full-iteration CUDA graphs that fits (as the search chooses; none with "
                  "Megatron-FSDP, which megatron-core 0.16.1 cannot graph)",
    "recompute": "the fastest recompute choice that fits (as the search chooses)",
    "dispatcher": "flex (DeepEP/HybridEP) with EP > 1, Megatron's alltoall without EP",
    "distributed_optimizer": "the faster choice that fits (as the search chooses)",
    "sequence_parallel": "on with TP (Megatron requires it for MoE with TP)",
    "tp_comm_overlap": "on where sequence parallel and TP > 1 allow it",
    "moe_a2a_overlap": "on where Megatron allows it (EP > 1, no full recompute, VP > 1 or PP = 1, MTP rules, not a hybrid model; "
                       "from 26.04 not beside a per-layer graph over a biased attention, search/wgrad_graph.py, where "
                       "the search takes the faster of the two)",
    "dp_overlap": "gradient reduce / param gather overlapped (Megatron's --overlap-grad-reduce/--overlap-param-gather)",
    "fused_moe": "fused permute + grouped MLP for MoE in MXFP8 on Blackwell, where the kernels exist",
    "fp8_attention": "off unless pinned (it changes numerics)",
    "fsdp": "FSDP (ZeRO-3) or the distributed optimizer, whichever is faster and fits (as the search chooses; pp = 1 "
            "only)",
    "fsdp_replicas": "with FSDP, HSDP with one shard group per scale-up domain or plain FSDP, whichever is faster "
                     "(as the search chooses)",
    "cpu_offload_layers": "layers whose activations go to host memory, where the release's recipes offload on this "
                          "GPU (as the search chooses; 0 = none)",
    "recompute_layers": "with recompute=full, every layer of each model chunk (0) unless pinned",
    "cuda_graph_scope": "with per-layer CUDA graphs, the modules the release's recipes capture for this kind of model",
    "fsdp_outer_optim": "with HSDP, the optimizer state replicated across the replicas (false) unless pinned "
                        "(--outer-dp-sharding-strategy optim)",
    "fused_mlp_offload_min": "0: megatron-core 0.16.1 has no fused_group_mlp offload (a 26.08 recipe's field)",
    "fsdp_double_buffer": "with FSDP, Megatron-FSDP's persistent double buffers (--fsdp-double-buffer: two units' "
                          "weights and gradients, as the prediction charges) unless pinned false",
    "keep_fp8_transpose_cache": "with FSDP, Megatron-FSDP's fp8 weight transposes dropped with each unit (false: at "
                                "megatron-core 0.16.1 every backward gather remakes them anyway, so keeping them saves "
                                "no pass) unless pinned",
}
# Fields that only mean something beside another value: named only then (a dense eager layout lists no graph scope).
APPLIES = {
    "fsdp_replicas": lambda lay: lay.fsdp,
    "fsdp_outer_optim": lambda lay: lay.fsdp and lay.fsdp_replicas > 1,
    "fsdp_double_buffer": lambda lay: lay.fsdp,
    "keep_fp8_transpose_cache": lambda lay: lay.fsdp,
    "recompute_layers": lambda lay: lay.recompute == "full",
    "cuda_graph_scope": lambda lay: lay.cuda_graph == "layer",
}
IMPLIED_FLAGS = {  # Megatron arguments a default drags in, with why
    ("cuda_graph", "full"): "--no-check-for-nan-in-loss-and-grad (Megatron's validate_args: the full-iteration "
                            "graph cannot check for NaN; pin cuda_graph=layer to keep the check)",
    ("fsdp", True): "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params --ckpt-format "
                    "fsdp_dtensor (Megatron-FSDP writes its own checkpoint format; pin fsdp=false to keep the "
                    "distributed optimizer's)",
}

# The same fields for a TorchTitan 0.3.0 plan (--framework torchtitan), what its launch (emit/torchtitan.py) runs: the
# fields TorchTitan fixes (frameworks._TITAN_FIXED, its config function's activation checkpointing) and the search's
# choices within what it runs (frameworks.framework_pins, restrict_columns, graphs_allowed).
TITAN_DEFAULT_REASONS = {
    "etp": TITAN_ETP,
    "cp": DEFAULT_REASONS["cp"],
    "dp": DEFAULT_REASONS["dp"],
    "cuda_graph": "TorchTitan 0.3.0's whole forward-backward CUDA graph where it runs one (pp = 1 and ep = 1: "
                  "trainer.py _validate_cuda_graphs) and it is faster and fits (as the search chooses), none elsewhere",
    "recompute": "the activation checkpointing TorchTitan 0.3.0's config function for the model sets (the launch keeps "
                 "it)",
    "dispatcher": "all-to-all, TorchTitan 0.3.0's token dispatcher in its shipped configs",
    "distributed_optimizer": "TorchTitan 0.3.0 always shards the optimizer state (FSDP2)",
    "sequence_parallel": "on with TP (TorchTitan 0.3.0's parallelism.enable_sequence_parallel default)",
    "tp_comm_overlap": "off: the launch turns TorchTitan's async TP off, as the prediction charges TP unoverlapped",
    "moe_a2a_overlap": "off: TorchTitan 0.3.0 does not overlap the EP all-to-all with another micro-batch",
    "dp_overlap": "FSDP2 overlaps its parameter gathers and gradient reduce-scatters with compute (always on)",
    "fused_moe": "off: TorchTitan 0.3.0 has no fused grouped MLP",
    "fp8_attention": "off: TorchTitan 0.3.0 has no FP8 attention",
    "fsdp": "FSDP2 resharding after forward (parameters gathered again for backward) or, with PP, gathered once a step, "
            f"whichever is faster and fits (as the search chooses); at pp = 1 always: {TITAN_DP_WITHOUT_PP}",
    "fsdp_replicas": "with FSDP, HSDP (FSDP2 replicated over data_parallel_replicate_degree) with one shard group per "
                     "scale-up domain or plain FSDP, whichever is faster (as the search chooses)",
    "cpu_offload_layers": "0: TorchTitan 0.3.0 offloads no activations (training.enable_cpu_offload offloads FSDP2's "
                          "parameters and optimizer state)",
    "recompute_layers": "with recompute=full, TorchTitan 0.3.0's full activation checkpointing of every layer (0)",
    "cuda_graph_scope": "TorchTitan 0.3.0 graphs no single layer",
    "fsdp_outer_optim": "false: TorchTitan 0.3.0's HSDP replicates the optimizer state across "
                        "data_parallel_replicate_degree",
    "fused_mlp_offload_min": "0: TorchTitan 0.3.0 has no module-level activation offload",
    "fsdp_double_buffer": "not read: FSDP2 keeps no persistent unit buffers (its unit memory is charged as it runs)",
    "keep_fp8_transpose_cache": "not read: FSDP2 gathers bf16 weights (torchao quantizes at each GEMM)",
}
assert TITAN_DEFAULT_REASONS.keys() == DEFAULT_REASONS.keys()
TITAN_IMPLIED_FLAGS = {  # TorchTitan 0.3.0 arguments a default puts in the launch (torchtitan_args.txt), with why
    ("cuda_graph", "full"): "--training.no_disable_cuda_graphs (the whole forward-backward captured and replayed; pin "
                            "cuda_graph=none for --training.disable_cuda_graphs)",
    ("fsdp", True): "--parallelism.fsdp_reshard_after_forward always (the parameters gathered again for backward, as "
                    "the prediction charges)",
}
# What only a MoE model's TorchTitan launch has (a dense one builds no experts, router or token dispatcher).
TITAN_MOE_FIELDS = ("etp", "dispatcher", "moe_a2a_overlap", "fused_moe")


def defaults_taken(layout: Layout, given: set[str], model=None, framework: str = "megatron",
                   graph_fallback: str = "", fits: bool = True) -> list[dict]:
    """One entry per layout field the user did not give (and that applies: APPLIES): field, value, why, and flags
    it implies in the launch `framework` runs (its reasons and flags: DEFAULT_REASONS / IMPLIED_FLAGS for Megatron-LM,
    TITAN_DEFAULT_REASONS / TITAN_IMPLIED_FLAGS for TorchTitan, where a dense model lists no expert field). With
    `model`, the recipes' graph scope ("" in a Layout) is named by its modules; `graph_fallback`
    (frameworks.graph_fallback): why per-layer graphs stand in for the recipes' full-iteration graph, said beside a
    per-layer graph taken by default. `fits` False (no candidate of the pinned layout fits: best_for_pins took the
    fastest): a reason that says "that fits" says that none does."""
    from commbench.planner.layout.graph_scope import default_scope

    titan = framework == "torchtitan"
    reasons, flags = (TITAN_DEFAULT_REASONS, TITAN_IMPLIED_FLAGS) if titan else (DEFAULT_REASONS, IMPLIED_FLAGS)
    dense = titan and model is not None and not model.is_moe
    out = []
    for name, why in reasons.items():
        if name in given or not APPLIES.get(name, lambda lay: True)(layout) or (dense and name in TITAN_MOE_FIELDS):
            continue
        value = getattr(layout, name)
        if name == "cuda_graph_scope" and not value:
            value = "+".join(default_scope(model)) if model is not None else "the recipes' scope"
        if name == "cuda_graph" and value == "layer" and graph_fallback:
            why = f"{graph_fallback}; {why}"
        if not fits and "fits" in why:
            why = why.replace(" that fits", "").replace(" and fits", "") + "; none fits here (predicted), so the fastest is taken"
        entry = {"field": name, "value": value, "why": why}
        implied = flags.get((name, value))
        if implied:
            entry["implies"] = implied
        out.append(entry)
    return out


# The plan's inputs that have a default (plan/tune options; gbs and precision also layout pins): input_defaults
INPUT_FIELDS = ("precision", "seq_len", "software", "gbs")


def input_defaults(req, gbs_note: str | None = None) -> list[dict]:
    """One entry per input of `req` (a SearchRequest) the user did not give, as defaults_taken's: field, the value
    taken (as plan.json `inputs` records it) and why; `gbs_note`: where a default global batch came from (None: given,
    as --gbs or a gbs= pin). Searched and pinned plans both list them (plan.json `defaults_taken`)."""
    out = []
    if not req.precision_asked:
        out.append({"field": "precision", "value": req.precision,
                    "why": f"not given: the default on {str(req.gpu_name).upper()}, the best precision it runs that "
                           f"{req.framework}'s recipes train the model in whole (--precision to change)"})
    if req.seq_len is None:
        out.append({"field": "seq_len", "value": int(req.model.seq_len),
                    "why": f"not given: {req.model.name}'s sequence length (--seq-len to change)"})
    if not req.software_asked:
        out.append({"field": "software", "value": req.software,
                    "why": "not given: the newest release in commbench/data/recipes.json (--software to change)"})
    if gbs_note:
        out.append({"field": "gbs", "value": int(req.gbs), "why": gbs_note})
    return out


def defaults_line(entries: list[dict]) -> str:
    """The plan's line naming its defaults: the layout fields not in --layout, then the inputs not given."""
    def text(e: dict) -> str:
        value = str(e["value"]).lower() if isinstance(e["value"], bool) else e["value"]
        return f"{e['field']}={value}" + (f" (adds {e['implies'].split(' (')[0]})" if "implies" in e else "")
    fields = [text(e) for e in entries if e["field"] not in INPUT_FIELDS]
    inputs = [text(e) for e in entries if e["field"] in INPUT_FIELDS]
    if not fields:
        return f"Defaults taken (not given as options): {', '.join(inputs)}."
    return (f"Defaults taken (not in --layout): {', '.join(fields)}"
            + (f"; not given as options: {', '.join(inputs)}" if inputs else "") + ".")


def versus_best(result: SearchResult, pinned_bd, i: int = 0) -> dict:
    """The searched best layout against the pinned one (row `i` of `pinned_bd`)."""
    bd = result.breakdown
    best_tok, tok = float(bd.tokens_per_s_per_gpu[0]), float(pinned_bd.tokens_per_s_per_gpu[i])
    room_ok = bool(pinned_bd.fits[i]) and float(pinned_bd.mem_capacity_bytes[i]) * (
        1.0 - result.request.headroom_fraction) >= float(pinned_bd.mem_total_bytes[i])
    deltas = term_deltas(bd, 0, pinned_bd, i)
    return {"best_layout": short(result.layouts.layout(0)),
            "best_layout_fields": _fields(result.layouts.layout(0)),
            "best_tokens_per_s_per_gpu": best_tok, "best_step_s": float(bd.step_s[0]),
            "pinned_tokens_per_s_per_gpu": tok, "pinned_step_s": float(pinned_bd.step_s[i]),
            "gap_pct": 100.0 * (tok / best_tok - 1.0),
            "rank": rank_of(result, tok) if room_ok else None, "fits_headroom": room_ok,
            "num_fitting": int(result.num_fit),
            "structure_rank": structure_rank_of(result, tok) if room_ok else None,
            "num_fitting_structures": int(len(result.fitting_structures_desc)),
            "term_deltas_s": [{"term": label, "key": key, "delta_s": d} for label, key, d in deltas if abs(d) > 1e-4],
            **gain_verdict(best_tok / tok - 1.0 if tok > 0 else float("inf"), result.request.model.is_moe,
                           fits=room_ok)}


def gain_verdict(gain: float, moe: bool, *, fits: bool = True) -> dict:
    """The best's predicted gain over a layout against the model's MEASURED error of a predicted gain
    (step.terms.MODEL_GAIN_MEDIAN_ABS_ERROR, MODEL_GAIN_P80_ABS_ERROR; calibrate/gain_error.py): "does_not_fit" when
    the layout does not fit the HBM headroom (never "best", however fast it is predicted: the search ranks only
    fitting layouts, and one that does not fit is no choice against them), else "best" when the layout is the best,
    "tie" within the median error, "likely" beyond it but within the 80th percentile, "beyond_p80" past that."""
    from commbench.planner.step.terms import MODEL_GAIN_MEDIAN_ABS_ERROR, MODEL_GAIN_P80_ABS_ERROR
    family = "moe" if moe else "dense"
    median, p80 = MODEL_GAIN_MEDIAN_ABS_ERROR[family], MODEL_GAIN_P80_ABS_ERROR[family]
    verdict = ("does_not_fit" if not fits else "best" if gain <= 1e-9 else "tie" if gain <= median
               else "likely" if gain <= p80 else "beyond_p80")
    return {"best_gain_pct": 100.0 * gain, "gain_error_family": family, "gain_error_median_pct": 100.0 * median,
            "gain_error_p80_pct": 100.0 * p80, "gain_verdict": verdict}


def gain_verdict_line(v: dict) -> str:
    """What the best's predicted gain over the pinned layout is worth, given the model's measured gain errors."""
    if v["gain_verdict"] == "does_not_fit":
        return (f"This layout does not fit the HBM headroom: the searched best (predicted) is {v['best_layout']}, "
                "the fastest layout that fits.")
    if v["gain_verdict"] == "best":
        return "This layout is the searched best (predicted)."
    family = "MoE" if v["gain_error_family"] == "moe" else "dense"
    errors = (f"a predicted gain between two published {family} layouts of one run errs by {v['gain_error_median_pct']:.1f}% "
              f"at the median, by less than {v['gain_error_p80_pct']:.1f}% in 4 of 5 pairs")
    gain = f"The best is predicted {v['best_gain_pct']:+.1f}% over this layout"
    if v["gain_verdict"] == "tie":
        return f"{gain}: a tie ({errors}); measure (verify-plan) before switching for it."
    if v["gain_verdict"] == "likely":
        return f"{gain}: beyond the median error, within the 4-in-5 one ({errors}); measure both (verify-plan) first."
    return f"{gain}: beyond 4 in 5 of the model's errors ({errors}); still predicted: measure before switching."


def _fields(layout: Layout) -> dict:
    return {k: getattr(layout, k) for k in layout.__dataclass_fields__}


def versus_best_lines(v: dict) -> list[str]:
    where = (f"rank {v['rank']:,} of {v['num_fitting']:,} fitting layouts ({v['structure_rank']:,} of "
             f"{v['num_fitting_structures']:,} distinct structures at their best flags)" if v["rank"] is not None else
             f"does not fit the HBM headroom, so unranked among the {v['num_fitting']:,} fitting layouts")
    lines = [f"Best searched layout (predicted): {v['best_layout']} at {v['best_tokens_per_s_per_gpu']:,.0f} "
             f"tokens/s/GPU (step {v['best_step_s']:.3f} s).",
             f"This layout: {v['pinned_tokens_per_s_per_gpu']:,.0f} tokens/s/GPU, {v['gap_pct']:+.1f}% vs the best, "
             f"{where}."]
    if v["term_deltas_s"]:
        parts = [f"{d['term']} {d['delta_s']:+.3f} s" for d in v["term_deltas_s"]]
        lines.append("Per step, this layout vs the best: " + ", ".join(parts) +
                     f" (step {v['pinned_step_s']:.3f} s vs {v['best_step_s']:.3f} s).")
    else:
        lines.append("Per step it matches the best term by term.")
    if "gain_verdict" in v:
        lines.append(gain_verdict_line(v))
    return lines


__all__ = ["defaults_taken", "defaults_line", "input_defaults", "gain_verdict", "gain_verdict_line", "versus_best", "versus_best_lines"]
