"""The NCCL-tuning part of `commbench report`: per-size winners and their speed-up over NCCL's default
(Markdown table), and a heat map of every combination's speed-up per size (PNG). All measured.

One table per scale (collective, nNodes, nRanks) and system: where the runs at a scale differ in NCCL
version, GPU models or hosts (results.run_setup.SYSTEM_FIELDS, as `nccl-tuner` refuses them), each
system gets its own table, titled by what differs, and a note names the runs (records.mixed_runs_text):
a winner is only ever a combination beating NCCL's default measured on the same system, as nccl-tests
results are read run by run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from commbench.files import safe_file_stem
from commbench.comm.nccl_tuning import TuningCombo
from commbench.results.nccl_tuner import (Cell, Rule, TunedPoint, against_a_rule, choose_cells, hold_to_measured,
                                          merge_rules, points_from_records)
from commbench.units import format_size


def tuning_points(records: list) -> list[TunedPoint]:
    """Points of runs measured with the tuning axes (records without nccl_* params are left out)."""
    points, _ = points_from_records([r for r in records if getattr(r, "record_type", "") == "header"
                                     or "nccl_algo" in getattr(r, "params", {})])
    return points


def scale_title(collective: str, nodes: int, ranks: int) -> str:
    return f"{collective}, {nodes} node(s), {ranks} rank(s)"


@dataclass(frozen=True, kw_only=True)
class WinnerTable:
    """The winners at one scale on one system: `system` says what sets it apart ('' when the scale has one)."""

    scale: tuple[str, int, int]
    system: str
    points: list[TunedPoint]
    cells: list[Cell]
    rules: list[Rule] = field(default_factory=list)  # as nccl-tuner writes them from these cells (config_rules)

    @property
    def title(self) -> str:
        return scale_title(*self.scale) + (f" — {self.system}" if self.system else "")


def winner_tables(records: list) -> tuple[list[WinnerTable], list[str]]:
    """The winners per scale and system, and a note per scale whose runs were measured on several systems."""
    from commbench.results.records import RunHeader
    from commbench.results.run_setup import SYSTEM_FIELDS, labels_by_what_differs, mixed_setup_texts, setup_of

    points = tuning_points(records)
    header = {r.run_id: r for r in records if isinstance(r, RunHeader)}  # every point's run has one
    tables, notes = [], []
    for scale in sorted({(p.collective, p.nodes, p.ranks) for p in points}):
        mine = [p for p in points if (p.collective, p.nodes, p.ranks) == scale]
        runs = {p.run_id: header[p.run_id] for p in mine}
        systems: dict[tuple, list[TunedPoint]] = {}
        for p in mine:
            systems.setdefault(setup_of(runs[p.run_id], SYSTEM_FIELDS), []).append(p)
        labels = labels_by_what_differs(runs, SYSTEM_FIELDS, unique=False) if len(systems) > 1 else {}
        if labels:
            notes.append(f"{scale_title(*scale)}: the results mix {'; '.join(mixed_setup_texts(runs, SYSTEM_FIELDS))}: "
                         "one winners table per system; none sets NCCL's default measured on one against a "
                         "combination measured on another")
        for group in systems.values():
            cells = choose_cells(group, any_channels=True)
            tables.append(WinnerTable(scale=scale, system=labels.get(group[0].run_id, ""), points=group,
                                      cells=cells, rules=config_rules(cells, header)))
    return tables, notes


def config_rules(cells: list[Cell], headers: dict) -> list[Rule]:
    """The rules `commbench nccl-tuner` writes from `cells` for commbench's plugin (workflows.nccl_tuner.rules_for:
    held to the measured sizes, merged, and channels 0 -- NCCL's own count -- where NCCL may have lowered the
    measured count, results.nccl_channels); `headers`: run id -> RunHeader of the points' runs."""
    from commbench.results.nccl_channels import leave_lowered_channels_to_nccl
    from commbench.results.nccl_tuner_targets import RULE_PIPE_OPS

    merged = merge_rules(hold_to_measured(cells), pipe_ops=RULE_PIPE_OPS["commbench"], name_reg_buff=True)
    return leave_lowered_channels_to_nccl(merged, {run_id: h.nccl_settings() for run_id, h in headers.items()},
                                          {run_id: h.nccl_version for run_id, h in headers.items()})


def rule_label(rule: Rule) -> str:
    """A rule as the config's line names it: algorithm/protocol/channels, channels 0 said to be NCCL's own count."""
    return f"{rule.algo}/{rule.proto}/{rule.channels}" + (" (NCCL's count)" if rule.channels == 0 else "")


WINNER_COLUMNS = ("size", "NCCL default (µs)", "best combination", "best (µs)", "speed-up", "noise", "rule")


def judged_times_us(points: list[TunedPoint]) -> dict[tuple, float]:
    """(collective, nodes, ranks, regBuff, size, combination) -> the time nccl-tuner judges it by: of a point
    measured more than once (repeats, several dtypes or ways) NCCL's default at its fastest and a combination at
    its slowest (results.nccl_tuner.against_a_rule), whatever the file order."""
    kept: dict[tuple, TunedPoint] = {}
    for p in points:
        key = (p.collective, p.nodes, p.ranks, p.reg_buff, p.size_bytes, p.combo)
        kept[key] = against_a_rule(kept.get(key), p)
    return {key: p.time_us for key, p in kept.items()}


def winner_rows(cells: list[Cell], points: list[TunedPoint],
                rules: list[Rule] | None = None) -> list[tuple[tuple, list[str]]]:
    """((collective, nodes, ranks), row) per cell, columns as WINNER_COLUMNS (all measured; times as nccl-tuner
    judges them: judged_times_us). The rule column says what the config holds at the cell's size (`rules`: the
    table's config_rules; a measured channel count may be written as 0 there), else the cell's choice."""
    time_us = judged_times_us(points)
    rows = []
    for cell in cells:
        chosen = cell.choice.label if cell.choice else "NCCL default kept"
        if cell.choice and rules is not None:
            regime = (cell.collective, cell.nodes, cell.ranks, cell.reg_buff)
            chosen = next((rule_label(r) for r in rules if (r.collective, r.nodes, r.ranks, r.reg_buff) == regime
                           and r.min_bytes <= cell.size_bytes <= r.max_bytes), "no rule written")
        scale = (cell.collective, cell.nodes, cell.ranks)
        at = (*scale, cell.reg_buff, cell.size_bytes)
        base = time_us.get((*at, TuningCombo()))
        best = time_us.get((*at, cell.best)) if cell.best else None
        rows.append((scale, [format_size(cell.size_bytes), "-" if base is None else f"{base:.2f}",
                             cell.best.label if cell.best else "-", "-" if best is None else f"{best:.2f}",
                             "-" if cell.speedup is None else f"{cell.speedup:.2f}x",
                             f"{100 * cell.noise_rel:.1f}%" if math.isfinite(cell.noise_rel) else "unknown",
                             chosen]))
    return rows


def winners_markdown(tables: list[WinnerTable], notes: list[str] = ()) -> list[str]:
    md = ["## NCCL tuning: per-size winners (measured)", "",
          "Speed-up = NCCL default time / best time (median). A winner is kept only beyond the measured noise "
          "(of the ratio: both points' 95% half-widths in quadrature, widened for picking the fastest of the K "
          "combinations measured at the size (Bonferroni); unknown for one iteration or no samples) "
          "(`commbench nccl-tuner` writes these as plugin rules). A point measured more than once shows as "
          "nccl-tuner judges it: NCCL's default at its fastest, a combination at its slowest. The rule column is what "
          "the config holds at that size (algorithm/protocol/channels): channels 0 is NCCL's own count, written "
          "where NCCL may have lowered the measured count (docs/nccl-tuner.md).", ""]
    md += [f"- note: {note}" for note in notes]
    for table in tables:
        md += ["", f"### {table.title}", "", "| " + " | ".join(WINNER_COLUMNS) + " |",
               "|---:|---:|---|---:|---:|---:|---|"]
        md += ["| " + " | ".join(row) + " |" for _, row in winner_rows(table.cells, table.points, table.rules)]
    return md + [""]


def heatmap(points: list[TunedPoint], scale: tuple[str, int, int], stem: Path, title: str = "",
            formats: tuple[str, ...] = ("png",)) -> list[Path]:
    """Rows: combinations; columns: sizes; colour: NCCL default time / combination time (points of one system;
    repeats as nccl-tuner judges them: judged_times_us)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    mine = [p for p in points if (p.collective, p.nodes, p.ranks) == scale]
    judged = judged_times_us(mine)  # repeats: the default at its fastest, a combination at its slowest
    base = {(reg_buff, size): time_us for (*_, reg_buff, size, combo), time_us in judged.items() if combo.is_default}
    combos = sorted({p.combo for p in mine if not p.combo.is_default}, key=lambda c: c.label)
    sizes = sorted({size for _, size in base})
    if not combos or not sizes:
        return []
    grid = np.full((len(combos), len(sizes)), np.nan)
    for (*_, reg_buff, size, combo), time_us in judged.items():
        if combo in combos and (reg_buff, size) in base:
            cell = (combos.index(combo), sizes.index(size))  # against its regBuff regime's default; the least
            grid[cell] = np.fmin(grid[cell], base[reg_buff, size] / time_us)  # favourable of the regimes
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(sizes) + 3), max(2.5, 0.35 * len(combos) + 1.5)))
    spread = max(0.05, float(np.nanmax(np.abs(np.log2(grid))))) if np.isfinite(grid).any() else 1.0
    image = ax.imshow(np.log2(grid), cmap="RdBu", vmin=-spread, vmax=spread, aspect="auto")
    ax.set_xticks(range(len(sizes)), [format_size(s) for s in sizes], rotation=60, fontsize=7)
    ax.set_yticks(range(len(combos)), [c.label for c in combos], fontsize=7)
    ax.set_xlabel("size (nccl-tests' size)")
    for (row, col), value in np.ndenumerate(grid):
        if np.isfinite(value):
            ax.text(col, row, f"{value:.2f}x", ha="center", va="center", fontsize=6)
    ax.set_title(f"{title or scale_title(*scale)}\nspeed-up over NCCL default (measured; blue = faster)", fontsize=9)
    fig.colorbar(image, ax=ax, label="log2(default time / time)")
    fig.tight_layout()
    from commbench.results.plots import save

    return save(fig, stem, formats)   # as every report figure: PNG at 150 dpi, SVG with --svg


def tuning_section(records: list, out: Path, formats: tuple[str, ...] = ("png",)) -> tuple[list[str], list[Path]]:
    """Markdown lines and heat maps (`formats`, the first linked) for the tuned runs among `records` (nothing when
    there are none)."""
    tables, notes = winner_tables(records)  # cells as nccl-tuner writes by default (channels 0: NCCL's count)
    if not tables:
        return [], []
    plots = []
    count: dict[tuple, int] = {}
    for table in tables:
        scale = table.scale
        count[scale] = count.get(scale, 0) + 1
        system = f"-system{count[scale]}" if table.system else ""  # one heat map per system of a scale
        stem = safe_file_stem(f"nccl-tuning-{scale[0]}-{scale[1]}n-{scale[2]}r{system}")
        plots += heatmap(table.points, scale, out / stem, table.title, formats)
    md = winners_markdown(tables, notes) + [f"![NCCL tuning heat map]({path.name})" for path in plots
                                            if path.suffix == f".{formats[0]}"] + [""]
    return md, plots
