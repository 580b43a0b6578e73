"""Each plot kind: human size ticks, predicted drawn apart from measured, MoE against tokens per rank, caption."""

from __future__ import annotations

import struct

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from commbench.results.plots import Series, busbw_figure, caption, latency_figure, moe_figure, save  # noqa: E402
from commbench.results.records import Measurement, RunHeader  # noqa: E402

SIZES = [8 << k for k in range(0, 28, 3)]  # 8 B .. 1 GiB


def row(size: int, **extra) -> Measurement:
    time_us = 20.0 + size / 40e3
    base = dict(run_id="r", collective="all_reduce", backend="nccl", size_bytes=size, count=size // 4, dtype="float32",
                op="sum", in_place=False, world_size=8, group_size=8, iters=20, warmup_iters=5, time_us_median=time_us,
                algbw_gbps=size / time_us / 1e3, busbw_gbps=1.75 * size / time_us / 1e3, num_wrong=0)
    return Measurement(**(base | extra))


def header() -> RunHeader:
    return RunHeader(run_id="r", started_at="2026-11-30T14:00:00+00:00", argv=[], commbench_version="0", python_version="3",
                     torch_version=None, nccl_version=None, cuda_version=None, cupy_version=None, backend="nccl",
                     world_size=8, hostnames=["gpu-node-7"] * 8, devices=["H100"], nccl_env={}, launcher="torchrun")


def tick_labels(fig) -> list[str]:
    fig.canvas.draw()
    return [t.get_text() for t in fig.axes[0].get_xticklabels() if t.get_text()]


@pytest.mark.parametrize("draw", [busbw_figure, latency_figure])
def test_size_plots_have_human_ticks_and_a_distinct_predicted_style(draw):
    rows = [row(s) for s in SIZES]
    fig = draw("all_reduce", [Series(label="nccl float32 n=8", rows=rows,
                                     predicted_s=np.array([15e-6 + s / 50e9 for s in SIZES]))], caption([header()]))
    labels = tick_labels(fig)
    assert {"64 B", "1 KiB", "16 KiB", "256 KiB", "4 MiB"} <= set(labels), labels  # not 2^18
    assert all(label.split()[-1] in ("B", "KiB", "MiB", "GiB") for label in labels)
    measured, predicted = fig.axes[0].get_lines()
    assert measured.get_label().startswith("measured") and predicted.get_label().startswith("predicted")
    assert (measured.get_linestyle(), measured.get_marker()) != (predicted.get_linestyle(), predicted.get_marker())
    assert predicted.get_linestyle() == "--" and predicted.get_marker() == "x"
    assert fig.axes[0].get_yscale() == "log"  # small sizes stay visible
    assert any("gpu-node-7, 2026-11-30, nccl, 8 ranks" in t.get_text() for t in fig.texts)


def test_moe_plot_is_against_tokens_with_dispatch_and_combine_apart(tmp_path):
    rows = [row(t * 7168, collective="moe_all_to_all", params={"tokens_per_rank": t, "hidden": 7168},
                metrics={"dispatch_busbw_gbps": 40.0 + t / 100, "combine_busbw_gbps": 35.0 + t / 120})
            for t in (128, 512, 2048, 8192)]
    fig = moe_figure([Series(label="nccl n=8 uniform", rows=rows)], caption([header()]))
    ax = fig.axes[0]
    assert set(tick_labels(fig)) >= {"128", "512", "2048", "8192"}
    assert ax.get_xlabel() == "tokens per rank" and ax.get_ylim()[0] == 0  # linear axis from 0
    dispatch, combine = ax.get_lines()
    assert dispatch.get_label().startswith("dispatch") and combine.get_label().startswith("combine")
    assert list(dispatch.get_ydata()) != list(combine.get_ydata()) and dispatch.get_linestyle() != combine.get_linestyle()
    paths = save(fig, tmp_path / "moe", ("png", "svg"))
    assert [p.suffix for p in paths] == [".png", ".svg"] and b"<svg" in paths[1].read_bytes()[:400]
    width_px, height_px = struct.unpack(">II", paths[0].read_bytes()[16:24])
    assert (width_px, height_px) == (8 * 150, int(4.8 * 150))  # 150 dpi
