"""How often the gate cries wolf, and how often it sees a real slowdown, on repeated runs of one host.

Runs `commbench bench all_reduce` R times as separate processes with `--hogs` CPU hogs beside them
(a busy, shared CI runner), then judges, with the new gate (commbench.results.compare) and the old one
(benchmarks/legacy_compare.py: within-run intervals only):
- A/A: one run vs another (disjoint pairs; the new gate with --history = up to 10 other runs, and without
  one: the run shift then assumed, noise.ASSUMED_SHIFT_PER_POINT_SD), and 3 runs per file vs 3 others (no
  history: BASE's own 3 runs give the run-to-run noise);
- detection: one run scaled x1.3 (and x1.1) at every point vs another run (+ history), every ordered
  pair; x1.3 at every point of 3 runs; one point x1.3 in all 3 runs of NEW (3 runs per file), every
  point in turn, without and with a history of 10 other runs (the old gate takes no history);
- per detection row the bound: the best any one-sided 5% test reaches at the noise measured over all
  runs (the two-way model of results/noise.py, for the statistic the new gate judges), Phi(delta /
  sigma - 1.645), sigma the noise of that row's most direct test (every point: the run's mean log
  ratio; one point: the point against its run's shift, taken as known); and the same at the quantile of
  the gate's own test for that change (its share of the 5%: the gate runs many tests at 5% in all, so
  the first bound is out of its reach; the second is what a gate knowing the noise exactly would get).
Goals (issue 26): A/A pass >= 95%, x1.3 everywhere >= 95%, one point x1.3 with 3 runs >= 80%.
Not a timed test: it prints rates side by side.

    python benchmarks/gate_accuracy.py [--runs 20] [--hogs 2] [-b 8 -e 1M -f 4 -n 40] [--keep DIR] [--assumed-shift X]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import legacy_compare  # noqa: E402
import numpy as np  # noqa: E402

from commbench.results.compare import choose_statistic, compare, gate_time_us, match_key  # noqa: E402
from commbench.results.alpha_split import AlphaSplit  # noqa: E402
from commbench.results import noise  # noqa: E402
from commbench.results.noise import estimate_run_to_run, normal_quantile  # noqa: E402
from commbench.results.records import measurements, read_records  # noqa: E402

HOG = "import time\nwhile True:\n    sum(range(10000))\n"


def measure(runs: int, hogs: int, bench_args: list[str], folder: Path) -> list[list]:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    missing = [i for i in range(runs) if not (folder / f"run{i:02d}.jsonl").exists()]
    hog_procs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(hogs if missing else 0)]
    try:
        for i in range(runs):
            out = folder / f"run{i:02d}.jsonl"
            if not out.exists():
                subprocess.run([sys.executable, "-m", "commbench", "bench", "all_reduce", "--nproc", "2", *bench_args,
                                "-O", str(out)], check=True, env=env, stdout=subprocess.DEVNULL)
            print(f"run {i + 1}/{runs} measured", file=sys.stderr, flush=True)
    finally:
        for proc in hog_procs:
            proc.kill()
            proc.wait()
    return [measurements(read_records([folder / f"run{i:02d}.jsonl"])) for i in range(runs)]


def scaled(records, factor: float, only_size: int | None = None, run_id: str | None = None, sizes=None):
    """Records with every time (and per-iteration sample) x factor, at one size, at `sizes`, or all."""
    out = []
    for m in records:
        f = factor if only_size in (None, m.size_bytes) and (sizes is None or m.size_bytes in sizes) else 1.0
        out.append(dataclasses.replace(
            m, run_id=run_id or m.run_id,
            time_us_median=m.time_us_median * f, time_us_mean=m.time_us_mean * f, time_us_min=m.time_us_min * f,
            time_us_max=m.time_us_max * f, iter_times_us=[t * f for t in m.iter_times_us],
            loop_time_us={k: v * f for k, v in m.loop_time_us.items()}))
    return out


STATISTIC = "auto"
Z95_ONE_SIDED = 1.6448536


def resolved_statistic(runs) -> str:
    """What the new gate judges for these runs (--statistic auto resolved as compare resolves it)."""
    return STATISTIC if STATISTIC != "auto" else (choose_statistic(runs[0], runs[1], "auto") or "median")


def noise_model(runs, statistic: str) -> tuple[float, float, tuple[int, float]]:
    """(sigma_run, sigma_point) in log time over all runs (the two-way model of results/noise.py), and the
    slowest run (index, its shift as a factor: every point of it that much slower than the runs' mean)."""
    table = [{match_key(m): math.log(gate_time_us(m, statistic)) for m in run} for run in runs]
    r2r = estimate_run_to_run([table])
    keys = sorted(set.intersection(*(set(row) for row in table)), key=repr)
    x = np.array([[row[k] for k in keys] for row in table])
    shifts = (x - x.mean(axis=0)).mean(axis=1)
    return r2r.sigma_run, r2r.sigma_pooled, (int(shifts.argmax()), math.exp(float(shifts.max())))


def best_detection(log_shift: float, sigma: float, z: float = Z95_ONE_SIDED) -> float:
    """The power of the best one-sided test at quantile z (5%: 1.645) of a Gaussian shift in noise sigma:
    Phi(delta/sigma - z) (the Neyman-Pearson bound; no test at that level does better)."""
    return 0.5 * math.erfc(-(log_shift / sigma - z) / math.sqrt(2))


def gate_share_z(kind: str, num_points: int, num_new: int) -> float:
    """The normal quantile of the gate's own test for a row (all runs of NEW; its alpha share of the 5%)."""
    keys = {("p", k): "all_reduce" for k in range(num_points)}
    split = AlphaSplit(alpha=0.05, num_new=num_new, collective_of=keys, scatter_known=True, shift_known=True)
    return normal_quantile(1 - split.alpha_of(kind, "all_reduce" if kind == "collective" else ("p", 0), True))


def new_gate(base, new, history=()) -> bool:
    return compare(base, new, max_regression=0.1, history=history, statistic=STATISTIC).passed


def old_gate(base, new) -> bool:
    result = legacy_compare.compare(base, new, max_regression=0.1)
    return not (result.regressions or result.regressed_collectives)


def rate(outcomes) -> str:
    outcomes = list(outcomes)
    return f"{sum(outcomes) / len(outcomes):6.1%} of {len(outcomes):3d}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--hogs", type=int, default=2)
    parser.add_argument("--keep", help="folder for the runs (reused when it holds them)")
    parser.add_argument("-b", default="8")
    parser.add_argument("-e", default="1M")
    parser.add_argument("-f", default="4")
    parser.add_argument("-n", default="40")
    parser.add_argument("--statistic", default="auto", help="the new gate's --statistic (auto: min with >= 20 samples)")
    parser.add_argument("--assumed-shift", type=float, default=noise.ASSUMED_SHIFT_PER_POINT_SD,
                        help="the new gate's assumed run shift / point scatter without repeated baseline runs "
                             "(noise.ASSUMED_SHIFT_PER_POINT_SD; judge the same --keep runs with another to compare)")
    args = parser.parse_args()
    global STATISTIC
    STATISTIC = args.statistic
    noise.ASSUMED_SHIFT_PER_POINT_SD = args.assumed_shift
    folder = Path(args.keep or tempfile.mkdtemp(prefix="gate-accuracy-"))
    folder.mkdir(parents=True, exist_ok=True)
    runs = measure(args.runs, args.hogs, ["-b", args.b, "-e", args.e, "-f", args.f, "-n", args.n], folder)
    n = len(runs)
    pairs = [(i, i + 1) for i in range(0, n - 1, 2)]  # disjoint A/A pairs
    ordered = list(itertools.permutations(range(n), 2))

    def history(*exclude):
        return [m for k in range(n) if k not in exclude for m in runs[k]][: 10 * len(runs[0])]

    triples = [list(range(k, k + 3)) for k in range(0, n - 2, 3)]
    triple_pairs = list(itertools.permutations(triples, 2))  # disjoint: the triples share no run

    def joined(indices, **kw):
        return [m for k in indices for m in (scaled(runs[k], 1.0, run_id=f"r{k}") if not kw else
                                             scaled(runs[k], kw["factor"], kw.get("size"), f"r{k}"))]

    sizes = sorted({m.size_bytes for m in runs[0]})
    statistic = resolved_statistic(runs)
    sigma_run, sigma_point, (slowest, slowest_factor) = noise_model(runs, statistic)
    num_points = len(sizes)
    # the least noise one test can have for each change: every point -> the run's mean log ratio; one point ->
    # that point against its run's shift (taken as known); one run per file (1 + 1) or 3 + 3
    everywhere_sd = math.sqrt(sigma_run ** 2 + sigma_point ** 2 / num_points)
    print(f"{n} runs of bench all_reduce --nproc 2 -b {args.b} -e {args.e} -f {args.f} -n {args.n} beside "
          f"{args.hogs} CPU hogs; {num_points} points per run; new gate --statistic {STATISTIC} ({statistic}), assumed "
          f"shift {noise.ASSUMED_SHIFT_PER_POINT_SD:g} x the point scatter without repeated baseline runs; runs in "
          f"{folder}\nnoise of the {statistic} over all {n} runs (log sd): run shift {sigma_run:.3f}, point "
          f"{sigma_point:.3f}; slowest run: run{slowest:02d}, x{slowest_factor:.2f} at every point\n"
          f"bound: the best any one-sided 5% test reaches at that noise, Phi(delta/sigma - 1.645) / "
          f"the same at the quantile of the gate's own test for that change (its share of the 5%)")
    print(f"{'':52s} {'new gate':>14s} {'bound':>11s}   {'old gate':>14s}")
    rows = [
        ("A/A pass, one run per file (disjoint pairs)", None,
         [new_gate(runs[a], runs[b], history(a, b)) for a, b in pairs], [old_gate(runs[a], runs[b]) for a, b in pairs]),
        ("A/A pass, one run per file (all ordered pairs)", None,
         [new_gate(runs[a], runs[b], history(a, b)) for a, b in ordered], [old_gate(runs[a], runs[b]) for a, b in ordered]),
        ("A/A pass, 3 runs per file (no history)", None,
         [new_gate(joined(a), joined(b)) for a, b in triple_pairs], [old_gate(joined(a), joined(b)) for a, b in triple_pairs]),
    ]
    rows += [
        ("A/A pass, one run per file, no history (disjoint)", None,
         [new_gate(runs[a], runs[b]) for a, b in pairs], [old_gate(runs[a], runs[b]) for a, b in pairs]),
        ("A/A pass, one run per file, no history (all pairs)", None,
         [new_gate(runs[a], runs[b]) for a, b in ordered], [old_gate(runs[a], runs[b]) for a, b in ordered]),
        ("x1.3 at every point, one run per file, no history", (math.log(1.3), everywhere_sd * math.sqrt(2), "collective", 1),
         [not new_gate(runs[a], scaled(runs[b], 1.3)) for a, b in ordered],
         [not old_gate(runs[a], scaled(runs[b], 1.3)) for a, b in ordered]),
        ("x1.3 at one point, one run per file, no history", (math.log(1.3), sigma_point * math.sqrt(2), "vs its run", 1),
         [not new_gate(runs[a], scaled(runs[b], 1.3, s)) for a, b in pairs for s in sizes],
         [not old_gate(runs[a], scaled(runs[b], 1.3, s)) for a, b in pairs for s in sizes]),
        # half the points moved together: a scatter read from the pair's own ratios must not take them for noise
        ("x2 at the top half of the sizes, one run, no history", None,
         [not new_gate(runs[a], scaled(runs[b], 2.0, sizes=set(sizes[len(sizes) // 2:]))) for a, b in ordered],
         [not old_gate(runs[a], scaled(runs[b], 2.0, sizes=set(sizes[len(sizes) // 2:]))) for a, b in ordered]),
        ("x2 at every other size (half), one run, no history", None,
         [not new_gate(runs[a], scaled(runs[b], 2.0, sizes=set(sizes[::2]))) for a, b in ordered],
         [not old_gate(runs[a], scaled(runs[b], 2.0, sizes=set(sizes[::2]))) for a, b in ordered]),
    ]
    for factor in (1.3, 1.1):
        rows.append((f"x{factor} at every point, one run per file (all pairs)",
                     (math.log(factor), everywhere_sd * math.sqrt(2), "collective", 1),
                     [not new_gate(runs[a], scaled(runs[b], factor), history(a, b)) for a, b in ordered],
                     [not old_gate(runs[a], scaled(runs[b], factor)) for a, b in ordered]))
    rows += [
        ("x1.3 at every point, 3 runs per file (no history)",
         (math.log(1.3), everywhere_sd * math.sqrt(2 / 3), "collective", 3),
         [not new_gate(joined(a), joined(b, factor=1.3)) for a, b in triple_pairs],
         [not old_gate(joined(a), joined(b, factor=1.3)) for a, b in triple_pairs]),
        ("x1.3 at one point, 3 runs per file (no history)", (math.log(1.3), sigma_point * math.sqrt(2 / 3), "vs its run", 3),
         [not new_gate(joined(a), joined(b, factor=1.3, size=s)) for a, b in triple_pairs for s in sizes],
         [not old_gate(joined(a), joined(b, factor=1.3, size=s)) for a, b in triple_pairs for s in sizes]),
        ("A/A pass, 3 runs per file + history", None,
         [new_gate(joined(a), joined(b), history(*a, *b)) for a, b in triple_pairs], None),
        ("x1.3 at one point, 3 runs per file + history", (math.log(1.3), sigma_point * math.sqrt(2 / 3), "vs its run", 3),
         [not new_gate(joined(a), joined(b, factor=1.3, size=s), history(*a, *b)) for a, b in triple_pairs for s in sizes],
         None),
    ]
    for name, bound, new_outcomes, old_outcomes in rows:
        shown = ""
        if bound is not None:
            delta, sigma, kind, num_new = bound
            shown = (f"{best_detection(delta, sigma):.0%} / "
                     f"{best_detection(delta, sigma, gate_share_z(kind, num_points, num_new)):.0%}")
        old = "(no history)" if old_outcomes is None else rate(old_outcomes)
        print(f"{name:52s} {rate(new_outcomes):>14s} {shown:>11s}   {old:>14s}")

if __name__ == "__main__":
    main()
