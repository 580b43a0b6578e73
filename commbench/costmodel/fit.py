"""Robust alpha-beta fits of time vs bytes, with held-out (leave-one-out) error.

The model is continuous and piecewise linear in the bus bytes x = bus_factor(n) * size:
time = alpha + x / busbw_1 up to a knot, then a new slope (busbw_2), ... Zero knots is the plain
Hockney alpha-beta line; one knot captures either a protocol switch (NCCL LL -> Simple: the slope
falls) or a cache cliff (CPU/gloo: the slope rises), which one line cannot.

Weights are relative (each point's residual is divided by its time, so 8 B and 8 GiB count the
same; equivalent to least squares in log space for small errors) and robust: iteratively
reweighted least squares with Huber weights on the relative residual (Holland & Welsch, "Robust
regression using iteratively reweighted least-squares", 1977). The knot is chosen by BIC (Schwarz 1978) on
all points; the reported error is leave-one-out with that knot count: every held-out point is
predicted by a fit (knot position and all parameters) made without it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HUBER_DELTA = 0.05  # relative residual beyond which a point's weight shrinks
MIN_POINTS_PER_SEGMENT = 4
MIN_BANDWIDTH_RATIO = 1.5  # a knot must change busbw this much (protocol switch, cache cliff), not fit noise


@dataclass(frozen=True, kw_only=True)
class PiecewiseFit:
    """time_s = latency_s + sum over segments of the bytes in that segment / its bandwidth."""

    latency_s: float
    knots_bytes: tuple[float, ...]  # x where a new segment starts (bus bytes)
    busbw_bytes_per_s: tuple[float, ...]  # one per segment, len(knots) + 1

    def predict_s(self, x_bytes: np.ndarray) -> np.ndarray:
        x = np.asarray(x_bytes, dtype=np.float64)
        edges = (0.0, *self.knots_bytes, np.inf)
        time_s = np.full(x.shape, self.latency_s)
        for lo, hi, busbw in zip(edges[:-1], edges[1:], self.busbw_bytes_per_s):
            time_s = time_s + np.clip(x - lo, 0.0, hi - lo) / busbw
        return time_s

    def segment_latencies_s(self) -> tuple[float, ...]:
        """Each segment as its own alpha-beta line: the intercept of its extension to x = 0."""
        edges = (0.0, *self.knots_bytes)
        return tuple(float(self.predict_s(np.array(lo))) - lo / bw
                     for lo, bw in zip(edges, self.busbw_bytes_per_s))


def _design(x: np.ndarray, knots: tuple[float, ...]) -> np.ndarray:
    return np.column_stack([np.ones_like(x), x] + [np.maximum(x - k, 0.0) for k in knots])


def _weighted_lstsq(design: np.ndarray, target: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted least squares through the (column-scaled) normal equations: a few parameters, many
    small solves, so this beats lstsq's SVD; lstsq is the fallback when the system is singular."""
    weighted = design * weights[:, None]
    scale = np.sqrt(np.einsum("ij,ij->j", design, weighted))
    scale[scale == 0] = 1.0
    gram = (design / scale).T @ (weighted / scale)
    try:
        return np.linalg.solve(gram, (weighted / scale).T @ target) / scale
    except np.linalg.LinAlgError:
        sqrt_w = np.sqrt(weights)
        return np.linalg.lstsq(design * sqrt_w[:, None], target * sqrt_w, rcond=None)[0]


def _solve(x: np.ndarray, t: np.ndarray, knots: tuple[float, ...], iters: int = 10) -> tuple[PiecewiseFit, float] | None:
    """IRLS with relative Huber weights; None if the fit is not physical (a slope <= 0)."""
    design = _design(x, knots) / t[:, None]
    target = np.ones_like(t)
    robust = np.ones_like(t)
    coef = None
    for _ in range(iters):
        coef = _weighted_lstsq(design, target, robust)
        if coef[0] < 0:  # latency cannot be negative: refit without it
            coef = np.concatenate([[0.0], _weighted_lstsq(design[:, 1:], target, robust)])
        resid = design @ coef - target
        new_robust = np.minimum(1.0, HUBER_DELTA / np.maximum(np.abs(resid), 1e-12))
        if np.max(np.abs(new_robust - robust)) < 1e-2:
            break
        robust = new_robust
    slopes = np.cumsum(coef[1:])
    if np.any(slopes <= 0):
        return None
    abs_resid = np.abs(design @ coef - target)
    huber = np.where(abs_resid <= HUBER_DELTA, 0.5 * abs_resid**2, HUBER_DELTA * (abs_resid - 0.5 * HUBER_DELTA))
    loss = float(np.mean(huber))  # comparable across knot choices, unlike the reweighted squares
    fit = PiecewiseFit(latency_s=float(coef[0]), knots_bytes=tuple(float(k) for k in knots),
                       busbw_bytes_per_s=tuple(float(1.0 / s) for s in slopes))
    return fit, loss


def fit_piecewise(x_bytes: np.ndarray, time_s: np.ndarray, *, num_knots: int | None = None) -> PiecewiseFit:
    """The best fit with `num_knots` (0 or 1) knots at measured sizes, >= 4 points a side (the knot
    included); by default the number is chosen by BIC (Schwarz 1978), a knot only counting if it
    changes busbw by >= 1.5x (protocol switch, cache cliff), not to chase noise."""
    order = np.argsort(x_bytes)
    x = np.asarray(x_bytes, dtype=np.float64)[order]
    t = np.asarray(time_s, dtype=np.float64)[order]
    if len(x) < 2 or np.all(x == x[0]):
        raise ValueError("need >= 2 distinct sizes to fit latency and bandwidth")
    knot_sets = [(float(k),) for k in x[MIN_POINTS_PER_SEGMENT - 1:len(x) - MIN_POINTS_PER_SEGMENT + 1]]
    candidates = {None: [()] + knot_sets, 0: [()], 1: knot_sets or [()]}[num_knots]
    best, best_score = None, np.inf
    for knots in candidates:
        solved = _solve(x, t, knots)
        if solved is None:
            continue
        fit, loss = solved
        bandwidths = fit.busbw_bytes_per_s
        if num_knots is None and len(bandwidths) > 1 and max(bandwidths) / min(bandwidths) < MIN_BANDWIDTH_RATIO:
            continue
        num_params = 2 + 2 * len(knots)  # a knot's position is a parameter too
        score = len(x) * np.log(max(loss, 1e-12)) + np.log(len(x)) * num_params
        if score < best_score:
            best, best_score = fit, score
    if best is None:  # every fit had a non-positive slope: time does not grow with size
        slope = max(float(np.median(np.diff(t) / np.maximum(np.diff(x), 1e-30))), 1e-30)
        best = PiecewiseFit(latency_s=float(max(np.median(t - slope * x), 0.0)), knots_bytes=(),
                            busbw_bytes_per_s=(1.0 / slope,))
    return best


def leave_one_out_errors(x_bytes: np.ndarray, time_s: np.ndarray, *, num_knots: int | None = None) -> np.ndarray:
    """|predicted / measured - 1| for each point, predicted by a fit made without it (NaN where
    fewer than 3 points remain). Pass the knot count chosen on all points to hold the model's
    structure fixed (the knot's position and every parameter are still refitted per fold)."""
    x = np.asarray(x_bytes, dtype=np.float64)
    t = np.asarray(time_s, dtype=np.float64)
    errors = np.full(len(x), np.nan)
    if len(x) < 4:
        return errors
    for i in range(len(x)):
        keep = np.arange(len(x)) != i
        try:
            fit = fit_piecewise(x[keep], t[keep], num_knots=num_knots)
        except ValueError:
            continue
        errors[i] = abs(float(fit.predict_s(x[i])) / t[i] - 1.0)
    return errors
