"""Reports and plots (issue 29, item 7): report --together, bench --format markdown, an MoE legend
without 'None', SVG text as text, fit's warning column kept at 80 columns, sizes exact or whole."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

pytest.importorskip("matplotlib")

from commbench.cli.app import app  # noqa: E402
from commbench.results.importers.nccl_tests import import_file  # noqa: E402
from commbench.results.records import JsonlWriter, Measurement  # noqa: E402
from commbench.results.report import series_key, series_label  # noqa: E402
from commbench.units import format_size  # noqa: E402

DATA = Path(__file__).parent / "data" / "nccl-tests"
runner = CliRunner()


def imported(tmp_path) -> Path:
    out = tmp_path / "imported.jsonl"
    with JsonlWriter(out) as writer:
        for rec in import_file(str(DATA / "multi-collective-2.14.log")).records:
            writer.write(rec)
    return out


def test_report_together_draws_every_collective_in_one_figure_with_svg_text(tmp_path):
    result = runner.invoke(app, ["report", str(imported(tmp_path)), "-O", str(tmp_path / "rep"), "--together", "--svg"])
    assert result.exit_code == 0, result.output
    rep = tmp_path / "rep"
    assert (rep / "together-busbw.png").exists() and (rep / "together-latency.svg").exists()
    svg = (rep / "together-busbw.svg").read_text()
    assert "<text" in svg and "all_gather" in svg and "all_to_all" in svg   # text, not glyph paths
    assert "![together busbw](together-busbw.png)" in (rep / "README.md").read_text()
    plain = runner.invoke(app, ["report", str(imported(tmp_path)), "-O", str(tmp_path / "rep2")])
    assert plain.exit_code == 0 and not (tmp_path / "rep2" / "together-busbw.png").exists()


def test_moe_legend_never_says_none():
    m = Measurement(run_id="r", collective="moe_all_to_all", backend="gloo", size_bytes=1024, count=1, dtype="bfloat16",
                    op=None, in_place=False, world_size=2, group_size=2, iters=1, warmup_iters=0, time_us_median=10.0,
                    params={"tokens_per_rank": 128, "hidden": 64, "routing": "uniform", "preset": None,
                            "dispatch_mode": "per-expert", "dispatch_dtype": None})
    label = series_label(series_key(m))
    assert "None" not in label and "uniform" in label and "per-expert" in label


def test_bench_format_markdown_prints_one_pasteable_table(tmp_path):
    result = runner.invoke(app, ["bench", "all_reduce", "--nproc", "1", "-b", "8", "-e", "64", "-f", "8", "-n", "2",
                                 "-w", "0", "--format", "markdown", "-J", str(tmp_path / "a.jsonl")])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    table = [line for line in lines if line.startswith("|")]
    assert table[0].startswith("| size |") and table[1].startswith("|---") and len(table) == 4
    assert table[2].startswith("| 8 B |") and "Avg bus bandwidth" in result.stdout
    assert "┃" not in result.stdout and "topology:" not in result.stdout


def test_bench_moe_format_markdown_states_its_layer_and_its_columns(tmp_path):
    # the markdown table of an MoE run had the plain collectives' size/time columns and no word of the layer
    # measured (tokens per rank, hidden, experts, top-k, routing): the terminal table's were lost in the paste
    result = runner.invoke(app, ["bench", "moe_all_to_all", "--nproc", "1", "--tokens", "16,32", "--hidden", "64",
                                 "--experts", "4", "--top-k", "2", "-n", "2", "-w", "0", "--format", "markdown",
                                 "-J", str(tmp_path / "m.jsonl")])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert any("hidden 64, 4 experts, top-2, uniform routing" in line for line in lines), result.stdout
    table = [line for line in lines if line.startswith("|")]
    assert table[0].startswith("| tok/rank | size | imbalance |") and "dispatch busbw" in table[0]
    assert "p99\\|max" in table[0] and table[0].count(" | ") == table[2].count(" | ")   # a pipe stays in its cell
    assert [row.split(" | ")[0] for row in table[2:]] == ["| 16", "| 32"] and len(table) == 4


def test_fit_keeps_the_warning_column_at_80_columns(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "junk.jsonl"
    with JsonlWriter(path) as writer:
        for size in [1 << k for k in range(10, 27)]:
            t = float(rng.uniform(10, 1000))
            writer.write(Measurement(run_id="r", collective="all_reduce", backend="gloo", size_bytes=size,
                                     count=size // 4, dtype="float32", op="sum", in_place=True, world_size=4,
                                     group_size=4, iters=5, warmup_iters=1, time_us_median=t,
                                     algbw_gbps=size / t / 1e3, busbw_gbps=1.5 * size / t / 1e3, num_wrong=0))
    result = runner.invoke(app, ["fit", str(path)], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.replace("│", " ").split())
    assert "poor fit" in text and "unreliable" in text
    assert "dropped" not in text or "warnings" not in text.split("dropped", 1)[1][:80]


@pytest.mark.parametrize("size, text", [(8, "8 B"), (1536 << 10, "1536 KiB"), (16 << 20, "16 MiB"),
                                        (268434432, "268434432 B"), (80_000_000, "80 MB"), (12345, "12345 B"),
                                        (3 << 30, "3 GiB")])
def test_sizes_are_exact_or_whole(size, text):
    assert format_size(size) == text
