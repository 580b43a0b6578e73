"""`commbench predict`: a predicted sweep from a preset or a fitted fabric, printed like a measured one."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Annotated, Optional

import numpy as np
import typer

from commbench.cli.base import command, console, err_console, print_json
from commbench.results.render import styled
from commbench.costmodel.nccl_tables import ALGORITHMS as NCCL_ALGORITHMS, PROTOCOLS as NCCL_PROTOCOLS, canonical_name
from commbench.costmodel import (COLLECTIVES, Fabric, best_algorithm_protocol, bus_factor, collective_time_s, load_preset,
                                 moe_all_to_all_time_s)
from commbench.costmodel.calibration import figures_summary, preset_calibration
from commbench.costmodel.choice import uses_nccl_model
from commbench.costmodel.formulas import MOE_PHASES
from commbench.costmodel.latency_only import prediction_line, predicting_curves
from commbench.errors import CommbenchError, as_option, invalid
from commbench.results.tables import Col, print_table
from commbench.units import SIZE_SUFFIXES, format_size, parse_size_bytes, size_range

LAYOUTS = ("contiguous", "strided")
MOE_MEAN = "mean(dispatch,combine)"   # what a moe_all_to_all row is, with both phases and no --algorithm


def resolve_fabric(fabric_path: str | None, system: str | None, racks: int | None, gpus: int | None,
                   warnings: list[str] | None = None) -> Fabric:
    """The fabric named by --fabric FILE or --system PRESET [--racks K | --gpus N]; a profile older than the results
    it was fitted from is warned about (cli.base.profile_older_than_results), and those lines are appended to
    `warnings` (for the files a command writes: nccl-tuner's config)."""
    if fabric_path is None and system is None:   # each option's own value, never a None or one of the two
        raise CommbenchError("--fabric/--system is missing: give one of --fabric FILE or --system PRESET")
    if fabric_path is not None and system is not None:
        raise CommbenchError(f"--fabric={fabric_path!r} and --system={system!r} conflict: give one of --fabric FILE "
                             "or --system PRESET")
    if racks is not None and gpus is not None:  # with --fabric too: --gpus won and --racks went unread
        raise CommbenchError(f"--racks={racks} and --gpus={gpus} conflict: give one of --racks or --gpus")
    for option, value in (("--racks", racks), ("--gpus", gpus)):  # a profile's scale was refused as num_gpus=-3
        if value is not None and value < 1:
            raise invalid(option, value, "must be >= 1")
    if fabric_path is not None:
        from commbench.files import refuse_empty_inputs   # '' read as the current folder: "Is a directory"
        refuse_empty_inputs(("--fabric", fabric_path, "a fabric profile (commbench fit -O)"))
        fabric = Fabric.from_json(fabric_path)
        from commbench.cli.base import profile_older_than_results
        age = profile_older_than_results(fabric_path)   # a fitted profile older than the results it was fitted from
        if warnings is not None:
            warnings += age.lines
        if racks is not None or gpus is not None:
            total = gpus if gpus is not None else racks * fabric.domain_size
            fabric = fabric.scaled(num_gpus=total)
        return fabric
    return load_preset(system, num_gpus=gpus, num_racks=racks)


def num_domains_for(fabric: Fabric, group_size: int, layout: str) -> int:
    """Domains a group of `group_size` ranks spans when placed contiguously or one per domain."""
    if layout not in LAYOUTS:
        raise invalid("--layout", layout, f"one of {', '.join(LAYOUTS)}")
    if group_size > fabric.num_gpus:
        raise invalid("--group", group_size, f"at most the {fabric.num_gpus} GPUs of {fabric.name} "
                      "(add --racks or --gpus)")
    if layout == "contiguous":
        return math.ceil(group_size / fabric.domain_size)
    return min(group_size, fabric.num_domains)


def picked_algorithms(fabric: Fabric, collective: str, sizes: np.ndarray, group: int, num_domains: int) -> list[str | None]:
    """The algorithm the model picks at each size (the fastest; None where the fabric offers one or none)."""
    names = sorted({c.algorithm for c in fabric.curves if c.collective == collective})
    if collective == "moe_all_to_all" or len(names) < 2:
        return [None] * len(sizes)
    times = []
    for name in names:
        try:
            times.append(collective_time_s(fabric, collective, sizes, group, num_domains, algorithm=name))
        except CommbenchError:  # no curve for this algorithm on a tier the group spans
            times.append(np.full(len(sizes), np.inf))
    best = np.argmin(np.vstack(times), axis=0)
    return [names[int(i)] for i in best]


def both_moe_phases(fabric: Fabric) -> bool:
    """The fabric has dispatch and combine curves, so a moe_all_to_all prediction without --algorithm is their mean
    (formulas.moe_all_to_all_time_s)."""
    return set(MOE_PHASES) <= {c.algorithm for c in fabric.curves if c.collective == "moe_all_to_all"}


def fitted_range(fabric: Fabric, collective: str, num_domains: int, phase: str | None = None) -> dict | None:
    """What a fitted profile measured for the curve that predicts `collective` on `num_domains` domains: sizes
    (nccl-tests' size, smallest and largest) and group sizes; None for a preset's curve (nothing measured).
    moe_all_to_all with dispatch and combine curves: `phase` picks one; without it (their mean, as
    formulas.moe_all_to_all_time_s) each phase's own range under "phases", and as min/max the sizes both measured
    (min > max where they share none): one range merged over both called 32 KiB in range on an fp8 dispatch
    measured from 16,896 B and an fp32 combine from 64 KiB (probe PE)."""
    if collective == "moe_all_to_all" and collective not in fabric.collectives:
        collective = "all_to_all"   # moe_all_to_all_time_s falls back to the plain all-to-all curves
    if collective != "moe_all_to_all" or not both_moe_phases(fabric):
        phase = None   # one curve (or a fabric whose curves are not split by phase) is read whatever the phase
    elif phase is None:
        phases = {p: r for p in MOE_PHASES if (r := fitted_range(fabric, collective, num_domains, p)) is not None}
        if len(phases) < 2:
            return next(iter(phases.values()), None)
        return {"curve": " and ".join(r["curve"] for r in phases.values()),
                "min_size_bytes": max(r["min_size_bytes"] for r in phases.values()),
                "max_size_bytes": min(r["max_size_bytes"] for r in phases.values()),
                "group_sizes": sorted(set.intersection(*(set(r["group_sizes"]) for r in phases.values()))),
                "collective": collective, "dtypes": sorted({d for r in phases.values() for d in r["dtypes"]}),
                "phases": phases}
    tier = "scale_out" if num_domains > 1 else "scale_up"
    rows = [r for r in fabric.fit_report if r.get("for_prediction") and r.get("collective") == collective
            and r.get("tier", "scale_out" if int(r.get("num_domains", 1)) > 1 else "scale_up") == tier
            and phase in (None, r.get("algorithm"))]
    if not rows or not any(c.collective == collective and c.tier == tier and c.source.startswith("fitted")
                           and phase in (None, c.algorithm) for c in fabric.curves):
        return None
    # as the profile kept them (profile._one_fit_per_curve): the collective's own curve over another workload's stage
    def ident(r):
        return r.get("algorithm"), r.get("group_size"), r.get("num_domains"), r.get("layout")

    own = {ident(r) for r in rows if r.get("source") in (None, collective)}
    rows = [r for r in rows if r.get("source") in (None, collective) or ident(r) not in own]
    stages = sorted({f"{r['source']} stage {r.get('stage')}" for r in rows if r.get("source") not in (None, collective)})
    return {"curve": f"{collective}{f'[{phase}]' if phase else ''} ({tier})"
                     + (f" from {', '.join(stages)} (no {collective} sweep of its own there)" if stages else ""),
            "min_size_bytes": min(int(r["min_size_bytes"]) for r in rows),
            "max_size_bytes": max(int(r["max_size_bytes"]) for r in rows),
            "group_sizes": sorted({int(r["group_size"]) for r in rows}), "collective": collective,
            "dtypes": sorted({str(d) for r in rows for d in r.get("dtypes", ())})}


def curve_ranges(measured: dict | None) -> dict[str, dict]:
    """fitted_range's curves, each with its own range: 'dispatch' and 'combine' for a moe_all_to_all mean, else
    the one curve under its name."""
    if measured is None:
        return {}
    return dict(measured["phases"]) if "phases" in measured else {measured["curve"]: measured}


def preset_curves(fabric: Fabric, collective: str, num_domains: int) -> list[str]:
    """In a profile fitted on a preset (`fit --system`), the curves a prediction of `collective` on `num_domains`
    domains reads that are the preset's, not measured ('all_reduce/scale_out tree'; the NCCL model's structure where
    no curve of the collective was measured), as `plan` names them (planner/emit/plan.fabric_lines); [] for a preset
    (all of it is) or where every curve read was measured."""
    if fabric.source == "preset" or not any(c.source.startswith("fitted") for c in fabric.curves):
        return []
    if collective == "moe_all_to_all" and collective not in fabric.collectives:
        collective = "all_to_all"   # moe_all_to_all_time_s falls back to the plain all-to-all curves
    if uses_nccl_model(fabric, collective):
        return [f"{collective}: NCCL's algorithm x protocol model"]
    tiers = ("scale_up",) if num_domains <= 1 else ("scale_up", "scale_out")
    return sorted({f"{c.collective}/{c.tier} {c.algorithm}" for tier in tiers for c in fabric.curves_for(collective, tier)
                   if not c.source.startswith("fitted")})


MAX_SHOWN_WARNINGS = 5


def fit_warnings(fabric: Fabric, collective: str) -> list[str]:
    """The profile's fit warnings about `collective` (and the curve that stands in for it) or about no collective
    in particular (an emulated fabric): a profile's first five warnings may all be another collective's, which
    hid 'poor fit ... unreliable' on the curve predicted."""
    from collectives import REGISTRY

    named = {*COLLECTIVES, *REGISTRY}
    mine = {collective, "all_to_all"} if collective == "moe_all_to_all" else {collective}

    def about(warning: str) -> str | None:
        match = re.match(r"([a-z_]+)[\[ :]", warning)
        return match.group(1) if match and match.group(1) in named else None

    return [w for w in fabric.warnings if about(w) in (None, *mine)]


def latency_undetermined(fabric: Fabric, measured: dict | None, num_domains: int) -> list[str]:
    """The fitted curves predicting `measured`'s collective on its tier whose latency the fit could not determine
    (fit_records.LATENCY_UNDETERMINED: the smallest size measured was already bandwidth-bound, so the intercept, even
    0, is no measurement): every time predicted from them carries that latency; empty on a preset."""
    from commbench.costmodel.fit_records import LATENCY_UNDETERMINED

    if measured is None:
        return []
    tier = "scale_out" if num_domains > 1 else "scale_up"
    return sorted({str(r.get("curve")) for r in fabric.fit_report
                   if r.get("for_prediction") and r.get("collective") == measured["collective"]
                   and r.get("tier") == tier and any(str(w).startswith(LATENCY_UNDETERMINED)
                                                     for w in r.get("warnings") or ())})


def extrapolated(measured: dict | None, sizes: np.ndarray, group: int) -> list[bool]:
    """Per size: beyond the fitted sizes, or on a group size never measured (False on a preset). A size is
    measured where it lies in the fitted sizes, or where the sweep would have measured it at one of them: measured
    sizes are nccl-tests-aligned (Collective.count_for: whole elements, 16 B multiples per rank for the chunked
    collectives; all_to_all on 3 ranks measures 64 KiB as 65,520 B), so a size that aligns, in a data type the curve
    was measured in ("dtypes": profiles fitted from this commbench on), into the fitted sizes is measured; no wider.
    A moe_all_to_all mean (fitted_range's "phases") is beyond where either phase's curve is (beyond_curves)."""
    return [bool(names) for names in beyond_curves(measured, sizes, group)]


def beyond_curves(measured: dict | None, sizes: np.ndarray, group: int) -> list[list[str]]:
    """Per size: the curves of `measured` (curve_ranges: 'dispatch', 'combine', or the one curve's name) whose own
    sizes or group sizes do not hold it."""
    out: list[list[str]] = [[] for _ in sizes]
    for name, one in curve_ranges(measured).items():
        other_group = group not in one["group_sizes"]
        for names, s in zip(out, sizes):
            if other_group or not _size_fitted(one, int(s), group):
                names.append(name)
    return out


def _size_fitted(measured: dict, size: int, group: int) -> bool:
    """Whether `size` lies in the fitted sizes, or aligns into them as the sweep would have measured it (extrapolated)."""
    low, high = measured["min_size_bytes"], measured["max_size_bytes"]
    if low <= size <= high:
        return True
    from collectives import REGISTRY
    from commbench.dtypes import get_dtype

    workload = REGISTRY.get(measured.get("collective", ""))
    return workload is not None and any(low <= workload.count_for(size, get_dtype(d).itemsize, group)[1] <= high
                                        for d in measured.get("dtypes", ()))


def beyond_text(measured: dict, sizes, group: int, profile: str) -> str:
    """Which dimension lies beyond what `profile` measured for the curve (`measured`: fitted_range): the sizes outside
    the fitted range, the group size never measured, or both, named apart: 'extrapolated' alone hid a group of 2
    predicted from a curve measured on 4 behind sizes that were all measured. A moe_all_to_all mean: per phase."""
    from commbench.units import format_size

    if "phases" in measured:
        parts = [beyond_text(one, sizes, group, profile) for name, one in measured["phases"].items()
                 if any(name in names for names in beyond_curves(measured, sizes, group))]
        return "; ".join(parts)
    off = sum(not _size_fitted(measured, int(s), group) for s in sizes)
    span = f"{format_size(measured['min_size_bytes'])}..{format_size(measured['max_size_bytes'])}"
    groups = ", ".join(map(str, measured["group_sizes"]))
    other_group = group not in measured["group_sizes"]
    what = " and ".join(([f"{off} of {len(sizes)} size(s)"] if off else [])
                        + ([f"group size {group}"] if other_group else []))
    inside = f"; its {len(sizes)} size(s) lie inside that range" if other_group and not off else ""
    return (f"{what} beyond what {profile} measured for {measured['curve']} (group size(s) {groups}, {span}{inside})")


@command("predict", help="Predicted sweep of one collective on a preset system or a fitted fabric (no GPU needed); sizes "
                               "beyond what the profile measured or the preset's published figures cover are marked "
                               "extrapolated.")
def predict(
    collective: Annotated[str, typer.Option("--collective", "-c", help=f"One of {', '.join(COLLECTIVES)}.")],
    group: Annotated[int, typer.Option("--group", "-g", help="Ranks in the group.")],
    fabric_path: Annotated[Optional[str], typer.Option("--fabric", help="Fabric profile JSON (from commbench fit).")] = None,
    system: Annotated[Optional[str], typer.Option("--system", help="Preset name (see commbench systems).")] = None,
    racks: Annotated[Optional[int], typer.Option("--racks", "--nodes", help="Scale-up domains (racks or nodes) in the system.")] = None,
    gpus: Annotated[Optional[int], typer.Option("--gpus", help="GPUs in the system (instead of --racks).")] = None,
    layout: Annotated[str, typer.Option("--layout", help="contiguous (fill a domain first) or strided (one rank per domain).")] = "contiguous",
    min_bytes: Annotated[str, typer.Option("-b", "--min-bytes", help=f"Smallest size (nccl-tests' size; {SIZE_SUFFIXES}).")] = "8",
    max_bytes: Annotated[str, typer.Option("-e", "--max-bytes", help="Largest size (predicted: 8G by default, as every command that predicts).")] = "8G",
    step_factor: Annotated[Optional[float], typer.Option("-f", "--step-factor", help="Multiply the size by this each step (default 2; 1: add -i each step, 1 MiB unless given, as nccl-tests).")] = None,
    step_bytes: Annotated[Optional[str], typer.Option("-i", "--step-bytes", help="Add this to the size each step (instead of -f; given both, -f wins when it is > 1, as in nccl-tests).")] = None,
    algorithm: Annotated[Optional[str], typer.Option("--algorithm", help="Force one algorithm, as NCCL_ALGO does (ring, tree, nvls, nvls_tree, collnet_direct, collnet_chain, pat on presets, any case; default: the pair NCCL's own model picks).")] = None,
    protocol: Annotated[Optional[str], typer.Option("--protocol", help="Force one protocol, as NCCL_PROTO does: LL, LL128 or Simple, any case (NCCL collectives on presets).")] = None,
    imbalance: Annotated[float, typer.Option("--imbalance", help="moe_all_to_all: max/mean bytes received per rank.")] = 1.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON rows instead of a table.")] = False,
) -> None:
    """Sizes from -b to -e; time, algbw and busbw as nccl-tests would print them, all predicted. Sizes beyond what a
    fitted profile measured, or beyond a preset's published figures, are marked extrapolated."""
    from commbench.limits import check_world_size
    from commbench.limits import MAX_WORLD_SIZE
    if not 2 <= group <= MAX_WORLD_SIZE:   # one range, stated alike for 1 and for 2**70 (which was predicted)
        raise invalid("--group", group, f"an integer from 2 (a group of one communicates nothing) to "
                                        f"{MAX_WORLD_SIZE:,} (commbench's bound on ranks in one job)")
    for option, value in (("--gpus", gpus), ("--racks", racks)):  # 2**70 ranks were predicted
        if value is not None and value >= 1:
            check_world_size(value, option)
    fabric = resolve_fabric(fabric_path, system, racks, gpus)
    if collective not in COLLECTIVES:
        raise invalid("--collective", collective, f"one of {', '.join(COLLECTIVES)}")
    if collective != "moe_all_to_all" and imbalance != 1.0:   # no other curve reads it: the sweep would not change
        raise invalid("--imbalance", imbalance, "only for moe_all_to_all (max/mean bytes received per rank)")
    if not 1 <= imbalance <= group:   # the busiest rank receives at most every byte: group x the mean
        raise invalid("--imbalance", imbalance, f"a number from 1 to the group size, {group} (max/mean bytes "
                      "received per rank)")
    num_domains = num_domains_for(fabric, group, layout)
    sizes = np.array(size_range(parse_size_bytes(min_bytes, "--min-bytes"), parse_size_bytes(max_bytes, "--max-bytes"),
                                step_factor, parse_size_bytes(step_bytes, "--step-bytes") if step_bytes else None),
                     dtype=np.float64)
    # any case, as NCCL reads NCCL_ALGO / NCCL_PROTO and bench/sweep read --nccl-algo / --nccl-proto: the model's
    # spelling from here on (rows and JSON say ring, LL128)
    if protocol is not None:
        protocol = canonical_name(protocol, NCCL_PROTOCOLS)
    if algorithm is not None:
        algorithm = canonical_name(algorithm, (*NCCL_ALGORITHMS, *MOE_PHASES, "ring_ll",
                                               *(c.algorithm for c in fabric.curves if c.collective == collective)))
    chosen, algorithm_used = None, algorithm
    if protocol is not None and protocol not in NCCL_PROTOCOLS:
        raise invalid("--protocol", protocol, f"one of {', '.join(NCCL_PROTOCOLS)}")
    if collective == "moe_all_to_all":
        if protocol is not None:
            raise invalid("--protocol", protocol, "only for NCCL collectives (all_reduce, reduce_scatter, all_gather, broadcast)")
        if algorithm not in (None, "dispatch", "combine"):
            raise invalid("--algorithm", algorithm, "for moe_all_to_all: dispatch or combine (default: both phases)")
        if not {"moe_all_to_all", "all_to_all"} & {*fabric.collectives, *(c.collective for c in fabric.latency_only)}:
            # the formula falls back on all_to_all
            raise invalid("--collective", collective, f"fabric {fabric.name!r} has no moe_all_to_all curve nor the "
                          f"all_to_all one it falls back on (it covers: {', '.join(fabric.collectives) or 'nothing'}): "
                          "measure moe_all_to_all or all_to_all and fit them")
        time_s = moe_all_to_all_time_s(fabric, sizes, group, num_domains, imbalance,
                                       phase=algorithm if algorithm in ("dispatch", "combine") else None)
        if algorithm is None and both_moe_phases(fabric):   # --json said algorithm null for this mean
            algorithm_used = MOE_MEAN
    else:
        try:
            if uses_nccl_model(fabric, collective):
                chosen = best_algorithm_protocol(fabric, collective, sizes, group, num_domains, algorithm=algorithm,
                                                 protocol=protocol)
                time_s = chosen.time_s
            else:
                time_s = collective_time_s(fabric, collective, sizes, group, num_domains, algorithm=algorithm,
                                           protocol=protocol)
        except CommbenchError as error:   # the cost model names its argument; the user typed the option
            raise as_option(as_option(error, "algorithm", "--algorithm"), "protocol", "--protocol") from None
    if chosen is not None:
        picked, protocols = [str(a) for a in chosen.algorithm], [str(p) for p in chosen.protocol]
    else:
        picked = ([algorithm_used] * len(sizes) if algorithm_used
                  else picked_algorithms(fabric, collective, sizes, group, num_domains))
        protocols = [protocol] * len(sizes)
    # a latency-only curve (latency_only.py): every time its measured latency; sizes below it measured extrapolated
    latency_only = predicting_curves(fabric, collective)
    latency_below = [any(c.below(s) for c in latency_only if (c.group_size, c.num_domains) == (group, num_domains))
                     for s in sizes] if latency_only else [False] * len(sizes)
    algbw = np.divide(sizes, time_s, out=np.zeros_like(sizes), where=time_s > 0) / 1e9
    busbw = algbw * bus_factor(collective, group)
    where = f"{num_domains} domain{'s' * (num_domains > 1)} of {fabric.domain_size}"
    measured = fitted_range(fabric, collective, num_domains, phase=algorithm if algorithm in MOE_PHASES else None)
    beyond_names = beyond_curves(measured, sizes, group)
    undetermined = [] if latency_only else latency_undetermined(fabric, measured, num_domains)
    beyond = [bool(names) for names in beyond_names]
    by_phase = measured is not None and "phases" in measured   # a mean of two curves, each with its own range
    # a preset: the published figures that set its terms, and per size whether they span it (own or borrowed)
    calibration = (preset_calibration(fabric.name, collective, group, num_domains, sizes,
                                      algorithm if algorithm_used != MOE_MEAN else None)
                   if fabric.source == "preset" else None)
    if latency_only:
        beyond, beyond_names = latency_below, [[c.label for c in latency_only] if x else [] for x in latency_below]
    if calibration is not None:
        beyond = [row["extrapolated"] for row in calibration["rows"]]
        beyond_names = [[calibration["curve"]] if x else [] for x in beyond]
    lent = [row["borrowed_from"] for row in calibration["rows"]] if calibration is not None else [[] for _ in sizes]
    borrowed = preset_curves(fabric, collective, num_domains)
    # whose runs set NCCL's launch and pipeline-ramp terms, where the preset's NCCL model predicts this collective
    small_sizes = (fabric.nccl.small_sizes or None) if uses_nccl_model(fabric, collective) else None
    if as_json:
        rows = [{"size_bytes": int(s), "time_us": float(t * 1e6), "algbw_gbps": float(a), "busbw_gbps": float(b),
                 "algorithm": name, "protocol": proto, "predicted": True, "extrapolated": x,
                 **({"latency_only": True} if latency_only else {}),
                 "latency_undetermined": bool(undetermined),
                 **({"extrapolated_phases": names} if by_phase else {}),
                 **({"borrowed_from": others} if calibration is not None else {})}
                for s, t, a, b, name, proto, x, names, others in zip(sizes, time_s, algbw, busbw, picked, protocols,
                                                                     beyond, beyond_names, lent)]
        if calibration is not None:
            calibration = {k: v for k, v in calibration.items() if k != "rows"}
        print_json({"format": "commbench-predict", "version": 1, "fabric": fabric.name,
                    "source": fabric.source, "collective": collective, "group_size": group,
                    "num_domains": num_domains, "fitted_range": measured, "calibration": calibration,
                    "preset_curves": borrowed, "small_sizes": small_sizes,
                    **({"latency_only": [dataclasses.asdict(c) for c in latency_only]} if latency_only else {}),
                    "latency_undetermined_curves": undetermined, "predicted_from_emulated": fabric.emulated_warning,
                    "fit_warnings": fit_warnings(fabric, collective), "rows": rows})
        return
    cols = [Col(name="size"), Col(name="time (µs)"), Col(name="algbw (GB/s)", keep=1), Col(name="busbw (GB/s)")]
    rows = [[format_size(s), f"{t * 1e6:.2f}", f"{a:.3f}", f"{b:.3f}"] for s, t, a, b in zip(sizes, time_s, algbw, busbw)]
    if any(picked):
        cols.append(Col(name="NCCL algo/proto" if chosen is not None else "algorithm", numeric=False, keep=2))
        rows = [row + [f"{name}/{proto}" if proto else (name or "-")] for row, name, proto in zip(rows, picked, protocols)]
    if calibration is not None and (any(beyond) or any(lent)):
        cols.append(Col(name="calibration", numeric=False, keep=2))
        rows = [row + ["extrapolated" if x else f"borrowed ({', '.join(others)})" if others else "in range"]
                for row, x, others in zip(rows, beyond, lent)]
    elif latency_only:
        cols.append(Col(name="fit", numeric=False, keep=2))
        rows = [row + ["extrapolated (latency only)" if x else "measured latency"] for row, x in zip(rows, beyond)]
    elif any(beyond) or undetermined:
        cols.append(Col(name="fit", numeric=False, keep=2))
        rows = [row + [", ".join([(f"extrapolated ({', '.join(names)})" if by_phase else "extrapolated")] * bool(names)
                                 + ["latency undetermined"] * bool(undetermined)) or "in range"]
                for row, names in zip(rows, beyond_names)]
    how = f"algorithm {algorithm} (forced)" if algorithm else "the fastest algorithm per size"
    if chosen is not None:   # costmodel.choice.best_algorithm_protocol: NCCL's own model picks, ours times it
        how = (f"algorithm {algorithm} (forced), " if algorithm else "") + "the pair NCCL's own model picks per size"
    if algorithm_used == MOE_MEAN:
        how = "the mean of one dispatch and one combine (--algorithm dispatch or combine for one)"
    if latency_only:
        how = "the MEASURED latency of a latency-only curve"
    # a profile fitted on `commbench emulate` runs (profile.fit_result_files' warning) predicts the emulator's links
    emulated = ", an EMULATED fabric" if fabric.emulated_warning else ""
    print_table(console, f"{collective} (predicted, {group} ranks, {where}, {fabric.name} from {fabric.source}"
                         f"{emulated}; {how})", cols, rows)
    if latency_only:
        console.print(styled("[yellow]latency-only[/]: {}", prediction_line(latency_only, fabric.name)), highlight=False)
    else:
        console.print(styled("[yellow]predicted[/] by the cost model, not measured"), highlight=False)
    for name in curve_ranges(measured):   # a curve of another workload's stage predicts: say which
        if " stage " in name:
            console.print(styled("[yellow]curve[/]: {}", name), highlight=False)
    if fabric.source == "preset":   # the sources `commbench systems` names for the same curves
        gpu = f" (GPU: {fabric.gpu.source})" if fabric.gpu is not None and fabric.gpu.source else ""
        console.print(f"sources: {fabric.name}: {fabric.notes[0] if fabric.notes else ''}{gpu}; link rates from "
                      "commbench/data/hardware.toml, efficiencies from its [[measured]] figures (commbench systems "
                      "--checks)", highlight=False, markup=False)
        spans = figures_summary(calibration, fabric.name)
        console.print(f"calibrated on: {calibration['curve']}: " + (f"published figures at {spans}" if spans else
                      "no published figure"), highlight=False, markup=False)
        borrowed_rows = [others for others in lent if others]
        if borrowed_rows:
            console.print(styled("[yellow]borrowed[/]: {} of {} size(s) rest only on figures measured on {}, not on {}",
                                 len(borrowed_rows), len(lent), ", ".join(sorted({p for o in borrowed_rows for p in o})),
                                 fabric.name), highlight=False)
        if any(beyond):
            console.print(styled("[yellow]extrapolated[/]: {} of {} size(s) ({} ranks, {} domain(s)) lie beyond these "
                                 "figures: the cost model gives them, no figure checks them", sum(beyond), len(beyond),
                                 group, num_domains), highlight=False)
    if small_sizes:
        console.print(f"small sizes: {small_sizes}", highlight=False, markup=False)
    if borrowed:   # a profile fitted on a preset: what it did not measure is the preset's (as `plan` says)
        inside = {c.algorithm for c in fabric.curves_for(collective, "scale_up")}
        bounded = num_domains > 1 and bool(inside) and any(
            c.algorithm not in inside for c in fabric.curves_for(collective, "scale_out"))
        console.print(styled("[yellow]from the preset[/] (not measured): {}{}", ", ".join(borrowed),
                             "; its cross-domain algorithms without an in-domain curve of their own are bounded "
                             "inside the domains by the fastest in-domain rate" if bounded else ""), highlight=False)
    for name, one in curve_ranges(measured).items() if measured is not None and any(beyond) else ():
        off = sum(name in names for names in beyond_names)
        if off:
            console.print(styled("[yellow]extrapolated[/]: {} of {} size(s) lie beyond what the profile '{}' measured "
                                 "for {} (group size(s) {}, {}..{}): the alpha-beta formula gives {}, not a measurement",
                                 off, len(beyond), fabric.name, one["curve"], ", ".join(map(str, one["group_sizes"])),
                                 format_size(one["min_size_bytes"]), format_size(one["max_size_bytes"]),
                                 f"its {name} half of the mean" if by_phase else "them"), highlight=False)
    if undetermined:
        console.print(styled("[yellow]latency undetermined[/]: {} measured no latency (its smallest size was already "
                             "bandwidth-bound): every time above carries a fitted latency that is no measurement; "
                             "measure smaller sizes and fit again", ", ".join(undetermined)), highlight=False)
    warnings = fit_warnings(fabric, collective)
    for warning in warnings[:MAX_SHOWN_WARNINGS]:
        console.print(styled("[yellow]fit warning:[/] {}", warning), highlight=False)
    if len(warnings) > MAX_SHOWN_WARNINGS:
        console.print(styled("[yellow]fit warning:[/] {} more for {} (--json fit_warnings lists them all)",
                             len(warnings) - MAX_SHOWN_WARNINGS, collective), highlight=False)
