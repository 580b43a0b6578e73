"""`commbench fit RESULTS.jsonl... -o fabric.json`: fit a fabric profile and report fit quality per curve."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.table import Table

from commbench.cli.base import command, console
from commbench.results.render import styled
from commbench.costmodel import load_preset
from commbench.errors import CommbenchError
from commbench.costmodel.fit_records import MIN_HELDOUT_BYTES, POOR_FIT
from commbench.costmodel.profile import fit_result_files
from commbench.units import format_size, parse_size_bytes


@command("fit", help="Fit latency and bandwidth per collective, group and tier from measured JSONL results.")
def fit(
    results: Annotated[list[str], typer.Argument(help="commbench JSONL results files (bench, sweep or import).")],
    output: Annotated[Optional[str], typer.Option("-o", "--output", help="Write the fabric profile JSON here.")] = None,
    system: Annotated[Optional[str], typer.Option("--system", help="Preset to start from: its GPU, domain size and the curves not measured.")] = None,
    racks: Annotated[Optional[int], typer.Option("--racks", "--nodes", help="With --system: domains in the system.")] = None,
    backend: Annotated[Optional[str], typer.Option("--backend", help="Fit only this backend's records (needed when files mix backends).")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="Name of the fitted fabric.")] = None,
    heldout_min: Annotated[str, typer.Option("--heldout-min", help="Report held-out error over sizes >= this.")] = "64K",
) -> None:
    """Each curve gets a robust piecewise alpha-beta fit; quality is leave-one-out error."""
    if output:
        from commbench.files import check_output_file

        check_output_file(output, "--output")
    if racks is not None and not system:
        raise CommbenchError(f"--racks={racks} needs --system: it scales the preset the fit starts from")
    base = load_preset(system, num_racks=racks) if system else None
    min_heldout = parse_size_bytes(heldout_min, "--heldout-min") if heldout_min else MIN_HELDOUT_BYTES
    fabric, fits, notes = fit_result_files(results, base=base, backend=backend, name=name,
                                           min_heldout_bytes=min_heldout)
    table = Table(title=f"fitted curves ({len(fits)}); held-out error on sizes >= {format_size(min_heldout)}, and per "
                  "size regime (latency < 512 KiB <= middle < 64 MiB <= bandwidth)",
                  title_justify="left")
    for column in ("curve", "points", "sizes", "latency (µs)", "busbw (GB/s)", "held-out err", "lat / mid / bw", "warnings"):
        table.add_column(column, justify="left" if column in ("curve", "warnings", "sizes") else "right")
    for f in fits:
        err = f.heldout_median_rel_error
        err_text = "-" if err is None else (styled("[red]{}[/]", f"{err:.1%}") if err > POOR_FIT else f"{err:.1%}")
        busbw = " → ".join(f"{bw / 1e9:.3g}" for bw in f.fit.busbw_bytes_per_s)
        regimes = dict(f.heldout_by_regime)
        per_regime = " / ".join(f"{regimes[r]:.1%}" if r in regimes else "-" for r in ("latency", "middle", "bandwidth"))
        table.add_row(f.key.label, str(f.num_points), f"{format_size(f.min_size_bytes)}..{format_size(f.max_size_bytes)}",
                      f"{f.fit.latency_s * 1e6:.2f}", busbw, err_text, per_regime, "; ".join(f.warnings) or "-")
    console.print(table)
    for note in notes:
        console.print(f"note: {note}", highlight=False)
    for note in fabric.notes:
        if note.startswith("NCCL ") and "learned from" in note:  # fit_nccl: forced NCCL_ALGO sweeps
            console.print(f"learned: {note}", highlight=False)
    for warning in fabric.warnings:
        if not any(warning.endswith(w) for f in fits for w in f.warnings):
            console.print(styled("[yellow]warning:[/] {}", warning), highlight=False)
    if output:
        fabric.to_json(output)
        console.print(styled("[green]fabric profile[/] {} → {}", fabric.name, output), highlight=False)
