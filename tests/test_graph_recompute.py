"""CUDA graphs beside recomputed modules, as a release's Megatron-LM takes them (search/graph_recompute.py).

Found from outside (probe EA): at --software 25.11, `plan --model qwen3-next-80b-a3b --system b200-hgx --gpus 32
--precision mxfp8` wrote --recompute-modules core_attn layernorm moe_act with --cuda-graph-impl transformer_engine
--cuda-graph-scope attn moe_router moe_preprocess, which 25.11's Megatron-LM (0d8e0714cd29) refuses in TransformerConfig
("attn cuda graph is not supported with core_attn recompute.", transformer_config.py:1592-1596); core_v0.16.1 and
26.02's b0cc2706 take it. A pinned --layout of that combination planned (exit 0)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.planner import Layout, load_model
from commbench.planner.emit.megatron import megatron_args
from commbench.planner.layout.graph_scope import scope_mask
from commbench.planner.layout.spec import CODE_FIELDS
from commbench.planner.search.graph_recompute import (graph_recompute_conflict, graph_recompute_pin_refusal,
                                                      graph_recompute_refused)

Q3N = "qwen3-next-80b-a3b"


def _conflict(model, release, graph="layer", scope="", recompute="selective"):
    return graph_recompute_conflict(load_model(model), release, graph, scope, recompute)


def test_the_rule_mirrors_each_releases_block():
    # 25.11 (0d8e0714, megatron-core 0.16.0rc0): every recomputed module the scope captures
    assert _conflict(Q3N, "25.11") == ("attn", "core_attn")            # the recipes' scope holds attn
    assert _conflict("deepseek-v3", "25.11", recompute="mla_up_proj") == ("attn", "mla_up_proj")
    assert _conflict(Q3N, "25.11", scope="moe", recompute="moe_act") == ("moe", "moe_act")
    assert _conflict(Q3N, "25.11", scope="layer") == ("the whole layer", "core_attn layernorm moe_act")
    assert _conflict("llama3-8b", "25.11", graph="full", recompute="full") == ("full_iteration", "full")
    assert _conflict("deepseek-v3", "25.11", scope="attn+mlp+moe_router", recompute="selective")[0] == "attn"
    assert _conflict(Q3N, "25.11", scope="moe_router+moe_preprocess") is None    # layernorm there: a warning only
    assert _conflict(Q3N, "25.11", recompute="moe_act") is None                   # no moe in the scope
    assert _conflict("llama3-8b", "25.11", graph="full", recompute="selective") is None   # scope full_iteration
    # every other table release: the refactored block (2b343d739f) takes all of these
    for release in ("25.09", "26.02", "26.02.01", "26.04", "26.08", None):
        assert _conflict(Q3N, release) is None, release
        assert _conflict(Q3N, release, scope="moe", recompute="moe_act") is None, release
        assert _conflict("llama3-8b", release, graph="full", recompute="full") is None, release
    # a per-layer graph with full recompute is refused in every release and answered apart (candidates, emitter)
    assert _conflict(Q3N, "25.11", recompute="full") is None


def test_the_search_keeps_the_graph_over_what_it_does_not_recompute():
    model = load_model(Q3N)
    layer, sel = CODE_FIELDS["cuda_graph"].index("layer"), CODE_FIELDS["recompute"].index("selective")
    refused, drop = graph_recompute_refused(model, "25.11", np.array([layer, layer, 0]),
                                            np.array([0, scope_mask("moe_router+moe_preprocess"), 0]),
                                            np.array([sel, sel, sel]))
    assert refused.tolist() == [True, False, False] and drop[0] == scope_mask("attn")


def test_the_25_11_qwen3_next_plan_graphs_no_attention_it_recomputes(tmp_path):
    # mbs 2 and selective recompute pinned: since STEP_MODEL 2026-12-06.18 (fix-G11) an alltoall graph over
    # moe_preprocess holds the permuted tokens, and the unpinned plan (mbs 4) no longer graphs at all
    result = CliRunner().invoke(app, ["plan", "--model", Q3N, "--system", "b200-hgx", "--gpus", "32", "--software",
                                      "25.11", "--precision", "mxfp8", "--layout", "mbs=2,recompute=selective",
                                      "-O", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    argv = json.loads((tmp_path / "p" / "plan.json").read_text())["megatron"]["args"]
    assert "--cuda-graph-impl" in argv, argv   # still graphed: over what it does not recompute
    assert "core_attn" in argv, argv
    scope = argv[argv.index("--cuda-graph-scope") + 1:argv.index("--cuda-graph-scope") + 4]
    modules = argv[argv.index("--recompute-modules") + 1:] if "--recompute-modules" in argv else []
    assert not ("attn" in scope and "core_attn" in modules[:1]), argv


def test_a_pinned_combination_is_refused_in_one_line_in_plan_tune_and_the_emitter(tmp_path):
    model = load_model(Q3N)
    why = graph_recompute_pin_refusal(model, "25.11", {"recompute": "selective", "cuda_graph": "layer",
                                                       "cuda_graph_scope": "attn"})
    assert why and "\n" not in why and "core_attn" in why and "1583-1624" in why, why
    assert graph_recompute_pin_refusal(model, "26.02", {"recompute": "selective", "cuda_graph": "layer"}) is None
    layout = ["--layout", "tp=1,pp=2,vp=1,ep=8,mbs=1,recompute=selective,cuda_graph=layer,cuda_graph_scope=attn"]
    common = ["--model", Q3N, "--system", "b200-hgx", "--gpus", "32", "--software", "25.11", "--precision", "mxfp8"]
    result = CliRunner().invoke(app, ["plan", *common, *layout, "-O", str(tmp_path / "p")], env={"COLUMNS": "400"})
    assert result.exit_code == 2 and "attn with core_attn recompute" in result.output, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1, result.output
    result = CliRunner().invoke(app, ["tune", *common, "--layout", "recompute=selective,cuda_graph=layer",
                                      "-O", str(tmp_path / "t")], env={"COLUMNS": "400"})
    assert result.exit_code == 2 and "attn with core_attn recompute" in result.output, result.output
    pinned = Layout.for_world(32, tp=1, pp=2, ep=8, etp=1, mbs=1, gbs=512, precision="mxfp8", recompute="selective",
                              cuda_graph="layer")
    with pytest.raises(CommbenchError, match="core_attn recompute"):
        megatron_args(pinned, model, release="25.11")
    assert "--cuda-graph-scope" in megatron_args(pinned, model, release="26.02")
