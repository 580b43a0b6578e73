"""NVIDIA's tuned layout beside the plan: where the searched release's Megatron-Bridge performance recipe covers the
request (its model, GPU, precision and GPU count; layout/recipes.py, commbench/data/recipes.json, cited per entry),
that recipe's layout is predicted with the same step model and ranked among the search's fitting layouts, and the
plan's predicted gain over it is weighed against the model's MEASURED error of a predicted gain (pinned_gap.
gain_verdict). All figures are predicted.

Why: the recipe's layout was tuned on the hardware. A plan predicted far faster than it is more likely a model error
than a find (benchmarks/vendor_layouts.py measures how often), so the user sees the tuned layout, its rank and what
the gain is worth before choosing. Only for a Megatron-LM plan searched without pins (the recipes are Megatron-
Bridge's; a pinned search answers another question) and a recipe for exactly the requested GPU count (its
parallelism was tuned at that scale); the recipe's global batch may differ from the request's, and is then noted.
Only at the sequence length the recipe trains at (recipe_model.recipe_seq_len): at another, its layout and batch
were tuned for other GEMM and activation sizes, so the comparison is refused with a line naming both lengths.
"""

from __future__ import annotations

from commbench.planner.layout.spec import Layout, LayoutArrays
from commbench.planner.search.explain import short
from commbench.planner.search.pinned_gap import versus_best
from commbench.planner.search.space import SearchResult


def recipe_entry_for(result: SearchResult) -> dict | None:
    """The searched release's recipe entry for the request (model, GPU, precision, GPU count; the default variant
    on a tie), or None: no such recipe, another framework, or pins."""
    from commbench.planner.layout.recipes import recipe_entry, resolve_release
    req = result.request
    if req.framework != "megatron" or req.pins or req.fabric.gpu is None:
        return None
    stand, _ = resolve_release(req.software)
    if stand is None:
        return None
    from commbench.planner.layout.recipe_model import recipe_model
    entry = recipe_entry(stand, recipe_model(req.model), req.fabric.gpu.name, req.precision,
                         {"num_gpus": req.num_gpus, "gbs": req.gbs})
    if entry is None or int(entry["num_gpus"]) != req.num_gpus:
        return None
    return entry


def recipe_layout(result: SearchResult, entry: dict) -> Layout:
    """The recipe's layout at the request's global batch: its structure, and its flags as calibration reads a
    published run of that release (recipes.recipe_for: the recipe's own sizes, so its offload and block-recompute
    counts carry)."""
    from commbench.planner.layout.recipe_model import recipe_model
    from commbench.planner.layout.recipes import MATCH_KEYS, recipe_for
    req = result.request
    flags = recipe_for(req.software, recipe_model(req.model), req.fabric.gpu.name, req.precision,
                       {k: entry[k] for k in MATCH_KEYS})
    flags = {k: v for k, v in flags.items() if k in Layout.__dataclass_fields__ and k != "fsdp_replicas"}   # below
    tp, pp, cp = int(entry["tp"]), int(entry["pp"]), int(entry.get("cp") or 1)
    fsdp = bool(entry.get("fsdp"))
    return Layout(tp=tp, pp=pp, vp=int(entry.get("vp") or 1), ep=int(entry.get("ep") or 1),
                  etp=int(entry.get("etp") or 1) if req.model.is_moe else tp, cp=cp,
                  dp=req.num_gpus // (tp * pp * cp), mbs=int(entry["mbs"]), gbs=req.gbs, precision=req.precision,
                  fsdp=fsdp, fsdp_replicas=int(entry.get("fsdp_replicas") or 1) if fsdp else 1, **flags)


def versus_recipe(result: SearchResult) -> dict | None:
    """The recipe's layout against the plan (pinned_gap.versus_best's fields, plus where the recipe comes from), or
    None when no recipe covers the request; {"unavailable": why} when its layout cannot run at the request."""
    from commbench.planner.step.evaluate import evaluate_layouts
    entry = recipe_entry_for(result)
    if entry is None:
        return None
    from commbench.planner.layout.recipe_model import recipe_seq_len
    req = result.request
    seq, recipe_seq = req.seq_len or req.model.seq_len, recipe_seq_len(entry["model"])
    where = {"recipe_release": entry["release"], "recipe_config": entry["config"],
             "recipe_source": f"https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/{entry['commit']}/{entry['file']}",
             "recipe_gbs": int(entry["gbs"]), "gbs": req.gbs, "recipe_seq_len": recipe_seq, "seq_len": seq,
             "recipe_model": entry["model"], "model": req.model.name}
    if recipe_seq != seq:   # its layout and batch were tuned at its length: a rank or gain at another is no comparison
        return where | {"unavailable": f"it trains at seq_len {recipe_seq} and this plan is at {seq}; its layout and "
                                       f"global batch were tuned at {recipe_seq}, so a rank or gain at {seq} is not "
                                       f"like-for-like (plan with --seq-len {recipe_seq} to compare)"}
    if req.num_gpus % (int(entry["tp"]) * int(entry["pp"]) * int(entry.get("cp") or 1)):
        return where | {"unavailable": "its tp*pp*cp does not divide the GPU count"}
    lay = recipe_layout(result, entry)
    # as the recipe runs: Megatron-Bridge's TE cross entropy (step/loss_memory.py run_loss)
    from commbench.planner.step.loss_memory import run_loss
    bd = evaluate_layouts(req.model, req.fabric, LayoutArrays.from_layouts([lay]), seq_len=req.seq_len,
                          calibration=req.calibration, moe_imbalance=req.moe_imbalance,
                          moe_capacity_factor=req.moe_capacity_factor, framework=req.framework,
                          loss=run_loss(req.framework))
    if not bool(bd.valid[0]):
        return where | {"recipe_layout": short(lay), "unavailable": f"its layout {short(lay)} {_broken(result, lay, bd)}"}
    out = where | {"recipe_layout": short(lay), "recipe_flags": _flags(lay), "recipe_pins": _pins(lay, req.model)} \
        | versus_best(result, bd)
    if lay.fp8_attention and not result.layouts.layout(0).fp8_attention and out["best_gain_pct"] < 0:
        out["with_fp8_attention"] = _with_fp8_attention(result)
    return out


def _with_fp8_attention(result: SearchResult) -> dict:
    """The search again with fp8_attention pinned, where the recipe runs it and the plan does not: the search leaves
    it off unless pinned (it changes numerics: pinned_gap.DEFAULT_REASONS), so the user sees what that choice costs
    by the same model. {"unavailable": why} when no layout can run it here."""
    import dataclasses

    from commbench.errors import CommbenchError
    from commbench.planner.search.space import search
    try:
        pinned = search(dataclasses.replace(result.request, pins={"fp8_attention": True}, keep=1))
    except CommbenchError as exc:
        return {"unavailable": str(exc)}
    best, plan = float(pinned.fitting_tokens_desc[0]), float(result.fitting_tokens_desc[0])
    return {"best_layout": short(pinned.layouts.layout(0)), "tokens_per_s_per_gpu": best,
            "gain_pct": (best / plan - 1.0) * 100.0}


def _broken(result: SearchResult, lay: Layout, bd) -> str:
    """Which layout rule the recipe's layout breaks at the request, in RULES' words with the values."""
    from commbench.planner.layout.spec import first_broken_rule, rule_detail
    req, name = result.request, first_broken_rule(int(bd.violations[0]))
    if not name:   # valid by the rules, but the GPU has no such precision (no peak): the search refuses it too
        return f"cannot run {req.precision} on {req.fabric.gpu.name}"
    return f"breaks the {name} rule here: {rule_detail(name, req.model, lay, req.num_gpus, req.seq_len, req.framework)}"


def _pins(lay: Layout, model) -> str:
    """The recipe's structure as `plan --layout` takes it (the search then chooses the flags the target framework
    runs, and prints its arguments)."""
    fields = ("tp", "pp", "vp", "ep", "etp", "cp", "mbs") if model.is_moe else ("tp", "pp", "vp", "cp", "mbs")
    return ",".join(f"{name}={getattr(lay, name)}" for name in fields)


def _flags(lay: Layout) -> str:
    parts = [f"cuda_graph={lay.cuda_graph}" + (f"({lay.cuda_graph_scope})" if lay.cuda_graph_scope else "")]
    parts += [name for name, on in (("fused_moe", lay.fused_moe), ("moe_a2a_overlap", lay.moe_a2a_overlap and lay.ep > 1),
                                     ("tp_comm_overlap", lay.tp_comm_overlap and lay.tp > 1),
                                     ("fp8_attention", lay.fp8_attention)) if on]
    return " ".join(parts)


def versus_recipe_lines(v: dict | None) -> list[str]:
    """The plan's lines about the recipe's layout ([] when no recipe covers the request)."""
    if v is None:
        return []
    head = f"NVIDIA's tuned layout (Megatron-Bridge {v['recipe_release']} recipe {v['recipe_config']}"
    if v.get("recipe_model", v.get("model")) != v.get("model"):   # hf:PATH reading a zoo model's recipe (recipe_model)
        head += f" for {v['recipe_model']}, whose architecture {v['model']} has"
    if "unavailable" in v:
        return [f"{head}): not compared, {v['unavailable']}."]
    batch = ("" if v["recipe_gbs"] == v["gbs"] else
             f" (the recipe's global batch is {v['recipe_gbs']:,}; compared at this plan's {v['gbs']:,})")
    faster = v["best_gain_pct"] < -1e-6
    where = ("unranked: its predicted memory does not fit the HBM headroom here" if v["rank"] is None else
             f"above every one of the {v['num_fitting']:,} fitting layouts searched" if faster else
             f"rank {v['rank']:,} of {v['num_fitting']:,} fitting layouts")
    line = (f"{head}): {v['recipe_layout']} {v['recipe_flags']}, predicted {v['pinned_tokens_per_s_per_gpu']:,.0f} "
            f"tokens/s/GPU, {where}{batch}; `plan --layout {v['recipe_pins']}` gives its launch arguments.")
    gain = v["best_gain_pct"]
    if v["gain_verdict"] == "does_not_fit":   # however fast, not a choice against the fitting layouts
        return [line, "It does not fit the HBM headroom here (predicted): this plan is the fastest layout that fits."]
    if faster:
        extra = sorted(set(v["recipe_flags"].split()) - set(_flags(Layout(**v["best_layout_fields"])).split()))
        lines = [line, f"It is predicted {v['gap_pct']:.1f}% faster than this plan by what it runs that the plan does "
                       f"not ({', '.join(extra) or 'its structure'}): the notes above say which of these the target "
                       "framework cannot launch; the plan is the best the search found among what it can."]
        fp8 = v.get("with_fp8_attention")
        if fp8 and "unavailable" in fp8:
            lines.append(f"fp8_attention is off unless pinned (it changes numerics); pinned, no layout runs here: "
                         f"{fp8['unavailable']}")
        elif fp8:
            lines.append(f"fp8_attention is off unless pinned (it changes numerics): with `--layout "
                         f"fp8_attention=true` the best is {fp8['best_layout']} at {fp8['tokens_per_s_per_gpu']:,.0f} "
                         f"tokens/s/GPU ({fp8['gain_pct']:+.1f}% over this plan, predicted).")
        return lines
    same = v["recipe_layout"] == v["best_layout"]
    verdict = {"best": "This plan is the recipe's layout." if same else "It is predicted as fast as this plan.",
               "tie": f"This plan's predicted gain over it, {gain:+.1f}%, is a tie (within the model's median error "
                      f"of a predicted gain, {v['gain_error_median_pct']:.1f}%): prefer the tuned layout unless you "
                      "measure otherwise (verify-plan).",
               "likely": f"This plan's predicted gain over it, {gain:+.1f}%, is beyond the model's median error of a "
                         f"predicted gain ({v['gain_error_median_pct']:.1f}%) but within 4 in 5 of its errors "
                         f"({v['gain_error_p80_pct']:.1f}%): measure both (verify-plan) before switching.",
               "beyond_p80": f"This plan's predicted gain over it, {gain:+.1f}%, is beyond 4 in 5 of the model's "
                             f"errors ({v['gain_error_p80_pct']:.1f}%): a layout tuned on the hardware is more "
                             "likely right than so large a predicted gain; measure before switching."}
    return [line, verdict[v["gain_verdict"]]]


__all__ = ["recipe_entry_for", "recipe_layout", "versus_recipe", "versus_recipe_lines"]
