"""`commbench verify-plan plan.json`: run the plan's collectives here, measured beside predicted."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from commbench.cli.base import command, console, err_console, fail, print_json
from commbench.results.render import styled
from commbench.results.emulated import fabric_text
from commbench.errors import CommbenchError, invalid
from commbench.results.tables import Col, print_table
from commbench.units import SIZE_SUFFIXES, format_size


DOES_NOT_FIT = "DOES NOT FIT"   # verify-plan's flag for a plan whose layout is predicted not to fit
SIZE_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1))


def size_unit(points: list[dict]) -> tuple[str, int]:
    """One binary unit for both size columns of the table (the measured and the plan's sizes side by side read in
    one unit): the largest in which the smallest size of either column is at least 1."""
    sizes = [int(p[k]) for p in points for k in ("measured_size_bytes", "plan_size_bytes") if int(p[k]) > 0]
    smallest = min(sizes, default=1)
    return next((name, mult) for name, mult in SIZE_UNITS if smallest >= mult)


def verify_columns(points: list[dict]) -> list[Col]:
    unit = size_unit(points)[0]
    return [Col(name="collective", numeric=False), Col(name="group (plan)", keep=2),
            Col(name=f"size measured ({unit})"), Col(name=f"plan size ({unit})", keep=3), Col(name="measured (µs)"),
            Col(name="predicted (µs)"), Col(name="measured/predicted", keep=1), Col(name="plan predicted (µs)", keep=3),
            Col(name="#wrong")]


def _us(value: float | None) -> str:
    return "-" if value is None or value != value else f"{value:,.1f}"


def _in_unit(size_bytes: int, unit: tuple[str, int]) -> str:
    return f"{int(size_bytes):,}" if unit[1] == 1 else f"{int(size_bytes) / unit[1]:,.2f}"


def verify_rows(points: list[dict]) -> list[list[str]]:
    """Table cells of `verify-plan --json`'s points, under verify_columns' headers: both sizes in the one unit of
    size_unit (exact bytes in --json and in the flags; the size measured, the EP all-to-all's the busiest rank's
    dispatch buffer, as bench's moe_all_to_all records it)."""
    unit = size_unit(points)
    return [[escape(p["collective"]), f"{p['group_size']} ({p['plan_group_size']})",
             _in_unit(p["measured_size_bytes"], unit), _in_unit(p["plan_size_bytes"], unit),
             _us(p["measured_time_us"]), _us(p["predicted_time_us"]) + (" extrapolated" if p.get("predicted_extrapolated")
                                                                         else ""),
             "-" if p["measured_over_predicted"] is None else f"{p['measured_over_predicted']:,.1f}x",
             _us(p["plan_predicted_time_us"]) + (" extrapolated" if p.get("plan_predicted_extrapolated") else ""),
             "-" if p["num_wrong"] is None else str(p["num_wrong"])] for p in points]


def plan_path(plan: str) -> str:
    """PLAN: a plan.json, or the folder `plan -O` / `tune -O` wrote (its plan.json)."""
    from pathlib import Path

    path = Path(plan)
    if path.is_dir():
        inside = path / "plan.json"
        if not inside.is_file():
            raise invalid("PLAN_FILE", plan, "a plan.json or a folder holding one (`commbench plan -O DIR` writes "
                                        "DIR/plan.json); this folder has no plan.json")
        return str(inside)
    return plan


@command("verify-plan", help="Run a plan's own communication (EP all-to-all, TP collectives, DP bucket "
                             "reduce-scatter, PP send/recv) on this machine or cluster; print measured vs predicted per collective "
                             "and flag every assumption the cluster does not meet. 'size measured' is the buffer measured (the "
                             "EP all-to-all's: the busiest rank's dispatch as routed here). 'predicted' is the plan's fabric at "
                             "what was measured here (size, group, racks); 'plan predicted' is the plan's own figure; "
                             "a ratio beyond 1.5x either way is flagged MISMATCH where the plan's fabric describes the "
                             "backend measured.")
def verify_plan(
    plan_file: Annotated[str, typer.Argument(help="plan.json written by `commbench plan --out` or `commbench tune`, or the folder holding it")],
    nproc: Annotated[Optional[int], typer.Option(help="local ranks (default: the plan's GPU count, at most 4 on gloo)")] = None,
    backend: Annotated[str, typer.Option(help="auto (NCCL if CUDA is available, else gloo), nccl, cupy-nccl (NCCL through CuPy) or gloo")] = "auto",
    max_bytes: Annotated[str, typer.Option("-e", "--max-bytes", help=f"largest buffer to measure ({SIZE_SUFFIXES}; 16M, as every command that measures); the plan's larger sizes are cut and flagged")] = "16M",
    iters: Annotated[int, typer.Option(help="timed iterations per collective")] = 5,
    timeout_s: Annotated[float, typer.Option("--timeout", "-T", help="Seconds before a hung collective aborts the run; under torchrun/srun/mpirun, also how long joining the launch waits for its ranks (plus 5 s).")] = 120.0,
    as_json: Annotated[bool, typer.Option("--json", help="print measured vs predicted per collective as JSON (schema: docs/json-output.md)")] = False,
) -> None:
    """'predicted' is the plan's fabric at what was measured here (size, group, racks): the figure to set beside
    'measured'; 'plan predicted' is the plan's own, at its size, group and racks. A measured/predicted beyond
    1.5x either way is flagged MISMATCH where the plan's fabric describes the backend measured."""
    from commbench.costmodel import load_preset, preset_names
    from commbench.comm.backends import max_local_ranks, resolve_backend
    from commbench.comm.job import run_job
    from commbench.comm.launch import detect_rank_env
    from commbench.comm.topology import resolve_before_launch
    from commbench.limits import check_iters
    from commbench.planner.emit.plan import load_plan
    from commbench.units import parse_size_bytes, timeout_problem
    from commbench.workflows.verify import (VerifyJob, check_items_memory, plan_context, plan_items,
                                           prediction_flags)

    if timeout_problem(timeout_s):
        raise invalid("--timeout", timeout_s, timeout_problem(timeout_s))
    from commbench.files import refuse_empty_inputs

    # '' read as the current folder planned from ./plan.json: an unset shell variable ran whatever plan was there
    refuse_empty_inputs(("PLAN_FILE", plan_file, "a plan.json or the folder holding it"))
    plan_file = plan_path(plan_file)
    doc = load_plan(plan_file)
    from commbench.planner.emit.input_paths import resolve_input_files
    doc, read_lines = resolve_input_files(doc, plan_file)   # a relative --system/--calibration from another directory
    resolved = resolve_backend(backend)
    gpus = int(doc["inputs"]["gpus"])
    launched = detect_rank_env()
    for line in read_lines if launched is None or launched.rank == 0 else ():
        err_console.print(f"note: {line}", highlight=False, markup=False, soft_wrap=True)
    ctx = plan_context(doc)
    if ctx.layout.world == 1:   # a plan commbench writes for one GPU: nothing of it crosses ranks (not bad input)
        console.print(f"verify-plan {plan_file}: nothing to verify: the plan runs on one GPU (tp = pp = ep = cp = "
                      "dp = 1), so it has no communication between ranks; its step is compute alone", highlight=False)
        return
    under_launcher = launched is not None and launched.launcher != "local"
    limit = launched.world_size if under_launcher else min(max_local_ranks(resolved)[0], 4)
    ranks = launched.world_size if under_launcher else (min(gpus, limit) if nproc is None else nproc)
    most, why = (launched.world_size, "the launch") if under_launcher else max_local_ranks(resolved)
    if not 2 <= ranks <= most:
        raise invalid("--nproc", ranks, f"from 2 (the least any collective needs) to {most} on {resolved} ({why})")
    check_iters(iters, "--iters")
    most_bytes = parse_size_bytes(max_bytes, "--max-bytes")
    # the run's racks as every command that measures resolves them (before launch: one rack, or commbench emulate's);
    # the ranks resolve them from the launch (NVML fabric, else host names) and cut the plan's groups again on them
    planned_on = resolve_before_launch(None, ranks)
    items, item_flags = plan_items(doc, ranks, most_bytes, ctx, planned_on)
    assert items, "plan_items refuses a plan none of whose collectives fits the ranks; one GPU returned above"
    check_items_memory(items, ranks, resolved)   # before ranks start, as bench and sweep check theirs
    flags: list[str] = []
    system = doc["inputs"]["system"]
    if system not in preset_names():
        where = str(system)
        fabric = _plan_fabric(doc, gpus, flags)
    elif (doc["inputs"].get("fabric") or {}).get("source", "preset") == "preset":
        where = f"preset {system}"
        fabric = load_preset(system, num_gpus=gpus)
    else:  # tune: the preset with measured curves, saved beside the plan as fabric.json (cli/tune.py)
        where = str(Path(plan_file).parent / "fabric.json")
        fabric = _plan_fabric(doc, gpus, flags, where)
    fabric_check = _fabric_check(doc, fabric, where)
    if fabric_check["status"] == "changed":
        fabric = None   # neither prediction would be the plan's: its figures came from the fabric as it was
    elif fabric_check["status"] == "unchecked":
        flags.append(fabric_check["line"])
    flags.extend(prediction_flags(doc, ctx, fabric))
    from commbench.costmodel.plausibility import above_hardware_lines
    flags.extend(f"the plan's fabric {where}: {line}" for line in above_hardware_lines(fabric))
    described = _fabric_backends(doc, fabric)
    emulated = _emulated()
    job = VerifyJob(items=tuple(items), flags=tuple(item_flags), backend=resolved, doc=doc, max_bytes=most_bytes,
                    ctx=ctx, topology=planned_on, iters=iters, timeout_s=timeout_s)
    outcomes = run_job(_rank, job, nproc=None if under_launcher else ranks, backend=resolved,
                       validate_world=lambda world: None, output_path="(verify-plan writes no file)")
    outcome = outcomes.get(0)
    if outcome is None:
        return
    items, rows, topology = list(outcome.items), outcome.rows, outcome.topology
    from commbench.cli.bench import first_failed
    failed = first_failed(outcomes)   # a collective failed (its row says so), the rows after it not measured
    flags = list(outcome.flags) + flags   # the groups' flags (cut on the run's racks) first, as plan_items gives them
    if not all(_describes(described, i, resolved) for i in items):
        preset = doc["inputs"].get("fabric", {}).get("source") == "preset"
        what = ("NCCL over NVLink and the NIC" if preset else
                "a profile fitted from measured results (plan.json inputs.fabric: its curves' sources)")
        flags.insert(0, f"backend {resolved}: the plan's fabric is {system} ({what}); measured times here check the "
                        "plan's sizes and groups, not its bandwidth, where its curves were not measured with "
                        f"{resolved}")
    if resolved == "gloo" and any(i.collective == "reduce_scatter" for i in items):
        flags.append("gloo implements reduce_scatter as a full all-reduce: its measured time is an upper bound")
    if emulated is not None:
        flags.insert(0, f"{fabric_text(emulated)}: measured times are the emulator's "
                        "(loopback and rate-limited veth links), not a real network's")
    points = _points(items, rows, fabric, ctx, described, resolved, topology, flags)
    from commbench.planner.emit.pinned import unfit_line
    unfit = unfit_line(doc.get("predicted", {}))
    if unfit:   # a plan written with --allow-unfit: what is measured here does not make it launchable
        flags.insert(0, f"{DOES_NOT_FIT}: {unfit} (plan.json predicted.fits is false)")
    # a profile fitted on `commbench emulate` runs (profile.fit_result_files' warning): its predictions are the
    # emulator's links, as predict's title, plan's network line and report --fabric say
    predicted_emulated = fabric.emulated_warning if fabric is not None else None
    if predicted_emulated:
        flags.insert(0, f"the predictions come from {where}, {predicted_emulated}: 'predicted' and 'plan predicted' "
                        "are the emulator's links' figures")
    if fabric_check["status"] == "changed":
        flags.insert(0, fabric_check["line"])   # first: every prediction column is empty for it
    if as_json:
        print_json({"format": "commbench-verify-plan", "version": 2, "plan": plan_file,
                    "system": system, "fabric_check": fabric_check, "backend": resolved,
                    "ranks": ranks, "topology": topology.to_dict(), "emulated": emulated,
                    "predicted_from_emulated": predicted_emulated,
                    "comparable": all(p["comparable"] for p in points), "points": points,
                    "unmet_assumptions": flags, "failed": failed})
    else:
        where = " on an EMULATED fabric" if emulated is not None else ""
        on = ", an EMULATED fabric" if predicted_emulated else ""
        print_table(console, f"verify-plan {plan_file}: {ranks} {resolved} rank(s){where}; measured here vs "
                             f"predicted for {system}{on}", verify_columns(points), verify_rows(points))
        console.print(escape(topology.describe()), highlight=False)
        for flag in flags:
            console.print(styled("[bold red]{}[/]" if flag.startswith(("MISMATCH", FABRIC_CHANGED, DOES_NOT_FIT))
                                 else "[yellow]unmet assumption:[/] {}", flag), highlight=False)
        from commbench.workflows.verify import NOT_REACHED

        for what, names in (("failed (the error line says why)", [p["collective"] for p in points
                                                                    if p["error"] and p["error"] != NOT_REACHED]),
                            ("not measured (the run stopped at the failure)",
                             [p["collective"] for p in points if p["error"] == NOT_REACHED])):
            if names:
                console.print(styled("[bold red]FAILED:[/] {}", f"{', '.join(names)}: {what}"), highlight=False)
    if failed:   # after the table or document: what was measured before the failure stands (exit 1, as bench)
        raise fail(f"{failed}; what was measured before it is printed above (verify-plan writes no file)", exit_code=1)
    if any(row["num_wrong"] for row in rows):
        raise CommbenchError("a collective returned wrong data (see the #wrong column)")


def _points(items, rows, fabric, ctx, described, resolved, topology, flags) -> list[dict]:
    """One JSON point per measured collective, both predictions beside it (the measured one on the scale-up domains
    the measured group spans of the run's racks, `topology`); adds the routing, scaled-group and mismatch flags."""
    from commbench.workflows.verify import measured_domains, mismatch_flags, predicted_s, priced_domains

    points, fits = [], {}
    for item, row in zip(items, rows):
        group, domains = int(row["group_size"]), measured_domains(item.groups, topology)
        if fabric is not None and (priced := priced_domains(fabric, group, domains)) > domains:
            flags.append(f"{item.label}: 'predicted' prices the {group} ranks measured over {priced} scale-up domains, "
                         f"as the profile's domains of {int(fabric.domain_size)} GPU(s) hold them; this run placed "
                         f"them in {domains}")
            domains = priced
        pred_us = plan_us = None
        imb = row["metrics"].get("imbalance_rank")   # EP: the busiest rank's received tokens / the mean, measured
        if imb:
            flags.append(f"{item.label}: measured routing imbalance {float(imb):.2f}x (uniform random routing; "
                         f"'predicted' uses it) vs the plan's {ctx.imbalance:g}x ('plan predicted')")
        if fabric is not None:
            try:
                pred_us = predicted_s(fabric, item, ctx, size_bytes=item.size_bytes, group=group, domains=domains,
                                      tokens=item.params.get("tokens_per_rank", 0),
                                      imbalance=max(float(imb or 1.0), 1.0)) * 1e6
                plan_us = predicted_s(fabric, item, ctx, size_bytes=item.plan_size_bytes, group=item.plan_group_size,
                                      domains=item.plan_domains, tokens=item.plan_tokens_per_rank) * 1e6
            except CommbenchError as exc:
                flags.append(f"{item.label}: no prediction ({exc})")
        beyond = plan_us is not None and _plan_extrapolated(fabric, item, ctx, flags)
        fit = _fit_for_verdict(fabric, item, ctx, group, domains, flags) if pred_us is not None else None
        if fit is not None:
            fits[item.label] = fit
        meas = row["time_us_median"]   # None: not measured (row["error"] says why)
        if (group, domains) != (item.plan_group_size, item.plan_domains):
            flags.append(f"{item.label}: 'predicted' is for the group measured ({group} ranks, {domains} scale-up "
                         f"domain(s)); the plan's is {item.plan_group_size} ranks over {item.plan_domains} domain(s): "
                         "'plan predicted'")
        measured_bytes = int(row["size_bytes"])
        if item.kind == "ep" and measured_bytes != item.size_bytes:
            flags.append(f"{item.label}: measured buffer {measured_bytes:,} B (the busiest rank's dispatch, as routed "
                         f"here: the 'size measured' column); the plan's accounting at the {item.params.get('tokens_per_rank')}"
                         f" tokens per rank measured gives {item.size_bytes:,} B per rank")
        points.append({"collective": item.label, "group_size": group, "plan_group_size": item.plan_group_size,
                       "num_domains": domains, "plan_num_domains": item.plan_domains,
                       "size_bytes": item.size_bytes, "measured_size_bytes": measured_bytes,
                       "plan_size_bytes": item.plan_size_bytes,
                       "measured_time_us": meas, "predicted_time_us": pred_us,
                       "measured_over_predicted": meas / pred_us if meas and pred_us else None,
                       "predicted_extrapolated": bool(fit and fit["beyond"]),
                       "plan_predicted_time_us": plan_us, "plan_predicted_extrapolated": bool(beyond),
                       "comparable": _describes(described, item, resolved),
                       "num_wrong": row["num_wrong"], "error": row.get("error")})
    flags.extend(mismatch_flags(points, fits=fits))
    return points


FABRIC_CHANGED = "FABRIC CHANGED"


def _fabric_check(doc: dict, fabric, where: str) -> dict:
    """Whether the fabric read here is the one the plan was made on, by content (plan.json inputs.fabric
    content_sha256, emit.plan.fabric_digest): status `same`, `changed` (its predicted figures are not the ones
    this fabric gives: no prediction is made), `unchecked` (a plan written before the digest was recorded) or
    `unread` (no fabric could be read here; a flag already says why); `line`: what the user is told."""
    from commbench.planner.emit.plan import fabric_digest

    planned = (doc["inputs"].get("fabric") or {}).get("content_sha256")
    if planned is not None and not (isinstance(planned, str) and len(planned) == 64
                                    and all(c in "0123456789abcdef" for c in planned)):
        raise invalid("inputs.fabric.content_sha256", planned, "64 lowercase hex digits, the SHA-256 `commbench plan` "
                                                               "writes (or no field: a plan written before it)")
    now = fabric_digest(fabric) if fabric is not None else None
    check = {"fabric": where, "plan_sha256": planned, "now_sha256": now}
    if now is None:
        return check | {"status": "unread", "line": None}
    if planned is None:
        return check | {"status": "unchecked", "line": (
            f"{where}: the plan records no content digest of its fabric (written before commbench recorded one): "
            "whether it was edited since the plan was made cannot be checked; predictions use it as it is now")}
    if planned == now:
        return check | {"status": "same", "line": None}
    return check | {"status": "changed", "line": (
        f"{FABRIC_CHANGED}: {where} is not the fabric the plan was made on ({_what_changed(doc, fabric)}; content "
        f"sha256 {now[:12]} here, {planned[:12]} in plan.json inputs.fabric): the plan's predicted figures came from "
        "the fabric as it was; no prediction is given, the measurements stand; plan again on it (or restore it) to "
        "compare")}


def _what_changed(doc: dict, fabric) -> str:
    """What of plan.json inputs.fabric differs from the fabric read here: its name or source (both named), the
    fields of its summary that differ, else its numbers (a curve's latency or bandwidth, an NCCL parameter)."""
    from commbench.planner.emit.plan import fabric_summary

    planned, now = doc["inputs"].get("fabric") or {}, fabric_summary(fabric)
    if (planned.get("name"), planned.get("source")) != (now["name"], now["source"]):
        return f"now {now['name']!r} ({now['source']}), not {planned.get('name')!r} ({planned.get('source')})"
    fields = [k for k in ("domain_size", "tiers", "curve_sources", "notes", "warnings") if planned.get(k) != now[k]]
    return f"its {', '.join(fields)} differ" if fields else "its curves' or NCCL parameters' numbers differ"


def _fit_beyond(fabric, item, ctx, *, size_bytes: int, group: int, domains: int) -> tuple[dict | None, list[int]]:
    """(what a fitted profile measured for the curve that prices `item` at `size_bytes` on `group` ranks over `domains`
    scale-up domains, predict's fitted_range; the sizes that curve is read at): the range is None on a preset
    (nothing measured) or a curve the profile did not measure."""
    from commbench.cli.predict import fitted_range
    from commbench.planner.step import moe_comm
    from commbench.workflows.verify import ACT_BYTES, priced_domains

    domains = priced_domains(fabric, group, domains)
    sizes = [int(size_bytes)]
    if item.kind == "ep":   # the dispatch's bytes, and the bf16 bytes its backward twin and the combine move
        sizes.append(int(round(size_bytes * ACT_BYTES / float(moe_comm.dispatch_bytes_per_element(ctx.quantised)))))
    return fitted_range(fabric, "moe_all_to_all" if item.kind == "ep" else item.collective, domains), sizes


def _curves_read(measured: dict | None, sizes: list[int]) -> list[tuple[dict, list[int]]]:
    """(range, the sizes read on it) per curve of `measured` (predict's curve_ranges): a moe_all_to_all fabric with
    dispatch and combine curves prices the dispatch at every size (the dispatch's bytes and its bf16 backward twin)
    and the combine at the bf16 one (planner/step/moe_comm.ep_phases_s); their range merged called sizes below every
    combine point measured (probe PE)."""
    from commbench.cli.predict import curve_ranges

    if measured is None:
        return []
    if "phases" not in measured:
        return [(measured, sizes)]
    return [(one, sizes if phase == "dispatch" else sizes[-1:]) for phase, one in curve_ranges(measured).items()]


def _beyond(measured: dict | None, sizes: list[int], group: int) -> list[tuple[dict, list[int]]]:
    """The curves of `measured` whose fitted sizes or group sizes do not hold the sizes read on them."""
    import numpy as np

    from commbench.cli.predict import extrapolated

    return [(one, read) for one, read in _curves_read(measured, sizes) if any(extrapolated(one, np.array(read), group))]


def _beyond_line(item, which: str, where: str, sizes: list[int], group: int, fabric, measured: dict) -> str:
    return (f"{item.label}: '{which}' is EXTRAPOLATED: {where} {', '.join(format_size(b) for b in sizes)} on {group} "
            f"ranks lies beyond what the profile {fabric.name!r} measured for {measured['curve']} "
            f"({format_size(measured['min_size_bytes'])} to {format_size(measured['max_size_bytes'])}, group "
            f"size(s) {', '.join(map(str, measured['group_sizes']))})")


def _plan_extrapolated(fabric, item, ctx, flags: list[str]) -> bool:
    """Whether 'plan predicted' lies beyond what a fitted profile measured for the curve that prices it (predict's
    fitted_range / extrapolated: the plan's sizes or group size outside the fitted ones, on the tier of the plan's
    domains); False on a preset (nothing measured). Adds a flag saying what was measured when it does."""
    group = item.plan_group_size
    measured, sizes = _fit_beyond(fabric, item, ctx, size_bytes=item.plan_size_bytes, group=group,
                                  domains=item.plan_domains)
    beyond = _beyond(measured, sizes, group)
    flags.extend(_beyond_line(item, "plan predicted", "the plan's", read, group, fabric, one) for one, read in beyond)
    return bool(beyond)


def _fit_for_verdict(fabric, item, ctx, group: int, domains: int, flags: list[str]) -> dict | None:
    """What a fitted profile measured for the curve that gives 'predicted' (the plan's fabric at what was measured
    here: `item.size_bytes` on `group` ranks over `domains`), for the verdict (workflows/verify.mismatch_flags' `fits`):
    `beyond`, whether 'predicted' lies outside it, as _plan_extrapolated judges 'plan predicted' (then a flag says so),
    and the sizes and group sizes read here and by the plan on that curve; None where the curve was not measured."""
    measured, sizes = _fit_beyond(fabric, item, ctx, size_bytes=item.size_bytes, group=group, domains=domains)
    if measured is None:
        return None
    outside = _beyond(measured, sizes, group)
    beyond = bool(outside)
    flags.extend(_beyond_line(item, "predicted", "the", read, group, fabric, one)
                 + " (-e/--max-bytes sets the size measured here)" for one, read in outside)
    groups = [group]
    plan_measured, plan_sizes = _fit_beyond(fabric, item, ctx, size_bytes=item.plan_size_bytes,
                                            group=item.plan_group_size, domains=item.plan_domains)
    if plan_measured is not None and plan_measured["curve"] == measured["curve"]:   # the plan reads the same curve
        sizes, groups = sizes + plan_sizes, groups + [item.plan_group_size]
    return dict(measured, beyond=beyond, lo_bytes=min(sizes), hi_bytes=max(sizes), groups=groups)


def _describes(described: dict[str, set[str]], item, backend: str) -> bool:
    """Whether the fabric curves a prediction of `item` reads describe `backend` (EP: the all-to-all curves the
    fabric has, its MoE curves where it has them). NCCL through torch and through CuPy (profile.NCCL_BACKENDS) are
    one library: a preset's NCCL curves describe a cupy-nccl run, and a profile fitted on either the other."""
    from commbench.costmodel.profile import NCCL_BACKENDS

    def library(name: str) -> str:
        return "nccl" if name in NCCL_BACKENDS else name

    curves = [c for c in (("all_to_all", "moe_all_to_all") if item.kind == "ep" else (item.collective,))
              if c in described]
    return bool(curves) and all(library(backend) in {library(b) for b in described[c]} for c in curves)


def _fabric_backends(doc: dict, fabric) -> dict[str, set[str]]:
    """Per collective, the backends the plan's fabric describes: NCCL for a preset (and a profile's preset
    curves), the measured backends for a fitted profile's curves."""
    return {} if fabric is None else fabric.backends()


def _emulated() -> dict | None:
    from commbench.results.provenance import emulated_from_env

    return emulated_from_env()


def _rank(rank_env, job):
    from commbench.workflows.verify import verify_rank
    return verify_rank(rank_env, job)


def _plan_fabric(doc: dict, gpus: int, flags: list[str], path: str | None = None):
    """The fitted fabric .json the plan was made on, for the predictions beside the measurements; None (and a flag
    saying why no prediction is given) when it cannot be read here or is not the profile the plan names. `path`: where
    that profile is when the plan names a preset whose curves measured ones replaced (`tune`'s fabric.json)."""
    from commbench.costmodel import load_fabric

    system = str(doc["inputs"]["system"]) if path is None else path
    try:
        fabric = load_fabric(system).scaled(num_gpus=gpus)
    except CommbenchError as exc:
        flags.append(f"no prediction: the plan's fabric {system} cannot be read here ({exc})")
        return None
    from commbench.costmodel.profile import profile_age
    flags.extend(profile_age(system).lines)   # its predictions from a profile older than its results
    planned = doc["inputs"].get("fabric") or {}
    if planned.get("content_sha256"):   # its content is checked whole (_fabric_check): name, source, curves, notes
        return fabric
    if (planned.get("name"), planned.get("source")) != (fabric.name, fabric.source):
        flags.append(f"no prediction: {system} is now fabric {fabric.name!r} ({fabric.source}), not the "
                     f"{planned.get('name')!r} ({planned.get('source')}) the plan was made on")
        return None
    from commbench.planner.emit.plan import fabric_summary
    now = fabric_summary(fabric)   # a refit under the same name and source (results appended, fit -O again --force)
    changed = [k for k in ("notes", "curve_sources", "tiers", "warnings") if k in planned and planned[k] != now[k]]
    if changed:
        flags.append(f"no prediction: {system} has changed since the plan was made on it (its {', '.join(changed)} "
                     "differ from plan.json inputs.fabric: refitted?); plan again on it, or restore the profile")
        return None
    return fabric
