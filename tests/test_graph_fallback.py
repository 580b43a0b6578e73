"""Where a MoE model's recipes in the release run only a full-iteration CUDA graph, which Megatron-LM core_v0.16.1
cannot capture with dropless MoE, the plan takes the per-layer graph the release runs on that GPU at that precision
(the strongest graph it can run there), not none, and says so (probe AV finding 4: qwen3-30b-a3b on 8 B200 at
mxfp8 was planned eager, 11,253 tokens/s/GPU against 15,451 at bf16)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

runner = CliRunner()
PIN = "tp=1,pp=1,vp=1,ep=8,mbs=1"


def _plan(system: str, precision: str, layout: str = PIN, *extra: str) -> dict:
    res = runner.invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", system, "--gpus", "8", "--layout",
                              layout, "--precision", precision, "--json", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize("system,precision", [("b200-hgx", "mxfp8"), ("b300-hgx", "mxfp8"), ("gb300-nvl72", "mxfp8")])
def test_a_pinned_layout_takes_the_per_layer_graph_where_the_recipe_s_full_graph_cannot_run(system, precision):
    doc = _plan(system, precision)
    assert doc["layout"]["cuda_graph"] == "layer", doc["layout"]
    taken = {e["field"]: e for e in doc["defaults_taken"]}
    why = taken["cuda_graph"]["why"]
    assert "full-iteration" in why and "per-layer" in why and "dropless MoE" in why, why
    eager = _plan(system, precision, PIN + ",cuda_graph=none")
    assert doc["predicted"]["tokens_per_s_per_gpu"] > eager["predicted"]["tokens_per_s_per_gpu"]
    bf16 = _plan(system, "bf16")
    assert bf16["layout"]["cuda_graph"] == "layer"
    assert doc["predicted"]["tokens_per_s_per_gpu"] > bf16["predicted"]["tokens_per_s_per_gpu"]


@pytest.mark.parametrize("system,precision", [("h100-hgx", "fp8"), ("b200-hgx", "nvfp4")])
def test_no_graph_is_invented_where_the_release_runs_none_there(system, precision):
    """No H100 FP8 recipe of any release runs a CUDA graph, nor any B200 NVFP4 one (recipes.release_features): those
    plans stay eager, and say why."""
    doc = _plan(system, precision)
    assert doc["layout"]["cuda_graph"] == "none"
    assert "stand in" not in {e["field"]: e for e in doc["defaults_taken"]}["cuda_graph"]["why"]


def test_the_search_s_software_line_says_the_per_layer_graph_stands_in():
    res = runner.invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "8",
                              "--precision", "mxfp8", "--top", "2"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "without per-layer CUDA graphs" not in text, text
    assert "per-layer CUDA graphs stand in" in text, text
