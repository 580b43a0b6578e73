"""Start-up cost: a one-point `commbench bench` vs a bare `torchrun` hello-world all-reduce, 2 gloo ranks.

Each round runs, back to back, (a) `torchrun --standalone --nproc-per-node 2 hello.py` (init_process_group,
one all_reduce of 2 floats, destroy), (b) `commbench bench all_reduce --nproc 2 -b 8 -e 8 -n 1 -w 0`
and (c) `python -c "import commbench.cli.app"` (what the CLI pays before any rank exists). Wall time
of the whole command, measured from outside; the printed ratio is the median of commbench / torchrun
over rounds. Where start-up went before (issue 17, item 20): torch's elastic agent (a c10d rendezvous
store, worker spawn re-importing torch in every rank, its monitor loop and shutdown). commbench now
forks gloo ranks from the launcher, which already imported torch, and meets them through a file store.

    python benchmarks/startup.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HELLO = """import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(2)
dist.all_reduce(t)
dist.destroy_process_group()
"""
REPO = Path(__file__).resolve().parents[1]


def wall_s(cmd: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torchrun = shutil.which("torchrun")
    if torchrun is None:
        sys.exit("torchrun not found on PATH")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as folder:
        hello = Path(folder) / "hello.py"
        hello.write_text(HELLO)
        out = Path(folder) / "bench.jsonl"
        runs: dict[str, list[float]] = {"torchrun hello": [], "commbench bench (1 point)": [], "import commbench CLI": []}
        for _ in range(args.rounds):
            runs["torchrun hello"].append(wall_s([torchrun, "--standalone", "--nproc-per-node", "2", str(hello)], env))
            out.unlink(missing_ok=True)
            runs["commbench bench (1 point)"].append(wall_s(
                [sys.executable, "-m", "commbench", "bench", "all_reduce", "--nproc", "2", "-b", "8", "-e", "8", "-n", "1",
                 "-w", "0", "-J", str(out)], env))
            runs["import commbench CLI"].append(wall_s([sys.executable, "-c", "import commbench.cli.app"], env))
    for name, times in runs.items():
        print(f"{name:28s} median {statistics.median(times):6.2f} s  (min {min(times):.2f}, {len(times)} runs)")
    ratios = [c / t for c, t in zip(runs["commbench bench (1 point)"], runs["torchrun hello"])]
    print(f"commbench / torchrun wall time: median ratio {statistics.median(ratios):.2f} (measured, goal <= 1.0)")


if __name__ == "__main__":
    main()
