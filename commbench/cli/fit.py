"""`commbench fit RESULTS.jsonl... -O fabric.json`: fit a fabric profile and report fit quality per curve."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.markup import escape

from commbench.cli.base import command, console, err_console, print_json, renamed
from commbench.results.render import styled
from commbench.costmodel import load_preset
from commbench.errors import CommbenchError
from commbench.costmodel.fit_records import MIN_HELDOUT_BYTES, POOR_FIT, bandwidth_undetermined
from commbench.costmodel.fabric import PROFILE_FORMAT
from commbench.costmodel.plausibility import ABOVE_HARDWARE
from commbench.costmodel.profile import check_usable_curve, fit_result_files
from commbench.files import (claim_output, refuse_being_written, refuse_empty_inputs, refuse_empty_path,
                             refuse_writing_inputs, write_output)
from commbench.results.tables import Col, print_table
from commbench.units import format_size, parse_size_bytes


def _write_fabric(fabric, out: str, force: bool) -> None:
    from commbench.costmodel.profile import located

    fabric = located(fabric, out)   # its results files also by their path from the profile's directory
    write_output(out, fabric.to_json() + "\n", "--out", marker=PROFILE_FORMAT, what="fabric profile", force=force)


@command("fit", help="Fit latency and bandwidth per collective, group and tier from measured JSONL results. The "
                     "profile names the runs it was fitted from and each curve the hosts it was measured on; runs of "
                     "different NCCL versions, devices, emulation (real vs commbench emulate) or NCCL_* settings "
                     "(beyond NCCL_ALGO/NCCL_PROTO/channels and NCCL_DEBUG) are refused, not merged.")
def fit(
    results: Annotated[list[str], typer.Argument(help="commbench JSONL results files (bench, sweep or import).")],
    out: Annotated[Optional[str], typer.Option("-O", "--out", help="Write the fabric profile JSON here.")] = None,
    old_out: Annotated[Optional[str], typer.Option("-o", "--output", hidden=True)] = None,
    system: Annotated[Optional[str], typer.Option("--system", help="Preset to start from: its GPU, domain size and the curves not measured.")] = None,
    racks: Annotated[Optional[int], typer.Option("--racks", "--nodes", help="With --system: domains in the system.")] = None,
    backend: Annotated[Optional[str], typer.Option("--backend", help="Fit only this backend's records (needed when files mix backends).")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="Name of the fitted fabric.")] = None,
    heldout_min: Annotated[str, typer.Option("--heldout-min", help="Report held-out error over sizes >= this.")] = "64K",
    as_json: Annotated[bool, typer.Option("--json", help="Print the fitted curves as JSON (schema: docs/json-output.md).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace -O/--out even when it is not a fabric profile.")] = False,
    dtype: Annotated[Optional[str], typer.Option("--dtype", help="Fit only this data type's points (commbench's name: float32, bfloat16, ...); where a collective's points mix data types (nccl-tests -d all) and this is not given, the fit takes bfloat16, else float32, else the most points, and says so.")] = None,
    op: Annotated[Optional[str], typer.Option("--op", help="Fit only this reduction op's points (sum, avg, ...; collectives that reduce nothing are kept); where a collective's points mix ops (nccl-tests -o all) and this is not given, the fit takes sum and says so.")] = None,
    leave_out_wrong: Annotated[bool, typer.Option("--leave-out-wrong", help="Fit although points failed their data check (#wrong > 0), leaving them out (counted in a note); without it such results are refused (exit 1, naming the points): a path that returns wrong data is no fabric to plan on. Failed points (no time) are always left out, counted in a note.")] = False,
) -> None:
    """Each curve gets a robust piecewise alpha-beta fit; quality is leave-one-out error."""
    out = renamed(out, old_out, old="-o/--output", new="-O/--out")
    if name is not None:   # '' wrote a profile named 'fitted', the name used when --name is left out
        from commbench.errors import refuse_empty
        refuse_empty(name, "--name", "a name for the fitted fabric, or leave --name out")
    refuse_empty_inputs(("RESULTS", results, "a results file"))
    if out is not None:
        refuse_empty_path(out, "--out")
        refuse_writing_inputs("--out", out, [out], [*results, system])
        claim_output(out, "--out", marker=PROFILE_FORMAT, what="fabric profile", force=force).release()
    if racks is not None and system is None:
        raise CommbenchError(f"--racks={racks} needs --system: it scales the preset the fit starts from")
    base = load_preset(system, num_racks=racks) if system is not None else None  # --system '' is refused there
    min_heldout = parse_size_bytes(heldout_min, "--heldout-min")  # '' too: refused, not read as the default
    for path in results:   # a run still writing it: its profile would be of part of the run (as compare refuses it)
        refuse_being_written(path, f"results file {path!r}", "fit it")
    fabric, fits, notes = fit_result_files(results, base=base, backend=backend, name=name,
                                           min_heldout_bytes=min_heldout, leave_out_wrong=leave_out_wrong,
                                           dtype=dtype, op=op)
    # a profile that predicts nothing is refused (exit 2), not written; one whose curves only measured a latency is
    # kept latency-only, said in one line
    check_usable_curve(fits, results, fabric.latency_only)
    from commbench.costmodel.latency_only import fit_note
    if (note := fit_note(fabric.latency_only)) is not None:
        err_console.print(f"note: {note}", highlight=False, markup=False)
    if as_json:
        if out:
            _write_fabric(fabric, out, force)
        print_json({"format": "commbench-fit", "version": 1, "fabric": fabric.name, "out": out,
                    "heldout_min_bytes": min_heldout, "curves": [f.to_report() for f in fits],
                    "emulated": fabric.emulated_warning, "notes": list(notes), "warnings": list(fabric.warnings)})
        return
    # where the curves were measured: once in the title when they agree, else a column (dropped on a narrow
    # terminal after every other droppable column; the profile's note names every curve's hosts there too)
    hosts = sorted({f.hosts_text for f in fits})
    per_curve = len(hosts) > 1
    host_cols = [Col(name="measured on", numeric=False, keep=5)] if per_curve else []
    rows = []
    for f in fits:
        err = f.heldout_median_rel_error
        err_text = "-" if err is None else (f"[red]{err:.1%}[/]" if err > POOR_FIT else f"{err:.1%}")
        regimes = dict(f.heldout_by_regime)
        per_regime = " / ".join(f"{regimes[r]:.1%}" if r in regimes else "-" for r in ("latency", "middle", "bandwidth"))
        rows.append([escape(f.key.label), *([escape(f.hosts_text)] if per_curve else []), str(f.num_points),
                     f"{format_size(f.min_size_bytes)}..{format_size(f.max_size_bytes)}",
                     f"{(f.fit.latency_s if f.latency_only_s is None else f.latency_only_s) * 1e6:.2f}",
                     "-" if bandwidth_undetermined(f.fit, f.growth)   # its warning says so
                     else " → ".join(f"{bw / 1e9:.3g}" for bw in f.fit.busbw_bytes_per_s),
                     err_text, per_regime, escape("; ".join(f.warnings)) or "-"])
    print_table(console, f"fitted curves ({len(fits)}{'' if per_curve else ', measured on ' + hosts[0]}); "
                f"held-out error on sizes >= {format_size(min_heldout)}, and per size regime (latency < 512 KiB <= "
                "middle < 64 MiB <= bandwidth)",
                [Col(name="curve", numeric=False), *host_cols,
                 Col(name="points", keep=2), Col(name="sizes", numeric=False, keep=1),
                 Col(name="latency (µs)"), Col(name="busbw (GB/s)", numeric=False), Col(name="held-out err"),
                 Col(name="lat / mid / bw", numeric=False, keep=4), Col(name="warnings", numeric=False)], rows)  # a warning is never dropped
    for note in notes:
        console.print(f"note: {note}", highlight=False)
    for note in fabric.notes:
        if note.startswith("NCCL ") and "learned from" in note:  # fit_nccl: forced NCCL_ALGO sweeps
            console.print(f"learned: {note}", highlight=False)
    for warning in fabric.warnings:
        if warning.startswith(ABOVE_HARDWARE):   # says WARNING itself
            console.print(styled("[bold yellow]{}[/]", warning), highlight=False)
        elif not any(warning.endswith(w) for f in fits for w in f.warnings):
            console.print(styled("[yellow]warning:[/] {}", warning), highlight=False)
    if out:
        _write_fabric(fabric, out, force)
        console.print(styled("[green]fabric profile[/] {} → {}", fabric.name, out), highlight=False)
