"""Where a plan goes beyond the published runs. A plan's layout can sit in a regime the calibration set
tests on its system, or in one the step model only extrapolates into. Two regimes decide the largest
predicted gains over NVIDIA's tuned layouts (benchmarks/vendor_layouts.py):
- MoE expert parallelism across scale-up domains: the all-to-all crosses the scale-out network;
- FSDP on a MoE model: every micro-batch gathers the experts' weights.

For the plan's winner, `coverage_lines` names the published runs on the same system in its regime and the
step model's error on them (predicted vs published tokens/s/GPU, with the calibration in use), or says
that none exists.
"""

from __future__ import annotations

import functools

import numpy as np

from commbench.planner.calibrate.published import PublishedRun, _preset, predict_runs, published_runs
from commbench.planner.layout import placement
from commbench.planner.layout.recipes import ep_overlap_measured_slower, tp_overlap_recipes, tp_overlap_unrun

CROSS_DOMAIN_EP = "EP across scale-up domains"
MOE_FSDP = "FSDP on a MoE model"


@functools.cache
def _modelled() -> tuple[PublishedRun, ...]:
    return tuple(r for r in published_runs() if r.layout is not None)


def run_ep_domains(run: PublishedRun) -> int:
    """Scale-up domains the EP group of a published run spans on its system."""
    domain = int(_preset(run.preset, int(run.row["num_gpus"])).domain_size)
    return int(placement.ep_domains(run.layout.ep, run.layout.etp, domain))


def cross_domain_ep_runs(system: str) -> list[PublishedRun]:
    """Calibration runs on `system` (a preset name) whose EP group spans more than one scale-up domain."""
    return [r for r in _modelled() if r.preset == system and r.model.is_moe and run_ep_domains(r) > 1]


def moe_fsdp_runs(system: str) -> list[PublishedRun]:
    """Calibration runs on `system` of a MoE model trained with FSDP."""
    return [r for r in _modelled() if r.preset == system and r.model.is_moe and r.layout.fsdp]


def regimes(model, layout, ep_domains_spanned: int, system: str) -> list[tuple[str, list[PublishedRun]]]:
    """The extrapolated regimes `layout` is in (CROSS_DOMAIN_EP, MOE_FSDP), each with the calibration runs
    on `system` that are in it too (empty: untested there)."""
    if not model.is_moe:
        return []
    out = []
    if ep_domains_spanned > 1:
        out.append((CROSS_DOMAIN_EP, cross_domain_ep_runs(system)))
    if layout.fsdp:
        out.append((MOE_FSDP, moe_fsdp_runs(system)))
    return out


def _tested(what: str, runs: list[PublishedRun], system: str, calibration) -> str:
    p = predict_runs(runs, calibration)
    err = (p.predicted_tokens / p.published_tokens - 1.0) * 100.0
    worst = int(np.argmax(np.abs(err)))
    if len(runs) == 1:
        found = f"one published run on {system} in the calibration set ({p.runs[0].label}), predicted {err[0]:+.0f}%"
    else:
        found = (f"{len(runs)} published runs on {system} in the calibration set, predicted {err.min():+.0f}% to "
                 f"{err.max():+.0f}% (median {float(np.median(err)):+.0f}%; furthest {p.runs[worst].label})")
    return f"Tested: {what} has {found} against the published tokens/s/GPU."


UNTESTED_WHY = {CROSS_DOMAIN_EP: "its all-to-all cost there is the fabric model's (hardware.toml) alone, the least "
                                 "certain part of this prediction",
                MOE_FSDP: "step/fsdp.py's charge for it is not checked against a measurement there"}


def ep_overlap_slower_runs() -> list[PublishedRun]:
    """Calibration runs with the EP all-to-all overlap where published runs measured it slower
    (layout/recipes.py ep_overlap_measured_slower: the EP group inside one 8-GPU node, host launches)."""
    return [r for r in _modelled() if r.model.is_moe and r.layout.moe_a2a_overlap and bool(ep_overlap_measured_slower(
        _preset(r.preset, int(r.row["num_gpus"])).domain_size, run_ep_domains(r), r.layout.cuda_graph == "full"))]


def _measured_slower(domain_size: int, calibration) -> str:
    runs = ep_overlap_slower_runs()
    p = predict_runs(runs, calibration)
    err = (p.predicted_tokens / p.published_tokens - 1.0) * 100.0
    return (f"Measured slower: EP all-to-all overlap with the EP group inside one {domain_size}-GPU node and eager "
            f"launches (pinned here): the {len(runs)} published runs of it in the calibration set ran slower than the same "
            f"runs without it, and this model predicts them {err.min():+.0f}% to {err.max():+.0f}% too fast (it has no term for what "
            "slows it, which NVIDIA names CPU overhead; layout/recipes.py cites the runs). Megatron-Bridge r0.3.1 "
            "turned it off there, and the search does not propose it.")


def coverage_lines(*, model, layout, ep_domains: int, domain_size: int, system: str, calibration) -> list[str]:
    """One line per extrapolated regime the plan's `layout` is in: the published runs on `system` in it
    and the model's error on them, or that there are none; one where published runs contradict the
    prediction (the EP overlap inside one 8-GPU node); one for a feature no recipe runs at the precision (TP comm
    overlap at NVFP4)."""
    detail = {CROSS_DOMAIN_EP: f" (this plan's EP{layout.ep} spans {ep_domains} domains of {domain_size})",
              MOE_FSDP: " (its experts' weights gathered every micro-batch)"}
    out = []
    for regime, runs in regimes(model, layout, ep_domains, system):
        what = regime + detail[regime]
        out.append(_tested(what, runs, system, calibration) if runs else
                   f"Untested: {what} has no published run on {system} in the calibration set; {UNTESTED_WHY[regime]}.")
    if model.is_moe and layout.moe_a2a_overlap and bool(ep_overlap_measured_slower(domain_size, ep_domains,
                                                                                    layout.cuda_graph == "full")):
        out.append(_measured_slower(domain_size, calibration))
    if layout.tp_comm_overlap and layout.tp > 1 and tp_overlap_unrun(layout.precision):
        recipes = tp_overlap_recipes(layout.precision)[1]
        out.append(f"Not run: TP comm overlap at {layout.precision} (pinned here): none of the {recipes} "
                   f"Megatron-Bridge recipes with TP > 1 at {layout.precision} runs it, so no published run checks "
                   "its predicted gain, and the search does not propose it.")
    return out
