"""How the gate spends its 5% false-alarm budget over its tests (a weighted Bonferroni split).

Bonferroni's inequality holds for any weights: if test i rejects with probability <= alpha_i when
nothing changed, the whole comparison fails with probability <= sum alpha_i, whatever the tests'
correlation (the weighted Bonferroni test: Rosenthal & Rubin 1983, "Ensemble-adjusted p values",
Psychological Bulletin 94:540-541). So the budget may go where detection
needs it, as long as the shares sum to alpha; an even split (alpha / number of tests) is one choice,
and a poor one here:
- A change in NCCL, a driver or a config most often slows a whole collective. Under the noise model
  (noise.py) the collective test's noise is sqrt(sigma_run^2 + sigma_k^2 / K): the run shift does
  not average away, so that test has no margin to spare, and an even split over scopes x (2K + C)
  tests pushed its quantile from 1.96 to 2.8-3.7 (x1.3 on every point missed 90% of the time).
- A point test is one of K (times 2 kinds): its quantile grows only slowly with its share
  (z at 0.05/36 is 3.0, at 0.05/72 3.2).
Hence: half of alpha to the collective tests (split evenly over the collectives), half to the point
tests (evenly over the points, and per point evenly over its kinds: against BASE, and against its own
run's shift where the points' run-to-run scatter is known and its collective has >= 3 points; with the
run shift unknown (no repeated baseline run) a point is judged against its run only, where it can be,
since its ratio against BASE carries the unknown shift, which the collective test judges). Within each, with
several runs in NEW, the test of all runs together (the most runs, the least noise) gets half and
each single run's test an equal part of the other half (a single slow run must stand out on its own,
so it is a large effect). With one run in NEW that one scope gets all of it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

VS_ITS_RUN_MIN_POINTS = 3  # a point against its run's shift needs the run-to-run noise and >= 3 points
COLLECTIVE_SHARE = 0.5


@dataclass(frozen=True, kw_only=True)
class AlphaSplit:
    alpha: float
    num_new: int  # runs in NEW: > 1 adds one scope per run beside "all runs"
    collective_of: dict  # judged point key -> its collective
    scatter_known: bool  # the points' run-to-run scatter (noise.RunToRun): the test against its run
    shift_known: bool  # the run shift's sd (repeated baseline runs): else a point is judged against its run
    _points_per_collective: Counter = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_points_per_collective", Counter(self.collective_of.values()))

    def _scope_weight(self, whole: bool) -> float:
        if self.num_new <= 1:
            return 1.0
        return 0.5 if whole else 0.5 / self.num_new

    def vs_run_judged(self, key) -> bool:
        return self.scatter_known and self._points_per_collective[self.collective_of[key]] >= VS_ITS_RUN_MIN_POINTS

    def vs_base_judged(self, key) -> bool:
        return self.shift_known or not self.vs_run_judged(key)

    def kinds_of(self, key) -> int:
        """1 or 2 point tests for a key: against BASE, and against its run where that test runs."""
        return int(self.vs_base_judged(key)) + int(self.vs_run_judged(key))

    def alpha_of(self, kind: str, of, whole: bool) -> float:
        """One test's one-sided alpha: kind "collective" (of: a collective) or "point"/"vs its run" (of:
        a key), in the scope of all runs (whole) or of one run of NEW."""
        weight = self._scope_weight(whole)
        if kind == "collective":
            return self.alpha * COLLECTIVE_SHARE * weight / max(len(self._points_per_collective), 1)
        share = self.alpha * (1 - COLLECTIVE_SHARE) * weight / max(len(self.collective_of), 1)
        return share / self.kinds_of(of)

    @property
    def num_tests(self) -> int:
        scopes = 1 + (self.num_new if self.num_new > 1 else 0)
        return scopes * (len(self._points_per_collective) + sum(self.kinds_of(k) for k in self.collective_of))
