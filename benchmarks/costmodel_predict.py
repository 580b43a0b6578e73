"""Predictions per second of one vectorised `collective_time_s` call (goal: 1,000,000 in < 100 ms).

    python benchmarks/costmodel_predict.py [num_predictions]

Random sizes (8 B .. 16 GiB), group sizes and domain counts on a 256-GPU GB300 NVL72 preset; the
best of ten calls is reported (wall and CPU time), per collective, plus the MoE all-to-all and a fitted fabric
(piecewise curves at several group sizes, the slower lookup path). All-reduce, reduce-scatter,
all-gather and broadcast go through NCCL's algorithm x protocol structure (costmodel/nccl_eval.py:
terms once per distinct group, only the pairs fastest at a size bin's edges evaluated per query).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from cli_args import count_argument, parser_for
from commbench.costmodel import AlgorithmCurve, collective_time_s, load_preset, moe_all_to_all_time_s

GOAL_S = 0.100


def random_queries(num: int, domain_size: int, num_gpus: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    sizes = 2.0 ** rng.uniform(3, 34, num)
    domains = rng.integers(1, -(-num_gpus // domain_size) + 1, num)
    per_domain = rng.integers(1, np.minimum(domain_size, num_gpus // domains) + 1)
    groups = np.maximum(domains * per_domain, 2)
    domains = np.minimum(domains, groups)
    return sizes, groups, domains


def best_of(fn, repeats: int = 10) -> tuple[float, float]:
    """(best wall seconds, best CPU seconds of this process) over `repeats` calls. On a shared machine
    the wall time includes waiting for a core; the CPU time is the work itself."""
    fn()  # warm-up
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def fitted_like(fabric):
    """The preset with all_reduce replaced by two-segment curves at three group sizes."""
    curves = [AlgorithmCurve(collective="all_reduce", tier=tier, algorithm="fitted", latency_us=offset,
                             latency_per_step_us=1.0, busbw_gbps=bw, group_size=g, min_bus_bytes=start)
              for tier in ("scale_up", "scale_out") for g in (8, 64, 256)
              for start, offset, bw in ((0.0, 0.0, 400.0), (1e6, -1.0, 300.0))]
    return fabric.with_curves(curves)


def main(argv: list[str]) -> int:
    num = count_argument(parser_for(__doc__), argv, "num_predictions", 1_000_000, "queries per call")
    fabric = load_preset("gb300-nvl72", num_gpus=256)
    sizes, groups, domains = random_queries(num, fabric.domain_size, fabric.num_gpus)
    cases = [(c, lambda c=c: collective_time_s(fabric, c, sizes, groups, domains))
             for c in ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "sendrecv", "broadcast")]
    cases.append(("moe_all_to_all", lambda: moe_all_to_all_time_s(fabric, sizes, groups, domains, 1.3)))
    fitted = fitted_like(fabric)
    cases.append(("all_reduce (fitted)", lambda: collective_time_s(fitted, "all_reduce", sizes, groups, domains)))
    print(f"{num:,} predictions per call, gb300-nvl72 x {fabric.num_gpus} GPUs; best of 10 calls")
    worst_wall = worst_cpu = 0.0
    for name, fn in cases:
        wall, cpu = best_of(fn)
        if name != "all_reduce (fitted)":
            worst_wall, worst_cpu = max(worst_wall, wall), max(worst_cpu, cpu)
        print(f"  {name:22s} wall {wall * 1e3:7.1f} ms  cpu {cpu * 1e3:7.1f} ms   {num / wall / 1e6:6.1f} M predictions/s"
              f"   {wall / GOAL_S:5.2f} x the 100 ms goal")
    verdict = "meets" if worst_wall < GOAL_S else "misses"
    print(f"slowest preset collective: {worst_wall * 1e3:.1f} ms wall ({worst_cpu * 1e3:.1f} ms CPU) for {num:,} "
          f"predictions: {verdict} the < 100 ms goal")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
