"""Per-layer CUDA graphs over a biased attention with delayed wgrad, as a release's Megatron-LM validate_args takes them
(search/wgrad_graph.py).

Found from outside (probe DE F1): `plan --model gpt-oss-120b --system gb300-nvl72 --gpus 64 --precision mxfp8` (default
release 26.08, Megatron-LM cd4afffa6484) wrote --overlap-moe-expert-parallel-comm --delay-wgrad-compute with
--cuda-graph-impl transformer_engine --cuda-graph-scope attn ..., which that release's validate_args refuses for
gpt-oss's attention biases ("CUDA graph with delay_wgrad_compute doesn't support attn bias for now.", arguments.py
:1829; added by Megatron-LM 1934391a95, first in megatron-core 0.17.0; core_v0.16.1 takes it)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.planner import Layout, load_model
from commbench.planner.emit.megatron import megatron_args, precision_notes
from commbench.planner.layout.graph_scope import scope_mask
from commbench.planner.layout.spec import CODE_FIELDS
from commbench.planner.search.wgrad_graph import wgrad_graph_pin_refusal, wgrad_graph_refused

HF_QWEN2_MOE = f"hf:{Path(__file__).parent / 'data' / 'hf' / 'Qwen2-57B-A14B'}"   # qkv biases and shared experts
LAYER = CODE_FIELDS["cuda_graph"].index("layer")


def _refused(model, release, *, scope="", overlap=True, ep=8, dp_overlap=True, graph=LAYER):
    return bool(wgrad_graph_refused(load_model(model), release, np.array([graph]), np.array([scope_mask(scope)]),
                                    np.array([overlap]), np.array([ep]), np.array([dp_overlap]))[0])


def test_the_rule_mirrors_each_condition_of_the_validate_args_block():
    assert _refused("gpt-oss-120b", "26.08")                                # add_bias_linear, recipes' scope (attn)
    assert _refused(HF_QWEN2_MOE, "26.04") and _refused(HF_QWEN2_MOE, "26.06.01")   # add_qkv_bias, core 0.17 / 0.18
    assert not _refused(HF_QWEN2_MOE, "26.02.01")                           # core_v0.16.1: no such check
    assert not _refused("qwen3-30b-a3b", "26.08")                           # no bias
    assert not _refused("gpt-oss-120b", "26.08", scope="moe_router+moe_preprocess")   # attn not graphed
    assert not _refused("gpt-oss-120b", "26.08", scope="layer")             # an empty scope lists no module
    assert not _refused("gpt-oss-120b", "26.08", overlap=False)             # no --delay-wgrad-compute
    assert not _refused("gpt-oss-120b", "26.08", ep=1)                      # the emitter writes no EP overlap
    assert not _refused("gpt-oss-120b", "26.08", dp_overlap=False)          # no --overlap-grad-reduce
    assert not _refused("gpt-oss-120b", "26.08", graph=CODE_FIELDS["cuda_graph"].index("none"))


def test_a_pin_of_the_combination_is_refused_in_one_line_and_the_emitter_refuses_it():
    model = load_model("gpt-oss-120b")
    pins = {"moe_a2a_overlap": True, "cuda_graph": "layer"}
    why = wgrad_graph_pin_refusal(model, "26.08", pins)
    assert why and "\n" not in why and "doesn't support attn bias" in why and "1934391a95" in why, why
    assert wgrad_graph_pin_refusal(model, "26.08", dict(pins, cuda_graph_scope="moe_router")) is None
    assert wgrad_graph_pin_refusal(model, "26.08", dict(pins, dp_overlap=False)) is None
    result = CliRunner().invoke(app, ["plan", "--model", "gpt-oss-120b", "--system", "gb300-nvl72", "--gpus", "64",
                                      "--precision", "mxfp8", "--layout",
                                      "tp=1,pp=1,ep=32,mbs=4,moe_a2a_overlap=true,cuda_graph=layer"])
    assert result.exit_code == 2 and "doesn't support attn bias" in result.output, result.output
    assert "Traceback" not in result.output
    layout = Layout.for_world(64, tp=1, pp=1, ep=32, etp=1, mbs=4, gbs=1280, precision="mxfp8", cuda_graph="layer",
                              moe_a2a_overlap=True)
    with pytest.raises(CommbenchError, match="attn bias"):
        megatron_args(layout, model, release="26.08")


def test_the_26_08_gpt_oss_plan_writes_no_graph_over_its_biased_attention_with_delayed_wgrad(tmp_path):
    result = CliRunner().invoke(app, ["plan", "--model", "gpt-oss-120b", "--system", "gb300-nvl72", "--gpus", "64",
                                      "--precision", "mxfp8", "-O", str(tmp_path / "p")], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "p" / "plan.json").read_text())
    argv = doc["megatron"]["args"]
    scope = argv[argv.index("--cuda-graph-scope") + 1:] if "--cuda-graph-scope" in argv else []
    graphed_attn = "--cuda-graph-impl" in argv and "attn" in scope[:3]
    assert not ("--delay-wgrad-compute" in argv and "--overlap-grad-reduce" in argv and graphed_attn), argv


def test_the_te_note_names_2_12_where_the_block_holds_a_delayed_wgrad_in_the_graph():
    model = load_model(HF_QWEN2_MOE)   # shared experts: the moe_router scope holds a delayed wgrad too
    layout = Layout.for_world(64, tp=1, pp=1, ep=8, etp=1, mbs=1, gbs=512, cuda_graph="layer",
                              cuda_graph_scope="moe_router+moe_preprocess", moe_a2a_overlap=True)
    (te,) = [n for n in precision_notes(layout, model, "26.08") if "Transformer Engine" in n]
    assert ">= 2.12" in te and "gradient accumulation fusion" in te, te
    (te,) = [n for n in precision_notes(layout, model, "26.02.01") if "Transformer Engine" in n]
    assert ">= 2.10" in te and ">= 2.12" not in te, te   # its container's 2.12.0 is named beside it


def test_the_pin_refusal_is_the_rule_on_the_pins_row_and_framework_pins_makes_it_for_a_launch():
    """One rule (wgrad_graph_refused on the pins' one row, unpinned dp_overlap / ep at the values it refuses), one call
    site (framework_pins, for the launch; a published run's target is not launched)."""
    from commbench.planner.search.frameworks import framework_pins
    for name, release in (("gpt-oss-120b", "26.08"), (HF_QWEN2_MOE, "26.04"), (HF_QWEN2_MOE, "26.02.01"),
                          ("qwen3-30b-a3b", "26.08")):
        model = load_model(name)
        for scope in ("", "attn", "moe_router+moe_preprocess", "layer"):
            for ep in (1, 8):
                for dp_overlap in (False, True):
                    pins = {"moe_a2a_overlap": True, "cuda_graph": "layer", "cuda_graph_scope": scope, "ep": ep,
                            "dp_overlap": dp_overlap}
                    assert (wgrad_graph_pin_refusal(model, release, pins) is not None) == _refused(
                        name, release, scope=scope, ep=ep, dp_overlap=dp_overlap), (name, release, pins)
    model = load_model("gpt-oss-120b")
    pins = {"moe_a2a_overlap": True, "cuda_graph": "layer"}
    with pytest.raises(CommbenchError, match="attn bias"):
        framework_pins("megatron", model, pins, release="26.08")
    assert framework_pins("megatron", model, pins, release="26.08", launch=False) == pins
    assert framework_pins("megatron", model, dict(pins, dp_overlap=False), release="26.08")["dp_overlap"] is False
