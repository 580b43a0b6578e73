"""Sweep files and the resumable sweep runner (schema.py, plan.py, runner.py; isolation.py says how
a failed or hung point is contained)."""

from commbench.sweep.plan import SweepPoint, estimate_point_s, plan_sweep
from commbench.sweep.runner import SweepJob, SweepOutcome, run_sweep_on_backend, run_sweep_rank
from commbench.sweep.schema import Sweep, SweepEntry, load_sweep, parse_sweep

__all__ = ["Sweep", "SweepEntry", "SweepJob", "SweepOutcome", "SweepPoint", "estimate_point_s", "load_sweep",
           "parse_sweep", "plan_sweep", "run_sweep_on_backend", "run_sweep_rank"]
