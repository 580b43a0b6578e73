"""Turn fitted curves into a fabric profile: one "fitted" algorithm per (collective, tier).

Scale-up fits (the group inside one domain) become curves as measured. Fits of groups that span
domains become scale-out curves by inverting the composition rules of `formulas`:
- rings/trees: the measured busbw is the slowest edge's, the edge between domains carrying the NICs
  of the group's m ranks per domain together, so the scale-out rate per rank is busbw / m (a warning
  says so when the busbw is within 10% of the scale-up rate, i.e. the NICs may not be the bottleneck); a busbw above
  the scale-up rate (NCCL's tree / NVLS-tree on a few nodes) is kept as the curve's intra_busbw_gbps, so that the
  scale-up rate never caps the group below what it was measured at;
- all-to-all: the NIC carries (n - m)/(n - 1) of the bus bytes, so scale-out = busbw * (n-m)/(n-1);
- latency: the part not explained by the scale-up steps, per scale-out step (NCCL's tuning model); the steps inside
  domains of the cross-domain group are stored on its curve so that the measured layout is reproduced, and a
  crossing never costs less than an in-domain step (split_latency).
Each size segment of a piecewise fit is kept as its own curve (`min_bus_bytes`). On a preset base,
sweeps that forced an NCCL algorithm also set the preset's NCCL parameters (fit_nccl.py).
Every curve's source names the hosts it was measured on; runs of one system's hosts may be joined (the
collectives measured apart), runs of different NCCL versions, devices or emulation may not.
"""

from __future__ import annotations

import dataclasses
import json
import math

from commbench.costmodel.fabric import AlgorithmCurve, Fabric, Tier
from commbench.costmodel.fit_nccl import learn_nccl_parameters
from commbench.costmodel.fit_records import CurveFit
from commbench.costmodel.latency_only import LatencyOnlyCurve
from commbench.costmodel.formulas import COLLECTIVES, steps
from commbench.data.reference import GpuSpec
from commbench.units import format_size

FITTED = "fitted"


def _segments(fit: CurveFit) -> list[tuple[float, float, float]]:
    """(start bus bytes, latency offset s, busbw bytes/s) per segment of the fit. A later segment's
    offset is its intercept minus the first's (often negative): added to the first segment's
    latency, at whatever group size, it keeps the curve continuous at the knot."""
    starts = (0.0, *fit.fit.knots_bytes)
    intercepts = fit.fit.segment_latencies_s()
    offsets = [0.0] + [lat - intercepts[0] for lat in intercepts[1:]]
    return list(zip(starts, offsets, fit.fit.busbw_bytes_per_s))


def curve_source(fit: CurveFit) -> str:
    """A fitted curve's source: what was measured and on which hosts."""
    return f"fitted: {fit.key.label} on {fit.hosts_text}"


def hosts_note(fits: list[CurveFit]) -> list[str]:
    """One note when the curves used to predict were measured on different hosts, naming which on which."""
    by_hosts: dict[str, list[str]] = {}
    for fit in fits:
        if fit.key.for_prediction and fit.key.collective in COLLECTIVES:
            by_hosts.setdefault(fit.hosts_text, []).append(f"{fit.key.collective}/{fit.tier} n={fit.key.group_size}")
    if len(by_hosts) < 2:
        return []
    return ["curves measured on different hosts, joined in one profile as one system's: " + "; ".join(
        f"{', '.join(dict.fromkeys(curves))} on {hosts}" for hosts, curves in sorted(by_hosts.items()))]


def scale_up_curves(fit: CurveFit) -> list[AlgorithmCurve]:
    n, algorithm = fit.key.group_size, fit.key.algorithm or FITTED
    per_step_us = max(fit.fit.latency_s, 0.0) * 1e6 / float(steps(fit.key.collective, algorithm, n))
    return [AlgorithmCurve(collective=fit.key.collective, tier="scale_up", algorithm=algorithm,
                           latency_us=offset_s * 1e6, latency_per_step_us=per_step_us,
                           busbw_gbps=busbw / 1e9, group_size=n, min_bus_bytes=start,
                           source=curve_source(fit))
            for start, offset_s, busbw in _segments(fit)]


def split_latency(latency_s: float, inter_steps: float, intra_steps: float,
                  up_step_s: float) -> tuple[float, float | None]:
    """(per scale-out step, per in-domain step) seconds of a cross-domain group's measured latency `latency_s`, paid
    over `inter_steps` steps between domains and `intra_steps` inside them (formulas.one_algorithm's composition),
    where the in-domain curve measured `up_step_s` per step. The split reproduces the measured layout exactly:
    inter_steps * out + intra_steps * in == latency_s.
    - ordinary case: the in-domain steps cost what the in-domain curve measured and the crossings the rest;
    - a crossing step never costs less than an in-domain step (its hop leaves NVLink for the PCIe switch, the NIC
      and the network), and never less than the measured group's mean step (latency_s / all its steps): where the
      in-domain rate times the group's in-domain steps reaches or exceeds the measured latency (NCCL's small-size
      algorithms grow with the group more slowly than the n-1 steps of the fitted model: 8 ranks in 25 us, 16 over
      two nodes in 30 us), the crossing is floored at `up_step_s` (capped at latency_s / inter_steps) and the
      in-domain steps of this group carry what is left. Without the floor the crossing was clamped to 0: the
      measured layout was predicted +67% and a one-rank-per-domain group at ~0 us (found from outside).
    The in-domain part is None where the group has no in-domain steps (one rank per domain measured)."""
    if intra_steps <= 0:
        return latency_s / inter_steps, None
    ordinary = (latency_s - up_step_s * intra_steps) / inter_steps
    out = min(max(ordinary, up_step_s), latency_s / inter_steps)
    return out, max(latency_s - out * inter_steps, 0.0) / intra_steps


def scale_out_curves(fit: CurveFit, up_curves: list[AlgorithmCurve]) -> tuple[list[AlgorithmCurve], list[str]]:
    key = fit.key
    n, d = key.group_size, key.num_domains
    m = math.ceil(n / d)
    algorithm = key.algorithm or FITTED
    inter_steps = float(steps(key.collective, algorithm, d))
    intra_steps = max(float(steps(key.collective, algorithm, n)) - inter_steps, 0.0)
    same = [c for c in up_curves
            if c.collective == key.collective and c.algorithm == algorithm and c.min_bus_bytes == 0.0]
    nearest_up = min(same, key=lambda c: abs(math.log((c.group_size or 1) / m)), default=None)
    up_step_s = nearest_up.latency_per_step_us * 1e-6 if (nearest_up and m > 1) else 0.0
    up_busbw = nearest_up.busbw_gbps * 1e9 if (nearest_up and m > 1) else math.inf
    spread = COLLECTIVES[key.collective].spread
    curves, warnings = [], []
    per_step_s, intra_step_s = split_latency(max(fit.fit.latency_s, 0.0), inter_steps, intra_steps, up_step_s)
    for start, offset_s, busbw in _segments(fit):
        # per rank's NIC: an all-to-all's bytes leave over the (n-m)/(n-1) share; a ring's or tree's
        # channels use the NICs of the m ranks in each domain together (formulas.py)
        out_busbw = busbw * (n - m) / (n - 1) if spread else busbw / m
        # the in-domain rate this measurement demonstrates: a ring's or tree's busbw went through its NVLink
        # segments too; an all-to-all's (m-1)/(n-1) share of the bus bytes stayed inside the domain in its time
        intra_busbw = (busbw * (m - 1) / (n - 1) if spread else busbw) if m > 1 else None
        if not spread and busbw > up_busbw:
            warnings.append(f"{key.label}: busbw {busbw / 1e9:.3g} GB/s is above the scale-up rate "
                            f"{up_busbw / 1e9:.3g} GB/s measured at {nearest_up.group_size} ranks in one domain: this "
                            "group was not bound by the in-domain ring (NCCL's tree or NVLS-tree reduce inside the "
                            "domain first); its own layout is predicted at its measured rate, other layouts are "
                            "composed from it")
        elif not spread and busbw > 0.9 * up_busbw:
            warnings.append(f"{key.label}: busbw {busbw / 1e9:.3g} GB/s is close to the scale-up rate; "
                            "the scale-out rate may be higher than fitted")
        curves.append(AlgorithmCurve(collective=key.collective, tier="scale_out", algorithm=algorithm,
                                     latency_us=offset_s * 1e6, latency_per_step_us=per_step_s * 1e6,
                                     latency_per_intra_step_us=None if intra_step_s is None else intra_step_s * 1e6,
                                     intra_busbw_gbps=None if intra_busbw is None else intra_busbw / 1e9,
                                     busbw_gbps=out_busbw / 1e9, group_size=n, min_bus_bytes=start,
                                     source=curve_source(fit)))
    return curves, warnings


def fabric_from_fits(fits: list[CurveFit], *, base: Fabric | None, name: str, source: str,
                     gpu: GpuSpec | None = None, domain_size: int | None = None,
                     num_gpus: int | None = None, notes: list[str] = ()) -> Fabric:
    """A profile whose fitted collectives replace `base`'s (if any) on the tiers they cover; curves whose time did
    not grow with size are kept latency-only where nothing else covers their collective (latency_only_curves)."""
    usable = _one_fit_per_curve([f for f in fits if f.key.for_prediction and f.key.collective in COLLECTIVES])
    latency_only = latency_only_curves(fits, usable, base)
    up = [c for f in usable if f.key.num_domains == 1 for c in scale_up_curves(f)]
    out, warnings = [], []
    for fit in (f for f in usable if f.key.num_domains > 1):
        curves, more = scale_out_curves(fit, up)
        out += curves
        warnings += more
    warnings += [f"{f.key.label}: {w}" for f in fits for w in f.warnings]
    group_sizes = sorted({f.key.group_size for f in usable if f.key.num_domains == 1})
    by_collective: dict[str, set[int]] = {}
    for fit in usable:
        by_collective.setdefault(fit.key.collective, set()).add(fit.key.group_size)
    warnings += [f"{c}: measured at one group size ({next(iter(sizes))}); other sizes scale by the "
                 "algorithm's step count (formula, not measured)" for c, sizes in by_collective.items()
                 if len(sizes) == 1]
    if base is None:
        largest = max((f.key.group_size for f in usable), default=1)
        if not usable:   # latency-only curves alone: their groups set the domain and scale
            largest = max((c.group_size for c in latency_only), default=1)
            group_sizes = sorted({c.group_size for c in latency_only if c.num_domains == 1})
        domain = domain_size or (max(group_sizes) if group_sizes else largest)
        # a tier's link rate is its fastest measured curve's: none measured (latency-only curves alone), no tier
        # rather than a made-up rate
        tiers = {"scale_up": Tier(name="measured scale-up", link_gbps_per_gpu=_peak(up) or 1.0)} if up or out else {}
        if out:
            tiers["scale_out"] = Tier(name="measured scale-out", link_gbps_per_gpu=_peak(out) or 1.0)
        return Fabric(name=name, gpu=gpu, domain_size=domain, num_gpus=max(num_gpus or 0, largest),
                      tiers=tiers, curves=tuple(up + out), source=source, notes=tuple(notes),
                      fit_report=tuple(f.to_report() for f in fits), warnings=tuple(warnings),
                      latency_only=latency_only)
    fabric = base.with_curves(up + out, name=name, source=source)
    nccl, learned = learn_nccl_parameters(fits, base) if base.nccl is not None else (None, [])
    return dataclasses.replace(fabric, gpu=gpu or base.gpu, domain_size=domain_size or base.domain_size,
                               num_gpus=max(num_gpus or base.num_gpus, base.num_gpus), nccl=nccl,
                               notes=tuple(base.notes) + tuple(notes) + tuple(learned),
                               fit_report=tuple(f.to_report() for f in fits), warnings=tuple(warnings),
                               latency_only=latency_only)


def latency_only_curves(fits: list[CurveFit], usable: list[CurveFit], base: Fabric | None
                        ) -> tuple[LatencyOnlyCurve, ...]:
    """The fits whose bandwidth is undetermined kept as latency-only curves (latency_only.py), one per (collective,
    group size, domains), where no usable fit and no curve of `base` predicts their collective on their tier: those
    would predict it instead (formulas reads a latency-only curve only where a collective has no curve)."""
    kept = _kept_latency_only(fits, usable, base)
    return tuple(LatencyOnlyCurve(collective=f.key.collective, tier=f.tier, group_size=f.key.group_size,
                                  num_domains=f.key.num_domains, latency_us=f.latency_only_s * 1e6,
                                  min_size_bytes=f.min_size_bytes, max_size_bytes=f.max_size_bytes,
                                  why=next((w for w in f.warnings if w.startswith("bandwidth undetermined")), ""),
                                  source=curve_source(f))
                 for f in sorted(kept, key=lambda f: f.key.label))


def settle_latency_only(fits: list[CurveFit], base: Fabric | None) -> list[CurveFit]:
    """`fits` with each latency-only fit the profile does not keep (latency_only_curves: its collective is predicted
    on its tier by a usable fit or by `base`, or a fit of the same curve with more points is kept) made an ordinary
    reported fit, its warning saying what predicts its collective instead: its fit's "kept latency-only" told of a
    curve the profile does not hold, and its to_report a latency nothing predicts with."""
    usable = _one_fit_per_curve([f for f in fits if f.key.for_prediction and f.key.collective in COLLECTIVES])
    kept = {id(f) for f in _kept_latency_only(fits, usable, base)}
    by_tier = {(f.key.collective, f.tier): f for f in usable}
    settled = []
    for fit in fits:
        if fit.latency_only_s is None or id(fit) in kept:
            settled.append(fit)
            continue
        instead = by_tier.get((fit.key.collective, fit.tier))
        why = (f"{fit.key.collective} on {fit.tier} is predicted from {instead.key.label} "
               f"({format_size(instead.min_size_bytes)}..{format_size(instead.max_size_bytes)}; its sizes outside "
               "that are extrapolated)" if instead is not None else
               f"{fit.key.collective} on {fit.tier} is predicted from the {base.name} preset's curve"
               if base is not None and base.curves_for(fit.key.collective, fit.tier) else
               "a fit of the same curve with more points is kept latency-only")
        kept_text = (f"; kept latency-only ({fit.latency_only_s * 1e6:,.1f} us, the median time): predicts these "
                     "sizes alone")
        warnings = tuple(w.replace(kept_text, f"; not kept latency-only: {why}{REPORTED_ONLY}")
                         for w in fit.warnings)
        settled.append(dataclasses.replace(fit, latency_only_s=None, warnings=warnings))
    return settled


def _kept_latency_only(fits: list[CurveFit], usable: list[CurveFit], base: Fabric | None) -> list[CurveFit]:
    """The latency-only fits latency_only_curves keeps."""
    covered = {(f.key.collective, f.tier) for f in usable}
    if base is not None:
        covered |= {(c.collective, c.tier) for c in base.curves}
    return [f for f in _one_fit_per_curve([f for f in fits if f.latency_only_s is not None])
            if (f.key.collective, f.tier) not in covered]


def _one_fit_per_curve(fits: list[CurveFit]) -> list[CurveFit]:
    """Where several fits describe the same curve (a plain sweep and a workload's stage), keep the collective's own
    (the plain sweep's: what `predict COLLECTIVE` asks for), else the one with the most points. Session 45: a
    grad_reduce_scatter flat 'stage total' curve of more points predicted `predict reduce_scatter` beside the
    reduce_scatter sweep's own curve."""
    best: dict[tuple, CurveFit] = {}

    def rank(fit: CurveFit) -> tuple[bool, int]:
        return fit.key.source in (None, fit.key.collective), fit.num_points

    for fit in fits:
        k = fit.key
        ident = (k.collective, k.algorithm, k.group_size, k.num_domains, k.layout)
        if ident not in best or rank(fit) > rank(best[ident]):
            best[ident] = fit
    return list(best.values())


def _peak(curves: list[AlgorithmCurve]) -> float | None:
    return max((c.busbw_gbps for c in curves), default=None)


# how fit names the options that choose a data type and a reduction op (tune: --fit-dtype, --fit-op)
FIT_DTYPE_OP_OPTIONS = ("--dtype", "--op")


def check_dtype_op(dtypes, ops, dtype: str | None, op: str | None, *, options: tuple[str, str] = FIT_DTYPE_OP_OPTIONS,
                   held: tuple[str, str] = ("the results hold", "the results' reductions are")) -> None:
    """Refuse a data type `dtype` or reduction op `op` (None: any) that is not among `dtypes` / `ops`, what the points
    to fit hold, in one line naming the option (`options`: the command's) and what is held (`held`: how to say it,
    for the data types and the ops). One rule for fit, tune --results and tune's check of its sweep's points."""
    from commbench.errors import invalid

    if dtype is not None and dtype not in dtypes:
        raise invalid(options[0], dtype, f"{held[0]} {', '.join(sorted(dtypes)) or 'no measurements'}")
    if op is not None and op not in ops:
        raise invalid(options[1], op, f"{held[1]} {', '.join(sorted(ops)) or 'none'}")


def only_dtype_op(points: list, dtype: str | None, op: str | None, *,
                  options: tuple[str, str] = FIT_DTYPE_OP_OPTIONS) -> list:
    """The points of data type `dtype` and reduction op `op` (--dtype, --op, or `options`; None: every one); a value
    the results do not hold is refused in one line naming those they do. `op` keeps the collectives that reduce
    nothing too."""
    check_dtype_op({m.dtype for m in points}, (), dtype, None, options=options)
    if dtype is not None:
        points = [m for m in points if m.dtype == dtype]
    check_dtype_op((), {m.op for m in points if m.op is not None}, None, op, options=options)
    if op is not None:
        points = [m for m in points if m.op in (op, None)]
    return points


# Where a collective's points mix data types or ops and neither --dtype nor --op says which, the fit takes the one
# the planner's traffic is: bf16 (Megatron's --grad-reduce-in-bf16 gradients, bf16 activations), else fp32; sum.
PREFERRED_DTYPES = ("bfloat16", "float32")
PREFERRED_OP = "sum"


def one_dtype_op_per_collective(points: list, *, options: tuple[str, str] = FIT_DTYPE_OP_OPTIONS,
                                runs: dict | None = None) -> tuple[list, list[str]]:
    """(points, notes): a collective whose ok points mix data types or reduction ops (nccl-tests -d all / -o all, a
    sweep over dtypes: the shipped ci-small, h100-node, nvl72-rack) keeps one (dtype, op): PREFERRED_DTYPES, then
    PREFERRED_OP, else the one with the most points; the others are left out and named in a note. One curve of
    them all would take the median of sum and avg (or float and half) per size, the time of no real call (an -o all
    log fitted to avg's 210 GB/s where sum ran 262; found from outside). A tier (by `runs`' headers, as the fit places
    a group: fit_records.num_domains_of) that only the left-out points measured is named in the note: its curve is
    not fitted (probe EN: bf16 measured the world across 2 hosts, float32 alone the pairs inside one)."""
    from commbench.costmodel.fit_records import num_domains_of

    def tiers_of(chosen_points) -> set[str]:
        return {"scale_out" if num_domains_of(m, (runs or {}).get(m.run_id)) > 1 else "scale_up"
                for m in chosen_points if m.status == "ok" and m.group_size >= 2}

    kinds: dict = {}
    for m in points:
        if m.status == "ok":
            kinds.setdefault(m.collective, {}).setdefault((m.dtype, m.op), 0)
            kinds[m.collective][(m.dtype, m.op)] += 1
    keep, notes = {}, []
    for collective, held in sorted(kinds.items()):
        if len(held) < 2:
            continue

        def rank(item):
            (dtype, op), count = item
            preferred = PREFERRED_DTYPES.index(dtype) if dtype in PREFERRED_DTYPES else len(PREFERRED_DTYPES)
            return preferred, op not in (PREFERRED_OP, None), -count

        chosen = min(held.items(), key=rank)[0]
        keep[collective] = chosen
        left = ", ".join(f"{d}{' ' + o if o else ''} ({n} points)" for (d, o), n in sorted(
            held.items(), key=lambda item: (item[0][0], item[0][1] or "")) if (d, o) != chosen)
        mine = [m for m in points if m.collective == collective]
        lost = sorted(tiers_of(m for m in mine if (m.dtype, m.op) != chosen)
                      - tiers_of(m for m in mine if (m.dtype, m.op) == chosen))
        notes.append(f"{collective}: fitted on {chosen[0]}{' ' + chosen[1] if chosen[1] else ''} "
                     f"({held[chosen]} points); left out {left}: a curve is one call's time ({options[0]} / {options[1]} "
                     "choose)" + (f"; the left-out points held the only {collective} {' and '.join(lost)} measurement, "
                                  f"so no {collective} {' and '.join(lost)} curve is fitted" if lost else ""))
    return [m for m in points if m.collective not in keep or (m.dtype, m.op) == keep[m.collective]], notes


def check_no_wrong_data(points, paths, leave_out_wrong: bool) -> None:
    """Results holding a point whose data check failed (#wrong > 0: the collective returned wrong data at that size)
    describe no fabric to plan on, whatever the other points say: refused in one line naming the points (exit 1, a
    failed run's, as compare fails it), unless `leave_out_wrong` (--leave-out-wrong): then fit_all leaves them out
    and its notes count them."""
    from commbench.errors import DataCheckFailed
    from commbench.results.compare import point_label

    wrong = [m for m in points if m.status == "ok" and m.num_wrong]
    if wrong and not leave_out_wrong:
        named = ", ".join(f"{point_label(m)} (#wrong {m.num_wrong})" for m in wrong[:4]) + (" ..." if len(wrong) > 4 else "")
        raise DataCheckFailed(f"{len(wrong)} point(s) in {', '.join(map(str, paths))} failed their data check: {named}; "
                              "a path that returns wrong data is no fabric to plan on: fix it and measure again, or "
                              "--leave-out-wrong to fit without those points (said in the notes)")


def check_no_self_contradicting(contradicting_of: dict[str, list[str]]) -> None:
    """Refuse (one line naming file, line and fields) results holding a record whose summary times disagree with its
    own samples (`contradicting_of`: per file, the lines records.iter_records gave on_self_contradicting,
    record_checks.SummaryDisagrees): edited or corrupted, so what the point measured is unknown; a fit skipping it as
    a torn line would pass over it with a count in the notes, as compare and nccl-tuner refuse it."""
    from commbench.errors import CommbenchError

    found = [f"{path} {line}" for path, lines in contradicting_of.items() for line in lines]
    if found:
        raise CommbenchError(f"{len(found)} record(s) contradict themselves: {found[0]}{' ...' if len(found) > 1 else ''}; "
                             "a fit would skip them as unreadable and fit what is left: delete those lines (the points "
                             "are then missing, said as such) or measure again")


def fit_result_files(paths: list[str], *, base: Fabric | None = None, backend: str | None = None,
                     name: str | None = None, min_heldout_bytes: int | None = None, leave_out_wrong: bool = False,
                     dtype: str | None = None, op: str | None = None,
                     dtype_op_options: tuple[str, str] = FIT_DTYPE_OP_OPTIONS
                     ) -> tuple[Fabric, list[CurveFit], list[str]]:
    """Read commbench JSONL results, fit every curve, build the profile: (fabric, fits, notes). `dtype_op_options`:
    how the command names the options `dtype` and `op` come from (fit's --dtype, --op; tune's --fit-dtype, --fit-op).

    Points whose data check failed (#wrong > 0) refuse the fit (check_no_wrong_data, exit 1) unless
    `leave_out_wrong` (then they are left out and said in the notes); failed points (no time) are left out and said.

    Raises CommbenchError when nothing usable is found or several backends are mixed without
    `backend` choosing one."""
    from commbench.costmodel.fit_records import MIN_HELDOUT_BYTES, fit_all
    from commbench.results.compare import check_points_once
    from commbench.results.resumed import continued_twice, sweeps_cut_short
    from commbench.errors import CommbenchError, invalid
    from commbench.results.records import measurements, read_records
    from commbench.results.run_headers import one_header_per_run

    bad_of: dict[str, list[str]] = {path: [] for path in paths}
    contradicting_of: dict[str, list[str]] = {path: [] for path in paths}
    per_file = [(path, read_records([path], on_bad_line=lambda line, why, path=path: bad_of[path].append(
                    f"line {line}: {why}"), drop_samples=True,  # a fit never uses per-iteration samples
                    on_self_contradicting=lambda line, why, path=path: contradicting_of[path].append(
                    f"line {line}: {why}")))
                for path in paths]
    bad_lines = [line for lines in bad_of.values() for line in lines]
    check_no_self_contradicting(contradicting_of)
    check_points_once(per_file, "fit")   # as compare and report refuse it
    runs = one_header_per_run(per_file)   # a run id's two different headers (a copy edited): refused
    records = [record for _, file_records in per_file for record in file_records]
    points = measurements(records)
    backends = sorted({m.backend for m in points})
    if backend is not None:
        if backend not in backends:
            raise invalid("--backend", backend, f"the results hold {', '.join(backends) or 'no measurements'}")
        points = [m for m in points if m.backend == backend]
    elif len(backends) > 1:
        raise invalid("--backend", None, f"the results mix backends {', '.join(backends)}; choose one")
    points, mix_notes = one_dtype_op_per_collective(only_dtype_op(points, dtype, op, options=dtype_op_options),
                                                    options=dtype_op_options, runs=runs)
    check_no_wrong_data(points, paths, leave_out_wrong)
    unknown_notes = check_setup_known(per_file, points, runs, bad_of)
    files = files_of_runs(per_file)
    sources = check_one_fabric(points, runs, files)
    domain = check_one_domain(points, runs, files)
    loop_note = check_one_loop(points)
    if base is not None:
        check_on_base(points, runs, base)
    fits, notes = fit_all(points, runs, min_heldout_bytes=min_heldout_bytes or MIN_HELDOUT_BYTES)
    held = run_record_counts(records)   # what each run held when fitted: profile_age sees points added later
    fits = [dataclasses.replace(f, run_records=tuple((run, held.get(run, 0)) for run in f.runs)) for f in fits]
    fits = settle_latency_only(fits, base)
    notes = [f"{len(bad_lines)} unreadable line(s) skipped"] * bool(bad_lines) + unknown_notes + mix_notes + notes \
        + [loop_note] * bool(loop_note)
    notes += continued_twice(records) + sweeps_cut_short(records)
    if not fits:
        raise CommbenchError(f"no usable points in {', '.join(paths)}: need ok measurements of a group of "
                             f">= 2 ranks at >= 2 sizes" + (f" ({'; '.join(notes)})" if notes else ""))
    notes += emulated_rate_checks(fits, list(runs.values())) + hosts_note(fits)
    world = max((m.world_size for m in points), default=None)
    label = name or (f"{base.name}+fitted" if base else "fitted")
    fabric = fabric_from_fits(fits, base=base, name=label, source="fitted:" + ",".join(paths),
                              num_gpus=world, notes=notes + sources, domain_size=domain if base is None else None)
    import os

    # where each results file is, for the check that it holds nothing newer than the fit from any directory
    # (profile_age); the path from the profile's own directory is added where the profile is written (located)
    # and what it read there of each run it fitted (count and digest): the check also sees records since deleted or edited
    fitted_runs = {run for f in fits for run in f.runs}
    fabric = dataclasses.replace(fabric, source_files=tuple(
        {"path": p, "absolute": os.path.abspath(p),
         "runs": run_digests(file_records, fitted_runs)}
        for p, file_records in per_file))
    from commbench.results.emulated import fabric_text

    emulated = sorted({fabric_text(runs[r].emulated) for r in {m.run_id for m in points}
                       if r in runs and runs[r].emulated})
    if emulated:  # a profile of the emulator's loopback and tbf links, never of a real network
        from commbench.costmodel.fabric import EMULATED_FIT

        fabric = dataclasses.replace(fabric, warnings=(f"{EMULATED_FIT} ({emulated[0]}), not on a real network",)
                                     + fabric.warnings)
    from commbench.costmodel.plausibility import above_hardware_warning, header_peaks, preset_peaks

    peaks = preset_peaks(base, base.name) if base is not None else \
        header_peaks([d for r in {m.run_id for m in points} if r in runs for d in runs[r].devices])
    too_fast = above_hardware_warning(fabric.curves, peaks)
    if too_fast:   # first: it is the warning that most changes what a plan on this profile is worth
        fabric = dataclasses.replace(fabric, warnings=(too_fast,) + fabric.warnings)
    return fabric, fits, notes


REPORTED_ONLY = "; reported, not used to predict"   # how fit_curve ends the warning of a curve it keeps from prediction


def check_usable_curve(fits: list[CurveFit], paths: list[str], latency_only: tuple = ()) -> None:
    """Refuse, in one line naming each curve and why, results whose fitted curves are all reported only (bandwidth
    undetermined, a composite workload's total, an unknown stage): the profile would predict nothing (`fit` wrote one
    and exited 0; found from outside), as results with no usable points are refused."""
    from commbench.errors import CommbenchError

    if latency_only or any(f.key.for_prediction and f.key.collective in COLLECTIVES for f in fits):
        return   # the profile's latency-only curves predict inside what they measured (latency_only.py)
    why = "; ".join(f"{f.key.label}: " + (next((w.removesuffix(REPORTED_ONLY) for w in f.warnings if "not used to predict" in w), None)
                                          or ("a composite workload's total or stage, reported only"
                                              if f.key.collective in COLLECTIVES or f.key.stage
                                              else "no collective the cost model predicts"))
                    for f in fits[:3]) + (f"; and {len(fits) - 3} more" if len(fits) > 3 else "")
    plain = "" if all(f.key.collective in COLLECTIVES and not f.key.stage for f in fits) else " of a plain collective"
    raise CommbenchError(f"no usable curve in {', '.join(paths)} ({why}); measure sizes where the time grows{plain}, "
                         "e.g. bench -e 16M (below about 1 MiB a collective takes its latency alone)")


def _run_text(header) -> str:
    """One run's provenance, as a profile's notes name it."""
    hosts = ",".join(sorted(set(header.hostnames))) or "hosts unknown"
    devices = ", ".join(sorted(set(header.devices))) or "devices unknown"
    emulated = "; emulated (commbench emulate)" if header.emulated else ""
    return (f"fitted from run {header.run_id} ({header.started_at}): {header.backend}, {header.world_size} ranks on "
            f"{hosts} ({devices}); torch {header.torch_version or '-'}, NCCL {header.nccl_version or '-'}, "
            f"CUDA {header.cuda_version or '-'}, commbench {header.commbench_version}{emulated}")


NCCL_BACKENDS = ("nccl", "cupy-nccl")


# Form factors whose fabric is not the one a preset describes (every preset is SXM GPUs on an NVLink switch).
# torch.cuda.get_device_name spellings: "NVIDIA H100 PCIe", "NVIDIA H800 PCIe", "NVIDIA A100-PCIE-40GB",
# "NVIDIA A100 80GB PCIe" (PCIe cards: no NVSwitch); "NVIDIA H100 NVL", "NVIDIA H200 NVL" (PCIe cards joined
# in pairs or fours by an NVLink bridge). Grace Blackwell reads "NVIDIA GB300 NVL": there NVL is the rack's
# NVLink switch, the fabric the gb*-nvl72 presets describe. SXM names carry no marker: "NVIDIA H100 80GB HBM3",
# "NVIDIA H200", "NVIDIA B200", "NVIDIA GB200".
_OFF_FABRIC = (("pcie", "a PCIe card (no NVLink switch)"),
               ("nvl", "a PCIe NVL card (an NVLink bridge between 2-4 cards, no NVLink switch)"))


def device_form_factor(device: str, gpu: str) -> str | None:
    """What `device` is when its form factor puts it on a different fabric than the preset GPU `gpu`'s (a PCIe or
    NVL card where every preset has SXM GPUs on an NVLink switch); None when nothing in its name says so."""
    import re

    for word, what in _OFF_FABRIC:
        if word == "nvl" and gpu.lower().startswith("gb"):
            continue  # "NVIDIA GB300 NVL": the NVL72 rack's own superchip
        if re.search(rf"(?<![a-z0-9]){word}(?![a-z0-9])", device.lower()):
            return what
    return None


def device_is_gpu(device: str, gpu: str) -> bool:
    """Whether a device name (as torch reports it, e.g. "NVIDIA H100 80GB HBM3") is the preset's GPU model
    (e.g. "h100"): the model as a name of its own, not a part of another model's ("NVIDIA GB200" is no B200,
    "NVIDIA GH200 480GB" no H200, "NVIDIA GB300" no B300), and not a form factor on another fabric ("NVIDIA H100
    PCIe", "NVIDIA H100 NVL": see device_form_factor). An empty `gpu` (a fabric without one) is any device."""
    import re

    if not gpu:
        return True
    return re.search(rf"(?<![a-z0-9]){re.escape(gpu.lower())}(?![0-9])", device.lower()) is not None \
        and device_form_factor(device, gpu) is None


def check_on_base(points: list, runs: dict, base: Fabric) -> None:
    """Refuse to replace a preset's curves with results not measured with NCCL on the preset's GPU (gloo on CPU
    ranks measures TCP and memory copies, never NVLink or the NIC: a gb300 plan would run on them), nor on a
    PCIe/NVL form factor of that GPU (another fabric: a PCIe H100's numbers are no HGX H100's)."""
    from commbench.errors import invalid

    gpu = base.gpu.name if base.gpu is not None else ""
    used = {m.run_id: m.backend for m in points if m.status == "ok"}
    devices = {r: sorted(set(runs[r].devices)) if r in runs else [] for r in used}  # no header: devices unknown
    off = {r: f"{backend} on {', '.join(devices[r]) or 'unknown devices'}" for r, backend in used.items()
           if backend not in NCCL_BACKENDS or not all(device_is_gpu(d, gpu) for d in devices[r])}
    if off:
        first = sorted(off)[0]
        more = f" and {len(off) - 1} more" if len(off) > 1 else ""
        scale_up = base.tiers['scale_up'].name
        form = next(((d, what) for d in devices[first] if (what := device_form_factor(d, gpu))), None)
        if form is not None and used[first] in NCCL_BACKENDS:
            raise invalid("--system", base.name, f"the results were measured on {form[0]} (run {first}{more}), "
                          f"{form[1]}; {base.name} expects {'' if gpu.startswith('gb') else 'SXM '}{gpu.upper()} GPUs on {scale_up}: its numbers would "
                          "be replaced by another fabric's; fit without --system, or measure on that system")
        raise invalid("--system", base.name, f"the results were measured with {off[first]} (run {first}{more}), "
                      f"not NCCL on {gpu.upper()}: they would replace {base.name}'s {scale_up} numbers; fit without "
                      "--system (plan with --gpu), or measure with NCCL on that GPU")


def check_setup_known(per_file: list[tuple[str, list]], points: list, runs: dict,
                      bad_of: dict[str, list[str]]) -> list[str]:
    """Refuse runs without a readable header record (its line lost, written by hand, or a newer schema_version's
    header the reader skipped: `bad_of` holds each file's unreadable lines) fitted together with any other run: their
    setup cannot be checked (run_setup.setup_unknown_text, compare's and report's line), so check_one_fabric's refusal
    of mixed setups would pass them in silence (probe CG F2: two thread counts merged once one header was unreadable).
    A run fitted alone is fitted as measured: the returned note names it (nothing to mix it with)."""
    from commbench.errors import CommbenchError
    from commbench.results.run_setup import runs_without_header, setup_unknown_text

    used = {m.run_id for m in points if m.status == "ok"}
    lines = [setup_unknown_text(unknown, path, bad_of.get(path, ()))
             for path, records in per_file
             if (unknown := [r for r in runs_without_header(records) if r in used and r not in runs])]
    if lines and len(used) > 1:
        raise CommbenchError(f"{'; '.join(lines)} against the other runs fitted with them ({len(used)} runs): one "
                             "fit would merge setups it cannot tell apart (runs that differ are refused, not "
                             "merged); fit such a run alone, or restore its header line (a newer commbench's "
                             "file: fit it with that commbench)")
    return [f"{line}; fitted alone, as measured" for line in lines]


def check_one_fabric(points: list, runs: dict, files: dict[str, list[str]] | None = None) -> list[str]:
    """Refuse points whose runs differ in NCCL version, devices, emulation (real vs `commbench emulate`, or two
    emulated fabrics), on gloo the torch version or threads per rank, or NCCL_* settings (run_setup.fabric_env): their medians per size would be merged into one curve of
    no real fabric.
    The refusal names each run's files (`files`: files_of_runs) beside its id.
    Returns a note per run used with a header (its provenance), for the profile; a run without one is
    check_setup_known's (refused beside others, noted where fitted alone)."""
    from commbench.errors import CommbenchError
    from commbench.results.records import mixed_runs_text

    used = {m.run_id for m in points if m.status == "ok"}
    known = {r: runs[r] for r in sorted(used) if r in runs}

    from commbench.results.run_setup import _UNKNOWN_IS_NO_CHANGE, GATE_FIELDS, SETUP_FIELDS, _known, fabric_env

    # compare's rule (run_setup.GATE_FIELDS: NCCL version, devices, real or emulated fabric and which, on gloo the torch
    # version and its threads per rank), plus the NCCL_* settings that change the fabric; a field a header does not
    # record (torch threads before it was recorded) is no value of its own
    checks = tuple((what, lambda h, what=what: SETUP_FIELDS[what](h)
                    if what not in _UNKNOWN_IS_NO_CHANGE or _known(h, what) else "")
                   for what in GATE_FIELDS) + (("NCCL_* settings", fabric_env),)
    for what, value in checks:
        named = mixed_runs_text({run_id: v for run_id, h in known.items() if (v := value(h))}, files)
        if named:
            raise CommbenchError(f"the results mix {what} ({named}): one fit would merge them into curves of no "
                                 "real fabric; fit each from the results measured with it (one fabric profile per "
                                 "system)")
    return [_run_text(h) for h in known.values()]


def run_domain_size(header) -> tuple[int, bool] | None:
    """(ranks per scale-up domain, exact) a run's header says: its racks' size where it has several (exact), the
    largest where they are uneven (exact), else its world on one rack (at least that many: a lower bound); None when
    it says nothing (no topology: fit_records.host_racks reads hosts then)."""
    from commbench.costmodel.fit_records import domain_size_in, header_domains
    info, racks = header_domains(header)   # as num_domains_of reads them
    size = domain_size_in(info) or (max(len(r) for r in racks) if racks else None)
    if not size:
        return None
    return size, len(racks) > 1 or size < header.world_size


def files_of_runs(per_file) -> dict[str, list[str]]:
    """run id -> the results files (as given) holding its records, in the order given: what a refusal names beside
    the run, since the user typed files, not run ids."""
    files: dict[str, list[str]] = {}
    for path, file_records in per_file:
        for run_id in dict.fromkeys(getattr(r, "run_id", None) for r in file_records):
            if run_id is not None and path not in files.setdefault(run_id, []):
                files[run_id].append(path)
    return files


def check_one_domain(points: list, runs: dict, files: dict[str, list[str]] | None = None) -> int | None:
    """The scale-up domain size the runs agree on (None when none says it exactly), or one line refusing runs that
    disagree: ci-small's racks of 2 and a one-rack 4-rank run fitted together made a profile of one 4-rank domain
    that could not predict the ci runs' own 2-domain curves (report: 'num_domains=2 is invalid: at most the 1
    domains of fitted'; found from outside). A run of one rack says only that its ranks share a domain."""
    from commbench.errors import CommbenchError

    said = {r: told for r in sorted({m.run_id for m in points if m.status == "ok"})
            if r in runs and (told := run_domain_size(runs[r]))}
    exact = {r: size for r, (size, is_exact) in said.items() if is_exact}
    at_least = {r: size for r, (size, is_exact) in said.items() if not is_exact}
    sizes = sorted(set(exact.values()))
    if len(sizes) > 1 or (sizes and any(size > sizes[0] for size in at_least.values())):
        def where(run_id: str) -> str:
            held_in = (files or {}).get(run_id)
            return f"{', '.join(held_in)} run {run_id}" if held_in else f"run {run_id}"

        shown = "; ".join(f"{where(r)}: {'racks of ' + str(size) if r in exact else str(size) + ' ranks on one rack'}"
                          for r, size in list({**exact, **at_least}.items())[:4])
        raise CommbenchError(f"the results' runs disagree on the scale-up domain ({shown}): one profile has one domain "
                             "size, and its curves would not predict the runs they came from; fit each topology's "
                             "results apart (fit FILE -O fabric.json with the files of one topology)")
    return sizes[0] if sizes else None


def loop_mode(m) -> str:
    """How a record's timed loop ran, as its params keep it (harness.loop_params; nccl-tests imports the same):
    CUDA graph replays (-G), -m N calls per iteration (nccl-tests' in one NCCL group, commbench's separate calls back
    to back: records.AGG_GROUPED / AGG_UNGROUPED, two loops), blocking (-z 1; an import's -z 2, -z 3 or an
    unknown mode, results/importers/nccl_tests_flags.py), nccl-tests' device-API kernels (-D N), registered buffers
    (-R: NCCL may take zero-copy paths with them), or eager single calls."""
    from commbench.results.records import AGG_GROUPED, AGG_UNGROUPED

    grouped, ungrouped = int(m.params.get(AGG_GROUPED) or 1), int(m.params.get(AGG_UNGROUPED) or 1)
    blocking = m.params.get("blocking")
    mode = "1" if blocking is True else str(blocking)
    parts = (["CUDA graph (-G)"] if m.params.get("cuda_graph") else []) + \
        ([f"-m {grouped} aggregated calls grouped in one NCCL group (nccl-tests)"] if grouped > 1 else []) + \
        ([f"-m {ungrouped} aggregated calls ungrouped, back to back (commbench)"] if ungrouped > 1 else []) + \
        ([f"blocking (-z {mode})"] if blocking else []) + \
        ([f"nccl-tests device-API kernels (-D {m.params['device_impl']})"] if m.params.get("device_impl") else []) + \
        ([f"{m.params['buffer_register']} buffer registration (-R)"] if m.params.get("buffer_register") else [])
    return ", ".join(parts) or "eager single calls"


def check_one_loop(points: list) -> str:
    """Refuse ok points measured in different loop modes (loop_mode): a call's time differs between them by its
    launch and synchronisation (a -m N call's launch overlaps the previous call; -z 1 waits after each), so their
    medians per size would merge into a curve of neither. '' for eager single calls, else a note naming the mode
    the profile's latencies are of."""
    from commbench.errors import CommbenchError

    by_mode: dict[str, list[str]] = {}
    for m in points:
        if m.status == "ok":
            runs = by_mode.setdefault(loop_mode(m), [])
            if m.run_id not in runs:
                runs.append(m.run_id)
    if len(by_mode) > 1:
        named = "; ".join(f"{mode}: run {', '.join(ids[:3])}" + (" ..." if len(ids) > 3 else "")
                          for mode, ids in sorted(by_mode.items()))
        raise CommbenchError(f"the results mix loop modes ({named}): a call's time differs between them by its launch "
                             "and synchronisation, so one fit would merge them into curves of neither; fit each "
                             "mode's results apart")
    mode = next(iter(by_mode), "eager single calls")
    return "" if mode == "eager single calls" else (f"every point measured as {mode}: the curves' latencies are "
                                                    "of that loop, not of eager single calls")


def emulated_rate_checks(fits: list[CurveFit], run_headers: list) -> list[str]:
    """For runs on `commbench emulate`'s fabric, the fitted scale-out busbw of ring-type curves next
    to the uplink rate the emulator set (one uplink per rack, shared by the rack's ranks)."""
    rates = {h.emulated.get("scale_out_rate_bits_per_s") for h in run_headers if h.emulated}
    rates.discard(None)
    if len(rates) != 1:
        return []
    rate_gbps = float(rates.pop()) / 8 / 1e9
    bursts = sorted({h.emulated.get("tbf_burst_bytes") for h in run_headers if h.emulated} - {None})
    lines = [f"emulated uplinks' tbf burst {bursts[0]:,} B: messages up to about that size cross unthrottled once the "
             "bucket has refilled, so small sizes run above the rate"] if len(bursts) == 1 else []
    for fit in fits:
        key = fit.key
        if key.num_domains > 1 and key.for_prediction and key.collective in COLLECTIVES \
                and not COLLECTIVES[key.collective].spread:
            fitted = fit.fit.busbw_bytes_per_s[-1] / 1e9
            lines.append(f"emulated scale-out rate {rate_gbps:.4g} GB/s per rack uplink; {key.label} fitted "
                         f"busbw {fitted:.4g} GB/s ({fitted / rate_gbps - 1:+.1%})")
    return lines


def run_record_counts(records) -> dict[str, int]:
    """{run id: its measurement records} of results read for a fit, counted as the lines hold them (any status, any
    backend): the count a fitted curve records per run (CurveFit.run_records) and profile_age counts again."""
    from commbench.results.records import Measurement

    counts: dict[str, int] = {}
    for record in records:
        if isinstance(record, Measurement):
            counts[record.run_id] = counts.get(record.run_id, 0) + 1
    return counts


def run_digests(records, runs=None) -> dict[str, dict]:
    """{run id: {"records": its measurement records, "sha256": digest of them}} of one results file as a fit read it
    (samples dropped, as fit reads them): each record as a canonical JSON line (sorted keys), the lines sorted (a
    reordered file holds the same records) and hashed; `runs`: those runs only. What Fabric.source_files records per
    file so profile_age sees a fitted run's records deleted or edited after the fit, not only runs and points added."""
    import dataclasses as dc
    import hashlib

    from commbench.results.records import Measurement

    names = [f.name for f in dc.fields(Measurement) if f.name != "iter_times_us"]   # a fit reads none (drop_samples)
    lines: dict[str, list[str]] = {}
    for record in records:
        if isinstance(record, Measurement) and (runs is None or record.run_id in runs):
            fields = {name: getattr(record, name) for name in names}
            lines.setdefault(record.run_id, []).append(json.dumps(fields, sort_keys=True, separators=(",", ":")))
    return {run: {"records": len(held), "sha256": hashlib.sha256("\n".join(sorted(held)).encode("utf-8")).hexdigest()}
            for run, held in lines.items()}


def fitted_records_changed(name: str, profile_path: str, then: dict, records) -> str | None:
    """One line when a results file no longer holds the records a profile's runs were fitted on (`then`: the file's
    Fabric.source_files "runs", run_digests at the fit): runs gone, fewer records (some deleted) or as many but not the
    same (edited, replaced). Runs holding more records than then are profile_age's "written after the fit" line."""
    now = run_digests(records, set(then))
    said = []
    for run, held in sorted(then.items()):
        if not isinstance(held, dict) or not isinstance(held.get("records"), int):
            continue
        count = now.get(run, {}).get("records", 0)
        if count == 0:
            said.append(f"run {run} is gone ({held['records']} record(s) fitted)")
        elif count < held["records"]:
            said.append(f"run {run} holds {count} of the {held['records']} record(s) fitted "
                        f"({held['records'] - count} deleted or no longer readable)")
        elif count == held["records"] and now[run]["sha256"] != held.get("sha256"):
            said.append(f"run {run}'s {count} record(s) are not those fitted (edited since the fit)")
    if not said:
        return None
    return (f"{name} no longer holds the records the profile {profile_path} was fitted on: {'; '.join(said[:3])}"
            f"{' ...' if len(said) > 3 else ''}: its curves are of results no longer there; restore them, or refit "
            f"(`commbench fit ... -O {profile_path} --force`) to plan on what the file holds now")


def located(fabric: Fabric, out) -> Fabric:
    """`fabric` as written to `out`: each results file it was fitted from (Fabric.source_files) also by its path from
    `out`'s directory, so a profile moved together with its results (an artifact unpacked elsewhere) still finds
    them. A profile that records none (a preset, one read back) is returned as it is."""
    import os

    from commbench.files import path_from

    if not fabric.source_files:
        return fabric
    folder = os.path.dirname(os.path.abspath(out))
    files = []
    for entry in fabric.source_files:
        entry = dict(entry)
        if entry.get("absolute"):
            relative = path_from(entry["absolute"], folder)
            if relative is None:   # another drive (Windows): the absolute path alone
                entry.pop("from_profile", None)
            else:
                entry["from_profile"] = relative
        files.append(entry)
    return dataclasses.replace(fabric, source_files=tuple(files))


@dataclasses.dataclass(frozen=True)
class ResultsAge:
    """What a fitted profile's results files say of it now (profile_age): `stale`, a line per file that holds runs or
    points the profile was not fitted on (it is older than its results); `unchecked`, one line naming the files that
    could not be found or read here, so that staleness is unknown (said, never passed in silence)."""

    stale: tuple[str, ...] = ()
    unchecked: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()   # a line per file that no longer holds the records fitted (deleted, edited)

    @property
    def lines(self) -> list[str]:
        return [*self.changed, *self.stale, *self.unchecked]


def _source_places(data: dict, profile_path: str) -> list[tuple[str, list]]:
    """(the results file as fit was given it, where to look for it, first found wins) per file a fitted profile names:
    from the profile's directory (the results moved with it), the absolute path fit recorded, then as given here
    and beside the profile (a profile written before fit recorded the first two: its source alone)."""
    from pathlib import Path

    from commbench.files import recorded_places

    folder = Path(profile_path).parent
    entries = [f for f in data.get("source_files") or [] if isinstance(f, dict) and isinstance(f.get("path"), str)]
    if not entries:
        entries = [{"path": name} for name in str(data.get("source"))[len("fitted:"):].split(",")]
    return [(entry["path"], [path for path, _ in recorded_places(entry, folder, "from_profile", "profile")])
            for entry in entries]


def profile_age(profile_path: str) -> ResultsAge:
    """One `stale` line per results file a fitted profile was fitted from (Fabric.source_files, else its "fitted:"
    source; found from the profile's directory, by the absolute path fit recorded, as given or beside the profile)
    that now holds runs the profile's curves were not fitted on (each curve's fit_report "runs"): results appended
    since the fit (a sweep resumed, another bench -O), so the profile is older than the results beside it. Only runs
    of a backend the profile fitted and holding a point fit would use count. Also one line where the runs it was
    fitted on now hold more records than they did then (fit_report "run_records": points written to the same run
    after the fit, which read it unfinished or before a line was added). One `changed` line per file that no longer
    holds the records its fitted runs had (Fabric.source_files "runs", fitted_records_changed: a run gone, records
    deleted or edited, the file replaced); a profile fitted before those digests: one where its runs hold fewer records
    than fitted (their count alone). One `unchecked` line naming the results
    files that cannot be found or read here (the check cannot be made: said, not passed in silence). Nothing for a
    preset or a profile that records no runs."""
    import os
    from pathlib import Path

    from commbench.errors import CommbenchError
    from commbench.costmodel.fit_records import collect_points
    from commbench.results.records import Measurement, headers as header_records, iter_records
    from commbench.results.run_setup import runs_without_header

    try:
        data = json.loads(Path(profile_path).read_text())
    except (OSError, ValueError):
        return ResultsAge()
    source = data.get("source") if isinstance(data, dict) else None
    report = [r for r in data.get("fit_report") or [] if isinstance(r, dict)] if isinstance(data, dict) else []
    fitted = {run for r in report for run in r.get("runs") or []}
    backends = {r.get("backend") for r in report}
    if not isinstance(source, str) or not source.startswith("fitted:") or not fitted:
        return ResultsAge()
    held_then: dict[str, int] = {}
    for r in report:
        counts = r.get("run_records")
        if isinstance(counts, dict):
            held_then.update({run: n for run, n in counts.items() if isinstance(n, int) and not isinstance(n, bool)})
    lines, changed, held_now, read, missing, digested = [], [], {}, [], [], False
    for given, places in _source_places(data, profile_path):
        path = next((p for p in places if p.is_file()), None)
        if path is None:
            missing.append(f"{given} not found (looked for {', '.join(dict.fromkeys(os.path.normpath(p) for p in places))})")
            continue
        name = os.path.normpath(path)   # as found from here
        try:
            records = list(iter_records(path, drop_samples=True))
        except CommbenchError as exc:
            missing.append(f"{name} cannot be read ({exc})")
            continue
        read.append(name)
        then = next((e.get("runs") for e in data.get("source_files") or [] if isinstance(e, dict)
                     and e.get("path") == given and isinstance(e.get("runs"), dict)), None)
        if then is not None:
            digested = True
            line = fitted_records_changed(name, profile_path, then, records)
            changed += [line] * bool(line)
        for run, count in run_record_counts(records).items():
            held_now[run] = held_now.get(run, 0) + count
        # the runs fit itself would use (its own point collection: a tuning sweep's forced-channel runs are never
        # fitted, so they are no sign of a newer file)
        runs_of: dict = {}
        collect_points([r for r in records if isinstance(r, Measurement) and r.backend in backends],
                       {h.run_id: h for h in header_records(records)}, runs_of)
        fresh = set().union(*runs_of.values()) if runs_of else set()
        new = sorted(fresh - fitted)
        # a run without a readable header is not fitted beside others (check_setup_known): a refit would be refused
        headerless = [run for run in runs_without_header(records) if run in fresh]
        if new and headerless and len(fresh | fitted) > 1:
            many = len(headerless) > 1
            advice = (f"run{'s' * many} {', '.join(headerless[:3])}{' ...' if len(headerless) > 3 else ''} "
                      f"ha{'ve' if many else 's'} no readable header record, so fit refuses to merge "
                      f"{'them' if many else 'it'} with the other runs ({'their' if many else 'its'} setup cannot be "
                      f"checked): restore {'their header lines' if many else 'its header line'} and refit (`commbench fit ... -O {profile_path} --force`), or fit such a run "
                      "alone into another profile")
        else:
            advice = f"refit (`commbench fit ... -O {profile_path} --force`) to plan on them"
        if new:
            lines.append(f"{name} now holds {len(new)} run(s) the profile {profile_path} was not fitted on (run "
                         f"{', '.join(new[:3])}{' ...' if len(new) > 3 else ''}): results added since the fit; {advice}")
    grown = {run: held_now[run] - n for run, n in sorted(held_then.items()) if held_now.get(run, 0) > n}
    if grown:
        runs = ", ".join(f"{n} point(s) of run {run}" for run, n in list(grown.items())[:3])
        lines.append(f"{', '.join(read)} now hold{'s' * (len(read) == 1)} {runs}{' ...' if len(grown) > 3 else ''} "
                     f"that the profile {profile_path} was fitted on, written after the fit (it read those runs before "
                     f"these points were in the file): refit (`commbench fit ... -O {profile_path} --force`) to plan "
                     "on every point")
    fewer = {run: n - held_now.get(run, 0) for run, n in sorted(held_then.items()) if held_now.get(run, 0) < n}
    if fewer and not digested and not missing:   # a profile fitted before the digests: its counts alone
        runs = ", ".join(f"{n} record(s) of run {run}" for run, n in list(fewer.items())[:3])
        changed.append(f"{', '.join(read)} no longer hold{'s' * (len(read) == 1)} {runs}{' ...' if len(fewer) > 3 else ''} "
                     f"that the profile {profile_path} was fitted on (deleted, or no longer readable, since the "
                     f"fit): restore them, or refit (`commbench fit ... -O {profile_path} --force`) to plan on what "
                     "the files hold now")
    unchecked = [f"cannot check whether the profile {profile_path} is older than the results it was fitted from: "
                 f"{'; '.join(missing)}; run where they can be found, or refit"] \
        if missing else []
    return ResultsAge(stale=tuple(lines), unchecked=tuple(unchecked), changed=tuple(changed))
