"""`commbench tune`: sweep + fit + plan in one go.

1. sweep: the given sweep file (or the small built-in `BUILTIN_SWEEP`) through the sweep runner;
2. fit: `commbench.costmodel.profile.fit_result_files` on the results (measured alpha-beta curves);
3. plan: the layout search on the target system, where the measured fabric replaces the preset's
   numbers only on the tiers the measurement covers: the backend must be NCCL on the target GPU
   (gloo on CPUs measures TCP and memory copies, never NVLink or the NIC); scale-up curves need a
   group inside one domain, scale-out curves a group across domains (as the results' own headers place
   their ranks: the fit's rule, measured_tiers). Otherwise the preset's numbers
   are used and the plan says so, tier by tier, in its assumptions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from commbench.costmodel import Fabric, load_preset
from commbench.results.records import headers, measurements, read_records

# Small enough for 2 gloo ranks on 2 CPU cores in seconds: the collectives the plan's step model uses
# (TP all-reduce / RS / AG, EP all-to-all, DP RS), 6 sizes each. Up to 16 MiB: on a loaded host a
# 1 MiB gloo all-to-all took no longer than 16 KiB (scheduler noise of milliseconds), so its curve's
# bandwidth came out undetermined and a plan on the measured fabric alone was refused.
BUILTIN_SWEEP = {
    "sweep": {"name": "tune-builtin", "description": "built-in tune sweep: step-model collectives, small sizes",
              "backend": "auto", "nproc": 2, "world_size": 2},
    "defaults": {"dtypes": ["float32"], "iters": 5, "warmup_iters": 1, "check": True, "timeout_s": 60},
    "run": [{"collective": c, "sizes": {"min": "16K", "max": "16M", "factor": 4}}
            for c in ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")],
}


TIERS = ("scale_up", "scale_out")


@dataclass(frozen=True, kw_only=True)
class Coverage:
    """Which tiers the measured fabric replaces, and why the preset's numbers stay on the others (`why_preset`: tier
    -> reason)."""

    backend: str
    devices: tuple[str, ...]
    scale_up: bool
    scale_out: bool
    why_preset: dict[str, str]


def measured_tiers(fits) -> set[str]:
    """The tiers the fitted curves measured, as the fit places each (CurveFit.tier: the domains its group spans, read
    from the results' own records and headers, fit_records.num_domains_of), among the curves a profile keeps for
    prediction (profile.fabric_from_fits): the one rule for the fabric tune plans with and for every line about it."""
    from commbench.costmodel.formulas import COLLECTIVES
    return {f.tier for f in fits if f.key.for_prediction and f.key.collective in COLLECTIVES}


def _domains_text(hdrs) -> str:
    """Where the runs' headers put their ranks: 'a 4-rank run on 2 domains (n1, n2)'."""
    from commbench.costmodel.fit_records import header_domains
    parts = []
    for h in hdrs:
        racks = header_domains(h)[1]
        hosts = ", ".join(dict.fromkeys(h.hostnames or ()))
        parts.append(f"a {h.world_size}-rank run on {max(len(racks), 1)} domain(s)" + (f" (hosts {hosts})" if hosts else ""))
    return "; ".join(dict.fromkeys(parts)) or "no run header"


def coverage(results_paths: list[str], target: Fabric, fits) -> Coverage:
    """Decide, from the results' headers (backend, devices) and the tiers their fitted curves measured
    (measured_tiers), which of the target's tiers the measurement replaces."""
    records = read_records(results_paths, drop_samples=True)
    hdrs, points = headers(records), measurements(records)
    backends = sorted({h.backend for h in hdrs} | {m.backend for m in points})
    devices = tuple(sorted({d for h in hdrs for d in h.devices}))
    from commbench.costmodel.profile import device_is_gpu

    gpu = target.gpu.name if target.gpu is not None else ""
    on_target = backends == ["nccl"] and bool(devices) and all(device_is_gpu(d, gpu) for d in devices)
    tiers = measured_tiers(fits) if on_target else set()
    why: dict[str, str] = {}
    if not on_target:
        off = (f"measured with backend {', '.join(backends) or 'none'} on {', '.join(devices) or 'unknown devices'}, "
               f"not NCCL on {gpu.upper() or 'the target GPU'}: those numbers say nothing about "
               f"{target.tiers['scale_up'].name} or "
               f"{target.tiers['scale_out'].name if 'scale_out' in target.tiers else 'the scale-out network'}")
        why = {tier: off for tier in TIERS}
    elif not tiers:
        # a latency-only curve (time did not grow with size) measured no bandwidth: the plan's sizes need one
        latency_only = sorted({f.key.label for f in fits if f.latency_only_s is not None})
        why = {tier: "no curve fitted from the results is kept for prediction (fit's warnings say why)"
               + (f"; {', '.join(latency_only)} measured a latency alone (time did not grow with size, kept "
                  "latency-only in fabric-measured.json): no bandwidth to plan with" if latency_only else "")
               for tier in TIERS}
    else:
        where = _domains_text(hdrs)
        if "scale_out" not in tiers:
            why["scale_out"] = (f"every curve fitted from the results measured a group inside one scale-up domain "
                                f"({where}): no scale-out measurement")
        if "scale_up" not in tiers:
            why["scale_up"] = (f"every curve fitted from the results measured a group spanning several scale-up "
                               f"domains ({where}): no scale-up measurement")
    return Coverage(backend=", ".join(backends), devices=devices, scale_up="scale_up" in tiers,
                    scale_out="scale_out" in tiers, why_preset=why)


def replaced_line(results_paths: list[str], system: str, fabric: Fabric) -> str:
    """What the measured curves replace, read from the fabric planned with (so the line says what fabric.json holds):
    on each tier with a fitted curve, the collectives measured there and those whose numbers stay the preset's there
    (a fitted curve replaces the preset's for its collective and tier only: Fabric.with_curves)."""
    fitted: dict[str, set[str]] = {}
    held: dict[str, set[str]] = {}
    for c in fabric.curves:
        held.setdefault(c.tier, set()).add(c.collective)
        if c.source.startswith("fitted"):
            fitted.setdefault(c.tier, set()).add(c.collective)
    tiers = [tier for tier in TIERS if tier in fitted]
    parts = "; ".join(f"{', '.join(sorted(fitted[tier]))} on {tier}" for tier in tiers)
    kept = "; ".join(f"on {tier} {', '.join(sorted(rest))} stay the preset's" for tier in tiers
                     if (rest := held[tier] - fitted[tier]))
    return (f"network: measured curves ({', '.join(results_paths)}) replace preset {system} for {parts or 'nothing'}"
            + (f"; {kept}" if kept else ""))


# tune's names for fit's --dtype and --op
FIT_OPTIONS = ("--fit-dtype", "--fit-op")


def check_fit_choice(points, which: str, dtype: str | None, op: str | None) -> None:
    """--fit-dtype / --fit-op against the data types and reduction ops the sweep's planned `points` (SweepPoint) will
    record (a collective that reduces nothing records no op, as the harness writes it), before any rank starts: a
    value the sweep does not measure was refused by the fit, after the whole sweep, naming fit's --dtype / --op.
    `which`: the sweep, as the refusal names it."""
    from collectives import get_collective
    from commbench.costmodel.profile import check_dtype_op

    check_dtype_op({p.point.spec.dtype.name for p in points},
                   {p.point.spec.op for p in points if get_collective(p.config.collective).reduces},
                   dtype, op, options=FIT_OPTIONS, held=(f"{which} measures", f"{which}'s reductions are"))


def planning_fabric(results_paths: list[str], system: str, num_gpus: int, *, leave_out_wrong: bool = False,
                    dtype: str | None = None, op: str | None = None) -> tuple[Fabric, list[str], Fabric | None]:
    """(fabric to plan with, assumption lines naming the numbers used, the fitted fabric or None). Results with a
    point whose data check failed are refused (profile.check_no_wrong_data) unless `leave_out_wrong`; `dtype` and
    `op` (tune's FIT_OPTIONS) choose the points fitted."""
    from commbench.costmodel.profile import fit_result_files
    preset = load_preset(system, num_gpus=num_gpus)
    fitted, fits, fit_notes = fit_result_files(results_paths, leave_out_wrong=leave_out_wrong, dtype=dtype, op=op,
                                               dtype_op_options=FIT_OPTIONS)
    cov = coverage(results_paths, preset, fits)
    # what the fit left out or could not vouch for (failed or wrong points, a sweep cut short, -c 0): said, as fit says it
    lines = [f"results {', '.join(results_paths)}: {note}" for note in fit_notes]
    if cov.scale_up or cov.scale_out:
        # every fitted curve is on a tier measured_tiers counted, so the fabric replaces the preset on those only
        fabric, _, _ = fit_result_files(results_paths, base=preset, leave_out_wrong=leave_out_wrong, dtype=dtype,
                                        op=op, dtype_op_options=FIT_OPTIONS)
        fabric = fabric.scaled(num_gpus=num_gpus)
        lines.append(replaced_line(results_paths, system, fabric))
    else:
        fabric = preset
    presets = [(tier, preset.tiers[tier]) for tier in TIERS if tier in cov.why_preset and tier in preset.tiers]
    if presets:
        # a curve's source may name several facts ("a; b"); each fact is listed once across tiers
        sources = dict.fromkeys(part.strip() for tier, _ in presets for c in preset.curves if c.tier == tier
                                for part in c.source.split(";") if part.strip())
        tiers = " and ".join(f"{tier} ({t.name}, {t.link_gbps_per_gpu:g} GB/s per GPU)" for tier, t in presets)
        reasons = list(dict.fromkeys(cov.why_preset[tier] for tier, _ in presets))
        because = reasons[0] if len(reasons) == 1 else "; ".join(f"{tier}: {cov.why_preset[tier]}"
                                                                  for tier, _ in presets)
        lines.append(f"network: preset {system} numbers used for {tiers} because {because}")
        lines.append("network sources: " + "; ".join(sources))
    return fabric, lines, fitted


def default_results_path(out: str | None) -> str:
    folder = Path(out or "results")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tune-sweep.jsonl"
    return str(path)
