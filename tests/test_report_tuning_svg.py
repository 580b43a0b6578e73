"""`report --svg` ('Also write each figure as SVG') wrote the NCCL tuning heat map as PNG only, at 110 dpi where
the help says PNGs are 150 dpi; now it is saved as every other figure (plots.save)."""

from __future__ import annotations

from PIL import Image
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.records import JsonlWriter, Measurement, RunHeader


def test_tuning_heat_map_is_written_as_svg_too(tmp_path):
    results = tmp_path / "tun.jsonl"
    with JsonlWriter(results) as writer:
        writer.write(RunHeader(run_id="t", started_at="2026-12-04T00:00:00+00:00", argv=[], commbench_version="0",
                               python_version="3", torch_version="2.5", nccl_version="2.27.3", cuda_version="12.8",
                               cupy_version=None, backend="nccl", world_size=8, hostnames=["n1"] * 8,
                               devices=["NVIDIA H100 80GB HBM3"] * 8, nccl_env={}, launcher="torchrun"))
        for algo, proto, speed in (("default", "default", 1.0), ("ring", "simple", 0.9), ("nvls", "simple", 1.2)):
            for p in (10, 20):
                t = (20 + (1 << p) / 300e3) / speed
                writer.write(Measurement(run_id="t", collective="all_reduce", backend="nccl", size_bytes=1 << p,
                                         count=(1 << p) // 4, dtype="float32", op="sum", in_place=True, world_size=8,
                                         group_size=8, iters=20, warmup_iters=5, time_us_median=t,
                                         algbw_gbps=(1 << p) / t / 1e3, busbw_gbps=1.75 * (1 << p) / t / 1e3,
                                         num_wrong=0, params={"nccl_algo": algo, "nccl_proto": proto,
                                                              "nccl_channels": "default"}))
    out = tmp_path / "rep"
    result = CliRunner().invoke(app, ["report", str(results), "-O", str(out), "--svg"])
    assert result.exit_code == 0, result.output
    maps = sorted(p.name for p in out.glob("nccl-tuning-*"))
    assert maps == ["nccl-tuning-allreduce-1n-8r.png", "nccl-tuning-allreduce-1n-8r.svg"], maps
    dpi = Image.open(out / "nccl-tuning-allreduce-1n-8r.png").info.get("dpi")
    assert dpi and round(dpi[0]) == 150
    assert "![NCCL tuning heat map](nccl-tuning-allreduce-1n-8r.png)" in (out / "README.md").read_text()
