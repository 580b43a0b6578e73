"""`commbench compare BASE.jsonl NEW.jsonl`: ratio per point with its 95% interval, geometric mean per
collective, and exit 1 when a point regresses beyond the threshold and the noise, or newly fails."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text
from rich.table import Table

from commbench.cli.base import command, console, fail
from commbench.results.render import styled
from commbench.results.compare import AUTO, check_statistic, compare, parse_threshold
from commbench.results.records import TIME_STATISTICS, measurements, read_records

_STYLE = {"REGRESSED": "bold red", "newly failed": "bold red", "newly wrong": "bold red", "faster": "green",
          "slower (within noise)": "yellow"}


def read_measurements(path: str):
    def bad_line(number: int, reason: str) -> None:
        console.print(styled("[yellow]warning:[/] {}:{}: skipped unreadable line ({})", path, number, reason),
                      highlight=False)

    return measurements(read_records([path], on_bad_line=bad_line))


def _us(value):
    return "-" if value is None else f"{value:.2f}"


@command("compare", help="Compare two results files point by point; exit 1 when a point regresses or newly fails (CI gate).")
def compare_cmd(
    base: Annotated[str, typer.Argument(help="Baseline results (JSONL).")],
    new: Annotated[str, typer.Argument(help="New results (JSONL).")],
    max_regression: Annotated[str, typer.Option("--max-regression", help="Allowed slowdown per point, e.g. 10% or 0.1; a point fails only beyond this AND beyond the 95% interval of the ratio from the recorded per-iteration samples.")] = "10%",
    statistic: Annotated[str, typer.Option("--statistic", help=f"Time statistic to compare: {AUTO} (median when both files have it, else nccl-tests' time as imported files hold), " + ", ".join(TIME_STATISTICS) + ".")] = AUTO,
) -> None:
    """Ratios are new / base of one named statistic (both measured); > 1 is slower."""
    threshold = parse_threshold(max_regression)
    result = compare(read_measurements(base), read_measurements(new), max_regression=threshold,
                     statistic=check_statistic(statistic))
    table = Table(title=f"measured {new} vs measured {base} (time ratio new/base; > 1 is slower)",
                  title_justify="left")
    for name in ("point", "statistic", "base (µs)", "new (µs)", "ratio", "95% interval", "noise", "verdict"):
        table.add_column(name, justify="left" if name in ("point", "statistic", "verdict", "noise") else "right")
    for p in sorted(result.points, key=lambda p: p.key):
        interval = "-" if p.ratio_low is None else f"{p.ratio_low:.3f}..{p.ratio_high:.3f}"
        style = _STYLE.get(p.verdict)
        verdict = Text(p.verdict, style=style) if style else p.verdict
        table.add_row(p.label, p.statistic, _us(p.base_us), _us(p.new_us),
                      "-" if p.ratio is None else f"{p.ratio:.3f}", interval, p.noise_text(), verdict)
    console.print(table)
    summary = Table(title="geometric mean of time ratios per collective", title_justify="left")
    summary.add_column("collective")
    summary.add_column("points", justify="right")
    summary.add_column("geomean ratio", justify="right")
    summary.add_column("95% interval", justify="right")
    summary.add_column("verdict")
    for name, value in sorted(result.geomean_by_collective.items()):
        low, high = result.geomean_interval_by_collective[name]
        verdict = styled("[bold red]REGRESSED[/]") if name in result.regressed_collectives else "ok"
        summary.add_row(name, str(sum(p.collective == name and p.ratio is not None for p in result.points)),
                        f"{value:.3f}", f"{low:.3f}..{high:.3f}", verdict)
    console.print(summary)
    if result.only_in_base or result.only_in_new:
        console.print(f"unmatched points: {result.only_in_base} only in {base}, {result.only_in_new} only in "
                      f"{new}", highlight=False)
    if result.regressions or result.regressed_collectives:
        slow = [p for p in result.regressions if p.verdict == "REGRESSED"]
        bad = [p for p in result.regressions if p.verdict != "REGRESSED"]
        parts = [f"{name} slower as a whole: geomean x{result.geomean_by_collective[name]:.2f} beyond "
                 f"{threshold:.0%} and the noise" for name in result.regressed_collectives]
        if slow:
            worst = max(slow, key=lambda p: p.ratio)
            parts.append(f"{len(slow)} point(s) regressed beyond {threshold:.0%} and the noise; worst: {worst.label} "
                         f"x{worst.ratio:.2f} ({worst.statistic}, noise {worst.noise_text()})")
        if bad:
            parts.append(f"{len(bad)} point(s) ok in the base {bad[0].verdict} in the new file (first: {bad[0].label})")
        raise fail("; ".join(parts), exit_code=1)
    console.print(styled("[green]pass[/]: {} point(s) compared, none slower than {} beyond the noise, none newly "
                         "failed or wrong", len(result.points), f"{threshold:.0%}"), highlight=False)
