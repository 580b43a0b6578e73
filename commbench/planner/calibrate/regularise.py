"""A user's calibration (`commbench calibrate RUNS -O FILE`) that says what it changed and how far to trust it.

Three guards against a fit that moves terms no row determines (one log moved four of 14 terms, one to
its bound, and reported 0% in-sample error):
- only as many terms as the runs determine: the columns of the Jacobian d log(predicted tokens/s) /
  d log(term) over the distinct runs are chosen by pivoted Gram-Schmidt (the term that explains most
  first, then the one most independent of those chosen), at most one term per distinct run; terms
  with no effect on any run are held;
- a Gaussian prior in log space toward the start (shipped) terms (ridge regression): with runs
  scattered by ROW_SIGMA and a prior width PRIOR_SIGMA per term, the penalty added to the mean Huber
  loss (fit.fit_loss, 0.5 err^2 near 0) is 0.5 (ROW_SIGMA/PRIOR_SIGMA)^2 / n * sum(log(v/v0)^2);
- leave-one-out: each distinct run is predicted by a fit on the others (median |error| reported beside
  the in-sample one), and a term that ends at its physical bound (fit.BOUNDS) is named.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from commbench.planner.calibrate.published import PublishedRun, predict_runs
from commbench.planner.calibrate.fit import BOUNDS, coordinate_search, fit_loss, fit_weights
from commbench.planner.step.terms import FITTED_TERMS, Calibration

ROW_SIGMA = 0.05     # a run's log error the model is expected to carry (its median error is 3-7%)
PRIOR_SIGMA = 0.25   # how far (log) a shipped term may move before the prior costs one row's typical error
MOVED_PCT = 0.5      # a term that changed by less than this (percent) is reported as unchanged
JACOBIAN_STEP = 0.05
MIN_INFLUENCE = 1e-3  # d log(tokens) / d log(term) below this on every run: the runs cannot see the term
LOO_MAX_RUNS = 12     # leave-one-out refits at most this many runs (each refit is a full fit)


@dataclass(frozen=True, kw_only=True)
class FitReport:
    fitted: Calibration
    terms_fitted: tuple[str, ...]
    terms_held: dict[str, str]                     # term -> why it kept its start value
    moved: list[dict] = field(default_factory=list)
    at_bound: list[dict] = field(default_factory=list)
    num_distinct_runs: int = 0
    loo_abs_error_pct: list[float] | None = None   # one per distinct run (None: too few or too many runs)
    loo_note: str = ""


def run_key(r: PublishedRun) -> tuple:
    """What makes rows one run to the fit: (model and the pipeline split it ran, system, GPUs, sequence length, layout
    with its precision and recipe), whatever their release: distinct_runs keeps one, leave-one-out holds them out together (_same), and
    `calibrate` warns where their tokens/s/GPU disagree (cli/calibrate._warn_repeats_disagree)."""
    return (r.model.name, r.model.pinned_split, r.preset, int(r.row["num_gpus"]), int(r.row["seq_len"]), r.layout)


def distinct_runs(runs: list[PublishedRun]) -> list[PublishedRun]:
    """One run per run_key (model, system, GPUs, sequence length, layout): repeats of a run determine no new term."""
    seen, out = set(), []
    for r in runs:
        key = run_key(r)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def influence(runs: list[PublishedRun], start: Calibration, terms=FITTED_TERMS) -> np.ndarray:
    """(runs x terms) d log(predicted tokens/s/GPU) / d log(term), by a one-sided finite difference
    toward the inside of the term's bounds."""
    base = np.log(np.maximum(predict_runs(runs, start).predicted_tokens, 1e-12))
    cols = []
    for name in terms:
        value, (lo, hi) = getattr(start, name), BOUNDS[name]
        if value <= 0:
            trial = hi * JACOBIAN_STEP
            step = 1.0   # from zero: the change per "unit" of the bound's 5%
        else:
            factor = 1 + JACOBIAN_STEP if value * (1 + JACOBIAN_STEP) <= hi else 1 / (1 + JACOBIAN_STEP)
            trial, step = value * factor, np.log(factor)
        pred = predict_runs(runs, start.with_values(**{name: float(trial)})).predicted_tokens
        cols.append((np.log(np.maximum(pred, 1e-12)) - base) / step)
    return np.stack(cols, axis=1) if cols else np.zeros((len(runs), 0))


def choose_terms(jac: np.ndarray, terms=FITTED_TERMS, max_terms: int | None = None) -> tuple[list[str], dict[str, str]]:
    """Pivoted Gram-Schmidt on the Jacobian's columns: the terms the runs determine, at most one per run."""
    n = jac.shape[0] if max_terms is None else max_terms
    held: dict[str, str] = {}
    residual = jac.astype(float).copy()
    norms0 = np.linalg.norm(jac, axis=0)
    for k, name in enumerate(terms):
        if norms0[k] < MIN_INFLUENCE:
            held[name] = "no run depends on it"
    chosen: list[int] = []
    while len(chosen) < n:
        norms = np.linalg.norm(residual, axis=0)
        norms[chosen] = 0
        norms[norms0 < MIN_INFLUENCE] = 0
        k = int(np.argmax(norms))
        if norms[k] < max(MIN_INFLUENCE, 1e-3 * norms0.max()):
            break
        chosen.append(k)
        q = residual[:, k] / norms[k]
        residual -= np.outer(q, q @ residual)
    for k, name in enumerate(terms):
        if k not in chosen and name not in held:
            held[name] = f"{jac.shape[0]} distinct run(s) determine {len(chosen)} term(s); others explain more"
    return [terms[k] for k in sorted(chosen)], held


def _penalised_loss(runs, cal: Calibration, start: Calibration, terms, weights, strength: float) -> float:
    prior = sum(np.log(getattr(cal, t) / getattr(start, t)) ** 2 for t in terms if getattr(start, t) > 0)
    return fit_loss(runs, cal, weights) + strength * prior


def fit_regularised(runs: list[PublishedRun], start: Calibration, terms: list[str], rounds: int = 5) -> Calibration:
    """Coordinate search (fit.coordinate_search) on the Huber loss plus the log-space prior."""
    weights = fit_weights(runs)
    strength = 0.5 * (ROW_SIGMA / PRIOR_SIGMA) ** 2 / max(len(distinct_runs(runs)), 1)
    return coordinate_search(runs, start, terms, rounds,
                             loss=lambda cal: _penalised_loss(runs, cal, start, terms, weights, strength))


def moved_terms(start: Calibration, fitted: Calibration, terms=FITTED_TERMS) -> list[dict]:
    out = []
    for name in terms:
        a, b = getattr(start, name), getattr(fitted, name)
        change = (b / a - 1) * 100 if a else (float("inf") if b else 0.0)
        if abs(change) >= MOVED_PCT:
            out.append({"term": name, "start": a, "fitted": b, "change_pct": change})
    return out


def terms_at_bound(fitted: Calibration, terms) -> list[dict]:
    out = []
    for name in terms:
        lo, hi = BOUNDS[name]
        value = getattr(fitted, name)
        for side, bound in (("lower", lo), ("upper", hi)):
            if abs(value - bound) <= 1e-9 * max(abs(bound), 1e-12):
                out.append({"term": name, "value": value, "bound": side})
    return out


def _abs_error_pct(runs, cal) -> np.ndarray:
    p = predict_runs(runs, cal)
    return p.abs_pct_error


def fit_chosen_terms(runs: list[PublishedRun], start: Calibration) -> tuple[Calibration, list[str], dict[str, str]]:
    """The fit calibrate writes: the terms the distinct runs determine (choose_terms, at most one per distinct run),
    fitted toward `start` (fit_regularised); the others held, each with why. Leave-one-out refits with this same
    procedure (it refitted with 3 rounds against the fit's 5, and reported 0.7% against an in-sample 1.2%)."""
    distinct = distinct_runs(runs)
    chosen, held = choose_terms(influence(distinct, start), FITTED_TERMS, max_terms=len(distinct))
    return (fit_regularised(runs, start, chosen) if chosen else start), chosen, held


def calibrate_report(runs: list[PublishedRun], start: Calibration, *, loo: bool = True) -> FitReport:
    """Choose the terms the runs determine, fit them toward `start`, and report moves, bounds and LOO error."""
    modelled = [r for r in runs if r.layout is not None]
    if not modelled:
        raise ValueError("no modelled runs to fit")
    distinct = distinct_runs(modelled)
    fitted, chosen, held = fit_chosen_terms(modelled, start)
    loo_errors, note = None, ""
    if not loo:
        note = "not run (--no-loo)"
    elif len(distinct) < 2:
        note = "needs at least 2 distinct runs (one run cannot be predicted by a fit on none)"
    elif len(distinct) > LOO_MAX_RUNS:
        note = f"skipped: {len(distinct)} distinct runs (refits at most {LOO_MAX_RUNS}; each refit is a full fit)"
    else:
        loo_errors = []
        for i, held_out in enumerate(distinct):
            train = [r for r in modelled if not _same(r, held_out)]
            cal = fit_chosen_terms(train, start)[0]   # the fit's own procedure: its rounds, start and term choice
            loo_errors.append(float(_abs_error_pct([held_out], cal)[0]))
    return FitReport(fitted=fitted, terms_fitted=tuple(chosen), terms_held=held,
                     moved=moved_terms(start, fitted), at_bound=terms_at_bound(fitted, chosen),
                     num_distinct_runs=len(distinct), loo_abs_error_pct=loo_errors, loo_note=note)


def _same(a: PublishedRun, b: PublishedRun) -> bool:
    return run_key(a) == run_key(b)


__all__ = ["FitReport", "calibrate_report", "choose_terms", "distinct_runs", "fit_chosen_terms", "fit_regularised",
           "influence", "run_key"]
