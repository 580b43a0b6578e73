"""`commbench verify-plan plan.json`: run the plan's collectives here, measured beside predicted."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer
from rich.markup import escape

from commbench.cli.base import command, console
from commbench.results.render import styled
from commbench.errors import CommbenchError, invalid
from commbench.results.tables import Col, print_table
from commbench.units import format_size


VERIFY_COLUMNS = (Col(name="collective", numeric=False), Col(name="group (plan)", keep=2), Col(name="size"),
                  Col(name="plan size", keep=3), Col(name="measured (µs)"), Col(name="predicted (µs)"),
                  Col(name="measured/predicted", keep=1), Col(name="#wrong"))


def _us(value: float | None) -> str:
    return "-" if value is None or value != value else f"{value:,.1f}"


def verify_rows(points: list[dict]) -> list[list[str]]:
    """Table cells of `verify-plan --json`'s points (sizes in KiB/MiB as bench prints them)."""
    return [[escape(p["collective"]), f"{p['group_size']} ({p['plan_group_size']})", format_size(p["size_bytes"]),
             format_size(p["plan_size_bytes"]), _us(p["measured_time_us"]), _us(p["predicted_time_us"]),
             "-" if p["measured_over_predicted"] is None else f"{p['measured_over_predicted']:,.1f}x",
             str(p["num_wrong"])] for p in points]


@command("verify-plan", help="Run a plan's own communication (EP all-to-all, TP collectives, DP bucket "
                             "reduce-scatter) on this machine or cluster; print measured vs predicted per collective "
                             "and flag every assumption the cluster does not meet.")
def verify_plan(
    plan_file: Annotated[str, typer.Argument(help="plan.json written by `commbench plan --out` or `commbench tune`")],
    nproc: Annotated[Optional[int], typer.Option(help="local ranks (default: the plan's GPU count, at most 4 on gloo)")] = None,
    backend: Annotated[str, typer.Option(help="auto (NCCL if CUDA is available, else gloo), nccl or gloo")] = "auto",
    max_bytes: Annotated[str, typer.Option("-e", "--max-bytes", help="largest buffer to measure (K/M/G; 16M, as every command that measures); the plan's larger sizes are cut and flagged")] = "16M",
    iters: Annotated[int, typer.Option(help="timed iterations per collective")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="print measured vs predicted per collective as JSON (schema: docs/json-output.md)")] = False,
) -> None:
    from commbench.costmodel import load_preset, preset_names
    from commbench.comm.backends import max_local_ranks, resolve_backend
    from commbench.comm.job import run_job
    from commbench.comm.launch import detect_rank_env
    from commbench.limits import check_iters
    from commbench.planner.emit.plan import load_plan
    from commbench.units import parse_size_bytes
    from commbench.workflows.verify import VerifyJob, plan_items, predicted_s

    doc = load_plan(plan_file)
    resolved = resolve_backend(backend)
    gpus = int(doc["inputs"]["gpus"])
    launched = detect_rank_env()
    under_launcher = launched is not None and launched.launcher != "local"
    limit = launched.world_size if under_launcher else min(max_local_ranks(resolved)[0], 4)
    ranks = launched.world_size if under_launcher else (min(gpus, limit) if nproc is None else nproc)
    most, why = (launched.world_size, "the launch") if under_launcher else max_local_ranks(resolved)
    if not 2 <= ranks <= most:
        raise invalid("--nproc", ranks, f"from 2 (the least any collective needs) to {most} on {resolved} ({why})")
    check_iters(iters, "--iters")
    items, flags = plan_items(doc, ranks, parse_size_bytes(max_bytes, "--max-bytes"))
    if not items:
        raise CommbenchError("the plan has no collective of more than one rank to verify (tp = ep = dp*cp = 1)")
    if resolved != "nccl":
        preset = doc["inputs"].get("fabric", {}).get("source") == "preset"
        what = ("NCCL over NVLink and the NIC" if preset else
                "a profile fitted from measured results (plan.json inputs.fabric: its curves' sources)")
        flags.insert(0, f"backend {resolved} on CPU: the plan's fabric is {doc['inputs']['system']} ({what}); measured "
                        "times here check the plan's sizes and groups, not its bandwidth")
    if resolved == "gloo" and any(i.collective == "reduce_scatter" for i in items):
        flags.append("gloo implements reduce_scatter as a full all-reduce: its measured time is an upper bound")
    job = VerifyJob(items=tuple(items), backend=resolved, iters=iters)
    outcomes = run_job(_rank, job, nproc=None if under_launcher else ranks, backend=resolved,
                       validate_world=lambda world: None, output_path="(verify-plan writes no file)")
    rows = outcomes.get(0)
    if rows is None:
        return
    system = doc["inputs"]["system"]
    fabric = load_preset(system, num_gpus=gpus) if system in preset_names() else _plan_fabric(doc, gpus, flags)
    per_rack = int(doc["placement"]["gpus_per_rack"])
    imbalance = float(doc["inputs"].get("moe_imbalance", 1.0))
    points = []
    for item, row in zip(items, rows):
        pred_us = predicted_s(fabric, item, per_rack, imbalance) * 1e6 if fabric is not None else None
        meas = row["time_us_median"]
        imb = row["metrics"].get("imbalance") or row["metrics"].get("max_over_mean")
        if imb:
            flags.append(f"{item.label}: measured routing imbalance {float(imb):.2f}x vs the plan's {imbalance:g}x")
        points.append({"collective": item.label, "group_size": row["group_size"], "plan_group_size": item.plan_group_size,
                       "size_bytes": item.size_bytes, "plan_size_bytes": item.plan_size_bytes,
                       "measured_time_us": meas, "predicted_time_us": pred_us,
                       "measured_over_predicted": meas / pred_us if meas and pred_us else None,
                       "num_wrong": row["num_wrong"]})
    if as_json:
        console.print_json(json.dumps({"format": "commbench-verify-plan", "version": 1, "plan": plan_file,
                                       "system": system, "backend": resolved, "ranks": ranks, "points": points,
                                       "unmet_assumptions": flags}))
    else:
        print_table(console, f"verify-plan {plan_file}: {ranks} {resolved} rank(s); measured here vs predicted for {system}",
                    VERIFY_COLUMNS, verify_rows(points))
        for flag in flags:
            console.print(styled("[yellow]unmet assumption:[/] {}", flag), highlight=False)
    if any(row["num_wrong"] for row in rows):
        raise CommbenchError("a collective returned wrong data (see the #wrong column)")


def _rank(rank_env, job):
    from commbench.workflows.verify import verify_rank
    return verify_rank(rank_env, job)


def _plan_fabric(doc: dict, gpus: int, flags: list[str]):
    """The fitted fabric .json the plan was made on, for the predictions beside the measurements; None (and a flag
    saying why no prediction is given) when it cannot be read here or is not the profile the plan names."""
    from commbench.costmodel import load_fabric

    system = str(doc["inputs"]["system"])
    try:
        fabric = load_fabric(system).scaled(num_gpus=gpus)
    except CommbenchError as exc:
        flags.append(f"no prediction: the plan's fabric {system} cannot be read here ({exc})")
        return None
    planned = doc["inputs"].get("fabric") or {}
    if (planned.get("name"), planned.get("source")) != (fabric.name, fabric.source):
        flags.append(f"no prediction: {system} is now fabric {fabric.name!r} ({fabric.source}), not the "
                     f"{planned.get('name')!r} ({planned.get('source')}) the plan was made on")
        return None
    return fabric
