"""How often `nccl-tuner`'s bar lets a combination that is no faster than NCCL's default make a rule, and how often it
sees a real win: the compare gate's within-run noise (noise.within_run_sd, what the tuner used before) against the
tuner's own (results/nccl_tuner_noise.tuner_point_sd), decided as results/nccl_tuner.beats decides a cell.

Per cell, as the probe's generators build them (probe EQ: genn2/genn3/genar2.py): NCCL's default and K = 5 forced
combinations, each point n samples of a log-normal time of 5% sd, independent or an AR(1) series of lag-1
correlation phi; the combinations' true time is `factor` x the default's (1: equal, 1.03: slower, 0.9: a true 10%
win). The fastest combination by the statistic is judged against the default: its log ratio against both points'
noise in quadrature, widened for the K tried (nccl_tuner.selection_widening). Printed: the share of cells that get
a rule. Goal (docs/nccl-tuner.md section 2): at most 2.5% at factor >= 1. Not a timed test.

    python benchmarks/tuner_false_rules.py [--cells 1000] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from commbench.results.nccl_tuner import selection_widening  # noqa: E402
from commbench.results.nccl_tuner_noise import tuner_point_sd  # noqa: E402
from commbench.results.noise import Z95, within_run_sd  # noqa: E402

COMBINATIONS = 5
NOISE_SD = 0.05
# (statistic, iterations, lag-1 correlation, combinations' time / default's)
SCENARIOS = [("min", 20, 0.0, 1.0), ("min", 100, 0.0, 1.0), ("min", 500, 0.0, 1.0), ("min", 100, 0.0, 1.03),
             ("min", 20, 0.0, 0.9), ("min", 100, 0.0, 0.9), ("min", 500, 0.0, 0.9),
             ("median", 50, 0.9, 1.0), ("mean", 50, 0.9, 1.0), ("min", 50, 0.9, 1.0), ("median", 50, 0.9, 1.05),
             ("median", 50, 0.5, 1.0), ("median", 200, 0.9, 1.0),
             ("median", 50, 0.0, 0.9), ("median", 50, 0.9, 0.9), ("median", 200, 0.9, 0.9), ("mean", 50, 0.0, 0.9)]
STATISTIC = {"min": np.min, "median": np.median, "mean": np.mean}


def samples(rng: np.random.Generator, points: int, n: int, phi: float) -> np.ndarray:
    """points x n samples of exp(NOISE_SD x a stationary unit AR(1) series), rounded to 1 ns at ~100 us."""
    x, current = np.empty((points, n)), rng.normal(0, 1, points)
    for i in range(n):
        current = phi * current + math.sqrt(1 - phi * phi) * rng.normal(0, 1, points)
        x[:, i] = current
    return np.round(100 * np.exp(NOISE_SD * x), 3)


def rule_rate(sd_of, statistic: str, n: int, phi: float, factor: float, cells: int, seed: int) -> float:
    rng, rules, widening = np.random.default_rng(seed), 0, selection_widening(COMBINATIONS)
    for _ in range(cells):
        points = samples(rng, COMBINATIONS + 1, n, phi)
        points[1:] *= factor
        times = [float(STATISTIC[statistic](p)) for p in points]
        best = 1 + int(np.argmin(times[1:]))
        sds = [sd_of(points[0], statistic), sd_of(points[best], statistic)]
        if any(sd is None or not math.isfinite(sd) for sd in sds):
            continue   # no noise estimate: no rule
        noise = math.expm1(math.hypot(*(Z95 * sd for sd in sds)) * widening)
        rules += times[0] / times[best] - 1 > noise
    return rules / cells


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"{'statistic':>9} {'n':>4} {'phi':>4} {'factor':>6}  {'before':>6}  {'after':>6}"
          "   (share of cells with a rule)")
    for statistic, n, phi, factor in SCENARIOS:
        before = rule_rate(within_run_sd, statistic, n, phi, factor, args.cells, args.seed)
        after = rule_rate(tuner_point_sd, statistic, n, phi, factor, args.cells, args.seed)
        print(f"{statistic:>9} {n:>4} {phi:>4} {factor:>6}  {before:6.3f}  {after:6.3f}", flush=True)


if __name__ == "__main__":
    main()
