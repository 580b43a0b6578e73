"""A plan says where it goes beyond the published runs (calibrate/coverage.py): EP across scale-up domains
and FSDP on a MoE model, each with the calibration runs on that system in the regime and the model's error
on them, or "Untested" where there is none."""

from __future__ import annotations

import json
import re

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
