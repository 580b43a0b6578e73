"""`commbench calibrate`: fit the step model's efficiency terms to a user's own runs, or evaluate
the model (shipped or a fitted file) on them. Predictions are PREDICTED; the runs' figures are
what the user measured."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import numpy as np
import typer
from rich.markup import escape

from commbench.cli.base import command, console, renamed
from commbench.errors import CommbenchError, first_line
from commbench.results.tables import Col, print_table

RUNS_HELP = ("JSON lists shaped like commbench/data/calibration-runs.json (recipe fields optional: recompute, "
             "dispatcher, moe_a2a_overlap, cuda_graph, fp8_attention, fused_moe, ...; missing ones default to "
             "selective recompute, TP/DP overlap on, EP overlap off, no CUDA graphs, flex dispatcher on NVL72), "
             "Megatron-LM training logs or TorchTitan training logs")


def load_runs(paths: list[str], *, model: str | None, system: str | None, gpus: int | None):
    """PublishedRun objects for every row of every RUNS file, each row checked (one-line errors). Runs the
    model does not cover come back with layout None and their skip_reason; none covered is an error."""
    from commbench.planner.published import check_row, published_runs
    from commbench.planner.runlogs import read_runs
    rows = []
    for path in paths:
        try:
            read = read_runs(path, model=model, gpu=system, num_gpus=gpus)
        except (ZeroDivisionError, ValueError, TypeError, KeyError) as exc:
            # a log's numbers that cannot make a run (elapsed 0 ms, world size 0, tp=abc); runlogs.py names
            # most fields itself: this keeps the rest to one line
            raise CommbenchError(f"runs file {path!r} holds values no run can have: {type(exc).__name__}: "
                                 f"{first_line(exc)}") from None
        for i, row in enumerate(read):
            check_row(row, f"{path} row {i + 1}")
            _check_measured(row, f"{path} row {i + 1}")
            rows.append(row)
    if not rows:
        raise CommbenchError("no runs in " + ", ".join(paths))
    runs = published_runs(tuple(rows))
    if all(r.layout is None for r in runs):
        r = runs[0]
        raise CommbenchError(f"none of the {len(runs)} run(s) can be modelled; the first, {r.label}: {r.skip_reason}")
    return runs


def _check_measured(row, where: str) -> None:
    """A run's measured throughput must be a finite positive number (NaN would fit the terms to nothing)."""
    import math

    for key in ("tokens_per_s_per_gpu", "tflops_per_gpu"):
        value = row.get(key) if isinstance(row, dict) else getattr(row, key, None)
        if value is None:  # a missing number is reported where it is needed, by name
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise CommbenchError(f"{where}: {key}={value!r} is invalid: a finite measured number > 0")


def skipped_runs(runs) -> list[dict]:
    """The runs the model does not cover: position (1-based over all RUNS rows), label and reason."""
    return [{"run_index": i + 1, "run": r.label, "reason": r.skip_reason} for i, r in enumerate(runs) if r.layout is None]


def _print_skipped(skipped: list[dict]) -> None:
    if skipped:
        console.print(f"not modelled: {len(skipped)} run(s): "
                      + "; ".join(f"{s['run']} ({s['reason']})" for s in skipped), highlight=False, markup=False)


def evaluation_rows(runs, calibration) -> list[dict]:
    """Each input row plus predicted_tokens_per_s_per_gpu and error_pct (predicted vs measured)."""
    from commbench.planner.published import predict_runs
    p = predict_runs(runs, calibration)
    out = []
    for j, r in enumerate(p.runs):
        pred = float(p.predicted_tokens[j])
        out.append(dict(r.row, predicted_tokens_per_s_per_gpu=pred,
                        error_pct=(pred / float(p.published_tokens[j]) - 1.0) * 100.0, fits=bool(p.fits[j])))
    return out


RUN_COLUMNS = (Col(name="run", numeric=False), Col(name="layout", numeric=False, keep=1), Col(name="measured tok/s/GPU"),
               Col(name="predicted tok/s/GPU"), Col(name="error"))


def _run_rows(rows: list[dict]) -> list[list[str]]:
    return [[escape(f"{r['model']} {r['num_gpus']}x {r['gpu']} {r.get('precision') or '?'}"),
             f"tp{r['tp']} pp{r['pp']} vp{r.get('vp') or 1} ep{r.get('ep') or 1} cp{r.get('cp') or 1} mbs{r['mbs']} gbs{r['gbs']}",
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
    model: Annotated[Optional[str], typer.Option(help="zoo model of the runs in training logs")] = None,
    system: Annotated[Optional[str], typer.Option(help="system preset of the runs in training logs (e.g. gb300-nvl72)")] = None,
    gpus: Annotated[Optional[int], typer.Option(help="GPU count, where a TorchTitan log leaves it to auto")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON: a rows list, each the input row plus "
                                          "predicted_tokens_per_s_per_gpu and error_pct")] = False,
    force: Annotated[bool, typer.Option("--force", help="replace -O/--out even when it is not a calibration file")] = False,
) -> None:
    from commbench.planner.calibration import CALIBRATED, FITTED_TERMS, calibration_json, load_calibration
    out = renamed(out, old_out, old="-o", new="-O/--out")
    if not evaluate and out is None:
        raise CommbenchError("give -O FILE to write fitted terms, or --evaluate to only compare predictions")
    if out is not None and not evaluate:
        from commbench.files import claim_output
        from commbench.planner.calibration import CALIBRATION_KIND

        claim_output(out, "--out", marker=CALIBRATION_KIND, what="calibration", force=force).release()
    start = load_calibration(calibration) if calibration else CALIBRATED
    everything = load_runs(runs, model=model, system=system, gpus=gpus)
    skipped = skipped_runs(everything)
    loaded = [r for r in everything if r.layout is not None]
    if evaluate:
        rows = evaluation_rows(loaded, start)
        errors = np.abs([r["error_pct"] for r in rows])
        if as_json:
            console.print_json(json.dumps({"kind": "predicted", "calibration": calibration or "shipped", "rows": rows,
                                           "skipped": skipped, "median_abs_error_pct": float(np.median(errors))},
                                          default=float))
            return
        print_table(console, f"predicted (calibration: {calibration or 'shipped'}) vs measured", RUN_COLUMNS, _run_rows(rows))
        console.print(f"median |error| {float(np.median(errors)):.1f}% over {len(rows)} runs (predicted)")
        _print_skipped(skipped)
        return
    from commbench.planner.published import fit_calibration
    with console.status(f"fitting {len(FITTED_TERMS)} terms to {len(loaded)} runs"):
        fitted = fit_calibration(loaded, start=start)
    before = np.abs([r["error_pct"] for r in evaluation_rows(loaded, start)])
    rows = evaluation_rows(loaded, fitted)
    after = np.abs([r["error_pct"] for r in rows])
    data = calibration_json(fitted, fitted_on=sorted(set(runs)))
    from commbench.files import write_output
    from commbench.planner.calibration import CALIBRATION_KIND

    write_output(out, json.dumps(data, indent=1, allow_nan=False) + "\n", "--out", marker=CALIBRATION_KIND,
                 what="calibration", force=force)
    if as_json:
        console.print_json(json.dumps(dict(data, rows=rows, skipped=skipped), default=float))
        return
    print_table(console, f"fitted terms ({len(loaded)} runs) -> {out}",
                [Col(name="term", numeric=False), Col(name="shipped"), Col(name="fitted")],
                [[name, f"{getattr(start, name):.4g}", f"{getattr(fitted, name):.4g}"] for name in FITTED_TERMS])
    print_table(console, "fitted: predicted vs measured", RUN_COLUMNS, _run_rows(rows))
    console.print(f"median |error| {float(np.median(before)):.1f}% before, {float(np.median(after)):.1f}% after "
                  f"(in-sample; use it with --calibration {out})")
    _print_skipped(skipped)
