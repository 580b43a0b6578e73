"""Probe AE finding 1: `commbench report` labelled a drop-and-pad MoE curve `gloo n=2 zipf:1.5 per-expert bf16`, the
label of a dropless layer, because only routing, dispatch mode/dtype and preset were named and other params only
where curves differed; and no human-readable output gave the dropped tokens (27% of the copies never sent), only the
JSONL. Now a curve's label names every MoE layer parameter not at its default (hidden, experts, top-k, combine dtype,
capacity factor, padding, ...; commbench.moe.params.non_default), and every printed MoE row with a capacity shows
its dropped copies (render.dropped_text): the bench and report tables, bench --format markdown, the nccl-tests text
and the sweep's progress lines."""

from __future__ import annotations

import pytest

from commbench.results.records import Measurement
from commbench.results.render import measurement_table, moe_markdown_table
from commbench.results.report import by_collective, series_key, series_label, series_labels, write_report
from commbench.sweep.view import point_summary

LAYER = {"hidden": 64, "top_k": 2, "num_experts": 4, "routing": "zipf:1.5", "dispatch_mode": "per-expert",
         "dispatch_dtype": "bf16", "combine_dtype": "bf16", "seed": 0, "preset": None}
CAPACITY = {"capacity_tokens": 16, "dropped_tokens": 35, "drop_fraction": 0.2734375, "padding_tokens": 0,
            "token_drop_policy": "position", "imbalance_expert_routed": 1.9}


def _moe(tokens: int = 32, *, params: dict | None = None, metrics: dict | None = None, run: str = "r") -> Measurement:
    return Measurement(run_id=run, collective="moe_all_to_all", backend="gloo", size_bytes=6656, count=3328,
                       dtype="bfloat16", op=None, in_place=False, world_size=2, group_size=2, iters=3, warmup_iters=1,
                       time_us_median=8018.7, algbw_gbps=0.0017, busbw_gbps=0.0008, num_wrong=0,
                       params={"tokens_per_rank": tokens, **(LAYER if params is None else params), "ep_size": 2,
                               "experts_per_rank": 2},
                       metrics={"dispatch_busbw_gbps": 0.016, "combine_busbw_gbps": 0.011, "imbalance_rank": 1.03,
                                **(metrics or {})})


def _label(m: Measurement) -> str:
    return series_label(series_key(m))


def test_a_single_dropping_curve_names_its_capacity_and_its_layer():
    label = _label(_moe(params={**LAYER, "capacity_factor": 1.0, "pad_to_capacity": False}, metrics=CAPACITY))
    assert "capacity_factor=1.0" in label, label
    assert "hidden=64" in label and "num_experts=4" in label and "top_k=2" in label, label
    assert "ep_size" not in label and "experts_per_rank" not in label   # the group's ranks: n=2 says it


def test_drop_and_drop_and_pad_curves_both_name_the_capacity_factor():
    drop = _moe(params={**LAYER, "capacity_factor": 1.0, "pad_to_capacity": False}, metrics=CAPACITY)
    pad = _moe(params={**LAYER, "capacity_factor": 1.0, "pad_to_capacity": True}, metrics=CAPACITY)
    labels = series_labels([series_key(drop), series_key(pad)])
    assert all("capacity_factor=1.0" in label for label in labels.values()), labels
    assert "pad_to_capacity=True" in labels[series_key(pad)]
    assert "pad_to_capacity" not in labels[series_key(drop)]   # the default, False


def test_defaults_go_unnamed_and_a_combine_dtype_or_seed_that_differs_is_named():
    default = dict(LAYER, hidden=4096, num_experts=64, top_k=8)
    assert _label(_moe(params=default)) == "gloo n=2 zipf:1.5 per-expert bf16"
    assert _label(_moe(params={**default, "combine_dtype": "fp32", "seed": 3})).endswith(" combine_dtype=fp32 seed=3")


def test_a_presets_own_shape_goes_unnamed_and_an_override_is_named():
    from commbench.moe.presets import preset_params

    preset = {**LAYER, **preset_params("qwen3-235b"), "preset": "qwen3-235b"}
    assert "hidden=" not in _label(_moe(params=preset)) and "qwen3-235b" in _label(_moe(params=preset))
    assert "num_experts=32" in _label(_moe(params={**preset, "num_experts": 32}))


def test_report_heading_and_table_show_the_capacity_and_the_drops(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [_moe(32, params={**LAYER, "capacity_factor": 1.0, "pad_to_capacity": False}, metrics=CAPACITY)]
    write_report(rows, tmp_path, sources=["moecap.jsonl"])
    readme = (tmp_path / "README.md").read_text()
    heading = next(line for line in readme.splitlines() if line.startswith("### "))
    assert "capacity_factor=1.0" in heading, heading
    header = next(line for line in readme.splitlines() if line.startswith("| tok/rank"))
    assert "dropped" in header and "| 35 (27.3%) |" in readme, readme


def test_bench_and_markdown_tables_show_the_drops_only_where_there_is_a_capacity():
    capped = _moe(params={**LAYER, "capacity_factor": 1.0, "pad_to_capacity": False}, metrics=CAPACITY)
    lines = moe_markdown_table([capped])
    assert "dropped" in lines[0] and "35 (27.3%)" in lines[2], lines
    assert "dropped" not in moe_markdown_table([_moe()])[0]   # dropless: the table as before

    from rich.console import Console

    console = Console(width=250, record=True)
    console.print(measurement_table("t", [capped], 250))
    text = console.export_text()
    assert "dropped" in text and "35 (27.3%)" in text, text


def test_sweep_progress_line_shows_the_drops():
    capped = _moe(params={**LAYER, "capacity_factor": 1.0, "pad_to_capacity": False}, metrics=CAPACITY)
    assert "dropped 35 token copies (27.3%)" in point_summary(capped).plain
    assert "dropped" not in point_summary(_moe()).plain


@pytest.mark.timeout(180)
def test_nccl_tests_text_shows_the_drops_and_still_imports(tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from commbench.results.importers.nccl_tests import parse_text

    out = tmp_path / "moe.jsonl"
    root = str(Path(__file__).parent.parent)
    proc = subprocess.run([sys.executable, "-m", "commbench", "bench", "moe_all_to_all", "--nproc", "1", "--tokens",
                           "32", "--hidden", "64", "--experts", "4", "--top-k", "2", "--routing", "zipf:1.5",
                           "--capacity-factor", "1.0", "-n", "2", "-w", "0", "--timeout", "60", "--format",
                           "nccl-tests", "-O", str(out)], capture_output=True, text=True, timeout=150, cwd=root,
                          env={**os.environ, "PYTHONPATH": root})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (record,) = [r for r in map(json.loads, out.read_text().splitlines()) if r["record_type"] == "measurement"]
    dropped = record["metrics"]["dropped_tokens"]
    assert dropped > 0
    lines = proc.stdout.splitlines()
    row = next(i for i, line in enumerate(lines) if line.strip().startswith(str(record["size_bytes"])))
    assert f"dropped {dropped} token copies ({record['metrics']['drop_fraction']:.1%})" in lines[row - 1], lines
    imported = parse_text(proc.stdout, "moe.log")
    assert imported.problems == [], imported.problems
    (m,) = [r for r in imported.records if isinstance(r, Measurement)]
    assert m.size_bytes == record["size_bytes"] and m.params["capacity_factor"] == 1.0
