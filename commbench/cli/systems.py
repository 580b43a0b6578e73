"""`commbench systems`: the preset fabrics, their link rates, predicted headline figures and sources."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from commbench.cli.base import command, console, print_json
from commbench.results.tables import Col, print_table
from commbench.costmodel import bus_factor, collective_time_s, load_preset, preset_names
from commbench.costmodel.accuracy import by_regime, format_summary
from commbench.costmodel.calibration import borrowed_figures, borrowed_statement, own_figures

_BIG_BYTES = 8 << 30


def _busbw_gbps(fabric, collective: str, group: int, num_domains: int) -> float:
    time_s = float(collective_time_s(fabric, collective, _BIG_BYTES, group, num_domains))
    return float(bus_factor(collective, group)) * _BIG_BYTES / time_s / 1e9


def preset_rows() -> list[dict]:
    rows = []
    for name in preset_names():
        fabric = load_preset(name, num_racks=2)
        n = fabric.domain_size
        rows.append({
            "preset": name, "gpu": fabric.gpu.name, "gpus_per_domain": n,
            "nvlink_gbps": fabric.tiers["scale_up"].link_gbps_per_gpu,
            "nic_gbps": fabric.tiers["scale_out"].link_gbps_per_gpu,
            "all_reduce_domain_busbw_gbps": _busbw_gbps(fabric, "all_reduce", n, 1),
            "all_to_all_domain_busbw_gbps": _busbw_gbps(fabric, "all_to_all", n, 1),
            "all_reduce_2_domains_busbw_gbps": _busbw_gbps(fabric, "all_reduce", 2 * n, 2),
            "description": fabric.notes[0], "gpu_source": fabric.gpu.source,
            "small_sizes": fabric.nccl.small_sizes,
            "own_figures": own_figures(name), "borrowed_figures": borrowed_figures(name),
        })
    return rows


@command("systems", help="List the preset systems with their link rates, predicted figures and sources.")
def systems(
    checks: Annotated[bool, typer.Option("--checks", help="Also compare each preset with the published figures it reproduces.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables (schema: docs/json-output.md).")] = False,
) -> None:
    """Predicted figures are at 8 GiB; the 2-domain all-reduce spans two racks/nodes."""
    rows = preset_rows()
    check_rows = []
    if checks:
        from commbench.costmodel.checks import check_presets

        check_rows = [{"preset": r.figure.preset, "collective": r.figure.collective, "group_size": r.figure.group_size,
                       "size_bytes": r.figure.size_bytes,
                       "num_domains": r.figure.num_domains, "what": r.figure.what,
                       "published_busbw_gbps": r.figure.busbw_gbps, "predicted_busbw_gbps": r.predicted_busbw_gbps,
                       "relative_error": r.relative_error, "regime": r.regime, "nccl_choice": r.chosen,
                       "source": r.source} for r in check_presets()]
    if as_json:
        print_json({"format": "commbench-systems", "version": 1, "presets": rows, "checks": check_rows})
        return
    print_table(console, "preset systems (busbw predicted at 8 GiB, GB/s)",
                [Col(name="preset", numeric=False), Col(name="GPU", numeric=False, keep=2), Col(name="GPUs/domain", keep=1),
                 Col(name="NVLink (GB/s)"), Col(name="NIC (GB/s)"), Col(name="AR in domain"), Col(name="A2A in domain"),
                 Col(name="AR 2 domains")],
                [[r["preset"], r["gpu"], str(r["gpus_per_domain"]), f"{r['nvlink_gbps']:g}", f"{r['nic_gbps']:g}",
                  f"{r['all_reduce_domain_busbw_gbps']:.0f}", f"{r['all_to_all_domain_busbw_gbps']:.0f}",
                  f"{r['all_reduce_2_domains_busbw_gbps']:.0f}"] for r in rows])
    for r in rows:
        console.print(f"{r['preset']}: {r['description']} (GPU: {r['gpu_source']})", highlight=False, markup=False)
    for r in rows:   # whose runs set the small-message curve (NCCL's launch and pipeline-ramp terms)
        console.print(f"{r['preset']} small sizes: {r['small_sizes']}", highlight=False, markup=False)
    for r in rows:   # which published figures set its efficiencies: its own, or another preset's
        console.print(f"{r['preset']} calibrated on: {borrowed_statement(r['preset'])}", highlight=False, markup=False)
    console.print("sources: link rates from commbench/data/hardware.toml (GPU datasheets); efficiencies from its "
                  "[[measured]] figures (commbench systems --checks)", highlight=False, markup=False)
    if checks:
        print_table(console, "published (measured) vs preset (predicted) busbw, GB/s",
                    [Col(name="preset", numeric=False), Col(name="collective", numeric=False), Col(name="ranks"),
                     Col(name="domains", keep=1), Col(name="what", numeric=False, keep=2),
                     Col(name="regime", numeric=False, keep=4), Col(name="published"), Col(name="predicted"),
                     Col(name="error"), Col(name="NCCL pick", numeric=False, keep=5),
                     Col(name="source", numeric=False, keep=3)],
                    [[r["preset"], r["collective"], str(r["group_size"]), str(r["num_domains"]), escape(r["what"]),
                      r["regime"], f"{r['published_busbw_gbps']:.3g}", f"{r['predicted_busbw_gbps']:.3g}",
                      f"{r['relative_error']:+.1%}", escape(r["nccl_choice"] or "(curves)"), escape(r["source"])]
                     for r in check_rows])
        console.print("error per size regime (latency < 512 KiB <= middle < 64 MiB <= bandwidth):", highlight=False)
        for name, summary in by_regime([(r["size_bytes"], r["relative_error"]) for r in check_rows]).items():
            console.print("  " + format_summary(name, summary), highlight=False, markup=False)
        console.print("held-out curves (never used to set a parameter): python benchmarks/costmodel_accuracy.py",
                      highlight=False, markup=False)
