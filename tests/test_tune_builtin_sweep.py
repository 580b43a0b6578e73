"""`commbench tune`'s built-in sweep measures 4 sizes of each collective, as its comment says: it measured 3
(16K..2M by x8: 16 KiB, 128 KiB, 1 MiB), so every curve of the default run's fabric-measured.json said 'only 3
sizes: no held-out error (need >= 4)' and the main job's fit never reported how well it predicts."""

from __future__ import annotations

from collections import Counter

from commbench.comm.backends import resolve_backend
from commbench.sweep import parse_sweep, plan_sweep
from commbench.workflows.tune import BUILTIN_SWEEP


def test_builtin_sweep_plans_four_sizes_per_collective():
    spec = parse_sweep(BUILTIN_SWEEP, "<built-in tune sweep>")
    planned = plan_sweep(spec, 2, backend=resolve_backend(spec.backend))
    sizes = Counter(p.entry.collective for p in planned)
    assert set(sizes) == {"all_reduce", "reduce_scatter", "all_gather", "all_to_all"}
    assert all(n >= 4 for n in sizes.values()), sizes
