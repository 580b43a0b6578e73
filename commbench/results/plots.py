"""Slide-ready figures of measured (and predicted) results, drawn with matplotlib (headless).

- busbw vs size: log-x with sizes as B/KiB/MiB/GiB, log-y so small sizes stay visible;
- latency vs size: log-log, the time per iteration a record is known by (its median; nccl-tests' time
  for imported runs; the legend names it);
- MoE all-to-all: dispatch and combine busbw apart (nccl-tests' alltoall factor, see
  collectives/moe_all_to_all.py) against tokens per rank, on a linear y axis from 0.
Measured series are solid lines with round markers; predicted ones dashed with cross markers, named
"predicted" in the legend. The caption names host, date, backend and world size of the runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commbench.results.records import Measurement, RunHeader, headline_time
from commbench.units import format_size

MEASURED_STYLE = {"linestyle": "-", "marker": "o", "markersize": 4}
PREDICTED_STYLE = {"linestyle": "--", "marker": "x", "markersize": 5, "alpha": 0.85}
DPI = 150
FORMATS = ("png", "svg")


@dataclass(frozen=True, kw_only=True)
class Series:
    """One curve: its legend label, the measured rows (sorted by x) and, when given, predicted seconds per row."""

    label: str
    rows: list[Measurement]
    predicted_s: np.ndarray | None = None
    time_name: str = "median"  # the statistic the measured times are (records.headline_time): median, nccl-avg, ...


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def human_size_axis(axis) -> None:
    """Power-of-two size ticks labelled 8 B, 64 KiB, 16 MiB, 2 GiB (not 2^18): powers of 4 labelled, the powers of 2
    between them too where the axis spans at most 16x (1, 2 and 4 MiB left 2 MiB unlabelled)."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    def narrow() -> bool:
        low, high = axis.get_view_interval()
        return low > 0 and high / low <= 16

    axis.set_major_locator(LogLocator(base=4))
    axis.set_minor_locator(LogLocator(base=2, subs=(1.0,)))
    axis.set_major_formatter(FuncFormatter(lambda value, _pos: format_size(value) if value >= 1 else ""))
    axis.set_minor_formatter(FuncFormatter(lambda value, _pos: format_size(value) if value >= 1 and narrow() else ""))


def caption(headers: list[RunHeader]) -> str:
    """Where and when the runs measured: hosts, date, backend and world size (one clause per distinct run setup)."""
    parts = []
    for h in headers:
        hosts = sorted(set(h.hostnames))
        where = ", ".join(hosts[:3]) + (f" +{len(hosts) - 3}" if len(hosts) > 3 else "")
        text = (f"measured on {where}, {h.started_at[:10] if h.started_at else 'date unknown'}, {h.backend}, {h.world_size} ranks"
                + (", EMULATED fabric" if h.emulated else ""))
        if text not in parts:
            parts.append(text)
    return "; ".join(parts[:3]) + (" ..." if len(parts) > 3 else "")


def _finish(fig, ax, title: str, note: str) -> None:
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:   # a figure with nothing drawn (no placeable point) has no legend
        ax.legend(fontsize=7)
    if note:
        fig.text(0.01, 0.01, note, fontsize=7, color="0.35", ha="left", va="bottom", wrap=True)
    fig.tight_layout(rect=(0, 0.05 if note else 0, 1, 1))


def drawable(values) -> bool:
    """Whether a line of `values` puts any point on a log axis (finite and > 0; the rest are masked)."""
    values = np.asarray(values, dtype=float)
    return bool(np.any(np.isfinite(values) & (values > 0)))


def busbw_figure(collective: str, series: list[Series], note: str = ""):
    """busbw (GB/s) vs size on log-log axes; predicted busbw uses each row's own bus factor."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for s in series:
        sizes = np.array([m.size_bytes for m in s.rows], dtype=float)
        line, = ax.plot(sizes, [m.busbw_gbps for m in s.rows], label=f"measured ({s.time_name} time): {s.label}",
                        **MEASURED_STYLE)
        if s.predicted_s is not None:
            factor = np.array([m.busbw_gbps / m.algbw_gbps if m.algbw_gbps else 1.0 for m in s.rows])
            with np.errstate(divide="ignore", invalid="ignore"):   # a NaN or 0 s prediction: no point, not a warning
                predicted = sizes / s.predicted_s / 1e9 * factor
            if drawable(predicted):   # a legend entry for no line drawn names a prediction nobody can see
                ax.plot(sizes, predicted, color=line.get_color(), label=f"predicted: {s.label}", **PREDICTED_STYLE)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", nonpositive="mask")  # busbw printed as 0.00 (tiny sizes) has no place on a log axis
    human_size_axis(ax.xaxis)
    ax.set_xlabel("size (nccl-tests' size)")
    ax.set_ylabel("busbw (GB/s, GB = 1e9 B; log scale)")
    _finish(fig, ax, f"{collective}: bus bandwidth vs size", note)
    return fig


def latency_figure(collective: str, series: list[Series], note: str = ""):
    """Median time per iteration (µs) vs size on log-log axes."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for s in series:
        sizes = np.array([m.size_bytes for m in s.rows], dtype=float)
        line, = ax.plot(sizes, [headline_time(m)[1] for m in s.rows], label=f"measured ({s.time_name} time): {s.label}",
                        **MEASURED_STYLE)
        if s.predicted_s is not None and drawable(s.predicted_s * 1e6):
            ax.plot(sizes, s.predicted_s * 1e6, color=line.get_color(), label=f"predicted: {s.label}",
                    **PREDICTED_STYLE)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", nonpositive="mask")
    human_size_axis(ax.xaxis)
    ax.set_xlabel("size (nccl-tests' size)")
    ax.set_ylabel("time per iteration (µs; log scale)")
    _finish(fig, ax, f"{collective}: latency vs size", note)
    return fig


def moe_figure(series: list[Series], note: str = ""):
    """Dispatch and combine busbw (GB/s, measured) against tokens per rank, each MoE setup one colour. Points whose
    tokens per rank are "unknown" (an older nccl-tests text's import: importers/moe_banner.py) have no place on the
    axis: left out, counted in the note."""
    from matplotlib.ticker import FuncFormatter

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.8))
    unplaced = 0
    for s in series:
        rows = [m for m in s.rows if isinstance(m.params["tokens_per_rank"], int)]
        unplaced += len(s.rows) - len(rows)
        if not rows:
            continue
        tokens = [m.params["tokens_per_rank"] for m in rows]
        line, = ax.plot(tokens, [m.metrics.get("dispatch_busbw_gbps", np.nan) for m in rows],
                        label=f"dispatch: {s.label}", **MEASURED_STYLE)
        ax.plot(tokens, [m.metrics.get("combine_busbw_gbps", np.nan) for m in rows], color=line.get_color(),
                label=f"combine: {s.label}", linestyle=":", marker="s", markersize=4)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:g}"))
    ax.set_ylim(bottom=0)
    ax.set_xlabel("tokens per rank")
    ax.set_ylabel("busbw (GB/s, measured; (n-1)/n factor)")
    if unplaced:
        note = " ".join(part for part in (note, f"{unplaced} point(s) of unknown tokens per rank not drawn") if part)
    _finish(fig, ax, "moe_all_to_all: dispatch and combine bandwidth vs tokens per rank", note)
    return fig


def save(fig, stem, formats: tuple[str, ...] = ("png",)) -> list:
    """Write `fig` as stem.png (150 dpi) and/or stem.svg; returns the paths."""
    from pathlib import Path

    for fmt in formats:
        if fmt not in FORMATS:
            raise ValueError(f"format={fmt!r}: allowed {', '.join(FORMATS)}")
    import matplotlib

    paths = []
    for fmt in formats:
        path = Path(f"{stem}.{fmt}")
        with matplotlib.rc_context({"svg.fonttype": "none"}):  # SVG text stays text (editable on a slide)
            fig.savefig(path, dpi=DPI)
        paths.append(path)
    _pyplot().close(fig)
    return paths
