"""Reports from results files: rich tables, PNG plots (matplotlib, headless) and a Markdown summary.

Plots (commbench.results.plots): busbw and latency vs size per collective, one line per (backend,
dtype, group size, layout) and run; MoE all-to-all against tokens per rank. Runs of one curve's setup
are drawn and tabled apart, each labelled by what sets it apart (results.run_setup: NCCL version,
devices, hosts, world size, fabric; else its run id); a resumed sweep is one run (results.resumed, as
`compare` counts it). Every figure is measured unless
a line says "predicted": pass `predict(collective, sizes_bytes, group_size, row, header) -> seconds` (e.g. from
a fitted fabric; `row` and its run's `header` say where the curve was measured: a strided group crosses racks) to
overlay predictions as dashed lines with cross markers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from commbench.comm.nccl_tuning import combo_from_params
from commbench.moe.params import non_default
from commbench.results.plots import Series, busbw_figure, caption, latency_figure, moe_figure, save
from commbench.results.records import Measurement, RunHeader, headline_time
from commbench.results.report_figures import earlier_figures, figures_line, remove_stale_figures
from commbench.results.render import is_moe, moe_markdown_table, record_label, tail_text
from commbench.results.run_setup import labels_by_what_differs
from commbench.files import safe_file_stem, write_output
from commbench.units import format_size

# (collective, sizes_bytes, group_size, a row of the curve, its run's header or None) -> seconds
Predictor = Callable[[str, np.ndarray, int, Measurement, "RunHeader | None"], np.ndarray]


@dataclass(frozen=True, kw_only=True)
class ReportFiles:
    markdown: Path
    plots: list[Path]
    removed: tuple[str, ...] = ()  # the earlier report's figures in the folder that this one did not draw


REPORT_MARKER = "# commbench report"  # README.md's first line: a README that lacks it is not replaced
_SWEPT_PARAMS = ("tokens_per_rank",)  # varies along a curve, like size
# named by value in a curve's label; an MoE curve's other layer parameters are named k=v where not at their default
# (moe.params.non_default), any other param k=v where curves differ in it (series_labels)
_LABELLED_PARAMS = ("algorithm", "routing", "dispatch_mode", "dispatch_dtype", "preset")
_TUNING_PARAMS = ("nccl_algo", "nccl_proto", "nccl_channels")


def series_key(m: Measurement) -> tuple:
    """Points of one curve share everything but their size: backend, dtype, group, workload params, reduction
    op and timed iterations (a sweep may measure all_reduce sum and max, or one size at two -n, in one run)."""
    params = tuple(sorted((k, str(v)) for k, v in m.params.items() if k not in _SWEPT_PARAMS))
    return (m.backend, m.dtype, m.group_size, m.group_layout, m.in_place, params, m.op or "", m.iters)


def series_label(key: tuple) -> str:
    backend, dtype, group_size, layout, in_place, params, op, _iters = key
    named = dict(params)
    extra_op = f" op={op}" if op not in ("", "sum") else ""  # sum, the default (nccl-tests' too), goes unnamed
    extra = "".join(f" {named[k]}" for k in _LABELLED_PARAMS if named.get(k) not in (None, "None", ""))
    if any(k in named for k in _TUNING_PARAMS):  # measured under --nccl-algo/--nccl-proto/--nccl-channels
        tuning = {k: int(v) if k == "nccl_channels" and v.isdecimal() else v  # the key holds str(value)
                  for k, v in named.items() if k in _TUNING_PARAMS}
        combo = combo_from_params(tuning).label
        extra += f" {combo}" if combo == "NCCL default" else f" NCCL {combo}"
    if "hidden" in named:   # MoE: every layer parameter not at its default, named, as it changes what was measured
        extra += "".join(f" {k}={v}" for k, v in non_default(named).items() if k not in _LABELLED_PARAMS)
    dtype = "" if "hidden" in named else f" {dtype}"  # MoE: the dtype is the byte payload, not a data type
    return (f"{backend}{dtype} n={group_size}" + (f" {layout}" if layout != "world" else "")
            + (" in-place" if in_place else "") + extra_op + extra)


def series_labels(keys: Iterable[tuple]) -> dict[tuple, str]:
    """series_label per key, told apart among `keys` (one collective's curves) where two would read the same:
    by the workload params in which they differ (broadcast "root=1")."""
    keys = list(keys)
    same: dict[str, list[tuple]] = {}
    for key in keys:
        same.setdefault(series_label(key), []).append(key)
    labels = {}
    for label, group in same.items():
        params = [{**dict(key[5]), "op": key[6] or "-", "iters": key[7]} for key in group]
        differ = sorted({k for p in params for k in p if len({q.get(k) for q in params}) > 1})
        for key, p in zip(group, params):
            labels[key] = label + "".join(f" {k}={p.get(k, '-')}" for k in differ)
    return labels


def is_wrong(m: Measurement) -> bool:
    """A point whose data check found wrong elements: its time is not a valid measurement (a collective that
    skipped the work is fast), so it is never drawn or summarised as busbw; the report lists it apart."""
    return m.status == "ok" and bool(m.num_wrong)


def by_collective(records: Iterable[Measurement]) -> dict[str, dict[tuple, list[Measurement]]]:
    """The drawable points (ok, with a busbw, no wrong data) per collective and curve, sorted by size."""
    out: dict[str, dict[tuple, list[Measurement]]] = {}
    for m in records:
        if m.status == "ok" and m.busbw_gbps is not None and not m.num_wrong:
            out.setdefault(m.collective, {}).setdefault(series_key(m), []).append(m)
    for series in out.values():
        for rows in series.values():
            rows.sort(key=lambda m: m.size_bytes)
    return out


def curve_label(label: str, run_label: str, rows: list[Measurement] = (), runs: dict[str, RunHeader] | None = None) -> str:
    """A series' label (series_labels) with what tells its run apart (run_curves) and, for a run measured on
    `commbench emulate` (`rows`' run header), that its fabric was emulated, unless the run label says it already."""
    text = label + (f" ({run_label})" if run_label else "")
    mark = emulated_mark(rows, runs or {})
    return text + (f" ({mark})" if mark and "emulated" not in run_label else "") + unchecked_mark(rows)


def unchecked_mark(rows: list[Measurement]) -> str:
    """' (unchecked: -c 0)' for a curve measured without the data check, ' (k of n unchecked)' for one partly so:
    its results were never verified, so it must not read as checked data ('' when every point was checked)."""
    from commbench.results.compare import is_unchecked

    n = sum(1 for m in rows if is_unchecked(m))
    if not n:
        return ""
    return " (unchecked: -c 0)" if n == len(rows) else f" ({n} of {len(rows)} points unchecked: -c 0)"


def emulated_mark(rows: list[Measurement], runs: dict[str, RunHeader]) -> str:
    """'EMULATED fabric: 2 racks x 2 ranks, 1 Gbit/s per rack uplink' for rows measured on `commbench emulate`,
    else ''."""
    from commbench.results.emulated import fabric_text

    found = [runs[m.run_id].emulated for m in rows if m.run_id in runs and runs[m.run_id].emulated]
    return fabric_text(found[0]) if found else ""


def curve_notes(rows: list[Measurement]) -> list[str]:
    """The distinct notes a curve's records carry (gloo's reduce_scatter is a full all-reduce; an out-of-place
    all_reduce on torch.distributed times a copy too; an imported nccl-tests time is no median), first seen first."""
    return list(dict.fromkeys(note for m in rows for note in m.notes))


def run_curves(rows: list[Measurement], runs: dict[str, RunHeader]) -> list[tuple[str, list[Measurement]]]:
    """The rows of one series split by run -- one curve and one table each, never a zig-zag line or a table
    holding each size twice -- with what tells each run apart ('' when the series holds one run)."""
    by_run: dict[str, list[Measurement]] = {}
    for m in rows:
        by_run.setdefault(m.run_id, []).append(m)
    if len(by_run) == 1:
        return [("", rows)]
    labels = labels_by_what_differs({run_id: runs.get(run_id) for run_id in by_run})
    return [(labels[run_id], run_rows) for run_id, run_rows in by_run.items()]


def _point_names(records: list[Measurement], among: list[Measurement]) -> list[str]:
    """'collective curve size' per record, the curve told apart among its collective's curves in `among` (every
    record of the report; series_labels: broadcast root=1, all_reduce op=max), MoE points by tokens per rank."""
    keys: dict[str, dict[tuple, None]] = {}
    for m in [*among, *records]:
        keys.setdefault(m.collective, {})[series_key(m)] = None
    labels = {c: series_labels(k) for c, k in keys.items()}
    return [f"{m.collective} {labels[m.collective][series_key(m)]} {record_label(m)}" for m in records]


def wrong_data_lines(records: Iterable[Measurement]) -> list[str]:
    """One line per point with wrong data: collective, curve, size, #wrong and run (plain text)."""
    records = list(records)
    wrong = [m for m in records if is_wrong(m)]
    return [f"{name}: #wrong {m.num_wrong} (run {m.run_id})" for name, m in zip(_point_names(wrong, records), wrong)]


def failed_lines(records: Iterable[Measurement]) -> list[str]:
    """One line per failed or skipped point (no time, never drawn or tabled): collective, curve, size, status,
    error and run (plain text)."""
    records = list(records)
    failed = [m for m in records if m.status != "ok"]
    return [f"{name}: {m.status} ({m.error or 'no error recorded'}) (run {m.run_id})"
            for name, m in zip(_point_names(failed, records), failed)]


def plot_collective(collective: str, series: dict[tuple, list[Measurement]], stem: Path,
                    predict: Predictor | None = None, note: str = "", formats: tuple[str, ...] = ("png",),
                    runs: dict[str, RunHeader] | None = None) -> list[Path]:
    """The figures of one collective: busbw and latency vs size, or for MoE all-to-all dispatch and combine
    busbw vs tokens per rank (commbench.results.plots); returns the written files. `runs`: the headers by
    run id, to label a curve's runs by what differs."""
    curves = _curves(collective, series, predict, runs or {})
    if all(is_moe(rows[0]) for rows in series.values()):
        return save(moe_figure(curves, note), f"{stem}-moe", formats)
    return (save(busbw_figure(collective, curves, note), f"{stem}-busbw", formats)
            + save(latency_figure(collective, curves, note), f"{stem}-latency", formats))


def plot_together(grouped: dict[str, dict[tuple, list[Measurement]]], stem: Path, predict: Predictor | None = None,
                  note: str = "", formats: tuple[str, ...] = ("png",),
                  runs: dict[str, RunHeader] | None = None) -> list[Path]:
    """Every size-swept collective in one busbw figure and one latency figure (`report --together`), each
    curve labelled with its collective; MoE all-to-all (tokens per rank, not size) keeps its own figure."""
    names = [c for c, series in sorted(grouped.items()) if not all(is_moe(rows[0]) for rows in series.values())]
    curves = []
    for collective in names:
        for curve in _curves(collective, grouped[collective], predict, runs or {}):
            curves.append(Series(label=f"{collective} {curve.label}", rows=curve.rows, predicted_s=curve.predicted_s,
                                 time_name=curve.time_name))
    if len(names) < 2:
        return []
    title = ", ".join(names)
    return (save(busbw_figure(title, curves, note), f"{stem}-busbw", formats)
            + save(latency_figure(title, curves, note), f"{stem}-latency", formats))


def _curves(collective: str, series: dict[tuple, list[Measurement]], predict: Predictor | None,
            runs: dict[str, RunHeader]) -> list[Series]:
    curves = []
    labels = series_labels(series)
    for key, rows in sorted(series.items()):
        for run_label, run_rows in run_curves(rows, runs):
            seconds = None
            if predict is not None and not is_moe(run_rows[0]):
                sizes = np.array([m.size_bytes for m in run_rows], dtype=float)
                seconds = np.asarray(predict(collective, sizes, key[2], run_rows[0], runs.get(run_rows[0].run_id)),
                                     dtype=float)
            curves.append(Series(label=curve_label(labels[key], run_label, run_rows, runs), rows=run_rows, predicted_s=seconds,
                                 time_name=headline_time(run_rows[0])[0]))
    return curves


MAX_TABLE_ROWS = 60  # rows per printed or Markdown table; the rest are counted (all stay in the results file)


def shown_rows(rows: list) -> tuple[list, str]:
    """The first MAX_TABLE_ROWS rows, and a note saying how many were left out ('' when none)."""
    if len(rows) <= MAX_TABLE_ROWS:
        return list(rows), ""
    return list(rows[:MAX_TABLE_ROWS]), (f"first {MAX_TABLE_ROWS} of {len(rows):,} rows shown; every row is in "
                                         "the results file and in the plots")


def markdown_table(rows: list[Measurement]) -> list[str]:
    if rows and all(is_moe(m) for m in rows):  # the terminal's MoE columns: tokens per rank, dispatch/combine apart
        rows, left_out = shown_rows(rows)
        return moe_markdown_table(rows) + (["", f"({left_out})"] if left_out else [])
    lines = ["| size | time (µs, measured) | statistic | tail (µs) | algbw (GB/s) | busbw (GB/s) | #wrong |",
             "|---:|---:|---|---:|---:|---:|---:|"]
    rows, left_out = shown_rows(rows)
    for m in rows:
        statistic, time_us = headline_time(m)
        lines.append(f"| {format_size(m.size_bytes)} | {time_us:.2f} | {statistic} | {tail_text(m)} | {m.algbw_gbps:.3f} | "
                     f"{m.busbw_gbps:.3f} | {'-' if m.num_wrong is None else m.num_wrong} |")
    return lines + (["", f"({left_out})"] if left_out else [])


# a run whose measurements no header record of the sources describes (a file written by hand or by another tool, its
# header line lost): what it planned (planned_points, run_cycles) and where it ran (NCCL version, devices, an emulated
# fabric) are unknown, so neither a cut-short run nor a mix of setups can be told (compare warns the same:
# cli/compare.py note_setup_unknown)
HEADERLESS_NOTE = ("These runs have no header record: their setup (NCCL version, devices, emulated fabric) and how many "
                   "points they planned are unknown, so the report cannot tell whether they are complete or measured "
                   "on the same setup as the others; drawn as measured.")


def write_report(records: list[Measurement], out_dir: str | Path, *, sources: list[str],
                 predict: Predictor | None = None, predicted_from: str = "", headers: list[RunHeader] = (),
                 formats: tuple[str, ...] = ("png",), run_records: list | None = None,
                 together: bool = False, force: bool = False, left_out: list[str] = (),
                 unpredicted: dict[str, str] | None = None, cut_short: list[str] = (),
                 extrapolated: dict[str, str] | None = None, headerless: list[str] = (),
                 fabric_warnings: list[str] = ()) -> ReportFiles:
    """Figures per collective (PNG at 150 dpi, and/or SVG) and README.md linking them, under out_dir.
    `run_records` (headers and measurements): adds the NCCL tuning winners and heat maps for runs
    measured with --nccl-*. `left_out`: what of the sources the report does not hold (lines that could not be read,
    measurements beyond what it reads), listed in its own section: a reader of README.md sees no terminal.
    `unpredicted`: filled by `predict` while the figures are drawn, 'curve' -> why it has no predicted line.
    `cut_short`: the sweeps whose runs hold fewer points than they plan (results.resumed.sweeps_cut_short).
    `extrapolated`: filled by `predict` too, 'curve' -> the sizes its dashed line takes beyond what the profile measured.
    `headerless`: the runs of the sources without a header record (HEADERLESS_NOTE), listed in their own section.
    `fabric_warnings`: lines on the profile the dashed lines come from (older than the results it was fitted from,
    or that cannot be checked: cli.base.profile_older_than_results), each under the sources line."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    grouped = by_collective(records)
    runs = {h.run_id: h for h in headers}
    failed = failed_lines(records)
    wrong = wrong_data_lines(records)
    emulated = any(h.emulated for h in headers if h.run_id in {m.run_id for m in records})
    md = [REPORT_MARKER, "", f"Sources: {', '.join(sources)}. All numbers are measured"
          + ("; those of runs marked EMULATED on `commbench emulate`'s fabric (loopback inside each emulated rack, "
             "rate-limited veth links between them; a message under the links' tbf burst crosses unthrottled), not on "
             "a real network" if emulated else "")
          + (f"; dashed lines are predicted from {predicted_from}." if predict else "."), ""] \
        + [f"**Warning** (predicted lines): {line}" for line in fabric_warnings if predict] + [""] * bool(fabric_warnings)
    plots = []
    if together:
        run_ids = {m.run_id for series in grouped.values() for rows in series.values() for m in rows}
        note = caption([h for h in headers if h.run_id in run_ids]) + (
            f"; dashed: predicted from {predicted_from}" if predict and predicted_from else "")
        figures = plot_together(grouped, out / "together", predict, note, formats, runs)
        plots += figures
        md += (["## All collectives together", ""] + [f"![together {f.stem.rsplit('-', 1)[-1]}]({f.name})"
                                                     for f in figures if f.suffix == f".{formats[0]}"] + [""]
               if figures else ["(--together: fewer than two size-swept collectives to draw together)", ""])
    for collective, series in sorted(grouped.items()):
        run_ids = {m.run_id for rows in series.values() for m in rows}
        note = caption([h for h in headers if h.run_id in run_ids]) + (
            f"; dashed: predicted from {predicted_from}" if predict and predicted_from else "")
        figures = plot_collective(collective, series, out / safe_file_stem(collective), predict, note, formats, runs)
        plots += figures
        md += [f"## {collective}", ""] + [f"![{collective} {f.stem.rsplit('-', 1)[-1]}]({f.name})" for f in figures
                                          if f.suffix == f".{formats[0]}"] + [""]
        labels = series_labels(series)
        for key, rows in sorted(series.items()):
            for run_label, run_rows in run_curves(rows, runs):
                notes = curve_notes(run_rows)
                md += [f"### {curve_label(labels[key], run_label, run_rows, runs)}", "", *markdown_table(run_rows), ""]
                md += [f"Note: {note}" for note in notes] + ([""] if notes else [])
    if run_records:
        from commbench.results.tuning_report import tuning_section

        tuning_md, tuning_plots = tuning_section(run_records, out, formats)
        md += tuning_md
        plots += tuning_plots
    if wrong:
        md += ["## Wrong data (not drawn, not in the tables above)", "",
               "The data check found wrong elements at these points: their times are not valid measurements.", ""]
        md += [f"- {line}" for line in wrong] + [""]
    if failed:
        md += ["## Failed or skipped points (not drawn, not in the tables above)", ""] + [f"- {line}" for line in failed] + [""]
    if cut_short:
        md += ["## Runs cut short (points not in the file)", "",
               "These sweeps or bench runs stopped before their last point: the tables and plots hold only the points they reached.",
               ""] + [f"- {line}" for line in cut_short] + [""]
    if headerless:
        md += ["## Runs without a header record (setup and completeness unknown)", "", HEADERLESS_NOTE, ""] + [
            f"- run {run_id}" for run_id in headerless[:20]] + (
            [f"- ... and {len(headerless) - 20} more"] if len(headerless) > 20 else []) + [""]
    if left_out:
        md += ["## Not read (not drawn, not in the tables above)", "",
               "What these lines held (a point, failed or not) is unknown: the tables and plots may lack points of "
               "the sources.", ""] + [f"- {line}" for line in left_out[:20]] + (
            [f"- ... and {len(left_out) - 20} more"] if len(left_out) > 20 else []) + [""]
    if predict and unpredicted:
        md += ["## Not predicted (no dashed line)", ""] + [f"- {curve}: {why}" for curve, why in unpredicted.items()] + [""]
    if predict and extrapolated:
        md += ["## Extrapolated (dashed lines beyond what the profile measured)", ""] + [
            f"- {curve}: {why}" for curve, why in extrapolated.items()] + [""]
    if any(unchecked_mark(rows) for series in grouped.values() for rows in series.values()):
        md += ["## Unchecked points", "", "Curves marked \"unchecked: -c 0\" were measured without the data check "
               "(`#wrong` shows -): their times are measured, their results were never verified.", ""]
    path = out / "README.md"
    earlier = earlier_figures(path)
    write_output(path, "\n".join([*md, figures_line(plots)]), "--out", marker=REPORT_MARKER, what="commbench report",
                 force=force)
    return ReportFiles(markdown=path, plots=plots, removed=tuple(remove_stale_figures(out, earlier, plots)))
