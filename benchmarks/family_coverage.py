"""Which published runs of issue 28's families the planner models, which it refuses and why, and the
median |error| of the modelled ones by family (predicted with the calibration in use, never fitted); "over HBM":
modelled rows whose predicted memory exceeds the GPU's (the run as published fits: a memory-model miss).

Runs: every pre-training row of Megatron-Bridge's performance summaries (docs/performance-summary.md and
performance-summary-archive.md at 067f987, 26.02 onwards, transcribed in benchmarks/data/new-family-runs.json)
of Nemotron-3, Kimi-K2, DeepSeek-V4 or Qwen3-Next, or with Megatron-FSDP (FSDP > 0), plus the rows of
commbench/data/calibration-runs.json of those kinds (the 25.x tables); duplicates once. "seen" = the row
is in the calibration set (its figure was fitted), "unseen" = it is not.

    python benchmarks/family_coverage.py
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cli_args import parser_for
from commbench.data.reference import calibration_runs  # noqa: E402
from commbench.planner.calibrate.published import predict_runs, published_runs  # noqa: E402

NEW_ROWS = Path(__file__).parent / "data" / "new-family-runs.json"
FAMILIES = (("Nemotron-3 Ultra", r"nemotron.?3.?ultra"), ("Nemotron-3 Super", r"nemotron.?3.?super"),
            ("Nemotron-3 Nano", r"nemotron.?3.?nano"), ("Nemotron-3.5", r"nemotron.?3.?5"),
            ("Kimi-K2", r"kimi"), ("DeepSeek-V4", r"deepseek.?v4"), ("Qwen3-Next", r"qwen3.?next"))
KEY_FIELDS = ("model", "gpu", "num_gpus", "precision", "gbs", "mbs", "tp", "pp", "cp", "ep", "release",
              "tokens_per_s_per_gpu")


def family(row: dict) -> str | None:
    """The row's family, "Megatron-FSDP" for an FSDP row of another model, None otherwise."""
    name = str(row["model"]).lower()
    for label, pattern in FAMILIES:
        if re.search(pattern, name):
            return label
    return "Megatron-FSDP" if re.search(r"FSDP=[1-9]", row.get("notes") or "") else None


def key(row: dict) -> tuple:
    """A run's identity across the tables' spellings (Nemotron-3-Nano / Nemotron_3_Nano, GB200 / DGX-GB200)."""
    return tuple(re.sub(r"[^a-z0-9.]", "", str(row.get(k)).lower().replace("dgx-", "")) for k in KEY_FIELDS)


def coverage_rows() -> tuple[list[dict], set[tuple]]:
    seen = {key(r) for r in calibration_runs()}
    rows, keys = [], set()
    for r in list(calibration_runs()) + json.loads(NEW_ROWS.read_text()):
        if family(r) and key(r) not in keys:
            keys.add(key(r))
            rows.append(r)
    return rows, seen


def main(argv: list[str]) -> int:
    parser_for(__doc__).parse_args(argv)   # --help; no options
    rows, seen = coverage_rows()
    runs = published_runs(tuple(rows))
    pred = predict_runs(runs)
    errors = dict(zip((id(r) for r in pred.runs), pred.abs_pct_error))
    fits = dict(zip((id(r) for r in pred.runs), pred.fits))
    by_family: dict[str, dict] = {}
    for r in runs:
        f = by_family.setdefault(family(r.row), {"rows": 0, "modelled": 0, "unseen": 0, "errors": [],
                                                 "unseen_errors": [], "refused": {},
                                                 "over_hbm": 0})
        f["rows"] += 1
        unseen = key(r.row) not in seen
        f["unseen"] += unseen
        if r.layout is None:
            f["refused"][r.skip_reason] = f["refused"].get(r.skip_reason, 0) + 1
            continue
        f["modelled"] += 1
        f["over_hbm"] += not fits[id(r)]
        f["errors"].append(errors[id(r)])
        if unseen:
            f["unseen_errors"].append(errors[id(r)])
    print(f"{'family':<18} {'rows':>4} {'unseen':>6} {'modelled':>8} {'median |err|':>12} {'unseen median':>13} "
          f"{'over HBM':>8}")
    total = modelled = 0
    for name, f in sorted(by_family.items()):
        med = f"{np.median(f['errors']):.1f}%" if f["errors"] else "-"
        med_u = f"{np.median(f['unseen_errors']):.1f}%" if f["unseen_errors"] else "-"
        print(f"{name:<18} {f['rows']:>4} {f['unseen']:>6} {f['modelled']:>8} {med:>12} {med_u:>13} {f['over_hbm']:>8}")
        total, modelled = total + f["rows"], modelled + f["modelled"]
    print(f"{'all':<18} {total:>4} {'':>6} {modelled:>8}   ({100.0 * modelled / total:.0f}% modelled)")
    refused = [(name, reason, n) for name, f in sorted(by_family.items()) for reason, n in f["refused"].items()]
    print("\nrefused (not modelled), by reason:" + ("" if refused else " none"))
    for name, reason, n in refused:
        print(f"  {name}: {n} x {reason}")
    print("\nper modelled row (predicted vs published tokens/s/GPU):")
    for r, p, q, e, ok in zip(pred.runs, pred.predicted_tokens, pred.published_tokens, pred.abs_pct_error, pred.fits):
        tag = ("seen" if key(r.row) in seen else "unseen") + ("" if ok else ", over HBM as modelled")
        lay = r.layout
        mode = f" hsdp{lay.fsdp_replicas}" if lay.fsdp_replicas > 1 else " fsdp" if lay.fsdp else ""
        print(f"  {r.label:<44} tp{lay.tp} pp{lay.pp} ep{lay.ep}{mode:<6} {p:>8.0f} vs {q:>8.0f} ({e:4.1f}%) {tag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
