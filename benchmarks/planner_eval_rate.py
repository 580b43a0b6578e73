"""Layouts evaluated per second by one vectorised `evaluate_layouts` call (goal: 100,000 in < 1 s).

    python benchmarks/planner_eval_rate.py [num_layouts]
"""

from __future__ import annotations

import sys
import time

import numpy as np

from cli_args import count_argument, parser_for
from commbench.costmodel import load_preset
from commbench.planner import LayoutArrays, evaluate_layouts, load_model


def random_layouts(num: int, num_gpus: int, seed: int = 0) -> LayoutArrays:
    rng = np.random.default_rng(seed)
    tp = rng.choice([1, 2, 4, 8], num)
    pp = rng.choice([1, 2, 4, 8, 16], num)
    cp = rng.choice([1, 2], num)
    dp = np.maximum(num_gpus // (tp * pp * cp), 1)
    return LayoutArrays.from_columns(
        tp=tp, pp=pp, cp=cp, dp=dp, vp=rng.choice([1, 2, 4], num), ep=rng.choice([1, 8, 16, 32, 64], num),
        etp=1, mbs=rng.choice([1, 2], num), gbs=4096, recompute=rng.integers(0, 3, num),
        precision=rng.integers(0, 3, num), dispatcher=rng.integers(0, 2, num),
        tp_comm_overlap=rng.random(num) < 0.5, moe_a2a_overlap=rng.random(num) < 0.5)


def main(argv: list[str]) -> int:
    num = count_argument(parser_for(__doc__), argv, "num_layouts", 100_000, "layouts per call")
    model = load_model("deepseek-v3")
    fabric = load_preset("gb300-nvl72", num_gpus=256)
    layouts = random_layouts(num, 256)
    evaluate_layouts(model, fabric, layouts.take(np.arange(min(num, 1000))))  # warm caches
    start = time.perf_counter()
    bd = evaluate_layouts(model, fabric, layouts)
    elapsed = time.perf_counter() - start
    print(f"evaluated {num} layouts in {elapsed:.3f} s: {num / elapsed:,.0f} layouts/s "
          f"({int(bd.valid.sum())} valid, {int(bd.fits.sum())} fit)  goal: 100,000 in < 1 s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
