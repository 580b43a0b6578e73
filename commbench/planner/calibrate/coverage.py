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
from commbench.planner.layout.placement import racks_spanned


@functools.cache
def _modelled() -> tuple[PublishedRun, ...]:
    return tuple(r for r in published_runs() if r.layout is not None)


def _ep_domains(run: PublishedRun) -> int:
    domain = int(_preset(run.preset, int(run.row["num_gpus"])).domain_size)
    return int(racks_spanned(run.layout.ep * run.layout.etp, domain)) if run.layout.ep > 1 else 1


def cross_domain_ep_runs(system: str) -> list[PublishedRun]:
    """Calibration runs on `system` (a preset name) whose EP group spans more than one scale-up domain."""
    return [r for r in _modelled() if r.preset == system and r.model.is_moe and _ep_domains(r) > 1]


def moe_fsdp_runs(system: str) -> list[PublishedRun]:
    """Calibration runs on `system` of a MoE model trained with FSDP."""
    return [r for r in _modelled() if r.preset == system and r.model.is_moe and r.layout.fsdp]


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


def coverage_lines(*, model, layout, ep_domains: int, domain_size: int, system: str, calibration) -> list[str]:
    """One line per extrapolated regime the plan's `layout` is in: the published runs on `system` in it
    and the model's error on them, or that there are none."""
    out = []
    if model.is_moe and ep_domains > 1:
        what = f"EP across scale-up domains (this plan's EP{layout.ep} spans {ep_domains} domains of {domain_size})"
        runs = cross_domain_ep_runs(system)
        out.append(_tested(what, runs, system, calibration) if runs else
                   f"Untested: {what} has no published run on {system} in the calibration set; its all-to-all "
                   "cost there is the fabric model's (hardware.toml) alone, the least certain part of this "
                   "prediction.")
    if model.is_moe and layout.fsdp:
        what = "FSDP on a MoE model (its experts' weights gathered every micro-batch)"
        runs = moe_fsdp_runs(system)
        out.append(_tested(what, runs, system, calibration) if runs else
                   f"Untested: {what} has no published run on {system} in the calibration set; step/fsdp.py's "
                   "charge for it is not checked against a measurement there.")
    return out
