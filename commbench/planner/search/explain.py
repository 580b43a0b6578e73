"""Why the search chose its layout, in the lines a performance engineer would write (all predicted).

Every sentence is computed from the step model's breakdown: the exposed communication of the
winner and why it is exposed (group size, racks spanned), what the best structurally different
runner-up gives up, and sensitivity: the kept candidates re-evaluated with the scale-out or
scale-up bandwidth halved or doubled and with uneven routing (busiest EP rank 1.5x the mean),
reporting whether and by how much the decision changes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from commbench.planner.layout.spec import Layout
from commbench.planner.layout.placement import domains_touched, racks_spanned
from commbench.planner.search.frameworks import flops_count_name
from commbench.planner.search.space import STRUCTURE, SearchResult, structure_key
from commbench.planner.step.evaluate import evaluate_layouts

COMM_TERMS = (("TP collectives", "tp"), ("EP all-to-all", "ep"), ("ETP all-gather + reduce-scatter", "etp"), ("CP ring", "cp"), ("PP send/recv", "pp"),
              ("DP dense grad reduce-scatter", "dp_dense_rs"), ("DP dense param all-gather", "dp_dense_ag"),
              ("DP expert grad reduce-scatter", "dp_expert_rs"), ("DP expert param all-gather", "dp_expert_ag"))


def scale_tier_bandwidth(fabric, tier: str, factor: float):
    """`fabric` with every curve on `tier` (and the tier's link rate) scaled by `factor`."""
    curves = [dataclasses.replace(c, busbw_gbps=c.busbw_gbps * factor) for c in fabric.curves if c.tier == tier]
    tiers = dict(fabric.tiers)
    if tier in tiers:
        tiers[tier] = dataclasses.replace(tiers[tier], link_gbps_per_gpu=tiers[tier].link_gbps_per_gpu * factor)
    return dataclasses.replace(fabric.with_curves(curves), tiers=tiers)


def short(layout: Layout) -> str:
    """'TP1 PP2 VP8 EP32 ETP1 CP1 DP128 mbs1 recompute=selective flex' (the searched dimensions; FSDP
    rows end in 'fsdp', HSDP rows in 'hsdpR' with R replicas; 'offloadN' where N layers' activations go to
    host memory)."""
    text = (f"TP{layout.tp} PP{layout.pp} VP{layout.vp} EP{layout.ep} ETP{layout.etp} CP{layout.cp} "
            f"DP{layout.dp} mbs{layout.mbs} recompute={layout.recompute}")
    if layout.recompute_layers:   # block recompute of that many layers per model chunk
        text += f"({layout.recompute_layers}/chunk)"
    if layout.ep > 1:
        text += f" {layout.dispatcher}"
    if layout.fsdp:  # FSDP over all of DP, or HSDP with its replicas (step/fsdp.py)
        text += f" hsdp{layout.fsdp_replicas}" if layout.fsdp_replicas > 1 else " fsdp"
    if layout.cpu_offload_layers:  # activations of that many layers in host memory
        text += f" offload{layout.cpu_offload_layers}"
    return text + ("" if layout.distributed_optimizer else " no-dist-opt")


def graph_text(layout: Layout, model) -> str:
    """' cuda_graph=layer(attn+moe_router+moe_preprocess)' where the layout runs per-layer CUDA graphs (the scope the
    Megatron arguments name: an empty cuda_graph_scope is the recipes' for the model, graph_scope.default_scope),
    ' cuda_graph=full' for a full-iteration graph, '' without one."""
    from commbench.planner.layout.graph_scope import default_scope

    if layout.cuda_graph == "layer":
        return f" cuda_graph=layer({layout.cuda_graph_scope or '+'.join(default_scope(model))})"
    return "" if layout.cuda_graph == "none" else f" cuda_graph={layout.cuda_graph}"


@dataclass(frozen=True, kw_only=True)
class Scenario:
    label: str
    tier: str | None = None
    factor: float = 1.0
    moe_imbalance: float | None = None


SCENARIOS = (Scenario(label="half the scale-out bandwidth", tier="scale_out", factor=0.5),
             Scenario(label="twice the scale-out bandwidth", tier="scale_out", factor=2.0),
             Scenario(label="half the scale-up (NVLink) bandwidth", tier="scale_up", factor=0.5),
             Scenario(label="uneven routing (busiest EP rank 1.5x the mean)", moe_imbalance=1.5))


def runner_up(result: SearchResult) -> int | None:
    """Index of the best kept layout whose structure (tp cp pp vp ep etp mbs dp) differs from the winner's."""
    first = structure_key(result.layouts, 0)
    return next((i for i in range(1, len(result)) if structure_key(result.layouts, i) != first), None)


def _pct(a: float, b: float) -> float:
    return 100.0 * (a / b - 1.0)


def exposed_lines(result: SearchResult, i: int = 0) -> list[str]:
    bd, lay, req = result.breakdown, result.layouts.layout(i), result.request
    step = float(bd.step_s[i])
    per_rack = result.gpus_per_rack
    lines = []
    terms = [(label, float(getattr(bd, f"{key}_exposed_s")[i]), float(getattr(bd, f"{key}_total_s")[i]), key)
             for label, key in COMM_TERMS]
    terms = [t for t in terms if t[2] > 0]
    exposed = sum(t[1] for t in terms)
    lines.append(f"Exposed communication is {exposed:.3f} s of the {step:.3f} s step ({100 * exposed / step:.1f}%); "
                 f"pipeline bubble {float(bd.bubble_s[i]):.3f} s ({100 * float(bd.bubble_s[i]) / step:.1f}%), "
                 f"compute {float(bd.compute_s[i]):.3f} s"
                 + (f", exposed host offload {float(bd.offload_exposed_s[i]):.3f} s" if float(bd.offload_exposed_s[i]) > 0
                    else "")
                 + f", optimizer step {float(bd.optimizer_s[i]):.3f} s.")  # every term of step_s (step/evaluate.py)
    for label, exp, total, key in sorted(terms, key=lambda t: -t[1])[:3]:
        why = _why(key, lay, per_rack, req.model, req.framework)
        hidden = 100 * (1 - exp / total) if total else 0
        lines.append(f"- {label}: {total:.3f} s in total, {exp:.3f} s exposed ({hidden:.0f}% hidden){why}.")
    return lines


def _racks(span: int, group: int, per_rack: int) -> int:
    """Racks the most spread of a layout's groups of `group` ranks over `span` consecutive ranks touches, as the step
    model counts them (placement.domains_touched)."""
    return int(domains_touched(np.array([span]), np.array([group]), per_rack)[0]) if group > 1 else 1


def dp_groups_text(lay: Layout, group: int, per_rack: int, grads: bool = True) -> str:
    """The data-parallel groups a DP term is priced over (step/evaluate.py): the whole `group` (dense dp*cp, expert
    edp), or under HSDP (fsdp_replicas = R) shard groups of group/R ranks (TorchTitan's dp_shard, parallel_dims.py;
    efsdp per replica for experts) whose gradient shards are all-reduced across the R replicas (in the gradient
    term, `grads`; the parameter all-gather runs within the shard group alone)."""
    stage = lay.world // lay.pp
    replicas = lay.fsdp_replicas if lay.fsdp else 1
    if replicas == 1:
        return f"a group of {group} ranks over {_racks(stage, group, per_rack)} rack(s)"
    shard = max(group // replicas, 1)
    text = f"HSDP: shard groups of {shard} ranks over {_racks(stage // replicas, shard, per_rack)} rack(s)"
    return text + (f", the gradient shards all-reduced across {replicas} replicas over "
                   f"{_racks(stage, replicas, per_rack)} rack(s)" if grads else f" ({replicas} replicas)")


def _why(key: str, lay: Layout, per_rack: int, model, framework: str = "megatron") -> str:
    if key == "ep":
        racks = int(racks_spanned(lay.etp * lay.ep, per_rack, lay.world))
        where = "inside one rack (NVLink)" if racks == 1 else f"across {racks} racks (scale-out network)"
        over = "overlapped with the other micro-batch's compute" if lay.moe_a2a_overlap else "not overlapped"
        return f"; EP{lay.ep} groups run {where}, {over}"
    if key.startswith("dp"):
        group = lay.dp * lay.cp if "dense" in key else lay.edp
        kept = ("; the Mamba layers, not Megatron-FSDP units, stay gathered all step"
                if getattr(model, "num_mamba_layers", 0) else "")
        window = (f"each layer's compute, every micro-batch (FSDP: gathered per layer forward and backward{kept})"
                  if lay.fsdp else "one micro-batch's compute" if lay.vp == 1 else
                  f"one micro-batch's compute plus the later model chunks' cool-down (VP{lay.vp})")
        return f"; {dp_groups_text(lay, group, per_rack, key.endswith('_rs'))}, hidden behind {window}"
    if key == "etp" and framework == "torchtitan":   # TorchTitan: around the MoE block (step/moe_comm.py)
        return (f"; each MoE layer gathers its input over TP{lay.tp} before the router (TorchTitan splits the experts "
                "over TP at ep = 1) and reduce-scatters the output after, not overlapped")
    if key == "etp":
        return (f"; each MoE layer gathers ETP{lay.etp} ranks' dispatched tokens (x top-{model.top_k}) before the "
                "expert GEMMs and reduce-scatters the outputs after, " +
                ("overlapped with the other micro-batch" if lay.moe_a2a_overlap else "not overlapped"))
    if key == "tp":
        return f"; TP{lay.tp} inside a rack, " + ("overlapped with GEMMs" if lay.tp_comm_overlap else "not overlapped")
    if key == "pp":
        return f"; {2 * lay.vp} sends per micro-batch (VP{lay.vp})"
    return ""


STEP_TERMS = (("compute", "compute_s"), ("bubble", "bubble_s"), ("optimizer", "optimizer_s")) + \
    tuple((label, f"{key}_exposed_s") for label, key in COMM_TERMS)


def term_deltas(bd_a, i: int, bd_b, j: int) -> list[tuple[str, str, float]]:
    """(label, breakdown key, b[j] - a[i] in seconds) per step term, largest change first."""
    return sorted(((label, k, float(getattr(bd_b, k)[j]) - float(getattr(bd_a, k)[i])) for label, k in STEP_TERMS),
                  key=lambda t: -abs(t[2]))


def _diff_lines(result: SearchResult, j: int) -> list[str]:
    bd, b = result.breakdown, result.layouts.layout(j)
    tok0, tok1 = float(bd.tokens_per_s_per_gpu[0]), float(bd.tokens_per_s_per_gpu[j])
    deltas = term_deltas(bd, 0, bd, j)
    parts = [f"{label} {d:+.3f} s" for label, _, d in deltas[:3] if abs(d) > 1e-4]
    room0, room1 = float(result.headroom_bytes[0]) / 1e9, float(result.headroom_bytes[j]) / 1e9
    return [f"Runner-up {short(b)}: {tok1:,.0f} tokens/s/GPU ({_pct(tok1, tok0):+.1f}%), memory headroom "
            f"{room1:.0f} GB vs {room0:.0f} GB; per step it changes {', '.join(parts) or 'nothing measurable'} "
            f"(step {float(bd.step_s[j]):.3f} s vs {float(bd.step_s[0]):.3f} s)."]


def sensitivity(result: SearchResult, scenarios=SCENARIOS) -> list[dict]:
    """Re-evaluate the kept layouts under each scenario: the new best, and the old winner's change."""
    req, out = result.request, []
    base_tok = float(result.breakdown.tokens_per_s_per_gpu[0])
    for sc in scenarios:
        if sc.tier == "scale_up" and int(getattr(req.fabric, "domain_size", 2)) < 2:
            continue   # one GPU per domain (a 1-GPU-per-node profile): no traffic runs inside a domain
        fabric = scale_tier_bandwidth(req.fabric, sc.tier, sc.factor) if sc.tier else req.fabric
        imbalance = sc.moe_imbalance if sc.moe_imbalance is not None else req.moe_imbalance
        bd = evaluate_layouts(req.model, fabric, result.layouts, seq_len=req.seq_len, calibration=req.calibration,
                              moe_imbalance=imbalance, framework=req.framework, loss=req.loss)
        tok = np.where(bd.fits, bd.tokens_per_s_per_gpu, 0.0)
        best = int(np.argmax(tok))
        out.append({"scenario": sc.label, "winner_tokens_per_s_per_gpu": float(tok[0]),
                    "winner_change_pct": _pct(float(tok[0]), base_tok), "best_index": best,
                    "best_layout": short(result.layouts.layout(best)), "best_tokens_per_s_per_gpu": float(tok[best]),
                    "best_margin_pct": _pct(float(tok[best]), float(tok[0])),
                    "decision_changes": structure_key(result.layouts, best) != structure_key(result.layouts, 0)})
    return out


def sensitivity_lines(rows: list[dict], winner: str) -> list[str]:
    lines = []
    for r in rows:
        if r["decision_changes"]:
            margin = f"{r['best_margin_pct']:.1f}%" if r["best_margin_pct"] >= 0.05 else "less than 0.1%"  # not "0.0%"
            lines.append(f"- With {r['scenario']}, {r['best_layout']} overtakes the plan by {margin} "
                         f"(the plan changes {r['winner_change_pct']:+.1f}% to {r['winner_tokens_per_s_per_gpu']:,.0f}).")
        else:
            lines.append(f"- With {r['scenario']}, the plan stays best at {r['winner_tokens_per_s_per_gpu']:,.0f} "
                         f"tokens/s/GPU ({r['winner_change_pct']:+.1f}%).")
    return lines


def software_line(req) -> str:
    """The plan's Software line, searched or pinned (`req` a SearchRequest): the Megatron-Bridge release whose
    recipes' features the layouts (a pinned layout's flags not given) were chosen from, for which model, GPU and
    precision, what the release or the fabric leaves out and why, and req.software_note where another release's
    recipes stand in for the one asked (README: the plan says so)."""
    from commbench.planner.layout.recipe_model import recipe_model
    from commbench.planner.layout.recipes import (dispatch_limits, feature_gpu, feature_gpu_note, release_features,
                                                  release_features_scope)
    model = req.model
    recipes_of = recipe_model(model)   # the zoo model whose recipes it reads: its own, or the one it is (hf:PATH)
    has = release_features(req.software, req.gpu_name, req.precision, recipes_of, model.is_moe, req.domain_size)
    scope = release_features_scope(req.software, req.gpu_name, req.precision, recipes_of, model.is_moe)
    for_model = scope == "model"
    # what the fabric cannot run of the release's dispatch, and why (recipes.dispatch_limits)
    limits = (dispatch_limits(req.software, req.gpu_name, req.precision, recipes_of, model.is_moe, req.domain_size)
              if model.is_moe and req.domain_size else {})
    why_off = {"the flex dispatcher": limits.get("dispatcher"), "EP all-to-all overlap": limits.get("moe_a2a_overlap")}

    def lacking(features: dict) -> list[str]:
        return [name for name, ok in (("per-layer CUDA graphs", "layer" in features["cuda_graph"]),
                                      ("full-iteration CUDA graphs", "full" in features["cuda_graph"]),
                                      ("fused MoE kernels", True in features["fused_moe"]),
                                      ("EP all-to-all overlap", True in features["moe_a2a_overlap"]),
                                      ("the flex dispatcher", "flex" in features["dispatcher"])) if not ok]
    from commbench.planner.search.frameworks import graph_fallback
    fallback = graph_fallback(req.framework, model, req.software, req.gpu_name, req.precision,
                              req.domain_size)
    extras = [name for name in lacking(has) if not (fallback and name == "per-layer CUDA graphs")]
    pinnable = [name for name in extras if name not in lacking(release_features(req.software, req.gpu_name,
                                                                                 req.precision, None, None,
                                                                                 req.domain_size))] if for_model else []
    gpu = req.gpu_name
    stand_in = feature_gpu_note(gpu)
    where = {"any": f" No recipe of release {req.software} (or an older one) runs on {(gpu or 'this GPU').upper()} "
                    "and none stands in for it: the features searched are every GPU's recipes' in that release.",
             "gpu": f" No recipe of the release runs at {req.precision.upper()} there: the features searched are its "
                    "recipes' there at any precision."}.get(scope, "") if gpu else ""
    return (f"Software: the features of Megatron-Bridge release {req.software}'s performance recipes "
            + (f"for {recipes_of} " if for_model else "")
            + (f"on {feature_gpu(gpu).upper()}, standing in for {gpu.upper()}, " if stand_in else
               f"on {gpu.upper()} " if gpu else "") + f"at {req.precision.upper()} (--software)"
            + (f"; without {', '.join(off)}." if (off := [name + (f" ({why_off[name]})" if why_off.get(name) else "")
                                                            for name in extras]) else ".")
            + (f" Other models' recipes there run {', '.join(pinnable)}: a --layout pin searches them."
               if pinnable else "")
            + (f" {stand_in[0].upper()}{stand_in[1:]}." if stand_in else "") + where
            + ("" if for_model else f" No recipe of the release covers {recipes_of} there: the features "
               "searched are other models' recipes', none tuned for it, so a gain the plan owes to them is the "
               "least certain part of its prediction.")
            + (f" Note: {req.software_note}." if req.software_note else ""))


def caveats(result: SearchResult) -> list[str]:
    lay, model = result.layouts.layout(0), result.request.model
    out = []
    if model.is_moe and lay.etp > 1:
        out.append(f"ETP{lay.etp} splits each expert's FFN into {model.expert_ffn // lay.etp} columns per GPU; the step "
                   "model charges the narrower grouped GEMMs their operand traffic (gemm_shape.py) and the ETP "
                   "all-gather/reduce-scatter, but kernel choices for very narrow GEMMs are not modelled.")
    if lay.cpu_offload_layers:
        bd, gpu = result.breakdown, result.request.fabric.gpu
        share = (1.0 - result.request.calibration.host_reserve_fraction) * gpu.host_memory_gb_per_gpu
        out.append(f"CPU offloading (predicted): {lay.cpu_offload_layers} of {model.num_layers} layers' activations go to host memory, "
                   f"{float(bd.mem_host_offload_bytes[0]) / 1e9:.0f} GB per micro-batch of the GPU's {share:.0f} GB share "
                   f"(hardware.toml host_memory_gb_per_gpu less the host reserve); their copies over the host link "
                   f"({gpu.host_link_gbps_per_dir:.0f} GB/s each way) leave {float(bd.offload_exposed_s[0]):.3f} s "
                   "exposed per step.")
    from commbench.planner.layout.recipes import (CONTAINERS_WITHOUT_DEEPEP, feature_gpu, flex_backend,
                                                  normalised_release, release_features)
    req = result.request
    if model.is_moe and lay.ep > 1 and lay.dispatcher == "flex":
        backend = flex_backend(int(req.fabric.domain_size), req.software, req.gpu_name)
        # the release changes the backend where it does not offer DeepEP on the GPU (recipes.flex_backend)
        why = ("" if backend == flex_backend(int(req.fabric.domain_size)) else
               f": the NeMo {req.software} container has no DeepEP (Megatron-Bridge known issues)"
               if normalised_release(req.software) in CONTAINERS_WITHOUT_DEEPEP else
               f": the Megatron-Bridge {req.software} recipes read for {req.gpu_name} "
               f"({feature_gpu(req.gpu_name).upper()}'s where it has flex ones, else every GPU's) set HybridEP, none "
               "DeepEP")
        out.append(f"The flex dispatcher ({'HybridEP' if backend == 'hybridep' else 'DeepEP'}, "
                   f"--moe-flex-dispatcher-backend {backend}{why}) is assumed installed; pin "
                   "dispatcher=alltoall otherwise.")
    from commbench.planner.layout.recipe_model import recipe_model, recipe_model_line
    recipes_of = recipe_model(model)   # the zoo model whose recipes it reads: its own, or the one it is (hf:PATH)
    has = release_features(req.software, req.gpu_name, req.precision, recipes_of, model.is_moe, req.domain_size)
    if recipes_of != model.name:
        out.append(recipe_model_line(model, req.software))
    out.append(software_line(req))
    from commbench.planner.search.frameworks import FRAMEWORK_VERSIONS, framework_version, runs_fused_grouped_mlp
    if model.is_moe and True in has["fused_moe"] and not runs_fused_grouped_mlp(result.request.framework):
        out.append(f"The release's recipes fuse the experts' grouped MLP (Transformer Engine); "
                   f"{framework_version(req.framework, req.torchtitan_version)} cannot run it, so no layout here "
                   "uses it "
                   "(published runs of those recipes do, and are faster by it).")
    if model.is_moe and req.framework == "megatron" and "full" in has["cuda_graph"] and "cuda_graph" not in req.pins:
        from commbench.planner.search.frameworks import MEGATRON_NO_FULL_GRAPH_MOE, graph_fallback
        fallback = graph_fallback(req.framework, model, req.software, req.gpu_name, req.precision, req.domain_size)
        out.append(f"The release's recipes run full-iteration CUDA graphs; {MEGATRON_NO_FULL_GRAPH_MOE}, so no layout "
                   "here uses one (published runs of those recipes do, and are faster by it)"
                   + ("; per-layer CUDA graphs stand in: the release's MoE recipes run them there, the strongest graph "
                      "it runs with dropless MoE." if fallback else "."))
    from commbench.planner.layout.recipes import runs_ep_overlap_with_full_graph
    if (model.is_moe and req.framework == "megatron"
            and runs_ep_overlap_with_full_graph(req.software, req.gpu_name, req.precision, recipes_of,
                                               model.is_moe)):
        out.append(f"The release's recipes run the EP all-to-all overlap beside a full-iteration CUDA graph; "
                   f"{FRAMEWORK_VERSIONS['megatron']} refuses that pair, so no layout here has both (published runs "
                   "of those recipes do, and a newer Megatron-Core would run them).")
    return out


def band_lines(result: SearchResult) -> list[str]:
    """Layouts whose predictions differ from the best by less than the model's measured error of a predicted
    gain (step.terms.MODEL_GAIN_MEDIAN_ABS_ERROR) are a tie."""
    from commbench.planner.step.terms import MODEL_GAIN_MEDIAN_ABS_ERROR, MODEL_GAIN_P80_ABS_ERROR
    family = "MoE" if result.request.model.is_moe else "dense"
    err, p80 = MODEL_GAIN_MEDIAN_ABS_ERROR[family.lower()], MODEL_GAIN_P80_ABS_ERROR[family.lower()]
    best = float(result.breakdown.tokens_per_s_per_gpu[0])
    tied = int(np.count_nonzero(result.fitting_tokens_desc >= best * (1.0 - err)))
    structures = int(np.count_nonzero(result.fitting_structures_desc >= best * (1.0 - err)))
    if tied <= 1:
        return []
    return [f"Band: {tied:,} fitting layouts ({structures:,} distinct {'/'.join(STRUCTURE)} structures) predict "
            f"within {100 * err:.1f}% of the best (the model's median error of a predicted gain between two layouts, "
            f"measured on pairs of published {family} layouts of one run; 4 in 5 pairs err by less than {100 * p80:.1f}%): "
            f"ranks 1-{tied:,} are a tie within the model's error; measure the top few (verify-plan) before choosing."]


def explain(result: SearchResult, *, with_sensitivity: bool = True) -> tuple[list[str], list[dict]]:
    """(lines of text, sensitivity rows) for the winner of `result`. Everything is predicted."""
    bd, lay = result.breakdown, result.layouts.layout(0)
    tok = float(bd.tokens_per_s_per_gpu[0])
    lines = [f"Plan (predicted): {short(lay)}{graph_text(lay, result.request.model)} at {tok:,.0f} tokens/s/GPU, {float(bd.model_tflops_per_gpu[0]):,.0f} "
             f"model TFLOP/s/GPU (MFU {100 * float(bd.mfu[0]):.1f}% of the {lay.precision} dense peak, "
             f"{float(bd.peak_tflops[0]):,.0f} TFLOP/s; "
             f"{flops_count_name(result.request.framework, result.request.torchtitan_version)}), "
             f"{float(result.headroom_bytes[0]) / 1e9:.0f} GB "
             f"of {float(bd.mem_capacity_bytes[0]) / 1e9:.0f} GB HBM free; best of {result.num_fit:,} fitting layouts "
             f"({result.num_enumerated:,} enumerated)."]
    lines += band_lines(result)
    lines += exposed_lines(result)
    j = runner_up(result)
    if j is not None:
        lines += _diff_lines(result, j)
    rows: list[dict] = []
    if with_sensitivity:
        rows = sensitivity(result)
        lines.append(f"Sensitivity (the {len(result)} kept layouts re-evaluated):")
        lines += sensitivity_lines(rows, short(lay))
    lines += caveats(result)
    return lines, rows


__all__ = ["SCENARIOS", "STRUCTURE", "STEP_TERMS", "explain", "graph_text", "term_deltas", "runner_up", "scale_tier_bandwidth", "sensitivity", "short"]
