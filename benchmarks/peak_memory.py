"""PREDICTED memory per GPU against published peak memory (benchmarks/data/published-peak-memory.json).

Each row is a run NVIDIA published a peak-memory figure for (Megatron-Bridge skills, docs and model verification
cards; the row names its source). "peak_allocated" rows compare the planner's allocated terms (weights + gradients +
optimizer state + the larger of the activations and the optimizer step's fp32 gradient copy, "step", without its reserve: torch.cuda.max_memory_allocated counts no CUDA context, NCCL,
DeepEP/HybridEP or TP-overlap userbuffers and no allocator cache) with the published peak allocated memory; "oom"
rows ran out of memory, so the planner's total (with its reserve) must exceed the GPU's usable HBM. Held out: no term
is fitted to these rows.

Units: a row gives its figure in the unit its source logs, `published_gb` (decimal, 1e9 B) or `published_gib` (2^30 B),
and the table converts it to GiB. Megatron-Bridge logs decimal GB from v0.2.0 (25.11) on: training/utils/train_utils.py
report_memory divides torch.cuda.memory_stats()'s bytes by 1.0e9 and rounds to 5 significant digits (067f987:1204;
v0.2.0:696; its "(after N iterations) memory (GB)" line, :1146), so a card's or skill's "GiB" over such a figure (e.g.
rank0_peak_allocated_gib 62.166) is that log's GB. Its 25.09 (v0.1.0rc4) log was MiB ("memory (MB)", / 1024^2).

    python benchmarks/peak_memory.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from cli_args import calibration_argument, calibration_of, parser_for
from commbench.planner.calibrate.published import _preset
from commbench.planner.layout.spec import Layout, LayoutArrays
from commbench.planner.models.zoo import load_model
from commbench.planner.step.evaluate import evaluate_layouts
from commbench.planner.step.loss_memory import run_loss
from commbench.planner.step.terms import STEP_MODEL

ROWS = Path(__file__).parent / "data" / "published-peak-memory.json"
GiB = 2 ** 30
UNIT_BYTES = {"published_gb": 1e9, "published_gib": float(GiB)}


def published_gib(row: dict, field: str = "published") -> float:
    """A row's published figure in GiB, from the one unit field it gives (`field`_gb or `field`_gib)."""
    given = [(name, row[name]) for name in (f"{field}_gb", f"{field}_gib") if name in row]
    if len(given) != 1:
        raise ValueError(f"{row['name']}: give exactly one of {field}_gb (decimal) or {field}_gib, got "
                         f"{[name for name, _ in given] or 'neither'}")
    name, value = given[0]
    return float(value) * UNIT_BYTES[name.replace(field, "published")] / GiB


def predict(row: dict, cal) -> dict:
    """The planner's memory terms (GiB) for one published row, as a Megatron-Bridge run."""
    bd = evaluate_layouts(load_model(row["model"]), _preset(row["gpu"], int(row["num_gpus"])),
                          LayoutArrays.from_layouts([Layout(**row["layout"])]), calibration=cal,
                          seq_len=int(row["seq_len"]),
                          loss=run_loss("megatron"))
    terms = {t: float(getattr(bd, f"mem_{t}_bytes")[0]) / GiB
             for t in ("weights", "grads", "optimizer", "activations", "optimizer_step", "reserve", "capacity")}
    terms["allocated"] = sum(terms[t] for t in ("weights", "grads", "optimizer")) \
        + max(terms["activations"], terms["optimizer_step"])
    terms["total"] = terms["allocated"] + terms["reserve"]
    return terms


def main(argv: list[str]) -> int:
    parser = parser_for(__doc__)
    calibration_argument(parser)
    args = parser.parse_args(argv)
    cal = calibration_of(parser, args.calibration)
    rows = json.loads(ROWS.read_text())
    print(f"step model {STEP_MODEL}; PREDICTED vs published peak memory per GPU, GiB ({ROWS.name}; pub: the "
          f"published figure in GiB, converted from the unit its source logs)")
    print(f"  {'run':86s} {'wts':>5} {'grad':>5} {'opt':>5} {'act':>6} {'step':>5} {'alloc':>6} {'pub':>7} {'err%':>6}  "
          f"{'total':>6} {'hbm':>6}")
    errors, oom_right, ooms = [], 0, 0
    for row in rows:
        t = predict(row, cal)
        pub = published_gib(row)
        if row["measure"] == "oom":
            ooms += 1
            over = t["total"] > t["capacity"]
            oom_right += over
            verdict = f"OOM published; predicted {'over' if over else 'UNDER'} HBM"
        else:
            errors.append(t["allocated"] / pub - 1.0)
            verdict = f"{errors[-1] * 100:+6.1f}"
        print(f"  {row['name'][:86]:86s} {t['weights']:5.1f} {t['grads']:5.1f} {t['optimizer']:5.1f} "
              f"{t['activations']:6.1f} {t['optimizer_step']:5.1f} {t['allocated']:6.1f} {pub:7.2f} {verdict}  {t['total']:6.1f} {t['capacity']:6.1f}")
    e = np.array(errors)
    print(f"peak allocated: {len(e)} runs, median |error| {np.median(np.abs(e)) * 100:.1f}%, median signed "
          f"{np.median(e) * 100:+.1f}%, worst under-count {e.min() * 100:+.1f}% (an under-count is a layout `plan` may "
          f"propose that does not fit); runs that ran out of memory predicted over HBM: {oom_right} of {ooms}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
