"""A whole-layer per-layer CUDA graph (cuda_graph=layer, cuda_graph_scope=layer: Megatron's TE graphs with no
--cuda-graph-scope) with the EP all-to-all overlap: megatron-core 0.16.1's TransformerConfig refuses the overlap with a
moe or mlp scope, and an empty scope slips past that check, but TransformerLayer._te_cuda_graph_replay (which the
overlap's combined 1F1B attention callable calls) asserts "EP overlap must be disabled when CUDA graph captures the
whole MLP/MoE part" for it. The plan emitted both (found by an outside probe); now the search keeps the overlap off
there, a pin of both is refused in one line, and the emitter refuses such a layout."""

from __future__ import annotations

import inspect

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.errors import CommbenchError
from commbench.planner import Layout, load_model
from commbench.planner.emit.megatron import megatron_args
from commbench.planner.search.space import SearchRequest, search

PINS = dict(tp=1, pp=2, vp=2, ep=8, mbs=1, recompute="selective", cuda_graph="layer", cuda_graph_scope="layer")


def test_megatron_core_asserts_the_overlap_off_under_a_whole_layer_graph():
    pytest.importorskip("megatron.core")
    from megatron.core.models.gpt import fine_grained_callables
    from megatron.core.transformer.transformer_layer import TransformerLayer
    replay = inspect.getsource(TransformerLayer._te_cuda_graph_replay)
    assert "not self.config.cuda_graph_scope" in replay and "EP overlap must be" in replay
    assert "layer._te_cuda_graph_replay" in inspect.getsource(fine_grained_callables.build_transformer_layer_callables)


def test_a_whole_layer_graph_plan_keeps_the_ep_overlap_off():
    model, gpus = load_model("qwen3-30b-a3b"), 32
    fabric = load_preset("gb300-nvl72", num_gpus=gpus)
    res = search(SearchRequest(model=model, fabric=fabric, num_gpus=gpus, gbs=256, precision="mxfp8", pins=PINS, keep=5))
    assert len(res.layouts) and not res.layouts.moe_a2a_overlap.any()
    assert "--overlap-moe-expert-parallel-comm" not in megatron_args(res.layouts.layout(0), model)
    # with the recipes' scope the overlap stays on (this is what the whole layer changes)
    other = dict(PINS, cuda_graph_scope="")
    res = search(SearchRequest(model=model, fabric=fabric, num_gpus=gpus, gbs=256, precision="mxfp8", pins=other, keep=5))
    assert res.layouts.moe_a2a_overlap.all()


def test_pinning_both_is_refused_in_one_line(tmp_path):
    layout = ",".join(f"{k}={v}" for k, v in PINS.items()) + ",moe_a2a_overlap=true"
    out = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "gb300-nvl72", "--gpus", "32",
                                   "--layout", layout, "--top", "1", "-O", str(tmp_path)], env={"COLUMNS": "200"})
    assert out.exit_code == 2 and len(out.output.strip().splitlines()) == 1, out.output
    assert out.output.startswith("error: moe_a2a_overlap=True is invalid: ") and "the whole layer" in out.output


def test_the_emitter_refuses_the_pair():
    lay = Layout.for_world(32, tp=1, pp=2, vp=2, ep=8, etp=1, mbs=1, gbs=256, recompute="selective",
                           cuda_graph="layer", cuda_graph_scope="layer", moe_a2a_overlap=True)
    with pytest.raises(CommbenchError, match=r"no per-layer CUDA graph over moe, mlp or the whole layer"):
        megatron_args(lay, load_model("qwen3-30b-a3b"))
