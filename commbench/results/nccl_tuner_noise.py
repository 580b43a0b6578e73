"""The noise bar of one point's statistic for `nccl-tuner`, stricter than `commbench compare`'s (noise.within_run_sd).

A rule forces a combination on every call of its sizes, so a bar that is too narrow makes NCCL slower; the compare
gate's bars are calibrated on its own A/A runs (README's gate table) and stay as they are. Two differences:

* Autocorrelated samples. The lag-1 autocorrelation r1 of n samples is biased low, by about (1 + 4 rho) / n for an
  AR(1) series with its mean estimated (Kendall 1954, "Note on bias in the estimation of autocorrelation",
  Biometrika 41:403-404; Marriott & Pope 1954, Biometrika 41:390-402): rho is estimated as r1 + (1 + 4 r1) / n,
  capped at RHO_CAP. The samples count as n_eff = n (1 - rho) / (1 + rho) independent ones (Wilks, Statistical
  Methods in the Atmospheric Sciences, 3rd ed., 5.2.4); the interval is widened by sqrt(n / n_eff) and its
  quantile is Student's t on n_eff - 1 degrees of freedom instead of the normal z (Wilks 5.2.4 again: the t test on
  the effective sample size). Fewer than MIN_EFFECTIVE_ITERATIONS effective samples: the noise is unknown (no rule),
  as with fewer iterations (nccl_tuner.MIN_ITERS_FOR_NOISE).
* The min. Its sampling spread comes from the lowest tail of the samples, which the samples barely show: the
  compare gate's x(1)..x(3) interval gives 0.75x its true spread at 5% log-normal noise (0.020/0.015/0.012 vs
  0.027/0.021/0.019 log sd at n = 20/100/500). Here the tail is taken as exponential in log time (the Gumbel domain
  of attraction, which holds for every light-tailed time): the normalised spacings j (y(j+1) - y(j)) of the lowest
  log samples are then independent exponentials of the tail's scale b (Weissman 1978, "Estimation of parameters and
  large quantiles based on the k largest observations", JASA 73:812-815, for the largest; the smallest mirror it),
  so b is their mean over the MIN_TAIL_SPACINGS lowest, and the min's sd is b pi / sqrt(6) (the sd of a Gumbel
  variable). For normal-tailed samples this reads 1.2-1.5x the true spread (deeper spacings are wider), and a time
  with a hard floor (a latency cannot drop below its wire time) has a narrower min still: the bar errs wide, which
  covers the estimate's own sampling error (benchmarks/tuner_false_rules.py measures both).
"""

from __future__ import annotations

import math

import numpy as np

from commbench.results.noise import Z95, mean_interval, median_interval, t_quantile

RHO_CAP = 0.99
# the median's distribution-free 95% interval needs 6 samples (nccl_tuner.MIN_ITERS_FOR_NOISE); so do effective ones
MIN_EFFECTIVE_ITERATIONS = 6.0
MIN_TAIL_SPACINGS = 5


def effective_iterations(values: np.ndarray) -> tuple[float, float]:
    """(n_eff, rho): the bias-corrected lag-1 autocorrelation of the log samples (clipped to [0, RHO_CAP]) and the
    AR(1) effective sample size n (1 - rho) / (1 + rho)."""
    logs = np.log(values)
    n = len(logs)
    centred = logs - logs.mean()
    denom = float(np.dot(centred, centred))
    r1 = float(np.dot(centred[:-1], centred[1:])) / denom if denom > 0 else 0.0
    rho = min(max(r1 + (1 + 4 * r1) / n, 0.0), RHO_CAP)
    return n * (1 - rho) / (1 + rho), rho


def min_spread_sd(values: np.ndarray, spacings: int = MIN_TAIL_SPACINGS) -> float:
    """The log-space sd of the min of `values` (independent samples) from the exponential tail fitted to its lowest
    spacings: b = mean of j (y(j+1) - y(j)), j = 1..k, y the sorted logs; sd = b pi / sqrt(6)."""
    lowest = np.sort(np.log(values))[:min(spacings, len(values) - 1) + 1]
    j = np.arange(1, len(lowest))
    return math.pi / math.sqrt(6) * float(np.dot(j, np.diff(lowest))) / len(j)


def tuner_point_sd(samples, statistic: str) -> float | None:
    """The log-space sd of a point's statistic ("median", "mean" or "min") from its per-iteration samples, for a
    rule's bar (the module docstring): inf where the samples hold fewer than MIN_EFFECTIVE_ITERATIONS effective ones,
    None without >= 2 positive samples."""
    values = np.asarray(samples, dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    if len(values) < 2:
        return None
    n_eff, rho = effective_iterations(values)
    if n_eff < MIN_EFFECTIVE_ITERATIONS:
        return math.inf
    widen = math.sqrt((1 + rho) / (1 - rho)) * t_quantile(0.975, n_eff - 1) / Z95
    if statistic == "min":
        return min_spread_sd(values) * widen
    if statistic == "median":
        low, high = median_interval(values)
        mid = float(np.median(values))
    elif statistic == "mean":
        low, high = mean_interval(values)
        mid = float(np.mean(values))
    else:
        raise ValueError(f"statistic={statistic!r} is invalid: allowed median, mean, min")
    low = max(low, mid * 1e-6)
    return max(math.log(mid / low), math.log(high / mid)) / Z95 * widen
