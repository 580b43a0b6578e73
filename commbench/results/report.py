"""Reports from results files: rich tables, PNG plots (matplotlib, headless) and a Markdown summary.

Plots: busbw vs size (log-x) per collective, one line per (backend, dtype, group size, layout).
Every figure is measured unless a line says "predicted": pass `predict(collective, sizes_bytes,
group_size) -> seconds` (e.g. from a fitted fabric) to overlay predictions as dashed lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from commbench.results.records import Measurement, headline_time
from commbench.results.render import tail_text
from commbench.units import format_size

Predictor = Callable[[str, np.ndarray, int], np.ndarray]  # (collective, sizes_bytes, group_size) -> seconds


@dataclass(frozen=True, kw_only=True)
class ReportFiles:
    markdown: Path
    plots: list[Path]


_SWEPT_PARAMS = ("tokens_per_rank",)  # varies along a curve, like size
_LABELLED_PARAMS = ("algorithm", "routing", "dispatch_mode", "dispatch_dtype", "preset")


def series_key(m: Measurement) -> tuple:
    """Points of one curve share everything but their size: backend, dtype, group, and workload params."""
    params = tuple(sorted((k, str(v)) for k, v in m.params.items() if k not in _SWEPT_PARAMS))
    return (m.backend, m.dtype, m.group_size, m.group_layout, m.in_place, params)


def series_label(key: tuple) -> str:
    backend, dtype, group_size, layout, in_place, params = key
    named = dict(params)
    extra = "".join(f" {named[k]}" for k in _LABELLED_PARAMS if k in named)
    return (f"{backend} {dtype} n={group_size}" + (f" {layout}" if layout != "world" else "")
            + (" in-place" if in_place else "") + extra)


def by_collective(records: Iterable[Measurement]) -> dict[str, dict[tuple, list[Measurement]]]:
    out: dict[str, dict[tuple, list[Measurement]]] = {}
    for m in records:
        if m.status == "ok" and m.busbw_gbps is not None:
            out.setdefault(m.collective, {}).setdefault(series_key(m), []).append(m)
    for series in out.values():
        for rows in series.values():
            rows.sort(key=lambda m: m.size_bytes)
    return out


def plot_collective(collective: str, series: dict[tuple, list[Measurement]], path: Path,
                    predict: Predictor | None = None, source: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, rows in sorted(series.items()):
        sizes = np.array([m.size_bytes for m in rows], dtype=float)
        line, = ax.plot(sizes, [m.busbw_gbps for m in rows], marker="o", label=f"measured ({headline_time(rows[0])[0]} time): {series_label(key)}")
        if predict is not None:
            seconds = np.asarray(predict(collective, sizes, key[2]), dtype=float)
            factor = np.array([m.busbw_gbps / m.algbw_gbps if m.algbw_gbps else 1.0 for m in rows])
            ax.plot(sizes, sizes / seconds / 1e9 * factor, linestyle="--", color=line.get_color(),
                    label=f"predicted: {series_label(key)}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes, nccl-tests' size)")
    ax.set_ylabel("busbw (GB/s, GB = 1e9 B)")
    ax.set_title(f"{collective}: bus bandwidth vs size" + (f" ({source})" if source else ""))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def markdown_table(rows: list[Measurement]) -> list[str]:
    lines = ["| size | time (µs, measured) | statistic | tail (µs) | algbw (GB/s) | busbw (GB/s) | #wrong |",
             "|---:|---:|---|---:|---:|---:|---:|"]
    for m in rows:
        statistic, time_us = headline_time(m)
        lines.append(f"| {format_size(m.size_bytes)} | {time_us:.2f} | {statistic} | {tail_text(m)} | {m.algbw_gbps:.3f} | "
                     f"{m.busbw_gbps:.3f} | {'-' if m.num_wrong is None else m.num_wrong} |")
    return lines


def write_report(records: list[Measurement], out_dir: str | Path, *, sources: list[str],
                 predict: Predictor | None = None, predicted_from: str = "", run_records: list | None = None) -> ReportFiles:
    """PNG per collective and README.md linking them, under out_dir. `run_records` (headers and
    measurements): adds the NCCL tuning winners and heat maps for runs measured with --nccl-*."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    grouped = by_collective(records)
    failed = [m for m in records if m.status != "ok"]
    md = ["# commbench report", "", f"Sources: {', '.join(sources)}. All numbers are measured"
          + (f"; dashed lines are predicted from {predicted_from}." if predict else "."), ""]
    plots = []
    for collective, series in sorted(grouped.items()):
        png = plot_collective(collective, series, out / f"{collective}-busbw.png", predict)
        plots.append(png)
        md += [f"## {collective}", "", f"![{collective} busbw vs size]({png.name})", ""]
        for key, rows in sorted(series.items()):
            md += [f"### {series_label(key)}", "", *markdown_table(rows), ""]
    if run_records:
        from commbench.results.tuning_report import tuning_section

        tuning_md, tuning_plots = tuning_section(run_records, out)
        md += tuning_md
        plots += tuning_plots
    if failed:
        md += ["## Failed or skipped points", ""] + [f"- {m.collective} {format_size(m.size_bytes)}: {m.error}" for m in failed] + [""]
    path = out / "README.md"
    path.write_text("\n".join(md), encoding="utf-8")
    return ReportFiles(markdown=path, plots=plots)
