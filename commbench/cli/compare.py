"""`commbench compare BASE.jsonl NEW.jsonl`: ratio per point, geometric mean per collective, and a
non-zero exit on a regression beyond the threshold and the recorded run-to-run spread."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from commbench.cli.base import command, console, fail
from commbench.results.render import styled
from commbench.results.compare import compare, parse_threshold
from commbench.results.records import measurements, read_records


def read_measurements(path: str):
    def bad_line(number: int, reason: str) -> None:
        console.print(styled("[yellow]warning:[/] {}:{}: skipped unreadable line ({})", path, number, reason), highlight=False)

    return measurements(read_records([path], on_bad_line=bad_line))


@command("compare", help="Compare two results files point by point; exit 1 when a point regresses (CI gate).")
def compare_cmd(
    base: Annotated[str, typer.Argument(help="Baseline results (JSONL).")],
    new: Annotated[str, typer.Argument(help="New results (JSONL).")],
    max_regression: Annotated[str, typer.Option("--max-regression", help="Allowed slowdown per point, e.g. 10% or 0.1; a point fails only beyond this AND the files' run-to-run spread.")] = "10%",
) -> None:
    """Ratios are new / base median time (both measured); > 1 is slower."""
    threshold = parse_threshold(max_regression)
    result = compare(read_measurements(base), read_measurements(new), max_regression=threshold)
    table = Table(title=f"measured {new} vs measured {base} (time ratio new/base; > 1 is slower)", title_justify="left")
    for name in ("point", "base (µs)", "new (µs)", "ratio", "spread", "verdict"):
        table.add_column(name, justify="left" if name in ("point", "verdict") else "right")
    for p in sorted(result.points, key=lambda p: p.key):
        verdict = styled("[bold red]REGRESSED[/]") if p.regressed else ("faster" if p.ratio < 1 else "ok")
        table.add_row(p.label, f"{p.base_us:.2f}", f"{p.new_us:.2f}", f"{p.ratio:.3f}", f"±{p.spread:.1%}", verdict)
    console.print(table)
    summary = Table(title="geometric mean of time ratios per collective", title_justify="left")
    summary.add_column("collective")
    summary.add_column("points", justify="right")
    summary.add_column("geomean ratio", justify="right")
    for name, value in sorted(result.geomean_by_collective.items()):
        summary.add_row(name, str(sum(p.collective == name for p in result.points)), f"{value:.3f}")
    console.print(summary)
    if result.only_in_base or result.only_in_new:
        console.print(f"unmatched points: {result.only_in_base} only in {base}, {result.only_in_new} only in {new}",
                      highlight=False)
    if result.regressions:
        worst = max(result.regressions, key=lambda p: p.ratio)
        raise fail(f"{len(result.regressions)} point(s) regressed beyond {threshold:.0%} and the run-to-run spread; "
                   f"worst: {worst.label} x{worst.ratio:.2f} (spread ±{worst.spread:.1%})", exit_code=1)
    console.print(styled("[green]pass[/]: {} point(s) compared, none slower than {} beyond the recorded spread",
                         len(result.points), f"{threshold:.0%}"), highlight=False)
