"""A plan says where it goes beyond the published runs (calibrate/coverage.py): EP across scale-up domains
and FSDP on a MoE model, each with the calibration runs on that system in the regime and the model's error
on them, or "Untested" where there is none."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner import Layout, load_model
from commbench.planner.calibrate import coverage
from commbench.planner.calibrate.published import _preset, predict_runs, published_runs
from commbench.planner.step.terms import CALIBRATED


def test_cross_domain_ep_runs_are_the_moe_runs_whose_ep_leaves_the_domain():
    for system in ("b300-hgx", "h100-hgx", "gb200-nvl72"):
        found = {r.index for r in coverage.cross_domain_ep_runs(system)}
        expected = set()
        for r in published_runs():
            if r.layout is None or r.preset != system or not r.model.is_moe:
                continue
            domain = int(_preset(r.preset, int(r.row["num_gpus"])).domain_size)
            span = r.layout.ep * r.layout.etp
            if span > domain or (domain % span and span > 1):   # more than one domain, or straddling two
                expected.add(r.index)
        assert found == expected
    assert coverage.cross_domain_ep_runs("h100-hgx")   # the published H100 EP32/EP64 runs cross nodes


def test_no_line_inside_one_domain_or_for_a_dense_model():
    lay = Layout(tp=1, pp=1, ep=8, dp=8, mbs=1, gbs=64)
    kw = dict(domain_size=8, system="h100-hgx", calibration=CALIBRATED)
    assert coverage.coverage_lines(model=load_model("qwen3-30b-a3b"), layout=lay, ep_domains=1, **kw) == []
    assert coverage.coverage_lines(model=load_model("llama3-8b"), layout=Layout(tp=1, pp=1, dp=8, mbs=1, gbs=64),
                                   ep_domains=2, **kw) == []


def test_tested_line_carries_the_models_error_on_those_runs():
    runs = coverage.cross_domain_ep_runs("h100-hgx")
    p = predict_runs(runs, CALIBRATED)
    err = (p.predicted_tokens / p.published_tokens - 1.0) * 100.0
    (line,) = coverage.coverage_lines(model=load_model("qwen3-235b-a22b"),
                                      layout=Layout(tp=2, pp=8, vp=4, ep=32, dp=16, mbs=1, gbs=2048),
                                      ep_domains=4, domain_size=8, system="h100-hgx", calibration=CALIBRATED)
    assert line.startswith("Tested: EP across scale-up domains") and f"{len(runs)} published runs" in line
    low, high = (float(x) for x in re.search(r"predicted ([+-]\d+)% to ([+-]\d+)%", line).groups())
    assert (low, high) == (round(err.min()), round(err.max()))
    # another calibration moves the reported errors with it
    other = CALIBRATED.with_values(gemm_efficiency_hopper=CALIBRATED.gemm_efficiency_hopper * 0.8)
    (moved,) = coverage.coverage_lines(model=load_model("qwen3-235b-a22b"),
                                       layout=Layout(tp=2, pp=8, vp=4, ep=32, dp=16, mbs=1, gbs=2048),
                                       ep_domains=4, domain_size=8, system="h100-hgx", calibration=other)
    assert moved != line


def test_untested_where_the_calibration_set_has_no_such_run():
    # no GB300 run is in the calibration set (they are the held-out table), and no MoE run uses FSDP
    assert not coverage.cross_domain_ep_runs("gb300-nvl72")
    lay = Layout(tp=1, pp=1, ep=16, dp=256, mbs=1, gbs=1024, fsdp=True)
    lines = coverage.coverage_lines(model=load_model("deepseek-v3"), layout=lay, ep_domains=2, domain_size=72,
                                    system="gb300-nvl72", calibration=CALIBRATED)
    assert [ln.split(":")[0] for ln in lines] == ["Untested", "Untested"]
    assert "EP16 spans 2 domains of 72" in lines[0] and "FSDP on a MoE model" in lines[1]


def test_plan_output_and_plan_json_carry_the_coverage_line(tmp_path):
    """Through `commbench plan`: the printed explanation and plan.json's explanation both say it."""
    res = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "16",
                                   "--gbs", "256", "--precision", "fp8", "--layout", "tp=1,pp=1,ep=16,mbs=1",
                                   "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "EP across scale-up domains (this plan's EP16 spans 2 domains of 8)" in text
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert any("EP across scale-up domains" in ln for ln in plan["explanation"])


def test_ep_overlap_inside_one_8_gpu_node_is_the_measured_slower_regime():
    """Every calibration run with the EP overlap and its EP group inside one HGX node is one the rule names,
    and each was measured slower than the model prices it; across nodes or on NVL72 racks the rule is off."""
    from commbench.planner.layout.recipes import ep_overlap_measured_slower
    runs = coverage.ep_overlap_slower_runs()
    assert len(runs) >= 3 and all(r.preset.endswith("-hgx") and r.layout.ep * r.layout.etp <= 8 for r in runs)
    p = predict_runs(runs, CALIBRATED)
    assert np.all(p.predicted_tokens > p.published_tokens * 1.2)    # each 20% or more too fast
    assert list(ep_overlap_measured_slower(8, np.array([1, 2, 4]))) == [True, False, False]
    assert not ep_overlap_measured_slower(72, 1)


def test_ep_overlap_inside_one_node_under_a_full_iteration_graph_is_not_the_measured_slower_regime():
    """NVIDIA names host time as what slows it (Megatron-Bridge PR #1760: "CPU overhead"), and the one published
    run with the EP group inside an 8-GPU node under a full-iteration graph (Qwen3-30B-A3B 8 x B300 MXFP8 26.06,
    benchmarks/data/newer-release-runs.json) is priced right: the rule names eager launches only."""
    import dataclasses
    from commbench.planner.layout.recipes import ep_overlap_measured_slower
    assert not ep_overlap_measured_slower(8, 1, True)
    assert list(ep_overlap_measured_slower(8, np.array([1, 1, 2]), np.array([False, True, False]))) == [
        True, False, False]
    rows = json.loads((Path(__file__).parents[1] / "benchmarks/data/newer-release-runs.json").read_text())
    runs = [r for r in published_runs(tuple(rows)) if r.layout is not None and r.layout.moe_a2a_overlap
            and r.layout.cuda_graph == "full" and r.preset.endswith("-hgx") and r.layout.ep * r.layout.etp <= 8]
    assert runs
    p = predict_runs(runs, CALIBRATED)
    assert np.all(np.abs(p.predicted_tokens / p.published_tokens - 1.0) < 0.1)
    model = load_model("qwen3-30b-a3b")
    layout = dataclasses.replace(runs[0].layout)
    assert coverage.coverage_lines(model=model, layout=layout, ep_domains=1, domain_size=8,
                                   system=runs[0].preset, calibration=CALIBRATED) == []


def test_search_does_not_propose_ep_overlap_inside_one_node_but_keeps_it_across_nodes_and_when_pinned():
    from commbench.costmodel import load_preset
    from commbench.planner.search.space import SearchRequest, best_for_pins
    model = load_model("qwen3-235b-a22b")

    def chosen(pins, gpus=64):
        req = SearchRequest(model=model, fabric=load_preset("b200-hgx", num_gpus=gpus), num_gpus=gpus, gbs=1024,
                            precision="mxfp8", software="25.11", pins=pins)
        arr, _ = best_for_pins(req)
        return arr.layout(0)

    inside = chosen(dict(tp=1, pp=8, vp=2, ep=8, mbs=1))
    assert not inside.moe_a2a_overlap                       # the 25.11 recipe's own layout, measured slower with it
    across = chosen(dict(tp=1, pp=4, vp=2, ep=16, mbs=1))
    assert across.moe_a2a_overlap                           # EP16 spans two nodes: the release's overlap stays
    pinned = chosen(dict(tp=1, pp=8, vp=2, ep=8, mbs=1, moe_a2a_overlap=True))
    assert pinned.moe_a2a_overlap
    (line,) = coverage.coverage_lines(model=model, layout=pinned, ep_domains=1, domain_size=8, system="b200-hgx",
                                      calibration=CALIBRATED)
    assert line.startswith("Measured slower: EP all-to-all overlap") and "pinned" in line
    assert f"the {len(coverage.ep_overlap_slower_runs())} published runs" in line


def test_tp_comm_overlap_is_not_proposed_at_a_precision_no_recipe_runs_it_at():
    """Every Megatron-Bridge recipe with TP > 1 at nvfp4 turns TP comm overlap off (the table: 0 of them run it),
    while most at mxfp8 run it: the search leaves it off at nvfp4 unless pinned, and a pinned one is named."""
    from commbench.costmodel import load_preset
    from commbench.planner.layout.recipes import tp_overlap_recipes, tp_overlap_unrun
    from commbench.planner.search.space import SearchRequest, best_for_pins
    runs, recipes = tp_overlap_recipes("nvfp4")
    assert runs == 0 and recipes >= 10 and tp_overlap_unrun("nvfp4")
    assert tp_overlap_recipes("mxfp8")[0] > 0 and not tp_overlap_unrun("mxfp8")
    model = load_model("llama3.1-405b")

    def chosen(precision, **pins):
        req = SearchRequest(model=model, fabric=load_preset("gb200-nvl72", num_gpus=256), num_gpus=256, gbs=1536,
                            precision=precision, software="26.02", pins=dict(tp=4, pp=16, vp=4, mbs=1, **pins))
        return best_for_pins(req)[0].layout(0)

    assert not chosen("nvfp4").tp_comm_overlap and chosen("mxfp8").tp_comm_overlap
    pinned = chosen("nvfp4", tp_comm_overlap=True)
    assert pinned.tp_comm_overlap
    lines = coverage.coverage_lines(model=model, layout=pinned, ep_domains=1, domain_size=72, system="gb200-nvl72",
                                    calibration=CALIBRATED)
    assert any(line.startswith(f"Not run: TP comm overlap at nvfp4 (pinned here): none of the {recipes} ") for line in lines)
    assert not any(line.startswith("Not run") for line in coverage.coverage_lines(
        model=model, layout=chosen("mxfp8"), ep_domains=1, domain_size=72, system="gb200-nvl72", calibration=CALIBRATED))
