"""`commbench calibrate`: fit the step model's efficiency terms to a user's own runs, or evaluate
the model (shipped or a fitted file) on them. Predictions are PREDICTED; the runs' figures are
what the user measured."""

from __future__ import annotations

import functools
import json
import re
from typing import Annotated, Optional

import numpy as np
import typer
from rich.markup import escape

from commbench.cli.base import command, console, err_console, print_json, renamed
from commbench.errors import CommbenchError, first_line, invalid
from commbench.results.render import styled
from commbench.results.tables import Col, print_table

CALIBRATE_FORMAT, CALIBRATE_VERSION = "commbench-calibrate", 1
RUNS_HELP = ("JSON lists shaped like commbench/data/calibration-runs.json (recipe fields optional: recompute, "
             "dispatcher, moe_a2a_overlap, cuda_graph, fp8_attention, fused_moe, ...; missing ones default to "
             "selective recompute, TP/DP overlap on, EP overlap off, no CUDA graphs, flex dispatcher on NVL72; "
             "Megatron-FSDP as \"fsdp\": N, the DP ranks it shards over, dividing num_gpus/(tp*pp*cp), 0 none, or "
             "FSDP=N in \"notes\" as the published tables write it), "
             "Megatron-LM training logs or TorchTitan training logs")


def _per_log(values: list | None, name: str, paths: list[str]) -> list:
    """--model/--system/--gpus for each RUNS file: one value for every log, or one per log in RUNS order
    (JSON run lists name their own model and system per row and take none)."""
    from commbench.planner.calibrate.runlogs import is_json_list, runs_file_text
    logs = [p for p in paths if not is_json_list(runs_file_text(p))]
    values = list(values or [])
    if values and not logs:  # every row of a JSON run list names its own: said, not silently dropped
        err_console.print(styled("[yellow]warning:[/] {}={} is not used: it names the runs of training logs, and "
                                 "RUNS ({}) holds only JSON run lists, whose rows name their own", name,
                                 repr(values[0]), ", ".join(paths)), highlight=False)
        return [None] * len(paths)
    if len(values) > 1 and len(values) != len(logs):
        raise CommbenchError(f"{name} given {len(values)} times for {len(logs)} training log(s) "
                             f"({', '.join(logs) or 'none'}): give it once for every log, or once per log in order")
    per_log = dict(zip(logs, values)) if len(values) > 1 else {p: (values[0] if values else None) for p in logs}
    return [per_log.get(p) for p in paths]


def load_runs(paths: list[str], *, model=None, system=None, gpus=None, software=None):
    """PublishedRun objects for every row of every RUNS file, each row checked (one-line errors). Runs the
    model does not cover come back with layout None and their skip_reason; none covered is an error.
    `model`, `system`, `gpus`, `software` (the release a log's run ran under, recorded as its row's "software"): one
    value (or a list: one for every log, or one per log in order)."""
    from commbench.planner.calibrate.published import READ_KEYS, check_row, published_runs, unread_fields
    from commbench.planner.calibrate.runlogs import read_runs_noted
    as_list = (lambda v: v if isinstance(v, list) else ([] if v is None else [v]))
    _check_not_option_values(paths)
    models, systems = _per_log(as_list(model), "--model", paths), _per_log(as_list(system), "--system", paths)
    counts = _per_log(as_list(gpus), "--gpus", paths)
    releases = [_log_release(r) for r in _per_log(as_list(software), "--software", paths)]
    for value in dict.fromkeys(s for s in systems if s is not None):   # named as given, not as the row's 'gpu' field
        from commbench.costmodel import preset_names
        from commbench.planner.calibrate.published import _preset_name
        if _preset_name(value) is None:
            raise invalid("--system", value, f"a system preset ({', '.join(preset_names())}): calibrate models a "
                          "log's run on a preset's GPU (a fitted fabric profile is for plan and tune)")
    _check_distinct_files(paths)
    rows, places, seen = [], [], {}
    for path, m, g, n, release in zip(paths, models, systems, counts, releases):
        try:
            read, left_out = read_runs_noted(path, model=m, gpu=g, num_gpus=n)
        except (ZeroDivisionError, ValueError, TypeError, KeyError) as exc:
            # a log's numbers that cannot make a run (elapsed 0 ms, world size 0, tp=abc); runlogs/ names
            # most fields itself: this keeps the rest to one line
            raise CommbenchError(f"runs file {path!r} holds values no run can have: {type(exc).__name__}: "
                                 f"{first_line(exc)}") from None
        unread: dict[str, None] = {}
        for i, row in enumerate(read):
            if release:   # a log's row: its software named on the command line (a log does not say it)
                _check_log_release(row, release)
                row["software"] = release
            check_row(row, f"{path} row {i + 1}")
            _check_measured(row, f"{path} row {i + 1}")
            _check_not_repeated(row, f"{path} row {i + 1}", seen)
            unread.update(dict.fromkeys(unread_fields(row)))
            rows.append(row)
            places.append(f"{path} row {i + 1}")
        if unread:
            err_console.print(f"warning: runs file {path}: field(s) {', '.join(map(repr, unread))} not read (kept as "
                              f"information); a run is read from: {', '.join(sorted(READ_KEYS))}", highlight=False,
                              markup=False, soft_wrap=True)
        for text in left_out:   # a log's lines it read but did not count: said, not dropped silently
            err_console.print(f"note: {path}: {text}", highlight=False, markup=False, soft_wrap=True)
    if not rows:
        raise CommbenchError("no runs in " + ", ".join(paths))
    runs = published_runs(tuple(rows), tuple(places))
    impossible = next((r for r in runs if r.cannot_have_run), None)
    if impossible:   # features its release cannot run: not a run to list as unmodelled, a row that cannot be real
        raise CommbenchError(f"{impossible.where}: {impossible.skip_reason}")
    _warn_repeats_disagree(runs)
    if all(r.layout is None for r in runs):
        r = runs[0]
        raise CommbenchError(f"none of the {len(runs)} run(s) can be modelled; the first, {r.where} ({r.label}): "
                             f"{r.skip_reason}")
    return runs


def _log_release(text: str | None) -> str | None:
    """--software for a log: a NeMo release plan's --software takes (recipes.check_release), as named (normalised)."""
    if text is None:
        return None
    from commbench.planner.layout.recipes import check_release, normalised_release
    check_release(text)
    return normalised_release(text)


def _check_log_release(row: dict, release: str) -> None:
    """A log's precision its --software release cannot run is refused as plan refuses --precision with --software."""
    from commbench.planner.calibrate.published import precision_of, unmodelled_precision
    from commbench.planner.layout.recipes import check_precision_in_release, check_release
    if not unmodelled_precision(row.get("precision")):
        check_precision_in_release(precision_of(row.get("precision")), check_release(release), release,
                                   fields=("the log's precision", "--software"))


def _check_gpu_counts(counts: list[int] | None) -> None:
    """--gpus: each a GPU count a run can have (0 read as not given, -8 named as a row's field)."""
    from commbench.errors import invalid
    from commbench.limits import MAX_GPUS
    for count in counts or []:
        if not 1 <= count <= MAX_GPUS:
            raise invalid("--gpus", count, f"a GPU count from 1 to {MAX_GPUS:,}")


def _check_not_option_values(paths: list[str]) -> None:
    """A RUNS entry that is no file but a zoo model, a system preset or a number is a second value given after one
    --model / --system / --gpus (`--model A B`: typer takes one value per flag and B lands in RUNS): one line saying
    to repeat the flag, not that the file cannot be read."""
    import os

    from commbench.costmodel import preset_names
    from commbench.planner.calibrate.published import _zoo_name
    for path in paths:
        if os.path.exists(path):
            continue
        flag = ("--model" if _zoo_name(path) else "--system" if path.lower() in preset_names()
                else "--gpus" if path.isdigit() else None)
        if flag:
            raise CommbenchError(f"RUNS entry {path!r} is not a file but a {flag} value: {flag} takes one value, so "
                                 f"repeat {flag} for each log ({flag} A {flag} B), not {flag} A B")


def _check_distinct_files(paths: list[str]) -> None:
    """The same run given twice would be fitted as two runs (and listed twice in the calibration file): a RUNS file
    named twice, or two files of the same text (a copy), is refused in one line."""
    import hashlib
    import os

    from commbench.planner.calibrate.runlogs import runs_file_text
    seen: dict[tuple, int] = {}
    for i, path in enumerate(paths):
        real = os.path.realpath(path)
        digest = hashlib.sha256(runs_file_text(path).encode()).hexdigest()
        for key, what in (((real,), "given twice"), ((digest,), "the same text")):
            if key in seen:
                first = seen[key]
                raise CommbenchError(f"RUNS {first + 1} and {i + 1} ({paths[first]!r}, {path!r}): {what}; each run "
                                     "would be fitted twice: give each runs file once")
            seen[key] = i


def _notes_read(row: dict) -> tuple:
    """What calibrate reads of a row's notes (published.py: FSDP=N, GA=N, 'w/o MTP', a log's framework prefix): the
    rest is information, so two rows that differ only there are one run (probe BL 6: a copy with notes "copy" was
    counted twice)."""
    import re

    from commbench.planner.calibrate.published import run_framework
    notes = row.get("notes") if isinstance(row.get("notes"), str) else ""
    ga = re.search(r"GA=(\d+)", notes)   # FSDP=N: in published.row_identity, with the "fsdp" field
    return (ga.group(1) if ga else None, "w/o mtp" in notes.lower(), run_framework(row))


def _check_not_repeated(row: dict, where: str, seen: dict[str, str]) -> None:
    """A row equal to an earlier one in every field but its source (its measured figure too) is the same run again, not a repeat
    measurement: refused in one line naming both. `seen`: each earlier row's canonical JSON -> its place. The fields
    that say which run it is are compared as read (published.row_identity: 'H100' and 'h100-hgx', 'FP8' and 'fp8',
    an alias of the model, ep null and 1, FSDP=8 in the notes and "fsdp": 8 are the same)."""
    from commbench.planner.calibrate.published import IDENTITY_FIELDS, row_identity
    key = json.dumps({**{k: v for k, v in row.items() if k not in ("source", "notes", *IDENTITY_FIELDS)},
                      **row_identity(row), "notes read": _notes_read(row)}, sort_keys=True, default=repr)
    if key in seen:   # a log's row names its file (source): a copy of the log with a line more is the same run
        raise CommbenchError(f"{where} is {seen[key]} again (every field but its source and the notes calibrate does not "
                             "read, the measured figure too): "
                             "the same run "
                             "would be fitted twice; give each run once (a repeat measurement has its own figure)")
    seen[key] = where


# How far apart two measurements of one layout (of any release: the fit merges them) may be before they are named: the published tables'
# same layout across Megatron-Bridge releases (other software, so wider than a repeat) differs by a median 2.2%, 80th
# percentile 6.3% (83 pairs in calibration-runs.json and benchmarks/data/*-runs.json)
REPEAT_AGREE = 1.10


def _warn_repeats_disagree(runs) -> None:
    """Rows the fit takes as one distinct run (regularise.run_key: model, system, GPUs, sequence length, layout with its
    precision and recipe, whatever their release) are repeat measurements of one run: where their tokens/s/GPU are more
    than REPEAT_AGREE apart, one warning line names the slowest and the fastest and the ratio (one of them is not the
    run its fields say, or in other units), as a row equal in every field is refused (_check_not_repeated). Grouped
    by release before, so a row 8x its same layout of another release (a total for a per-GPU figure) was merged by the
    fit without a word."""
    from commbench.planner.calibrate.regularise import run_key
    groups: dict[tuple, list] = {}
    for r in runs:
        if r.layout is not None:
            groups.setdefault(run_key(r), []).append(r)
    for group in groups.values():
        slow = min(group, key=lambda r: float(r.row["tokens_per_s_per_gpu"]))
        fast = max(group, key=lambda r: float(r.row["tokens_per_s_per_gpu"]))
        low, high = float(slow.row["tokens_per_s_per_gpu"]), float(fast.row["tokens_per_s_per_gpu"])
        if high > REPEAT_AGREE * low:
            first, second = sorted((slow, fast), key=lambda r: r.index)
            err_console.print(
                f"warning: {first.where or f'run {first.index + 1}'} and {second.where or f'run {second.index + 1}'} "
                f"are one layout ({first.label}, the same sizes, batch, sequence length and recipe"
                + (f"; releases {first.row.get('release') or 'none'} and {second.row.get('release') or 'none'}, "
                   "which the fit takes as one run" if first.row.get("release") != second.row.get("release") else "")
                + ") measured "
                f"{float(first.row['tokens_per_s_per_gpu']):,.6g} and {float(second.row['tokens_per_s_per_gpu']):,.6g} "
                f"tokens/s/GPU, {high / low:.2f}x apart (repeats are taken to agree within "
                f"{(REPEAT_AGREE - 1) * 100:.0f}%): one of them is probably not the run its fields say ("
                + ("the releases' software, which the recipe fields do not record, " if first.row.get("release")
                   != second.row.get("release") else "")
                + "another recipe, a slow node, other units); a fit takes their compromise"
                + (f" ({len(group)} rows)" if len(group) > 2 else ""), highlight=False, markup=False, soft_wrap=True)


def _check_measured(row, where: str) -> None:
    """A run's measured throughput must be a finite positive number (NaN would fit the terms to nothing)."""
    import math

    for key in ("tokens_per_s_per_gpu", "tflops_per_gpu"):
        value = row.get(key) if isinstance(row, dict) else getattr(row, key, None)
        if value is None:  # a missing number is reported where it is needed, by name
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise CommbenchError(f"{where}: {key}={value!r} is invalid: a finite measured number > 0")


TFLOPS_AGREE = (0.5, 2.0)  # a row's tflops_per_gpu over the model TFLOP/s its tokens/s means (published: 0.83-1.13)
# The least measured model TFLOP/s over the GPU's peak at the run's precision a run is read without a word: the 328
# modelled published runs (calibration-runs.json and benchmarks/data/*-runs.json) reach 4.3% to 74%, median 18%; a
# figure under 1% is more likely in other units (thousands of tokens/s) than a run that slow
LEAST_PEAK_FRACTION = 0.01
# A Megatron-LM log's own "throughput per GPU (TFLOP/s/GPU)" is training.py num_floating_point_operations over the same
# iteration time the tokens/s are read from, the count commbench's model TFLOP/s reproduce (models/counts.py
# flops_breakdown: 23.006 GFLOP a token for Qwen3-30B-A3B at 4096 in both); they differ by the count's documented
# departures (commbench/data/FLOPS.md: at most 0.6%, hybrid models with MTP), the log's one decimal (0.05 TFLOP/s) and
# the median of its lines: beyond this share plus the rounding the log ran another network than --model's (a printed
# argument the checks do not read) or another release's count
MEGATRON_TFLOPS_AGREE = 0.01
MEGATRON_TFLOPS_ROUNDING = 0.05


def check_units(runs, calibration) -> None:
    """One line for a modelled run whose measured figures cannot be per-GPU tokens/s: more model TFLOP/s per GPU
    than the GPU's datasheet peak (tokens/s over all GPUs?), or a tflops_per_gpu that disagrees with the
    tokens/s by more than TFLOPS_AGREE (one of them in other units). Measured model TFLOP/s = the predicted
    model TFLOP/s scaled by measured / predicted tokens/s (the same model FLOPs per token). A figure under
    LEAST_PEAK_FRACTION of the peak is named in a warning line."""
    from commbench.planner.calibrate.published import predict_runs
    p = predict_runs(runs, calibration)
    for j, r in enumerate(p.runs):
        measured = float(p.published_tokens[j])
        tflops = float(p.model_tflops_per_gpu[j]) * measured / max(float(p.predicted_tokens[j]), 1e-30)
        where = f"{r.where + ': ' if r.where else ''}run {r.index + 1} ({r.label})"
        if tflops > float(p.peak_tflops[j]):
            raise CommbenchError(f"{where}: tokens_per_s_per_gpu={measured:,.6g} means {tflops:,.0f} model TFLOP/s "
                                 f"per GPU, above the GPU's {float(p.peak_tflops[j]):,.0f} peak; allowed: tokens/s "
                                 f"per GPU (over all {r.row['num_gpus']} GPUs it would be "
                                 f"{measured / int(r.row['num_gpus']):,.6g} per GPU)")
        if tflops < LEAST_PEAK_FRACTION * float(p.peak_tflops[j]):
            err_console.print(f"warning: {where}: tokens_per_s_per_gpu={measured:,.6g} means {tflops:,.0f} model "
                              f"TFLOP/s per GPU, {100 * tflops / float(p.peak_tflops[j]):.1f}% of the GPU's "
                              f"{float(p.peak_tflops[j]):,.0f} peak (published runs reach 4% or more): is it tokens/s "
                              "per GPU, not thousands of them?", highlight=False, markup=False, soft_wrap=True)
        logged = r.row.get("tflops_per_gpu")
        if logged and not TFLOPS_AGREE[0] <= float(logged) / tflops <= TFLOPS_AGREE[1]:
            raise CommbenchError(f"{where}: tflops_per_gpu={logged!r} but tokens_per_s_per_gpu={measured:,.6g} means "
                                 f"{tflops:,.0f} model TFLOP/s per GPU: one of them is in other units (both per GPU; "
                                 "tokens/s, not TFLOP/s, in tokens_per_s_per_gpu)")
        if logged and str(r.row.get("notes", "")).startswith("Megatron-LM log") and \
                abs(float(logged) - tflops) > MEGATRON_TFLOPS_AGREE * tflops + MEGATRON_TFLOPS_ROUNDING:
            err_console.print(f"warning: {where}: the log's throughput per GPU is {float(logged):,.1f} TFLOP/s, but "
                              f"Megatron-LM's FLOP count for {r.row['model']} at its iteration time is {tflops:,.1f} "
                              f"({float(logged) / tflops - 1:+.1%}; the same count agrees within "
                              f"{MEGATRON_TFLOPS_AGREE:.0%}): it ran another network than --model's, or another "
                              "release's count", highlight=False, markup=False, soft_wrap=True)


def _check_start_is_current(start_file) -> None:
    """A chained fit (-O with --calibration FILE) writes FILE's terms, and its runs, under this commbench's step model:
    from a FILE fitted to another step model (or to one it does not record) that stamped stale terms current, and
    plan with the result warned no more. Refused in one line naming the way out: refit FILE's runs without it."""
    from commbench.planner.step.terms import STEP_MODEL
    if start_file.step_model == STEP_MODEL:
        return
    said = (f"was fitted to step model {start_file.step_model}" if start_file.step_model
            else "records no step model (written before step models were recorded)")
    sources = _fitted_on(start_file.path)
    raise CommbenchError(f"--calibration {start_file.path} {said}, not this commbench's {STEP_MODEL}: a fit from it "
                         f"would write its terms as fitted to {STEP_MODEL}; refit its runs without --calibration "
                         f"(`commbench calibrate {' '.join(sources) if sources else 'RUNS'} ... -O FILE`), then chain "
                         "from that file")


def _fit_record(report, fitted, start_file) -> tuple[list[str] | None, list[str] | None]:
    """The file's terms_fitted (the terms this fit determined, with those a --calibration start file's fits did: the
    file carries both) and terms_at_bound (those of them at an end of fit.BOUNDS); (None, None) from a start file that
    records none, whose fitted terms are unknown (plan says so)."""
    from commbench.planner.calibrate.regularise import terms_at_bound
    from commbench.planner.step.terms import FITTED_TERMS
    if start_file is not None and start_file.terms_fitted is None:
        return None, None
    determined = set(report.terms_fitted) | set(start_file.terms_fitted if start_file else ())
    names = [t for t in FITTED_TERMS if t in determined]
    return names, [b["term"] for b in terms_at_bound(fitted, names)]


def _fitted_on(path: str) -> list[str]:
    """A calibration file's "fitted_on" (the RUNS files it was fitted from), [] where it records none readable."""
    from commbench.errors import read_user_file
    said = json.loads(read_user_file(path, "calibration file")).get("fitted_on")
    return [s for s in said if isinstance(s, str)] if isinstance(said, list) else []


def skipped_runs(runs) -> list[dict]:
    """The runs the model does not cover: position (1-based over all RUNS rows), file and row, label and reason."""
    return [{"run_index": i + 1, "where": r.where, "run": r.label, "reason": r.skip_reason}
            for i, r in enumerate(runs) if r.layout is None]


def _print_skipped(skipped: list[dict]) -> None:
    if skipped:
        console.print(f"not modelled: {len(skipped)} run(s): "
                      + "; ".join(f"{s['where']}: {s['run']} ({s['reason']})" for s in skipped), highlight=False,
                      markup=False, soft_wrap=True)


def _print_notes(runs) -> None:
    """Where a modelled run departs from the row as given (a release the recipe table lacks read as an older
    one, an mbs corrected from the run's own recipe)."""
    for r in runs:
        if r.layout_note:
            console.print(f"note: {r.label}: {r.layout_note}", highlight=False, markup=False)


def run_key(r, label: str | None = None) -> str:
    """A modelled run as a calibration file lists the runs it was fitted on: label, layout, sequence length and
    the measured tokens/s/GPU."""
    a = r.layout
    return (f"{label or r.label} tp{a.tp} pp{a.pp} vp{a.vp} ep{a.ep} etp{a.etp} cp{a.cp} mbs{a.mbs} gbs{a.gbs} "
            f"seq{int(r.row['seq_len'])}: {float(r.row['tokens_per_s_per_gpu']):.6g} tokens/s/GPU")


def run_identity(text: str) -> str:
    """A listed run (run_key) with its label as the run is read (published.run_label: model alias, GPU, precision
    and release spelled one way), so one run written 'Llama3-70B 64x H100 FP8' and 'llama3.1-70b 64x h100 fp8' is
    one; a text of no such shape (a model or GPU name with a space) as it is."""
    from commbench.planner.calibrate.published import run_label
    from commbench.planner.calibrate.fit import LISTED_RUN   # a run_key as written
    match = LISTED_RUN.fullmatch(text)
    if not match:
        return text
    g = match.groupdict()
    precision = None if g["precision"] == "?" else g["precision"]
    label = run_label(g["model"], g["num"] or g["old_num"], g["gpu"] or g["old_gpu"], precision, g["release"])
    return f"{label} {g['rest']}"


@functools.lru_cache(maxsize=8)
def _identities(keys: frozenset) -> frozenset:
    return frozenset(map(run_identity, keys))


def listed_in(r, keys: frozenset) -> bool:
    """Whether a calibration file's run list holds `r`: the same run however either spells its model, GPU, precision
    and release (run_identity), also as files written before the label spelled the GPU count as the table does
    ('gb300-nvl72x256', now '256x gb300-nvl72') list it."""
    return (run_key(r) in keys or run_key(r, r.legacy_label) in keys
            or run_identity(run_key(r, r.identity)) in _identities(keys))


def shipped_fitted_on() -> frozenset:
    """The runs the shipped calibration (step.terms.CALIBRATED) was fitted on, as a calibration file lists its runs
    (run_key): every modelled row of commbench/data/calibration-runs.json (README: its terms are fitted on them). A
    RUNS row among them is in-sample for the shipped terms, as a --calibration FILE's own runs are for FILE's."""
    return _shipped_keys()


@functools.lru_cache(maxsize=1)
def _shipped_keys() -> frozenset:
    from commbench.planner.calibrate.published import published_runs
    return frozenset(run_key(r) for r in published_runs() if r.layout is not None)


def evaluation_rows(runs, calibration, fitted_on: frozenset = frozenset()) -> list[dict]:
    """Each input row plus predicted_tokens_per_s_per_gpu and error_pct (predicted vs measured),
    in_sample (the calibration was fitted on this run: its error is not a held-out one) and layout_note (where
    the modelled run departs from the row: whose recipe stood in for its release, an mbs from its recipe)."""
    from commbench.planner.calibrate.published import predict_runs
    p = predict_runs(runs, calibration)
    out = []
    for j, r in enumerate(p.runs):
        pred = float(p.predicted_tokens[j])
        out.append(dict(r.row, predicted_tokens_per_s_per_gpu=pred,
                        error_pct=(pred / float(p.published_tokens[j]) - 1.0) * 100.0, fits=bool(p.fits[j]),
                        in_sample=listed_in(r, fitted_on), layout_note=r.layout_note))
    return out


def scoped_evaluation_rows(runs, cal_file, fitted_on: frozenset) -> tuple[list[dict], list[str]]:
    """evaluation_rows with each run predicted as `plan --calibration` predicts its GPU (CalibrationFile.for_gpu: on a
    GPU the file's runs do not include, the shipped kernel terms), in the runs' order, and those GPUs (sorted); one
    warning per such GPU (stderr, also under --json)."""
    from commbench.planner.calibrate.fit import preset_gpu
    by_gpu: dict[str, list[int]] = {}
    for i, r in enumerate(runs):
        by_gpu.setdefault(preset_gpu(r.preset), []).append(i)
    rows: list[dict | None] = [None] * len(runs)
    for gpu, picks in by_gpu.items():
        note = cal_file.other_gpu_note(gpu)
        if note:
            err_console.print(f"warning: {note}", highlight=False, markup=False, soft_wrap=True)
        for i, row in zip(picks, evaluation_rows([runs[i] for i in picks], cal_file.for_gpu(gpu)[0], fitted_on)):
            rows[i] = row
    return rows, sorted(gpu for gpu in by_gpu if not cal_file.fitted_on(gpu))


def shared_kernel_terms_note(path: str) -> str:
    """'' when the calibration file written at `path` lists runs of one GPU (or names none); else one line: its kernel
    terms (step.terms.KERNEL_TERMS) are one set fitted to all of those GPUs' runs (a --calibration start file's runs
    included), which a plan of each of them uses whole (calibrate.fit.CalibrationFile.for_gpu)."""
    from commbench.planner.calibrate.fit import fitted_gpus
    from commbench.planner.step.terms import KERNEL_TERMS
    gpus = fitted_gpus(path)
    if len(gpus) < 2:
        return ""
    return (f"{path} lists runs of {len(gpus)} GPUs ({', '.join(gpus)}): its kernel terms ({', '.join(KERNEL_TERMS)}) "
            "are one set fitted to all of them, and a plan of any of these GPUs uses that set; fit each GPU's runs "
            "into a file of its own for the kernel terms particular to that GPU")


RUN_COLUMNS = (Col(name="run", numeric=False), Col(name="layout", numeric=False, keep=1), Col(name="measured tok/s/GPU"),
               Col(name="predicted tok/s/GPU"), Col(name="error"))


def _file_frameworks(calibration: str | None) -> list[str]:
    """The frameworks a --calibration start file records (its runs are carried into the new file); 'unstated' for
    a file that records none."""
    if not calibration:
        return []
    from commbench.errors import read_user_file
    said = json.loads(read_user_file(calibration, "calibration file")).get("frameworks")
    return [f for f in said if isinstance(f, str)] if isinstance(said, list) else ["unstated"]


def _layout_text(r: dict) -> str:
    """The layout column: the parallel sizes and batch, and "fsdpN" for a run modelled as Megatron-FSDP over N DP
    ranks (its notes' FSDP=N), which otherwise shows as the same sizes as a DDP run."""
    from commbench.planner.calibrate.published import fsdp_of
    fsdp = fsdp_of(r)
    return (f"tp{r['tp']} pp{r['pp']} vp{r.get('vp') or 1} ep{r.get('ep') or 1} cp{r.get('cp') or 1} "
            f"mbs{r['mbs']} gbs{r['gbs']}" + (f" fsdp{fsdp}" if fsdp else ""))


def _errors_left(rows: list[dict]) -> str:
    """The signed errors fitted rows leave, as a fit of one distinct run states them: '+4.3% on it', or for its
    several rows (repeats of one layout) '-7.6%, +178.9% on its 2 rows'."""
    errors = ", ".join(f"{r['error_pct']:+.1f}%" for r in rows[:4]) + (", ..." if len(rows) > 4 else "")
    return f"{errors} on it" if len(rows) == 1 else f"{errors} on its {len(rows)} rows"


def _run_rows(rows: list[dict]) -> list[list[str]]:
    return [[escape(f"{r['model']} {r['num_gpus']}x {r['gpu']} {r.get('precision') or '?'}"),
             _layout_text(r),
             f"{r['tokens_per_s_per_gpu']:,.0f}", f"{r['predicted_tokens_per_s_per_gpu']:,.0f}", f"{r['error_pct']:+.1f}%"]
            for r in rows]


@command("calibrate", help="Fit the step model's efficiency terms to your own training runs (-O FILE, then "
                           "--calibration FILE on plan/tune), or --evaluate the model on them: predicted vs "
                           "measured tokens/s/GPU per run.")
def calibrate(
    runs: Annotated[list[str], typer.Argument(help=RUNS_HELP)],
    out: Annotated[Optional[str], typer.Option("-O", "--out", help="write the fitted terms here (JSON)")] = None,
    old_out: Annotated[Optional[str], typer.Option("-o", hidden=True)] = None,
    evaluate: Annotated[bool, typer.Option("--evaluate", help="only predict the runs and print the errors")] = False,
    calibration: Annotated[Optional[str], typer.Option(help="terms from `commbench calibrate -O` (default: shipped)")] = None,
    model: Annotated[Optional[list[str]], typer.Option(help="zoo model of the runs in training logs (or hf:PATH, a Hugging Face config.json): once for "
                                                       "every log, or once per log in RUNS order")] = None,
    system: Annotated[Optional[list[str]], typer.Option(help="system preset of the runs in training logs (e.g. "
                                                        "gb300-nvl72): once, or once per log")] = None,
    gpus: Annotated[Optional[list[int]], typer.Option(help="GPU count where a TorchTitan log leaves it to auto and "
                                                      "prints no device mesh: once, or once per log")] = None,
    loo: Annotated[bool, typer.Option("--loo/--no-loo", help="leave-one-out error: refit without each run and "
                                      "predict it (up to 12 distinct runs)")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON (format commbench-calibrate, schema "
                                          "commbench/data/schemas/calibrate.schema.json): the rows, each the input "
                                          "row plus predicted_tokens_per_s_per_gpu and error_pct; with a fit, the "
                                          "terms fitted/held/moved, bounds reached and leave-one-out error")] = False,
    force: Annotated[bool, typer.Option("--force", help="replace -O/--out even when it is not a calibration file")] = False,
    software: Annotated[Optional[list[str]], typer.Option(help="the NeMo release (e.g. 26.02) a training log's run ran "
                                                          "under, as plan's --software: once for every log, or once "
                                                          "per log; recorded in -O FILE (a log does not say it: "
                                                          "without it plan calls the release unknown)")] = None,
) -> None:
    from commbench.planner.calibrate.fit import read_calibration_file
    from commbench.planner.step.terms import CALIBRATED, FITTED_TERMS
    out = renamed(out, old_out, old="-o", new="-O/--out")
    if not evaluate and out is None:
        raise CommbenchError("give -O FILE to write fitted terms, or --evaluate to only compare predictions")
    if evaluate and out is not None:  # --evaluate fits nothing: -O was left unwritten without a word
        raise CommbenchError(f"-O/--out={out!r} and --evaluate conflict: --evaluate fits no terms to write; give one")
    from commbench.files import refuse_empty_inputs, refuse_writing_inputs

    refuse_empty_inputs(("RUNS", runs, "a run: a published run's name, a training log or a runs file"),
                        ("--calibration", calibration, "a calibration file (commbench calibrate -O)"))
    if out is not None and not evaluate:
        from commbench.files import claim_output
        from commbench.planner.step.terms import CALIBRATION_KIND

        refuse_writing_inputs("--out", out, [out], [*runs, calibration, *(model or []), *(system or [])])
        claim_output(out, "--out", marker=CALIBRATION_KIND, what="calibration", force=force).release()
    start_file = read_calibration_file(calibration) if calibration else None
    if start_file and not evaluate:
        _check_start_is_current(start_file)
    start = start_file.calibration if start_file else CALIBRATED
    shipped_terms = {"calibration_shipped_terms": list(start_file.shipped_terms)} if start_file else {}
    for line in start_file.warnings() if start_file else []:
        err_console.print(f"warning: {line}", highlight=False, markup=False, soft_wrap=True)
    if start_file and start_file.shipped_terms and not as_json:   # --json carries calibration_shipped_terms
        err_console.print(f"note: {start_file.note()}", highlight=False, markup=False, soft_wrap=True)
    _check_gpu_counts(gpus)
    everything = load_runs(runs, model=model, system=system, gpus=gpus, software=software)
    skipped = skipped_runs(everything)
    loaded = [r for r in everything if r.layout is not None]
    check_units(loaded, start)
    if evaluate:
        from commbench.planner.step.terms import fitted_runs
        in_file = frozenset(fitted_runs(calibration)) if calibration else shipped_fitted_on()
        rows, other_gpus = (scoped_evaluation_rows(loaded, start_file, in_file) if start_file
                            else (evaluation_rows(loaded, start, in_file), []))
        in_sample = sum(r["in_sample"] for r in rows)
        errors = np.abs([r["error_pct"] for r in rows])
        from commbench.planner.calibrate.fit import median_error_by_family
        by_family = median_error_by_family(loaded, errors)
        if as_json:
            print_json({"format": CALIBRATE_FORMAT, "version": CALIBRATE_VERSION, "mode": "evaluate",
                        "kind": "predicted", "calibration": calibration or "shipped",
                        **shipped_terms, "calibration_other_gpus": other_gpus, "rows": rows,
                        "skipped": skipped, "median_abs_error_pct": float(np.median(errors)),
                        "num_in_sample": in_sample,
                        "median_abs_error_pct_by_family": {k: {"median": m, "runs": n}
                                                           for k, (m, n) in by_family.items()}},
                       default=float)
            return
        print_table(console, f"predicted (calibration: {calibration or 'shipped'}) vs measured", RUN_COLUMNS, _run_rows(rows))
        console.print(f"median |error| {float(np.median(errors)):.1f}% over {len(rows)} runs (predicted); by family: "
                      + ", ".join(f"{k} {m:.1f}% ({n})" for k, (m, n) in by_family.items()), highlight=False)
        if in_sample:
            err_console.print(f"note: {in_sample} of these {len(rows)} run(s) are ones "
                              f"{calibration or 'the shipped calibration (commbench/data/calibration-runs.json)'} was "
                              "fitted on: their errors are in-sample, not what to expect on other runs ("
                              + ("fit without them to hold them out" if calibration else
                                 "benchmarks/planner_calibration.py's leave-one-GPU-out and leave-one-release-out "
                                 "tables hold them out") + ")", highlight=False, markup=False, soft_wrap=True)
        _print_skipped(skipped)
        _print_notes(loaded)
        return
    from commbench.planner.calibrate.regularise import calibrate_report
    from commbench.planner.step.terms import fitted_runs
    again = [run_key(r) for r in loaded if listed_in(r, frozenset(fitted_runs(calibration)))] if calibration else []
    if again:   # the start file's terms carry its runs already: fitted again they would weigh twice, unseen in -O
        raise CommbenchError(f"--calibration {calibration} was fitted on {len(again)} of these runs already "
                             f"({again[0]!r}{' and others' if len(again) > 1 else ''}): its terms carry them, so they "
                             "would count twice; give only runs it was not fitted on, or fit every run from the "
                             "shipped calibration (no --calibration)")
    # "before" as --evaluate with the same file says it; its warning names each GPU the file's runs do not include
    start_rows = (scoped_evaluation_rows(loaded, start_file, frozenset())[0] if start_file
                  else evaluation_rows(loaded, start))
    # the fit starts from the file's terms whole, also on GPUs its runs never saw: the file written lists its runs, so
    # its terms must carry them (a start from the shipped kernel terms wrote those over the ones fitted to its runs)
    with console.status(f"fitting the terms {len(loaded)} run(s) determine"):
        report = calibrate_report(loaded, start, loo=loo)
    fitted = report.fitted
    before = np.abs([r["error_pct"] for r in start_rows])
    # the shipped start terms were fitted on calibration-runs.json: its rows among RUNS are in-sample "before", and
    # each leave-one-out refit still starts from and is pulled toward terms fitted on the held-out row (a --calibration
    # FILE's own runs are refused above for the same reason: they would count twice)
    in_start = 0 if calibration else sum(listed_in(r, shipped_fitted_on()) for r in loaded)
    rows = evaluation_rows(loaded, fitted, frozenset(run_key(r) for r in loaded))   # all in-sample
    after = np.abs([r["error_pct"] for r in rows])
    from commbench.planner.step.terms import save_calibration
    # a --calibration start file's terms are held or pulled toward: its runs are in the result as much as these
    # (else a chain of fits names the last runs alone, and a plan of the first runs' GPU hears nothing)
    from commbench.planner.step.terms import fitted_runs
    carried = fitted_runs(calibration) if calibration else []
    from commbench.planner.calibrate.fit import run_framework
    frameworks = {run_framework(r.row) for r in loaded} | set(_file_frameworks(calibration))
    terms_fitted, terms_at_bound = _fit_record(report, fitted, start_file)
    data = save_calibration(out, fitted, fitted_on=sorted(set(runs)) + ([calibration] if calibration else []),
                            force=force, runs=list(dict.fromkeys([*carried, *(run_key(r) for r in loaded)])),
                            frameworks=sorted(frameworks), terms_fitted=terms_fitted, terms_at_bound=terms_at_bound,
                            run_releases={**dict(start_file.run_releases if start_file else ()),
                                          **{run_key(r): r.row["software"] for r in loaded if r.row.get("software")}})
    loo_median = float(np.median(report.loo_abs_error_pct)) if report.loo_abs_error_pct else None
    shared = shared_kernel_terms_note(out)
    if shared:
        err_console.print(f"note: {shared}", highlight=False, markup=False, soft_wrap=True)
    if as_json:
        print_json({"format": CALIBRATE_FORMAT, "version": CALIBRATE_VERSION, "mode": "fit",
                    "out": out, "start": calibration or "shipped", **shipped_terms,
                    "calibration": data,
                    "num_runs": len(loaded), "num_distinct_runs": report.num_distinct_runs,
                    "terms_fitted": list(report.terms_fitted),
                    "terms_held": [{"term": t, "why": w} for t, w in report.terms_held.items()],
                    "moved": report.moved, "at_bound": report.at_bound,
                    "median_abs_error_pct_before": float(np.median(before)),
                    "num_in_start": in_start,
                    "median_abs_error_pct_in_sample": float(np.median(after)),
                    "median_abs_error_pct_leave_one_out": loo_median,
                    "leave_one_out_abs_error_pct": report.loo_abs_error_pct,
                    "leave_one_out_note": report.loo_note, "rows": rows, "skipped": skipped},
                   default=float)
        return
    moved = {m["term"]: m for m in report.moved}
    print_table(console, f"terms ({len(loaded)} run(s), {report.num_distinct_runs} distinct: {len(report.terms_fitted)} "
                f"fitted toward the {calibration or 'shipped'} values) -> {out}",
                [Col(name="term", numeric=False), Col(name="start"), Col(name="fitted"), Col(name="change"),
                 Col(name="note", numeric=False, keep=1)],
                [[name, f"{getattr(start, name):.4g}", f"{getattr(fitted, name):.4g}",
                  f"{moved[name]['change_pct']:+.1f}%" if name in moved else "",
                  "fitted" if name in report.terms_fitted else f"held: {report.terms_held.get(name, '')}"]
                 for name in FITTED_TERMS])
    print_table(console, "fitted: predicted vs measured", RUN_COLUMNS, _run_rows(rows))
    console.print("moved: " + (", ".join(f"{m['term']} {m['start']:.4g} -> {m['fitted']:.4g} ({m['change_pct']:+.1f}%)"
                                         for m in report.moved) or "nothing"), highlight=False, markup=False)
    for b in report.at_bound:
        err_console.print(styled("[yellow]warning:[/] fitted term {} = {} ends at its {} bound (its physical range): "
                                 "the runs do not determine it there, and may want it beyond (another term or the "
                                 "model is off for them); predictions leaning on it are less trustworthy", b["term"],
                                 f"{b['value']:.4g}", b["bound"]), highlight=False, soft_wrap=True)
    if report.num_distinct_runs < 2 and report.moved:
        # one distinct run: the in-sample figure below is the fit's own error on it, which tests no other layout. It is
        # not ~0: the fit is pulled toward the start terms (regularise.py's prior) and a term stops at its bound
        err_console.print(styled("[yellow]warning:[/] one distinct run moved {}: the fit leaves {} (pulled toward the "
                                 "start terms by its prior{}, so not reproduced), and that in-sample error says "
                                 "nothing of other layouts or batch sizes; how far these terms carry is unmeasured "
                                 "(add runs of other layouts: leave-one-out needs 2)",
                                 ", ".join(m["term"] for m in report.moved), _errors_left(rows),
                                 "".join(f"; {b['term']} at its {b['bound']} bound" for b in report.at_bound)),
                          highlight=False, soft_wrap=True)
    loo_text = (f"{loo_median:.1f}% leave-one-out over {len(report.loo_abs_error_pct)} distinct runs"
                + (" (not held out of the shipped start terms)" if in_start else "")
                if loo_median is not None else f"leave-one-out {report.loo_note}")
    why = (" (the fit minimises a weighted Huber loss pulled toward the start terms, not this median)"
           if float(np.median(after)) > float(np.median(before)) else "")
    if in_start:
        err_console.print(f"note: {in_start} of these {len(loaded)} run(s) are rows of commbench/data/calibration-runs"
                          ".json, which the shipped start terms were fitted on: the 'before' error is in-sample for "
                          "them, and leave-one-out holds them out of each refit but not of its start terms and prior "
                          "(fitted on them), so it is not a held-out error for them", highlight=False, markup=False,
                          soft_wrap=True)
    console.print(f"median |error| {float(np.median(before)):.1f}% before"
                  + (f" (in-sample for {in_start})" if in_start else "") + f", {float(np.median(after)):.1f}% after "
                  f"in-sample{why}, {loo_text} (use it with --calibration {out})", highlight=False, markup=False)
    _print_skipped(skipped)
    _print_notes(loaded)
