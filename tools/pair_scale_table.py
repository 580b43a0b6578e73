"""The small-sample table of noise.pair_scatter's scale estimator, by simulation.

The estimator (noise.py): for n values, the k-th smallest of the n(n-1)/2 pairwise distances |x_i - x_j|,
k = C(ceil(n/2), 2), times 1 / (sqrt(2) Phi^-1(5/8)) = 2.21914 (Rousseeuw & Croux's Qn, JASA 88:1273, 1993,
with h = ceil(n/2) in place of floor(n/2) + 1: the same for odd n; for even n it still reads one half's own pairs
when the other half moved). Per n, over REPS samples of n standard normals:
- factor c_n = 1 / mean(raw estimate): the estimate times c_n is unbiased for sigma (as Croux & Rousseeuw 1992
  tabulate Qn's d_n);
- df_n: the chi-square degrees of freedom whose log sd has the same variance as the corrected estimate's log,
  Var(log s) = trigamma(df/2) / 4 for s^2 ~ sigma^2 chi2_df / df (the log, not the variance, since the t test
  fails where the estimate reads low).

    python tools/pair_scale_table.py [--reps 100000] [--max-n 60]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

ASYMPTOTIC = 1 / (math.sqrt(2) * 0.3186393639643752)  # Phi^-1(5/8) = 0.31864


def raw(x: np.ndarray) -> np.ndarray:
    """The k-th smallest pairwise distance of each row of x (reps x n)."""
    n = x.shape[1]
    i, j = np.triu_indices(n, 1)
    distances = np.abs(x[:, i] - x[:, j])
    k = math.comb(math.ceil(n / 2), 2)
    return np.partition(distances, k - 1, axis=1)[:, k - 1]


def trigamma(x: float) -> float:
    """psi'(x): the recurrence psi'(x) = psi'(x + 1) + 1/x^2 up to x >= 6, then the asymptotic series
    1/x + 1/(2x^2) + 1/(6x^3) - 1/(30x^5) + 1/(42x^7) - 1/(30x^9) (Abramowitz & Stegun 6.4.12)."""
    total = 0.0
    while x < 6:
        total += 1 / x ** 2
        x += 1
    return total + 1 / x + 1 / (2 * x ** 2) + 1 / (6 * x ** 3) - 1 / (30 * x ** 5) + 1 / (42 * x ** 7) - 1 / (30 * x ** 9)


def equivalent_df(var_log: float) -> float:
    low, high = 0.01, 1e5
    for _ in range(200):
        mid = math.sqrt(low * high)
        if trigamma(mid / 2) / 4 > var_log:
            low = mid
        else:
            high = mid
    return mid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=100000)
    parser.add_argument("--max-n", type=int, default=60)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for n in range(3, args.max_n + 1):
        chunk = max(1, min(args.reps, 2_000_000 // (n * n)))
        estimate = np.concatenate([ASYMPTOTIC * raw(rng.standard_normal((min(chunk, args.reps - done), n)))
                                   for done in range(0, args.reps, chunk)])
        factor = 1 / float(estimate.mean())
        corrected = estimate * factor
        positive = corrected[corrected > 0]
        df = equivalent_df(float(np.var(np.log(positive))))
        print(f"    {n}: ({factor:.4f}, {df:.2f}),  # zero in {1 - len(positive) / len(corrected):.1e}")


if __name__ == "__main__":
    main()
