"""A whole-layer per-layer CUDA graph (cuda_graph=layer, cuda_graph_scope=layer: Megatron's TE graphs with no
--cuda-graph-scope) on a MoE model.

With the EP all-to-all overlap megatron-core 0.16.1's TransformerConfig refuses a moe or mlp scope, and an empty
scope slips past that check, but TransformerLayer._te_cuda_graph_replay (which the overlap's combined 1F1B attention
callable calls) asserts "EP overlap must be disabled when CUDA graph captures the whole MLP/MoE part" for it. The
plan emitted both (found by an outside probe).

More generally a whole-layer graph captures each MoE layer's dispatch and experts (cuda_graphs.py
_layer_is_graphable graphs every layer with an empty scope), which dropless MoE cannot be captured in (Megatron-LM
core_v0.16.1 megatron/core/transformer/moe/README.md: without --moe-expert-capacity-factor and
--moe-pad-expert-input-to-capacity "the resulting dynamic shapes make MoE layers uncapturable"; NVIDIA/Megatron-LM
#1598), as the explicit 'moe' scope is refused for (TransformerConfig: "moe cuda graph is only supported with
drop-padding MoE"), and no plan pads to capacity. So the whole layer is refused on a MoE model as 'moe' is, by one
rule (frameworks.megatron_graph_scope_refusal), whose message no longer recommends 'layer' there (found by an outside
probe: it did, and the plan emitted a whole-layer graph over dropless MoE)."""

from __future__ import annotations

import inspect

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.errors import CommbenchError
from commbench.planner import Layout, load_model
from commbench.planner.emit.megatron import megatron_args
from commbench.planner.search.space import SearchRequest

PINS = dict(tp=1, pp=2, vp=2, ep=8, mbs=1, recompute="selective", cuda_graph="layer", cuda_graph_scope="layer")


def test_megatron_core_asserts_the_overlap_off_under_a_whole_layer_graph():
    pytest.importorskip("megatron.core")
    from megatron.core.models.gpt import fine_grained_callables
    from megatron.core.transformer.cuda_graphs import _layer_is_graphable
    from megatron.core.transformer.transformer_config import TransformerConfig
    from megatron.core.transformer.transformer_layer import TransformerLayer
    replay = inspect.getsource(TransformerLayer._te_cuda_graph_replay)
    assert "not self.config.cuda_graph_scope" in replay and "EP overlap must be" in replay
    assert "layer._te_cuda_graph_replay" in inspect.getsource(fine_grained_callables.build_transformer_layer_callables)
    # an empty scope graphs every layer, MoE included; TransformerConfig refuses only the explicit moe scope
    assert "if not config.cuda_graph_scope:\n        return True" in inspect.getsource(_layer_is_graphable)
    assert "moe cuda graph is only supported with drop-padding MoE" in inspect.getsource(TransformerConfig)


@pytest.mark.parametrize("name, gpus, system", [("qwen3-30b-a3b", 8, "b200-hgx"),
                                                ("nemotron-3-nano-30b-a3b", 8, "gb200-nvl72")])
def test_a_whole_layer_graph_on_a_dropless_moe_model_is_refused_as_moe_is(name, gpus, system, tmp_path):
    for scope in ("layer", "moe"):
        out = CliRunner().invoke(app, ["plan", "--model", name, "--system", system, "--gpus", str(gpus),
                                       "--layout", f"tp=1,pp=1,ep=8,mbs=1,cuda_graph=layer,cuda_graph_scope={scope}",
                                       "-O", str(tmp_path)], env={"COLUMNS": "200"})
        assert out.exit_code == 2 and len(out.output.strip().splitlines()) == 1, out.output
        assert out.output.startswith(f"error: cuda_graph_scope={scope!r} is invalid for {name}: "), out.output
        assert "dropless" in out.output and "Traceback" not in out.output
        # the way out it names is not itself refused: the recipes' scope or modules, never the whole layer
        assert "'layer'" not in out.output.split(". Use ", 1)[1] and "moe_router" in out.output
        assert not (tmp_path / "megatron_args.txt").exists()


def test_the_search_and_the_emitter_refuse_it_and_the_ep_overlap_pair():
    model = load_model("qwen3-30b-a3b")
    with pytest.raises(CommbenchError, match=r"^cuda_graph_scope='layer' is invalid for qwen3-30b-a3b: .*dropless"):
        SearchRequest(model=model, fabric=load_preset("gb300-nvl72", num_gpus=32), num_gpus=32, gbs=256,
                      precision="mxfp8", pins=PINS)
    for overlap in (False, True):
        lay = Layout.for_world(32, tp=1, pp=2, vp=2, ep=8, etp=1, mbs=1, gbs=256, recompute="selective",
                               cuda_graph="layer", cuda_graph_scope="layer", moe_a2a_overlap=overlap)
        with pytest.raises(CommbenchError, match=r"dropless"):
            megatron_args(lay, model)


def test_a_dense_model_keeps_its_whole_layer_graph():
    lay = Layout.for_world(8, tp=2, pp=1, mbs=1, gbs=128, cuda_graph="layer", cuda_graph_scope="layer")
    args = megatron_args(lay, load_model("llama3-8b"))
    assert args[args.index("--cuda-graph-impl") + 1] == "transformer_engine" and "--cuda-graph-scope" not in args
