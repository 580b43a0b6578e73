"""`commbench compare BASE.jsonl NEW.jsonl`: ratio per point, geometric mean per collective, and a
non-zero exit on a regression beyond the threshold and the recorded run-to-run spread."""

from __future__ import annotations

from typing import Annotated

import typer
import json

from commbench.cli.base import command, console, err_console, fail
from commbench.results.compare import compare, parse_threshold
from commbench.results.records import measurements, read_records
from commbench.results.tables import Col, print_table


def verdict(p) -> str:
    return "regressed" if p.regressed else ("faster" if p.ratio < 1 else "ok")


def comparison_document(result, base: str, new: str) -> dict:
    """`compare --json`: one object per matched point with its verdict; ratios are of measured medians."""
    return {"format": "commbench-compare", "version": 1, "base": base, "new": new,
            "max_regression": result.max_regression, "passed": not result.regressions,
            "points": [{"collective": p.collective, "point": p.label, "base_time_us": p.base_us, "new_time_us": p.new_us,
                        "ratio": p.ratio, "spread": p.spread, "verdict": verdict(p)}
                       for p in sorted(result.points, key=lambda p: p.key)],
            "geomean_ratio_by_collective": dict(sorted(result.geomean_by_collective.items())),
            "only_in_base": result.only_in_base, "only_in_new": result.only_in_new}


def read_measurements(path: str):
    def bad_line(number: int, reason: str) -> None:
        err_console.print(f"[yellow]warning:[/] {path}:{number}: skipped unreadable line ({reason})", highlight=False)

    return measurements(read_records([path], on_bad_line=bad_line))


@command("compare", help="Compare two results files point by point; exit 1 when a point regresses (CI gate).")
def compare_cmd(
    base: Annotated[str, typer.Argument(help="Baseline results (JSONL).")],
    new: Annotated[str, typer.Argument(help="New results (JSONL).")],
    max_regression: Annotated[str, typer.Option("--max-regression", help="Allowed slowdown per point, e.g. 10% or 0.1; a point fails only beyond this AND the files' run-to-run spread.")] = "10%",
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict per point as JSON (schema: docs/json-output.md); the exit code is the same.")] = False,
) -> None:
    """Ratios are new / base median time (both measured); > 1 is slower."""
    threshold = parse_threshold(max_regression)
    result = compare(read_measurements(base), read_measurements(new), max_regression=threshold)
    if as_json:
        console.print_json(json.dumps(comparison_document(result, base, new)))
    else:
        rows = [[p.label, f"{p.base_us:.2f}", f"{p.new_us:.2f}", f"{p.ratio:.3f}", f"±{p.spread:.1%}",
                 "[bold red]REGRESSED[/]" if p.regressed else verdict(p)] for p in sorted(result.points, key=lambda p: p.key)]
        print_table(console, f"measured {new} vs measured {base} (time ratio new/base; > 1 is slower)",
                    [Col(name="point", numeric=False), Col(name="base (µs)"), Col(name="new (µs)"), Col(name="ratio"),
                     Col(name="spread", keep=1), Col(name="verdict", numeric=False)], rows)
        print_table(console, "geometric mean of time ratios per collective",
                    [Col(name="collective", numeric=False), Col(name="points"), Col(name="geomean ratio")],
                    [[name, str(sum(p.collective == name for p in result.points)), f"{value:.3f}"]
                     for name, value in sorted(result.geomean_by_collective.items())])
    if (result.only_in_base or result.only_in_new) and not as_json:
        console.print(f"unmatched points: {result.only_in_base} only in {base}, {result.only_in_new} only in {new}",
                      highlight=False)
    if result.regressions:
        worst = max(result.regressions, key=lambda p: p.ratio)
        raise fail(f"{len(result.regressions)} point(s) regressed beyond {threshold:.0%} and the run-to-run spread; "
                   f"worst: {worst.label} x{worst.ratio:.2f} (spread ±{worst.spread:.1%})", exit_code=1)
    if not as_json:
        console.print(f"[green]pass[/]: {len(result.points)} point(s) compared, none slower than {threshold:.0%} "
                      "beyond the recorded spread", highlight=False)
