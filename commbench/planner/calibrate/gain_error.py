"""What a predicted gain of one layout over another is worth, MEASURED on published runs.

NVIDIA publishes one layout per run and release, and retunes it between releases: where two published rows are
the same run (model, system, GPU count, precision, sequence, global batch: `run_key`) with different layout
structures (`run_structure`), the ratio of their published throughputs is a measured gain, and the ratio of the
model's predictions for them (each with its own release's recipe) is the predicted one. The error of a predicted
gain is |log(predicted ratio) - log(published ratio)|, software moves between the releases included (every such
pair in the tables is across releases: there is no same-release pair of layouts to measure). Its median per
family is the band `plan` states for a gain (step.terms.MODEL_GAIN_MEDIAN_ABS_ERROR; benchmarks/vendor_layouts.py
measures it on the calibration, held-out GB300 and newer-release tables).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commbench.planner.calibrate.published import PublishedRun, predict_runs
from commbench.planner.layout.spec import STRUCTURE
from commbench.planner.step.terms import CALIBRATED, Calibration



def run_key(run: PublishedRun) -> tuple:
    """What makes two published rows the same run: model, system, GPU count, precision, sequence, global batch."""
    lay = run.layout
    return (run.model.name, run.preset, int(run.row["num_gpus"]), lay.precision, int(run.row["seq_len"]), lay.gbs)


def run_structure(run: PublishedRun) -> tuple:
    """The row's layout structure (layout.spec.STRUCTURE)."""
    return tuple(getattr(run.layout, name) for name in STRUCTURE)


@dataclass(frozen=True)
class GainError:
    """One pair of published layouts of one run: |log error| of the predicted gain, and the model family."""
    error: float
    moe: bool
    model: str
    releases: tuple[str, str]


def layout_pair_errors(runs: list[PublishedRun], cal: Calibration = CALIBRATED) -> list[GainError]:
    """Every pair of modelled published rows of one run with different structures, one pair per (run, structures,
    releases), each row predicted with its own release's recipe."""
    p = predict_runs(runs, cal)
    items = [(run_key(run), run_structure(run), str(run.row.get("release") or ""), float(p.published_tokens[j]),
              float(p.predicted_tokens[j]), run) for j, run in enumerate(p.runs)]
    seen, out = set(), []
    for i, a in enumerate(items):
        for b in items[i + 1:]:
            key = (a[0], frozenset(((a[1], a[2]), (b[1], b[2]))))
            if a[0] != b[0] or a[1] == b[1] or key in seen:
                continue
            seen.add(key)
            error = abs(np.log(b[4] / a[4]) - np.log(b[3] / a[3]))
            out.append(GainError(error=float(error), moe=a[5].model.is_moe, model=a[5].model.name,
                                 releases=(a[2], b[2])))
    return out


def gain_error_quantile(pairs: list[GainError], q: float) -> dict[str, float]:
    """The q-quantile of the error of a predicted gain per family ("moe", "dense"); a family with no pair takes every
    pair's."""
    every = float(np.quantile([p.error for p in pairs], q)) if pairs else float("nan")
    out = {}
    for family, moe in (("moe", True), ("dense", False)):
        errors = [p.error for p in pairs if p.moe == moe]
        out[family] = float(np.quantile(errors, q)) if errors else every
    return out


def median_gain_error(pairs: list[GainError]) -> dict[str, float]:
    """Median error of a predicted gain per family: the band `plan` states (gain_error_quantile at 0.5)."""
    return gain_error_quantile(pairs, 0.5)


__all__ = ["GainError", "gain_error_quantile", "layout_pair_errors", "median_gain_error", "run_key", "run_structure"]
