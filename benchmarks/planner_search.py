"""Full layout search of DeepSeek-V3 on GB300 NVL72 (goals on 2 CPU cores: 1,024 GPUs < 2 s, 16,384 < 10 s).

    python benchmarks/planner_search.py

Prints layouts enumerated per second (search time: enumeration, rules, placement, chunked evaluation,
top-K and Pareto; model loading and imports excluded). gbs is 4096 on 1,024 GPUs and 16,384 on
16,384 GPUs (one sequence per GPU per step at least).
"""

from __future__ import annotations

import sys
import time

from commbench.costmodel import load_preset
from commbench.planner import load_model
from commbench.planner.search import SearchRequest, search

CASES = ((256, 4096, None), (1024, 4096, 2.0), (16384, 16384, 10.0))


def main() -> int:
    model = load_model("deepseek-v3")
    search(SearchRequest(model=model, fabric=load_preset("gb300-nvl72", num_gpus=64), num_gpus=64, gbs=512,
                         precision="mxfp8"))  # warm caches
    worst = 0
    for gpus, gbs, goal_s in CASES:
        fabric = load_preset("gb300-nvl72", num_gpus=gpus)
        start = time.perf_counter()
        res = search(SearchRequest(model=model, fabric=fabric, num_gpus=gpus, gbs=gbs, precision="mxfp8"))
        elapsed = time.perf_counter() - start
        verdict = "" if goal_s is None else (f"goal < {goal_s:g} s: " + ("met" if elapsed < goal_s else "MISSED"))
        worst |= goal_s is not None and elapsed >= goal_s
        print(f"deepseek-v3 on {gpus:>6,} GB300: {res.num_enumerated:>9,} layouts ({res.num_valid:,} valid, "
              f"{res.num_fit:,} fit) in {elapsed:.2f} s = {res.num_enumerated / elapsed:,.0f} layouts/s  {verdict}")
    return int(worst)


if __name__ == "__main__":
    sys.exit(main())
