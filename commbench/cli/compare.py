"""`commbench compare BASE.jsonl NEW.jsonl`: ratio per point with its 95% interval, geometric mean per
collective, and exit 1 when a point regresses beyond the threshold and the noise, or newly fails."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape

from commbench.cli.base import command, console, err_console, fail
from commbench.results.render import styled
from commbench.results.compare import AUTO, check_statistic, compare, parse_threshold
from commbench.results.records import TIME_STATISTICS, measurements, read_records
from commbench.results.tables import Col, print_table

_STYLE = {"REGRESSED": "bold red", "newly failed": "bold red", "newly wrong": "bold red", "faster": "green",
          "slower (within noise)": "yellow"}


def read_measurements(path: str):
    def bad_line(number: int, reason: str) -> None:
        err_console.print(styled("[yellow]warning:[/] {}:{}: skipped unreadable line ({})", path, number, reason),
                          highlight=False)

    return measurements(read_records([path], on_bad_line=bad_line))


def _us(value):
    return "-" if value is None else f"{value:.2f}"


def comparison_document(result, base: str, new: str) -> dict:
    """`compare --json`: every matched point with its verdict; ratios are new/base of measured times."""
    return {"format": "commbench-compare", "version": 1, "base": base, "new": new,
            "max_regression": result.max_regression,
            "passed": not (result.regressions or result.regressed_collectives),
            "points": [{"collective": p.collective, "point": p.label, "statistic": p.statistic,
                        "base_time_us": p.base_us, "new_time_us": p.new_us, "ratio": p.ratio,
                        "ratio_low": p.ratio_low, "ratio_high": p.ratio_high, "noise": p.noise_text(),
                        "verdict": p.verdict} for p in sorted(result.points, key=lambda p: p.key)],
            "collectives": [{"collective": name, "geomean_ratio": value,
                             "geomean_low": result.geomean_interval_by_collective[name][0],
                             "geomean_high": result.geomean_interval_by_collective[name][1],
                             "regressed": name in result.regressed_collectives}
                            for name, value in sorted(result.geomean_by_collective.items())],
            "only_in_base": result.only_in_base, "only_in_new": result.only_in_new}


@command("compare", help="Compare two results files point by point; exit 1 when a point regresses or newly fails (CI gate).")
def compare_cmd(
    base: Annotated[str, typer.Argument(help="Baseline results (JSONL).")],
    new: Annotated[str, typer.Argument(help="New results (JSONL).")],
    max_regression: Annotated[str, typer.Option("--max-regression", help="Allowed slowdown per point, e.g. 10% or 0.1; a point fails only beyond this AND beyond the 95% interval of the ratio from the recorded per-iteration samples.")] = "10%",
    statistic: Annotated[str, typer.Option("--statistic", help=f"Time statistic to compare: {AUTO} (median when both files have it, else nccl-tests' time as imported files hold), " + ", ".join(TIME_STATISTICS) + ".")] = AUTO,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict per point as JSON (schema: docs/json-output.md); the exit code is the same.")] = False,
) -> None:
    """Ratios are new / base of one named statistic (both measured); > 1 is slower."""
    threshold = parse_threshold(max_regression)
    result = compare(read_measurements(base), read_measurements(new), max_regression=threshold,
                     statistic=check_statistic(statistic))
    if as_json:
        console.print_json(json.dumps(comparison_document(result, base, new)))
    else:
        rows = []
        for p in sorted(result.points, key=lambda p: p.key):
            style = _STYLE.get(p.verdict)
            rows.append([escape(p.label), p.statistic, _us(p.base_us), _us(p.new_us), "-" if p.ratio is None else f"{p.ratio:.3f}",
                         "-" if p.ratio_low is None else f"{p.ratio_low:.3f}..{p.ratio_high:.3f}", escape(p.noise_text()),
                         f"[{style}]{escape(p.verdict)}[/]" if style else escape(p.verdict)])
        print_table(console, f"measured {new} vs measured {base} (time ratio new/base; > 1 is slower)",
                    [Col(name="point", numeric=False), Col(name="statistic", numeric=False, keep=2), Col(name="base (µs)"),
                     Col(name="new (µs)"), Col(name="ratio"), Col(name="95% interval", keep=3),
                     Col(name="noise", numeric=False, keep=1), Col(name="verdict", numeric=False)], rows)
        print_table(console, "geometric mean of time ratios per collective",
                    [Col(name="collective", numeric=False), Col(name="points"), Col(name="geomean ratio"),
                     Col(name="95% interval", keep=1), Col(name="verdict", numeric=False)],
                    [[name, str(sum(p.collective == name and p.ratio is not None for p in result.points)), f"{value:.3f}",
                      "{:.3f}..{:.3f}".format(*result.geomean_interval_by_collective[name]),
                      "[bold red]REGRESSED[/]" if name in result.regressed_collectives else "ok"]
                     for name, value in sorted(result.geomean_by_collective.items())])
    if (result.only_in_base or result.only_in_new) and not as_json:
        console.print(f"unmatched points: {result.only_in_base} only in {base}, {result.only_in_new} only in {new}",
                      highlight=False)
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
    if not as_json:
        console.print(styled("[green]pass[/]: {} point(s) compared, none slower than {} beyond the noise, none newly "
                             "failed or wrong", len(result.points), f"{threshold:.0%}"), highlight=False)
