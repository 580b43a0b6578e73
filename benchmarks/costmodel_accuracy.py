"""Predicted vs every published figure: the calibration figures of hardware.toml and the published
curves of benchmarks/data/published-curves.json (held-out ones never set a preset parameter).

    python benchmarks/costmodel_accuracy.py [--points]

Prints, per curve and over all held-out curves, the median |error|, worst error and bias
(median signed error) per size regime: latency (< 512 KiB), middle, bandwidth (>= 64 MiB), and
from 1 MiB up. Errors are on busbw, predicted / published - 1. Issue 20's goal on held-out
curves: median <= 15% over all sizes, <= 10% from 1 MiB up, no regime biased by more than 25%.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cli_args import parser_for
from commbench.costmodel.accuracy import by_regime, curve_points, format_summary, regime_of
from commbench.costmodel.checks import check_presets
from commbench.units import format_size

CURVES = Path(__file__).with_name("data") / "published-curves.json"


def main(argv: list[str]) -> int:
    parser = parser_for(__doc__)
    parser.add_argument("--points", action="store_true", help="also print every published point beside its prediction")
    show_points = parser.parse_args(argv).points
    curves = json.loads(CURVES.read_text(encoding="utf-8"))["curves"]
    print("calibration figures (hardware.toml [[measured]]; commbench systems --checks):")
    checks = check_presets()
    for name, summary in by_regime([(r.figure.size_bytes, r.relative_error) for r in checks]).items():
        print("  " + format_summary(name, summary))
    heldout, same_fabric = [], []
    for curve in curves:
        points = curve_points(curve)
        errors = [(p.size_bytes, p.relative_error) for p in points]
        note = f" [{curve['note']}]" if curve.get("note") else ""
        env = "".join(f", {name}={value}" for name, value in (curve.get("nccl_env") or {}).items())
        print(f"\n{curve['role']}: {curve['name']} ({curve['preset']}, {curve['group_size']} ranks, "
              f"{curve['num_domains']} domain(s), algorithm {curve.get('algorithm') or 'NCCL default'}{env}){note}")
        print(f"  source: {curve['source']}")
        if show_points:
            for p in points:
                print(f"    {format_size(p.size_bytes):>9} {regime_of(p.size_bytes):>9}  published {p.published_busbw_gbps:8.2f}"
                      f"  predicted {p.predicted_busbw_gbps:8.2f}  {p.relative_error:+7.1%}  {p.algorithm}/{p.protocol}")
        for name, summary in by_regime(errors).items():
            print("  " + format_summary(name, summary))
        if curve["role"] == "heldout":
            heldout += errors
            same_fabric += [] if curve.get("note") else errors
    for title, errors in (("all held-out curves", heldout), ("held-out curves on the preset's own fabric", same_fabric)):
        print(f"\n{title}:")
        for name, summary in by_regime(errors).items():
            print("  " + format_summary(name, summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
