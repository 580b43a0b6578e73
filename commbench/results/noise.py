"""The noise a regression gate must allow: within one run, and between repeated runs.

Within a run: the uncertainty of a point's statistic from its per-iteration samples (for the median
the distribution-free order-statistic interval: the j-th and (n+1-j)-th smallest samples, j the
largest with P(Binomial(n, 1/2) < j) <= 2.5%; Hollander & Wolfe, Nonparametric Statistical Methods,
ch. 3; for p10 the same for the 0.1 quantile; for the min the 1/n quantile's upper side, the interval
being open below the fastest sample; for nccl-tests' time, a mean, mean +- 1.96 standard errors). It describes noise inside one
run only: iterations are autocorrelated and whole runs differ by more (load, clocks, rank placement).

Between runs, in log time (a two-way layout without replication, runs x points; Montgomery, Design
and Analysis of Experiments, ch. 4, the randomized complete block design):
    x[r, k] = mu_k + s_r + e[r, k]
`s_r` is the shift every point of run r shares (sd `sigma_run`), `e` a point's own scatter (sd
`sigma_k`, per point, shrunk towards the pooled value with NU0 prior degrees of freedom). Each set of
repeated runs is centred on its own point means; the sums of squares are pooled over the sets:
    sigma_e^2 = SS_residual / ((R-1)(K-1)),   sigma_run^2 = sum_r s_r^2 / (R-1) - sigma_e^2 / K,
the latter shrunk towards a prior shift (SHIFT_PRIOR_RATIO x sigma_e, worth min(df of sigma_e,
SHIFT_PRIOR_DF) degrees of freedom: a scaled inverse-chi^2 prior, its posterior
(nu0 s0^2 + sum (R-1) sigma_run^2) / (nu0 + sum (R-1)) at nu0 + sum (R-1) df; Gelman et al., Bayesian Data
Analysis, 3rd ed., 3.3), so that a second baseline run adds to what one run is judged with instead of
replacing it by one shift at 1 df. A test's noise that sums the shift and the points' scatter takes the
Welch-Satterthwaite df of the two parts (RunToRun.shift_and_scatter_df).
The run shift comes from baseline sets only (BASE's runs, the --history folder's): a slow run of NEW
is the news, not noise. The points' own scatter `e` comes from NEW's repeated runs too: each NEW run's
shift is removed first, so a slowdown all of NEW's runs share (at one point or at all) leaves it
unchanged, and the two sides' residuals pool as in the two-sample t test.

Without repeated baseline runs the run shift cannot be told from a regression of the whole
collective: its sd is assumed (ASSUMED_SHIFT_PER_POINT_SD x the points' scatter, said in the output),
and a point is judged against its run's other points rather than against BASE. With no repeated run
anywhere (one run in BASE, one in NEW, no history) the points' scatter still shows in the pair itself:
each point's log ratio d_k = s + e_nk - e_bk (sd sigma_point * sqrt(2) about s), so the differences d_i - d_j
of two points of one collective are free of the run shift s. `pair_scatter` reads the scale of d_k / sqrt(2) from
those pairwise distances, as Rousseeuw & Croux's Qn does (1993, "Alternatives to the median absolute
deviation", JASA 88:1273-1283): the k-th smallest of the n(n-1)/2 distances |d_i - d_j| of a collective's n
points, k = C(h, 2), times 1 / (sqrt(2) Phi^-1(5/8)) = 2.21914 (k / C(n, 2) -> 1/4, the quartile of |X - Y|
for X, Y normal) and a small-sample factor c_n. Qn takes h = floor(n/2) + 1; here h = ceil(n/2) (the same
for odd n). Why: the k-th smallest of all the pairs is at most the k-th smallest of the pairs within any h of
the points, so whatever the other n - h >= floor(n/2) points do, the estimate is at most what the h points
they left alone give: at most their largest pairwise distance (their range) when exactly half moved, each by
its own factor; their own scatter (or less) when the moved points moved by one factor, since then the moved
points' pairs are as close as the untouched ones' (C(m,2) + C(n-m,2) >= C(h,2) for every m: a uniform step at
any share of the points cannot widen it). So the size of a change at up to half the points never enters the
noise it is judged against. (The median absolute deviation used before breaks down at exactly half: the top 4
of 8 sizes x1000 slower read as the noise, and passed.) Only a change spreading over more than half the points
by different factors can widen it, and that moves the collective's mean, its own test. c_n (E[c_n * estimate] = sigma) and the
estimate's degrees of freedom (the chi-square df with the same variance of the log: trigamma(df/2)/4) are
simulated for n <= 60 (tools/pair_scale_table.py, 10^5 normal samples per n; its odd-n factors agree within 0.6%
with Croux & Rousseeuw's d_n for Qn, 1992, Computational Statistics 1:411-428: 0.994, 0.844, 0.857, 0.872 at n =
3, 5, 7, 9), and extrapolated beyond (bias and df in proportion to 1/n and n - 1, within a parity). The df credited
is capped at the MAD's 0.37 (n - 1) (PAIR_DF_PER_POINT: the gate's noise is heavier-tailed than normal). Collectives
pool their variances weighted by their df.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

CONFIDENCE = 0.95
Z95 = 1.959964
# The prior weight (degrees of freedom) of the pooled sd in a point's own (a scaled inverse-chi^2 prior
# on the points' variances: NU0 ~ 2 / CV^2 + 4, CV the spread of the true per-point variances). Over
# 2 x 20 runs of bench all_reduce beside 2 CPU hogs (benchmarks/gate_accuracy.py) the min's per-point
# variances spread by CV 0.34 (true CV^2 0.11 after their sampling error: NU0 ~ 22) and by no more than
# their sampling error (NU0 -> infinity): points differ little in log-time noise; 16 stays below both.
NU0 = 16.0
# With no repeated baseline run the run shift is not measured. It is assumed half the points' own
# scatter: below every ratio sigma_run / sigma_point measured on repeated runs here (0.58-1.03 for the
# min: 0.61 and 1.03 over the two sets of 20, 0.58 without the first set's one x1.5 run). Said in the
# output; append repeated runs to BASE or pass --history for a measured one.
ASSUMED_SHIFT_PER_POINT_SD = 0.5
# With no estimate of the points' scatter at all (one run a side, no history, and no collective of PAIR_MIN_POINTS
# points to read it from the pair: a 1- or 2-point sweep) it is assumed: the largest point sd of the min measured on
# repeated runs here (README gate table, set D: 0.18 log sd), worth NU0 degrees of freedom, and the run shift assumed
# from it as above. Within-run intervals alone (no run-to-run part) failed 6 of 30 pairs of unchanged 2-point gloo
# sweeps and 3 of 20 of 1-point ones (probe BI: x1.15-x1.64 between unchanged runs).
ASSUMED_POINT_SD = 0.18
# With repeated baseline runs the measured run shift is shrunk towards a prior (module docstring): sd SHIFT_PRIOR_RATIO
# x the points' scatter, the top of the ratios measured here (1.03, above), so that a few runs are not assumed
# steadier than this host has been, worth SHIFT_PRIOR_DF degrees of freedom, so that from 5 baseline runs (4 shifts)
# the measurement outweighs it. On 100 A/A comparisons drawn from a model with twice that shift (sd 0.1, points
# 0.05; tests/test_compare_alpha.py) 4% failed with 2 baseline runs and 2% with 7 (at 16 df and 0.5: 14% and 8%);
# it keeps the collective test from t(1) with 2 runs, which let x5 at every point pass (probe AN).
SHIFT_PRIOR_DF = 4.0
SHIFT_PRIOR_RATIO = 1.0


def median_interval(samples: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Distribution-free interval of the median: (j-th, (n+1-j)-th order statistic), 1-based, with j
    the largest such that P(Binomial(n, 1/2) <= j-1) <= (1-confidence)/2; (min, max) when n is too
    small for that confidence (n < 6 at 95%)."""
    ordered = np.sort(np.asarray(samples, dtype=float))
    n = len(ordered)
    tail, cumulative, j = (1 - confidence) / 2, 0.0, 0
    if n > 500:  # normal approximation of the binomial (exact sums would overflow a float)
        j = int(n / 2 - Z95 * math.sqrt(n) / 2)
        return float(ordered[j - 1]), float(ordered[n - j])
    for k in range(n // 2 + 1):
        cumulative += math.comb(n, k) / 2.0 ** n
        if cumulative > tail:
            break
        j = k + 1
    j = max(j, 1)
    return float(ordered[j - 1]), float(ordered[n - j])


def mean_interval(samples: np.ndarray) -> tuple[float, float]:
    """mean +- 1.96 standard errors (normal approximation)."""
    values = np.asarray(samples, dtype=float)
    mean = float(values.mean())
    half = Z95 * float(values.std(ddof=1)) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return mean - half, mean + half


def quantile_interval(samples: np.ndarray, q: float) -> tuple[float, float]:
    """Distribution-free ~95% interval of the q-quantile: the order statistics n*q -+ 1.96 sqrt(n q (1-q))
    (normal approximation of the binomial count below the quantile; Hollander & Wolfe, ch. 3)."""
    ordered = np.sort(np.asarray(samples, dtype=float))
    n = len(ordered)
    half = Z95 * math.sqrt(n * q * (1 - q))
    low, high = int(math.floor(n * q - half)), int(math.ceil(n * q + half))
    return float(ordered[min(max(low, 1), n) - 1]), float(ordered[min(max(high, 1), n) - 1])


def autocorrelation_factor(values: np.ndarray) -> float:
    """sqrt((1 + r1) / (1 - r1)), r1 the lag-1 autocorrelation of the log samples clipped to [0, 0.9]:
    how much wider an interval from n autocorrelated samples is than from n independent ones (the
    AR(1) effective sample size n (1 - r1) / (1 + r1); e.g. Wilks, Statistical Methods in the
    Atmospheric Sciences, sec. 5.2.4)."""
    logs = np.log(values)
    centred = logs - logs.mean()
    denom = float(np.dot(centred, centred))
    r1 = float(np.dot(centred[:-1], centred[1:])) / denom if denom > 0 else 0.0
    r1 = min(max(r1, 0.0), 0.9)
    return math.sqrt((1 + r1) / (1 - r1))


def within_run_sd(samples, statistic: str) -> float | None:
    """The log-space sd of one record's statistic from its per-iteration samples (the 95% interval's
    half-width / 1.96, widened for the samples' lag-1 autocorrelation); None without >= 2 positive
    samples."""
    values = np.asarray(samples, dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    if len(values) < 2:
        return None
    if statistic == "median":
        low, high = median_interval(values)
        mid = float(np.median(values))
    elif statistic == "p10":
        low, high = quantile_interval(values, 0.1)
        mid = float(np.percentile(values, 10))
    elif statistic == "min":  # the 1/n quantile's interval; below the fastest sample it is open, so its upper side
        low, high = quantile_interval(values, 1 / len(values))
        mid = low = float(values.min())
    else:
        low, high = mean_interval(values)
        mid = float(np.mean(values))
    low = max(low, mid * 1e-6)
    return max(math.log(mid / low), math.log(high / mid)) / Z95 * autocorrelation_factor(values)


def normal_quantile(p: float) -> float:
    """Inverse of the standard normal CDF (Acklam's rational approximation, |error| < 1.2e-9)."""
    a = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
         -3.066479806614716e+01, 2.506628277459239e+00)
    b = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
         -1.328068155288572e+01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
         4.374664141464968e+00, 2.938163982698783e+00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)
    if p < 0.02425 or p > 1 - 0.02425:
        q = math.sqrt(-2 * math.log(min(p, 1 - p)))
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
        return x if p < 0.5 else -x
    q = p - 0.5
    r = q * q
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / \
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile by the Cornish-Fisher expansion around the normal one (Abramowitz &
    Stegun 26.7.5): within 0.5% of the exact one for df >= 7 down to p = 1 - 1e-3, narrower at fewer df
    (df 3, p = 0.9993: 10.4 against 11.6)."""
    z = normal_quantile(p)
    if not math.isfinite(df) or df > 1e6:
        return z
    df = max(df, 1.0)
    g1 = (z ** 3 + z) / 4
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
    return z + g1 / df + g2 / df ** 2 + g3 / df ** 3


# A point's run-to-run noise is heavier-tailed than normal: over 32 runs of a 2-rank gloo sweep beside 2 CPU hogs
# (10 points; fix-G4) 1.6% of the min's point residuals (two-way model) lay beyond 3 sd where a normal puts 0.27%, the
# largest at 5.1 sd; a Student t with 4 df, scaled to unit variance, puts 1.3% there. The point tests, at a quantile
# near 3.5 (their share of 5%), failed 9 of 150 A/A comparisons of those runs on one point x2-x4 in one run.
POINT_TAIL_DF = 4


def _t4_survival(t: np.ndarray) -> np.ndarray:
    """P(T > t) for Student's t with 4 df (closed form: F(t) = 1/2 + 3/8 a (1 - t^2 / (12 (1 + t^2/4))),
    a = t / sqrt(1 + t^2/4); Johnson, Kotz & Balakrishnan, Continuous Univariate Distributions 2, 28.2)."""
    u = 1 + t * t / 4
    return 0.5 - 0.375 * (t / np.sqrt(u)) * (1 - t * t / (12 * u))


def point_quantile(p: float, df: float) -> float:
    """The p-quantile of a point test's statistic d / s when the point's noise d is a unit-variance Student t with
    POINT_TAIL_DF (4) df (heavy tails: the robust default of Lange, Little & Taylor 1989, "Robust statistical modeling
    using the t distribution", JASA 84:881-896) and its sd s is estimated with `df` degrees of freedom (s^2 ~ sigma^2
    chi^2_df / df; infinite: known). P(d/s > q) = E_W[P(T_4 > q sqrt(W/df) / sqrt(1/2))], W ~ chi^2_df taken at 400
    equal-probability points (Wilson-Hilferty), solved for q by bisection. Wider than t_df(p): at p = 1 - 0.00125
    and 17 df, 5.2 against 3.5."""
    scale = math.sqrt(POINT_TAIL_DF / (POINT_TAIL_DF - 2))   # T_4 / scale has unit variance
    if not math.isfinite(df) or df > 1e6:
        w = np.ones(1)
    else:
        df = max(df, 1.0)
        z = np.array([normal_quantile((i + 0.5) / 400) for i in range(400)])
        w = np.clip(1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df)), 1e-6, None) ** 3   # chi^2_df / df
    sqrt_w = np.sqrt(w)
    tail = 1 - p
    low, high = 0.0, 1e3
    for _ in range(80):
        mid = (low + high) / 2
        if float(np.mean(_t4_survival(mid * sqrt_w * scale))) > tail:
            low = mid
        else:
            high = mid
    return high


@dataclass(frozen=True, kw_only=True)
class RunToRun:
    """What repeated runs say about run-to-run noise (log-time sds); see the module docstring."""

    sigma_run: float | None  # the shift all points of one run share (None: unknown, no repeated baseline runs)
    sigma_pooled: float  # a point's own scatter, pooled over points
    sigma_by_point: dict = field(default_factory=dict)  # per point key, shrunk towards sigma_pooled
    df: float = 0.0  # residual degrees of freedom (pooled over points)
    num_runs: int = 0  # runs that took part (in sets of >= 2)
    df_by_point: dict = field(default_factory=dict)  # a point's own df + NU0 (its t quantile)
    df_run: float = 0.0  # degrees of freedom of sigma_run: the measured shifts' + shift_prior_df
    shift_prior_df: float = 0.0  # the weight (df) of the assumed shift sigma_run was shrunk towards
    num_shifts: float = 0.0  # the measured shifts' df (sum of runs - 1 over the baseline sets)
    scatter_from: str = "repeated runs"  # where the points' scatter came from ("repeated runs", "the pair", "assumed")

    @property
    def shift_known(self) -> bool:
        return self.sigma_run is not None

    def shift_sd(self, point_var: float) -> float:
        """The run shift's sd: measured, or (no repeated baseline run) ASSUMED_SHIFT_PER_POINT_SD x the
        points' scatter sqrt(point_var)."""
        return self.sigma_run if self.sigma_run is not None else ASSUMED_SHIFT_PER_POINT_SD * math.sqrt(point_var)

    def shift_and_scatter_df(self, point_var: float, scatter_df: float, count: float = 1.0) -> float:
        """The degrees of freedom of shift_sd(point_var)^2 + point_var / count, a noise estimated from two
        independent parts (Welch-Satterthwaite: df = (a + b)^2 / (a^2 / df_a + b^2 / df_b); Satterthwaite 1946,
        Biometrics Bulletin 2:110-114): at least the smaller part's df, never the shift's alone where the points'
        scatter is most of it. An assumed shift is a multiple of the scatter itself: one estimate, `scatter_df`."""
        if not self.shift_known or not self.df_run:
            return scatter_df
        a, b = self.sigma_run ** 2, point_var / count
        if a + b <= 0:
            return max(self.df_run, scatter_df)
        return (a + b) ** 2 / (a ** 2 / self.df_run + b ** 2 / scatter_df)

    def sigma_point(self, key) -> float:
        return self.sigma_by_point.get(key, self.sigma_pooled)

    def point_df(self, key) -> float:
        return self.df_by_point.get(key, self.df if self.scatter_from in ("the pair", "assumed") else NU0)


def _blocks(run_sets: list[list[dict]]) -> list[tuple[list, np.ndarray]]:
    """(keys all runs share, runs x keys log times) of each set with >= 2 runs sharing a key."""
    blocks = []
    for runs in run_sets:
        runs = [r for r in runs if r]
        if len(runs) < 2:
            continue
        keys = sorted(set.intersection(*(set(r) for r in runs)), key=repr)
        if keys:
            blocks.append((keys, np.array([[r[k] for k in keys] for r in runs])))
    return blocks


def estimate_run_to_run(run_sets: list[list[dict]], scatter_sets: list[list[dict]] = ()) -> RunToRun | None:
    """Estimate the model from sets of repeated runs, each run {point key: log time}: `run_sets` give the
    run shift and the points' scatter, `scatter_sets` (NEW's runs) the points' scatter only. None when no
    set has two runs sharing a point (run-to-run noise unknown: see `pair_scatter`)."""
    shift_blocks, scatter_blocks = _blocks(run_sets), _blocks(list(scatter_sets))
    if not shift_blocks and not scatter_blocks:
        return None
    ss_e = df_e = 0.0
    per_key: dict = {}
    for keys, x in (*shift_blocks, *scatter_blocks):
        num_runs, num_keys = x.shape
        d = x - x.mean(axis=0)
        e = d - d.mean(axis=1, keepdims=True)
        if num_keys >= 2:
            ss_e += float((e ** 2).sum())
            df_e += (num_runs - 1) * (num_keys - 1)
            for j, k in enumerate(keys):
                ss, dfk = per_key.get(k, (0.0, 0.0))
                per_key[k] = (ss + float((e[:, j] ** 2).sum()), dfk + (num_runs - 1) * (num_keys - 1) / num_keys)
    var_e = ss_e / df_e if df_e else 0.0
    shift_ss = shift_df = 0.0
    for keys, x in shift_blocks:
        num_runs, num_keys = x.shape
        shifts = (x - x.mean(axis=0)).mean(axis=1)
        # E[sum s_r^2 / (R-1)] = sigma_run^2 + sigma_e^2 / K: remove the points' share
        shift_ss += float((shifts ** 2).sum()) - (num_runs - 1) * var_e / num_keys
        shift_df += num_runs - 1
    # The measured shifts update a prior (a scaled inverse-chi^2 prior on sigma_run^2, as NU0 is for the points'
    # variances): with R runs the shift's variance has R - 1 df (1 with two runs: t(0.99, 1) = 31.8), so alone it
    # judged two baseline runs far more weakly than one run and the assumption (x5 at every point and x1000 at one
    # collective passed where one run failed them: probe AN).
    prior_df = min(df_e, SHIFT_PRIOR_DF)
    sigma_run = df_run = None
    if shift_df:
        prior_ss = prior_df * (SHIFT_PRIOR_RATIO ** 2) * var_e
        df_run = prior_df + shift_df
        sigma_run = math.sqrt((prior_ss + max(shift_ss, 0.0)) / df_run)
    by_point = {k: math.sqrt((ss + NU0 * var_e) / (dfk + NU0)) for k, (ss, dfk) in per_key.items()}
    return RunToRun(sigma_run=sigma_run, sigma_pooled=math.sqrt(var_e), sigma_by_point=by_point,
                    df=df_e if df_e else shift_df, num_runs=sum(len(x) for _, x in (*shift_blocks, *scatter_blocks)),
                    df_by_point={k: dfk + NU0 for k, (_, dfk) in per_key.items()}, df_run=df_run or 0.0,
                    shift_prior_df=prior_df if shift_df else 0.0, num_shifts=shift_df)


# the pair scale's small-sample table, n: (c_n, df_n) (tools/pair_scale_table.py; see the module docstring)
PAIR_SCALE_TABLE = {
    3: (0.9893, 0.93), 4: (1.8380, 0.90), 5: (0.8437, 1.98), 6: (1.2648, 2.00), 7: (0.8609, 3.22), 8: (1.1470, 3.24),
    9: (0.8741, 4.54), 10: (1.0997, 4.62), 11: (0.8894, 5.94), 12: (1.0755, 6.06), 13: (0.9038, 7.38),
    14: (1.0596, 7.47), 15: (0.9118, 8.75), 16: (1.0483, 9.01), 17: (0.9211, 10.23), 18: (1.0408, 10.43),
    19: (0.9266, 11.80), 20: (1.0358, 12.06), 21: (0.9340, 13.30), 22: (1.0324, 13.49), 23: (0.9384, 14.84),
    24: (1.0274, 15.15), 25: (0.9436, 16.27), 26: (1.0251, 16.56), 27: (0.9467, 17.94), 28: (1.0222, 18.16),
    29: (0.9498, 19.71), 30: (1.0208, 19.86), 31: (0.9535, 20.80), 32: (1.0198, 21.33), 33: (0.9553, 22.69),
    34: (1.0183, 23.05), 35: (0.9574, 24.24), 36: (1.0161, 24.46), 37: (0.9592, 25.78), 38: (1.0159, 26.14),
    39: (0.9618, 27.53), 40: (1.0147, 27.60), 41: (0.9635, 28.84), 42: (1.0136, 29.57), 43: (0.9651, 30.68),
    44: (1.0130, 30.96), 45: (0.9660, 32.22), 46: (1.0125, 32.29), 47: (0.9684, 33.65), 48: (1.0110, 33.78),
    49: (0.9689, 35.24), 50: (1.0110, 35.78), 51: (0.9702, 37.23), 52: (1.0107, 37.70), 53: (0.9710, 38.55),
    54: (1.0100, 38.89), 55: (0.9721, 40.66), 56: (1.0089, 40.70), 57: (0.9730, 41.92), 58: (1.0098, 42.53),
    59: (0.9745, 43.50), 60: (1.0088, 43.63),
}
PAIR_SCALE_ASYMPTOTIC = 1 / (math.sqrt(2) * 0.31863936396437514)  # 1 / (sqrt(2) Phi^-1(5/8)) = 2.21914
PAIR_MIN_POINTS = 3  # a collective's points needed to take their scatter from their pairwise distances
# The df a collective's pair scale is credited with: the simulated df_n (normal noise) but at most 0.37 (n - 1), what
# the median absolute deviation it replaced was given (its efficiency at the normal, Rousseeuw & Croux 1993). The
# gate's noise on a shared host is heavier-tailed than normal: on 12 runs of benchmarks/gate_accuracy.py (9 points,
# one run a side, no history) the simulated df passed 87.1% of A/A pairs (the MAD 90.2%); capped, 94.7%.
PAIR_DF_PER_POINT = 0.37


def pair_scale_constants(n: int) -> tuple[float, float]:
    """(c_n, df_n) of the pair scale at n points: tabulated (simulated) up to the table's end; beyond it from the
    largest tabulated n of the same parity, the bias c_n - 1 in proportion to 1/n and the df to n - 1."""
    if n in PAIR_SCALE_TABLE:
        return PAIR_SCALE_TABLE[n]
    last = max(m for m in PAIR_SCALE_TABLE if m % 2 == n % 2)
    factor, df = PAIR_SCALE_TABLE[last]
    return 1 + (factor - 1) * last / n, df * (n - 1) / (last - 1)


def pair_scale(values) -> tuple[float, float]:
    """(sd, df) of `values` from their pairwise distances (the module docstring's Qn with h = ceil(n/2)):
    c_n * 2.21914 * the C(ceil(n/2), 2)-th smallest |x_i - x_j|. At most the scatter of the ceil(n/2) values
    closest together, whatever the others do."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    i, j = np.triu_indices(n, 1)
    distances = np.abs(x[i] - x[j])
    k = math.comb(math.ceil(n / 2), 2)
    factor, df = pair_scale_constants(n)
    return factor * PAIR_SCALE_ASYMPTOTIC * float(np.partition(distances, k - 1)[k - 1]), df


def pair_scatter(diffs: dict, collective_of: dict, inverse_runs: dict) -> RunToRun | None:
    """The points' scatter from one comparison's own log ratios when no repeated run exists (see the
    module docstring): `diffs` {key: mean log ratio new/base}, `inverse_runs` {key: 1/Rn + 1/Rb}. Per
    collective `pair_scale` of the ratios (no centre needed: pairwise distances are free of the run shift),
    pooled over collectives (variances weighted by their df). None when no collective has PAIR_MIN_POINTS
    points."""
    ss = df_sum = 0.0
    for collective in sorted(set(collective_of[k] for k in diffs)):
        mine = sorted((k for k in diffs if collective_of[k] == collective), key=repr)
        if len(mine) < PAIR_MIN_POINTS:
            continue
        # scaled to one run per side, so that sigma_point * sqrt(1/Rn + 1/Rb) gives back the ratio's noise
        sd, df = pair_scale([diffs[k] / math.sqrt(inverse_runs[k]) for k in mine])
        df = min(df, PAIR_DF_PER_POINT * (len(mine) - 1))
        ss += df * sd ** 2
        df_sum += df
    if not df_sum:
        return None
    return RunToRun(sigma_run=None, sigma_pooled=math.sqrt(ss / df_sum), df=max(df_sum, 1.0), num_runs=2,
                    scatter_from="the pair")


def assumed_scatter() -> RunToRun:
    """The run-to-run noise where nothing measures it (ASSUMED_POINT_SD): the points' scatter assumed, the run shift
    assumed from it (RunToRun.shift_sd), so that a point judged against BASE carries both, as with a pair scatter."""
    return RunToRun(sigma_run=None, sigma_pooled=ASSUMED_POINT_SD, df=NU0, num_runs=2, scatter_from="assumed")
