"""`commbench report FILE... [-O DIR]`: rich tables, busbw/latency-vs-size figures and a Markdown summary."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from commbench.cli.base import command, console
from commbench.results.render import styled
from commbench.errors import CommbenchError


def fabric_predictor(path: str, unpredicted: dict[str, str], beyond: dict[str, str] | None = None,
                     latency_only: dict[str, str] | None = None):
    """predict(collective, sizes, group size, row, header) -> seconds from a fitted fabric, on the scale-up domains
    the curve's group spanned; a curve the fabric cannot predict gets no dashed line (NaN) and its reason in
    `unpredicted`, never a failed report. `beyond` gets the curves whose dashed line reaches sizes or a group size the
    profile never measured (predict's 'extrapolated'), with what it measured; `latency_only` the curves whose dashed
    line is a latency-only curve's measured latency (latency_only.py), with what that curve is."""
    import numpy as np

    from commbench.cli.predict import beyond_text, extrapolated, fitted_range

    from commbench.costmodel import collective_time_s, load_fabric
    from commbench.costmodel.fit_records import num_domains_of
    from commbench.costmodel.latency_only import prediction_line, predicting_curves
    from commbench.costmodel.profile import NCCL_BACKENDS

    fabric = load_fabric(path)
    described = fabric.backends()

    def nccl_named(backend: str) -> str:   # raw NCCL through CuPy is NCCL
        return "nccl" if backend in NCCL_BACKENDS else backend

    def predict(collective, sizes, group_size, row, header):
        # a curve fitted on gloo is no prediction of an NCCL run (nor the reverse): its dashed line would be labelled
        # with the measured curve's backend, 'predicted: nccl float32 n=2', 60x below on CPU figures
        backends = described.get(collective, set())
        if backends and "None" not in backends and nccl_named(row.backend) not in {nccl_named(b) for b in backends}:
            unpredicted.setdefault(f"{collective} on {row.backend}", f"{path}'s {collective} curves describe "
                                   f"{', '.join(sorted(backends))}, not {row.backend}")
            return np.full(np.shape(sizes), np.nan)
        # the racks the measured group crossed, as fit reads them (a strided pair across 2 racks was predicted
        # inside one domain); a group larger than one of the fabric's domains spans ceil(g / domain) of them
        domains = max(num_domains_of(row, header), -(-int(group_size) // fabric.domain_size))
        try:
            times = collective_time_s(fabric, collective, sizes, group_size, domains)
        except (CommbenchError, ValueError) as exc:
            unpredicted.setdefault(f"{collective} on {group_size} ranks" + (f" across {domains} domains" if domains > 1
                                                                         else ""), str(exc))
            return np.full(np.shape(sizes), np.nan)
        if latency_only is not None and (curves := predicting_curves(fabric, collective)):
            latency_only.setdefault(f"{collective} on {group_size} ranks", prediction_line(curves, path))
        measured = fitted_range(fabric, collective, domains)
        out = extrapolated(measured, np.atleast_1d(sizes), int(group_size))
        if beyond is not None and any(out):
            beyond.setdefault(f"{collective} on {group_size} ranks" + (f" across {domains} domains" if domains > 1
                                                                        else ""),
                              f"{beyond_text(measured, np.atleast_1d(sizes), int(group_size), path)}: "
                              "the alpha-beta formula gives them, not a measurement")
        return times

    return predict


def print_tuning_winners(records: list) -> None:
    """Per-size NCCL tuning winners, for runs measured with --nccl-algo/--nccl-proto/--nccl-channels: one table
    per scale and system (NCCL version, GPU models, hosts), with a note where a scale's runs mix systems."""
    from commbench.results.tables import Col, print_table
    from commbench.results.tuning_report import WINNER_COLUMNS, winner_rows, winner_tables

    tables, notes = winner_tables(records)
    for note in notes:
        console.print(styled("[yellow]note:[/] {}", note), highlight=False)
    for table in tables:
        rows = [[escape(str(cell)) for cell in row] for _, row in winner_rows(table.cells, table.points, table.rules)]
        print_table(console, f"NCCL tuning winners (measured): {table.title}",
                    [Col(name=name, numeric=name not in ("best combination", "rule")) for name in WINNER_COLUMNS], rows)


def without_repeats(records: list) -> list:
    """`records` less the imported runs (nccl-tests logs) that repeat an earlier run record for record under another
    run id (a log imported into one file three times: three 'runs' agreeing exactly looked like reproducibility), said
    in a note, as compare counts them once (results.compare.repeated_runs). commbench's own runs are left as they are
    (an emulated fabric can time two runs alike)."""
    from commbench.results.compare import repeated_runs
    from commbench.results.records import RunHeader, measurements

    imported = {r.run_id for r in records if isinstance(r, RunHeader) and r.launcher == "nccl-tests"}
    repeats = repeated_runs(m for m in measurements(records) if m.run_id in imported)
    by_first: dict[str, list[str]] = {}
    for run, first in repeats.items():
        by_first.setdefault(first, []).append(run)
    for first, runs in by_first.items():
        console.print(styled("[yellow]note:[/] imported run {} repeat(s) run {} record for record (the same log "
                             "imported again?): tabled and drawn once, as compare counts it", ", ".join(runs), first),
                      highlight=False)
    return [r for r in records if r.run_id not in repeats] if repeats else records


MAX_REPORT_MEASUREMENTS = 250_000  # ~0.7 GB of records without their per-iteration samples (~3 KB each)


def tuning_record(data: dict) -> bool:
    """Whether a record (parsed JSON) is a point of the NCCL tuning axes, whose per-iteration samples the tuning
    table keeps: its noise is nccl-tuner's (results.nccl_tuner.record_noise_rel), so both give one verdict."""
    params = data.get("params")
    return isinstance(params, dict) and "nccl_algo" in params


def read_for_report(files: list[str], unreadable: list | None = None) -> tuple[list, str]:
    """The records of `files`, streamed without per-iteration samples (a report never draws them; the NCCL
    tuning points keep theirs: tuning_record), up to
    MAX_REPORT_MEASUREMENTS measurements; beyond, the rest is not read and the second value says so.
    A resumed sweep's runs in one file are one run (results.resumed, as `compare` counts them) where they
    were measured on one setup (results.run_setup): one curve and one table, not one per launch. A point of
    a run already read from an earlier file (the same file given twice, a copy) is read once, and said; one that differs
    there (the same run id, other measurements: a file edited or concatenated by hand) is refused in one line, as
    compare refuses it: which copy to table would decide what the report shows; so is a run whose files hold two
    different headers of it (results.run_headers). Each line that
    cannot be read is said, and with `unreadable` appended to it as "PATH line N: why"."""
    import dataclasses

    from commbench.errors import CommbenchError
    from commbench.results.compare import _fingerprint, match_key, point_label
    from commbench.results.records import Measurement, RunHeader, iter_records
    from commbench.results.resumed import resumed_runs_joined
    from commbench.results.run_headers import OneHeaderPerRun
    from commbench.results.run_setup import same_setup

    kept: list = []
    count = 0
    seen: dict[tuple, int] = {}  # (run id, point or "header") -> the index of the file it was first read from
    first_copy: dict[tuple, Measurement] = {}  # (run id, point) -> its record as first read

    origin: dict[tuple, str] = {}  # (run id, point) -> the launch that measured it (a continuation's own id)

    def forks_of(index: int, mine: list, joined: list) -> dict[str, str]:
        """{logical run id: the continuation's run id} where a launch of this file continued a run that an earlier
        file's launch continued too, at a point both hold (one partial sweep file copied and resumed in two places):
        this file's run is then a run of its own, under its continuation's id, not an edit of the earlier one."""
        out: dict[str, str] = {}
        for raw, record in zip(mine, joined):
            if isinstance(record, Measurement) and raw.run_id != record.run_id:
                key = (record.run_id, match_key(record))
                if seen.get(key, index) != index and origin.get(key) not in (None, raw.run_id):
                    out.setdefault(record.run_id, raw.run_id)
        return out

    def once(index: int, mine: list) -> list:
        fresh, again, twice = [], {}, {}
        joined = resumed_runs_joined(mine, joinable=same_setup)
        forks = forks_of(index, mine, joined)
        for first, fork in forks.items():
            console.print(styled("[yellow]note:[/] {}: run {} continues run {} as {} does (one partial sweep file "
                                 "copied and resumed in both): tabled as a run of its own, with the point(s) of run {} "
                                 "it continues", files[index], fork, first,
                                 ", ".join(sorted({o for (r, _), o in origin.items() if r == first and o != first}))
                                 or "an earlier file", first), highlight=False)
        joined = [dataclasses.replace(r, run_id=forks[r.run_id]) if isinstance(r, Measurement) and r.run_id in forks
                  else r for r in joined]
        for raw, record in zip(mine, joined):
            if isinstance(record, Measurement):
                origin.setdefault((record.run_id, match_key(record)), raw.run_id)
        for record in joined:
            key = (record.run_id, match_key(record) if isinstance(record, Measurement) else "header")
            first = seen.setdefault(key, index)
            if first == index and isinstance(record, Measurement) and key in first_copy:   # twice in this file
                if _fingerprint({key: record}) != _fingerprint({key: first_copy[key]}):
                    raise CommbenchError(f"{files[index]}: run {record.run_id} holds {point_label(record)} twice with "
                                         "different measurements (commbench measures a point once a run; a file "
                                         "concatenated by hand?): which to table is unknown, and compare refuses it "
                                         "too; keep one copy, or give each its own run")
                twice[record.run_id] = twice.get(record.run_id, 0) + 1
                continue
            if first == index:
                fresh.append(record)
                if isinstance(record, Measurement):
                    first_copy.setdefault(key, record)
            elif isinstance(record, Measurement):
                if _fingerprint({key: record}) != _fingerprint({key: first_copy[key]}):
                    raise CommbenchError(f"run {record.run_id} holds {point_label(record)} in {files[first]} and in "
                                         f"{files[index]} with different measurements (a file edited or concatenated "
                                         "by hand?): which to table is unknown; report one of them, or give each "
                                         "copy its own run id")
                again.setdefault(first, {}).setdefault(record.run_id, 0)
                again[first][record.run_id] += 1
        if twice:   # a line repeated in one file (a file concatenated with its own lines): compare reads it once too
            console.print(styled("[yellow]note:[/] {} point(s) of {} are in it twice, identical (run {}): each is "
                                 "tabled and drawn once, as compare reads it", sum(twice.values()), files[index],
                                 ", ".join(sorted(twice))), highlight=False)
        for first, runs in again.items():
            console.print(styled("[yellow]note:[/] {} point(s) of {} were read from {} already (run {}: the same run "
                                 "in both files): each is tabled and drawn once", sum(runs.values()), files[index],
                                 files[first], ", ".join(sorted(runs))), highlight=False)
        return fresh

    one_header = OneHeaderPerRun()
    for index, path in enumerate(files):
        mine: list = []
        def bad_line(number: int, why: str, path: str = path) -> None:
            console.print(styled("[yellow]skipped line {} of {}[/]: {}", number, path, why), highlight=False)
            if unreadable is not None:
                unreadable.append(f"{path} line {number}: {why}")

        for record in iter_records(path, drop_samples=True, keep_samples_of=tuning_record, on_bad_line=bad_line):
            if isinstance(record, RunHeader):
                one_header.add(path, record)   # one run id, two different headers (a copy edited): refused
            if isinstance(record, Measurement):
                count += 1
                if count > MAX_REPORT_MEASUREMENTS:
                    rest = f" and {', '.join(files[index + 1:])}" if index + 1 < len(files) else ""
                    return kept + once(index, mine), (
                        f"this report holds the first {MAX_REPORT_MEASUREMENTS:,} measurements read; the rest "
                        f"of {path}{rest} is not in its tables or plots (split the file, or report fewer files)")
            mine.append(record)
        kept += once(index, mine)
    return kept, ""


@command("report", help="Tables, busbw and latency vs size plots (PNG, --svg) and a Markdown summary from results files.")
def report(
    files: Annotated[list[str], typer.Argument(help="Results files (JSONL).")],
    out: Annotated[str, typer.Option("-O", "--out", help="Directory for the PNGs and README.md.")] = "report",
    fabric: Annotated[Optional[str], typer.Option("--fabric", help="Fitted fabric (commbench fit) to overlay predicted busbw and latency as dashed lines.")] = None,
    svg: Annotated[bool, typer.Option("--svg", help="Also write each figure as SVG, text kept as text (PNGs are 150 dpi).")] = False,
    together: Annotated[bool, typer.Option("--together", help="Also draw every size-swept collective (all_reduce, all_to_all, ...) in one busbw and one latency figure (together-busbw/-latency).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace OUT/README.md even when it is not a commbench report.")] = False,
) -> None:
    from commbench.results.render import measurement_table
    from commbench.results.report import (by_collective, curve_label, curve_notes, failed_lines, run_curves, series_labels, shown_rows, write_report,
                                          wrong_data_lines)
    from commbench.results.records import Measurement, headers, measurements

    from commbench.files import check_output_dir

    from commbench.files import claim_output
    from commbench.results.report import REPORT_MARKER

    from commbench.files import refuse_empty_inputs, refuse_empty_path, refuse_writing_inputs, same_file

    refuse_empty_inputs(("FILES", files, "a results file"), ("--fabric", fabric, "a fabric profile (commbench fit -O)"))
    refuse_empty_path(out, "--out", "a folder")
    # README.md and its figures (.png, .svg): an input of those names in OUT would be written over
    figures = [path for path in files
               if Path(path).suffix.lower() in (".png", ".svg") and same_file(Path(path).parent, out)]
    refuse_writing_inputs("--out", out, [Path(out) / "README.md", *figures], [*files, fabric])
    unpredicted: dict[str, str] = {}
    beyond: dict[str, str] = {}   # dashed lines past what the profile measured (predict's 'extrapolated')
    latency_only: dict[str, str] = {}   # dashed lines that are a latency-only curve's measured latency
    predict = fabric_predictor(fabric, unpredicted, beyond, latency_only) if fabric else None  # a wrong --fabric: refused before any table
    predicted_from = fabric or ""
    if fabric:
        from commbench.costmodel import load_fabric

        emulated_fit = load_fabric(fabric).emulated_warning
        if emulated_fit:   # as predict's title and plan's network line say it: its dashed lines are the emulator's
            predicted_from = f"{fabric} (fitted on an EMULATED fabric)"
            console.print(styled("[yellow]warning:[/] --fabric {}: {}: its dashed lines are the emulator's links",
                                 fabric, emulated_fit), highlight=False, soft_wrap=True)
        from commbench.cli.base import profile_older_than_results
        age = profile_older_than_results(fabric)   # on the terminal, and in README.md under the sources line
        older = age.lines
        if age.changed:   # the figures' captions say it short
            predicted_from = f"{predicted_from} (fitted on records its results files no longer hold: refit)"
        elif age.stale:
            predicted_from = f"{predicted_from} (OLDER than the results it was fitted from: refit)"
    unreadable: list[str] = []   # lines skipped: the README says so, as the terminal does
    everything, not_read = read_for_report(files, unreadable)
    everything = without_repeats(everything)
    records = measurements(everything)
    if not records:   # refused before --out is made: a failed report leaves no empty folder behind
        raise CommbenchError(f"no measurements in {', '.join(files)}")
    check_output_dir(out, "--out")
    claim_output(f"{out}/README.md", "--out", marker=REPORT_MARKER, what="commbench report", force=force).release()
    runs = {h.run_id: h for h in headers(everything)}
    for collective, series in sorted(by_collective(records).items()):
        labels = series_labels(series)
        for key, rows in sorted(series.items()):
            for run_label, run_rows in run_curves(rows, runs):
                # imported nccl-tests rows have no p99: shown as "-"
                shown, left_out = shown_rows(run_rows)
                console.print(measurement_table(f"{collective} — {curve_label(labels[key], run_label, run_rows, runs)} (measured)"
                                                + (f" — {left_out}" if left_out else ""), shown, console.width))
                for note in curve_notes(run_rows):
                    console.print(styled("[yellow]note:[/] {}", note), highlight=False)
    for line in wrong_data_lines(records):
        console.print(styled("[bold red]wrong data[/] (not drawn, not in the tables): {}", line), highlight=False)
    for line in failed_lines(records):
        console.print(styled("[red]no measurement[/] (not drawn, not in the tables): {}", line), highlight=False)
    without_busbw = [m for m in records if isinstance(m, Measurement) and m.status == "ok" and not m.num_wrong
                     and m.busbw_gbps is None]
    if without_busbw:   # a file written by another tool (or by hand): drawn and tabled nowhere, said here
        from commbench.results.compare import point_label
        console.print(styled("[yellow]no busbw[/] (not drawn, not in the tables): {} ok point(s) hold no busbw_gbps, "
                             "first {}", len(without_busbw), point_label(without_busbw[0])), highlight=False)
    from commbench.results.resumed import sweeps_cut_short
    cut_short = [] if not_read else sweeps_cut_short(everything)   # past the report's bound: not_read says so
    from commbench.files import writer_of
    writing = {path: pid for path in files if (pid := writer_of(path)) is not None}
    for path, pid in writing.items():
        console.print(styled("[yellow]in progress[/]: {} is being written by {} (a commbench run): its points not "
                             "written yet are not in this report", path, f"PID {pid}" if pid else "another process"),
                      highlight=False)
    label = "cut short or still running" if writing else "cut short"
    for line in cut_short:
        console.print(styled("[yellow]{}[/] (points not in the file): {}", label, line), highlight=False)
    from commbench.results.run_setup import runs_without_header, setup_unknown_text
    headerless = runs_without_header(everything)
    if headerless:   # as compare and fit say it (run_setup.setup_unknown_text)
        console.print(styled("[yellow]warning:[/] {}, nor how many points they planned (whether they are complete); "
                             "drawn as measured", setup_unknown_text(headerless)), highlight=False)
    print_tuning_winners(everything)
    result = write_report(records, out, sources=list(files), predict=predict, predicted_from=predicted_from,
                          headers=headers(everything), formats=("png", "svg") if svg else ("png",),
                          run_records=everything, together=together, force=force,
                          left_out=[*unreadable, *([not_read] if not_read else [])], unpredicted=unpredicted,
                          cut_short=cut_short, extrapolated=beyond, headerless=headerless,
                          fabric_warnings=older if fabric else ())
    if not_read:
        console.print(styled("[yellow]summarised:[/] {}", not_read), highlight=False)
    for curve, why in unpredicted.items():
        console.print(styled("[yellow]note:[/] no predicted line for {}: {}", curve, why), highlight=False)
    for curve, why in beyond.items():
        console.print(styled("[yellow]extrapolated[/] predicted line for {}: {}", curve, why), highlight=False)
    for curve, why in latency_only.items():
        console.print(styled("[yellow]latency-only[/] predicted line for {}: {}", curve, why), highlight=False)
    if result.removed:
        console.print(styled("[yellow]note:[/] removed {} figure(s) of the earlier report in {} that this one does not "
                             "draw: {}", len(result.removed), out, ", ".join(result.removed)), highlight=False)
    console.print(styled("[green]report[/]: {} and {} plot(s) in {}", result.markdown, len(result.plots), out), highlight=False)
