"""Predicted vs published tokens/s/GPU for every calibration row, the median absolute percentage
error, and how many published layouts the model predicts to fit in memory.

    python benchmarks/planner_calibration.py          # with the calibrated terms in use
    python benchmarks/planner_calibration.py --fit    # refit the terms first and print them
"""

from __future__ import annotations

import sys

import numpy as np

from commbench.planner.calibration import CALIBRATED, FITTED_TERMS
from commbench.planner.published import fit_calibration, predict_runs, published_runs


def main(argv: list[str]) -> int:
    runs = published_runs()
    cal = CALIBRATED
    if "--fit" in argv:
        cal = fit_calibration(runs)
        print("fitted terms:")
        for name in FITTED_TERMS:
            print(f"  {name} = {getattr(cal, name):.4g}")
    p = predict_runs(runs, cal)
    print(f"{'#':>3} {'run':46} {'layout':34} {'pred tok/s':>10} {'published':>10} {'err%':>7} {'mem GB':>7} {'cap':>5} fit")
    for j, r in enumerate(p.runs):
        lay = r.layout
        desc = f"tp{lay.tp} pp{lay.pp} vp{lay.vp} ep{lay.ep} cp{lay.cp} mbs{lay.mbs} gbs{lay.gbs}"
        err = (p.predicted_tokens[j] / p.published_tokens[j] - 1) * 100
        print(f"{r.index:>3} {r.label:46} {desc:34} {p.predicted_tokens[j]:10.0f} {p.published_tokens[j]:10.0f} "
              f"{err:+7.1f} {p.mem_total_bytes[j] / 1e9:7.1f} {p.mem_capacity_bytes[j] / 1e9:5.0f} "
              f"{'yes' if p.fits[j] else 'NO'}")
    skipped = [r for r in runs if r.layout is None]
    print(f"\nnot modelled: {len(skipped)} rows "
          f"({', '.join(sorted({r.skip_reason for r in skipped}))})")
    mape = float(np.median(p.abs_pct_error))
    print(f"rows modelled: {len(p.runs)}")
    print(f"median absolute percentage error (predicted vs published tokens/s/GPU): {mape:.1f}%  (goal <= 15%)")
    print(f"mean absolute percentage error: {float(np.mean(p.abs_pct_error)):.1f}%; "
          f"rows within 15%: {int(np.sum(p.abs_pct_error <= 15))}/{len(p.runs)}")
    print(f"published layouts predicted to fit in memory: {int(p.fits.sum())}/{len(p.runs)}  (goal: all)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
