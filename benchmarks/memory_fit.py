"""Does the memory model let the published layouts fit, and does it say NVIDIA needed its memory savers?

For every published layout in the calibration rows (commbench/data/calibration-runs.json), the held-out GB300
runs and the newer releases' runs (benchmarks/data/), as calibration predicts it (calibrate/published.py
predict_runs): PREDICTED memory per GPU by term (weights, gradients, optimizer state, activations, reserve)
against the GPU's usable HBM. A published layout RAN, so one predicted over HBM is a model error (an over-count
somewhere). Then, for each row whose recipe pays for a memory saver (recompute selective / full / block
recompute_layers / mla_up_proj / moe_act, Megatron-FSDP, CPU offloading), the same layout with that saver
removed (recompute none, no FSDP, no offloading): the PREDICTED headroom it would have had. A vendor recipe
that pays for a saver most likely needed it, so "removed and still fits with much headroom" hints at an
under-count; the two readings bound the memory model from both sides.

    python benchmarks/memory_fit.py                 # every table, every row
    python benchmarks/memory_fit.py --only-flagged  # only rows over HBM, or fitting with a saver removed
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

from cli_args import calibration_argument, calibration_of, parser_for
from commbench.planner.calibrate.published import _preset, published_runs, run_megatron_core
from commbench.planner.layout.spec import LayoutArrays
from commbench.planner.search.space import DEFAULT_HEADROOM
from commbench.planner.step.evaluate import evaluate_layouts
from commbench.planner.step.loss_memory import run_loss
from commbench.planner.step.terms import CALIBRATED

DATA = Path(__file__).parent / "data"
TABLES = (("calibration", None), ("held-out GB300", DATA / "heldout-gb300-runs.json"),
          ("newer releases", DATA / "newer-release-runs.json"))
GB = 1e9
TERMS = ("weights", "grads", "optimizer", "activations", "reserve")


def savers(layout) -> list[str]:
    """The memory savers a layout pays for (names as printed)."""
    out = []
    if layout.recompute != "none":
        out.append(f"recompute={layout.recompute}" + (f"/{layout.recompute_layers}" if layout.recompute_layers else ""))
    if layout.fsdp:
        out.append("fsdp")
    if layout.cpu_offload_layers:
        out.append(f"offload={layout.cpu_offload_layers}")
    return out


def without_savers(layout):
    """The layout with every memory saver removed: no recompute, no FSDP (the distributed optimizer kept), no
    CPU offloading."""
    return dataclasses.replace(layout, recompute="none", recompute_layers=0, fsdp=False, cpu_offload_layers=0)


def memory_rows(runs, cal=CALIBRATED) -> list[dict]:
    """One dict per modelled run: its predicted memory terms (bytes) as published and with its savers removed
    (None where it has none, or where the layout without them is invalid)."""
    modelled = [r for r in runs if r.layout is not None]
    out = []
    for run in modelled:
        lay = run.layout
        names = savers(lay)
        lays = [lay] + ([without_savers(lay)] if names else [])
        bd = evaluate_layouts(run.model, _preset(run.preset, int(run.row["num_gpus"])), LayoutArrays.from_layouts(lays),
                              seq_len=int(run.row["seq_len"]), calibration=cal,
                              megatron_core=run_megatron_core(run.row),
                              loss=run_loss("megatron"))   # the TE cross entropy the published runs ran

        def terms(i):
            return {t: float(getattr(bd, f"mem_{t}_bytes")[i]) for t in TERMS} | {
                "total": float(bd.mem_total_bytes[i]), "capacity": float(bd.mem_capacity_bytes[i]),
                "valid": bool(bd.valid[i])}

        row = dict(run=run, savers=names, published=terms(0), removed=None)
        if names and bool(bd.valid[1]):
            row["removed"] = terms(1)
        out.append(row)
    return out


def over_hbm(row: dict) -> bool:
    p = row["published"]
    return p["total"] > p["capacity"]


def within_headroom(row: dict) -> bool:
    """The published layout uses more than the search's default share of HBM (search.space.DEFAULT_HEADROOM)."""
    p = row["published"]
    return p["total"] > p["capacity"] * (1.0 - DEFAULT_HEADROOM)


def removed_fits(row: dict) -> bool:
    r = row["removed"]
    return r is not None and r["total"] <= r["capacity"]


def show(rows: list[dict], title: str, only_flagged: bool) -> None:
    print(f"{title}: PREDICTED memory per GPU, GB (a published layout over HBM is a model error: it ran)")
    print(f"{'#':>3} {'run':44} {'wts':>6} {'grad':>6} {'opt':>6} {'act':>6} {'rsv':>6} {'total':>6} {'hbm':>5} "
          f"{'head':>6}  savers -> headroom without them")
    for r in rows:
        p, run = r["published"], r["run"]
        flag = over_hbm(r) or removed_fits(r)
        if only_flagged and not flag:
            continue
        head = (p["capacity"] - p["total"]) / GB
        if r["savers"]:
            if r["removed"] is None:
                tail = f"{', '.join(r['savers'])} -> (invalid without them)"
            else:
                rh = (r["removed"]["capacity"] - r["removed"]["total"]) / GB
                tail = f"{', '.join(r['savers'])} -> {rh:+.1f} GB" + ("  FITS WITHOUT" if rh >= 0 else "")
        else:
            tail = "-"
        mark = "  OVER HBM" if over_hbm(r) else ""
        print(f"{run.index:>3} {run.label[:44]:44} " + " ".join(f"{p[t] / GB:6.1f}" for t in TERMS)
              + f" {p['total'] / GB:6.1f} {p['capacity'] / GB:5.0f} {head:+6.1f}  {tail}{mark}")
    n = len(rows)
    over = [r for r in rows if over_hbm(r)]
    with_savers = [r for r in rows if r["savers"] and r["removed"] is not None]
    fits = [r for r in with_savers if removed_fits(r)]
    heads = np.array([(r["removed"]["capacity"] - r["removed"]["total"]) / GB for r in fits])
    print(f"{title}: {n} published layouts; {len(over)} PREDICTED over HBM (model errors: they ran"
          + (f": rows {', '.join(str(r['run'].index) for r in over)}" if over else "") + f"); {len(with_savers)} pay "
          f"for a memory saver, of which {len(fits)} are PREDICTED to fit without it"
          + (f" (median headroom {np.median(heads):.1f} GB)" if len(fits) else ""))
    tight = [r for r in rows if not over_hbm(r) and within_headroom(r)]
    print(f"  {len(tight)} more fit but leave less than the search's {DEFAULT_HEADROOM * 100:g}% HBM headroom (PREDICTED; "
          f"`plan` would not propose them, though they ran)"
          + (f": rows {', '.join(str(r['run'].index) for r in tight)}" if tight else ""))


def main(argv: list[str]) -> int:
    parser = parser_for(__doc__)
    parser.add_argument("--only-flagged", action="store_true",
                        help="print only rows over HBM or that fit with their savers removed")
    calibration_argument(parser)
    args = parser.parse_args(argv)
    cal = calibration_of(parser, args.calibration)
    for title, path in TABLES:
        runs = published_runs() if path is None else published_runs(tuple(json.loads(path.read_text())))
        show(memory_rows(runs, cal), title, args.only_flagged)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
