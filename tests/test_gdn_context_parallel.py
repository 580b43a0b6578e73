"""Gated DeltaNet (Qwen3-Next) under context parallelism, by release.

Megatron-LM 20ba03fec0 "Gated delta net context parallel (CP) (#2642)" is first in megatron-core 0.18.0, release
26.06 (d0b3b775 megatron/core/ssm/gated_delta_net.py: all-to-alls from sequence to head shards around the delta rule);
26.04.01's 2edffadb transformer_config.py:1115-1118 asserts "Gated delta net does not support context parallel".
The planner refused cp>1 for GDN at every release (probe P1: 26.08 too); it now takes it from 26.06 on, refuses a
pinned cp>1 before in one line naming the first release that builds it, and prices GDN's CP all-to-alls.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.layout.release_flags import release_model
from commbench.planner.layout.spec import RULE_BITS, layout_violations
from commbench.planner.step import evaluate as step_module
from commbench.planner.step import gdn

MODEL = "qwen3-next-80b-a3b"     # 16 key heads, 32 value heads


def _layouts(*tp_cp):
    return LayoutArrays.from_layouts([Layout(tp=tp, pp=1, ep=16, etp=1, cp=cp, dp=16 // (tp * cp), mbs=1, gbs=64)
                                      for tp, cp in tp_cp])


@pytest.mark.parametrize("release, takes_cp", [("26.02", False), ("26.04", False), ("26.04.01", False),
                                               ("26.06", True), ("26.08", True)])
def test_cp_is_valid_for_gated_deltanet_from_26_06(release, takes_cp):
    model = release_model(load_model(MODEL), release)
    assert model.gdn_context_parallel == takes_cp
    heads = layout_violations(model, _layouts((1, 2), (2, 2), (2, 4), (1, 1)), 16) & RULE_BITS["heads"]
    assert heads.tolist() == ([0, 0, 0, 0] if takes_cp else [RULE_BITS["heads"]] * 3 + [0])


def test_cp_must_divide_the_heads_of_a_tp_rank():
    # 16 key heads: tp 2 x cp 16 leaves a CP rank no whole key head (gated_delta_net.py heads // tp // cp)
    model = release_model(load_model(MODEL), "26.08")
    arr = LayoutArrays.from_layouts([Layout(tp=2, pp=1, ep=16, etp=1, cp=16, dp=1, mbs=1, gbs=64)])
    assert layout_violations(model, arr, 32)[0] & RULE_BITS["heads"]


def _plan(tmp_path, release):
    return CliRunner().invoke(app, ["plan", "--model", MODEL, "--system", "h200-hgx", "--gpus", "16",
                                    "--software", release, "--precision", "bf16", "--layout", "cp=2",
                                    "-O", str(tmp_path / release)])


def test_a_pinned_cp_before_26_06_is_refused_in_one_line_naming_the_release(tmp_path):
    result = _plan(tmp_path, "26.04")
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert "--layout cp=2 is invalid" in lines[0] and "release 26.04" in lines[0] and "26.06" in lines[0]


def test_a_pinned_cp_at_26_08_is_planned_and_launched(tmp_path):
    result = _plan(tmp_path, "26.08")
    assert result.exit_code == 0, result.output
    argv = (tmp_path / "26.08" / "megatron_args.txt").read_text().split()
    assert argv[argv.index("--context-parallel-size") + 1] == "2"


def test_the_step_model_prices_gdn_cp_all_to_alls(monkeypatch):
    model = release_model(load_model(MODEL), "26.08")
    fabric = load_preset("h200-hgx", num_gpus=16)
    arr = _layouts((1, 2))
    with_a2a = evaluate_layouts(model, fabric, arr)
    monkeypatch.setattr(step_module.gdn, "cp_all_to_all_s", lambda *a, **k: np.zeros(1))
    without = evaluate_layouts(model, fabric, arr)
    # per micro-batch: every GDN layer's in_proj output and gated-norm output, each way, fwd + bwd (no recompute)
    coll, _ = step_module._costmodel()
    rows = model.seq_len / 2 * 2.0
    one_way = (coll(fabric, "all_to_all", np.array([rows * gdn.in_proj_width(model)]), np.array([2]), np.array([1]))
               + coll(fabric, "all_to_all", np.array([rows * gdn.v_dim(model)]), np.array([2]), np.array([1])))
    n_mb = 64 // 8
    expected = n_mb * model.num_linear_attention_layers * 2.0 * float(one_way[0])
    assert float(with_a2a.cp_total_s[0] - without.cp_total_s[0]) == pytest.approx(expected, rel=1e-9)
    assert expected > 0 and with_a2a.valid[0]
