"""Hierarchical vs flat gradient reduce-scatter on an emulated 2-rack fabric, whole-operation time, with repeats
(the timing claim tests/test_emulate.py used to assert once; needs root and iproute2, like `commbench emulate`).

tests/test_emulate.py asserts what does not depend on the host's load: hierarchical sends 1/R of flat's bytes over
the rack uplinks (veth counters) and its cross-rack stage takes less time than flat. The whole operation also runs
the intra-rack stage over loopback, CPU-bound, so on a loaded host hierarchical can be slower overall (684 vs
598 ms seen with two test suites running on 2 cores). This script alternates the two, `--rounds` times each, and
prints per round and the median of hierarchical/flat (measured), with the host's load average beside it.

    sudo python benchmarks/emulate_hierarchical.py [--rounds 5] [--size 64M] [--rate 1gbit]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def _once(folder: Path, algorithm: str, size: str, rate: str) -> float:
    """One emulated `bench grad_reduce_scatter` run: its median time (µs, measured)."""
    out = folder / f"{algorithm}.jsonl"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "commbench", "emulate", "--racks", "2", "--ranks-per-rack", "2",
           "--scale-out-rate", rate, "--netns-prefix", f"cbb{os.getpid()}", "--", "bench", "grad_reduce_scatter",
           "--algorithm", algorithm, "-b", size, "-e", size, "-n", "3", "-w", "1", "--timeout", "60", "-J", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"error: {algorithm} run failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
    record = [json.loads(line) for line in out.read_text().splitlines()][-1]
    return float(record["time_us_median"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", default="64M")
    parser.add_argument("--rate", default="1gbit")
    args = parser.parse_args()
    if args.rounds < 1:
        raise SystemExit(f"error: --rounds={args.rounds} is invalid: at least 1")
    ratios = []
    with tempfile.TemporaryDirectory(prefix="commbench-emulate-bench-") as tmp:
        for index in range(args.rounds):   # interleaved: the host's load hits both alike
            flat = _once(Path(tmp), "flat", args.size, args.rate)
            hier = _once(Path(tmp), "hierarchical", args.size, args.rate)
            ratios.append(hier / flat)
            print(f"round {index + 1}: flat {flat / 1e3:.0f} ms, hierarchical {hier / 1e3:.0f} ms, "
                  f"hierarchical/flat {hier / flat:.3f} (measured; load average {os.getloadavg()[0]:.1f})")
    print(f"median hierarchical/flat over {len(ratios)} round(s): {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}); below 1: hierarchical faster (measured)")


if __name__ == "__main__":
    main()
