"""One switch says what a search plans (SearchRequest.target): "launch", the Megatron-LM / TorchTitan launch commbench
emits (plan, tune), or "published", a published NVIDIA run or Megatron-Bridge recipe (benchmarks/vendor_layouts.py's
and calibration's rows). Both of its consequences follow from it:
- the cross entropy the memory charges (step/loss_memory.py): the launch's (for Megatron-LM the recipes' te where the
  release's Megatron-LM takes it, else megatron-core's native one: 26.06.01 on)
  or the one the published runs ran (Transformer Engine's: every Megatron-Bridge performance recipe sets it);
- what the release's Megatron-LM parse_args takes in no spelling (layout/release_flags.release_spelled_features:
  25.09's multi-module per-layer graph scopes and full-iteration graph, 25.09/25.11's activation offloading) is left
  out of a launch's search only: the published runs ran through Megatron-Bridge's Python configs, not pretrain_gpt.py
  flags, and ran those features at those releases (25.09 / 25.11 recipes with cuda_graph_scope attn+mlp, full
  iteration graphs, cpu offloading: commbench/data/recipes.json)."""

from __future__ import annotations

import dataclasses

import pytest

from commbench.costmodel import load_preset
from commbench.errors import CommbenchError
from commbench.planner import load_model
from commbench.planner.layout.recipe_model import recipe_model
from commbench.planner.layout.recipes import release_features
from commbench.planner.search.space import SearchRequest, best_for_pins


def _req(model="llama3-8b", system="gb200-nvl72", gpus=8, gbs=128, precision="bf16", software=None, **kw):
    return SearchRequest(model=load_model(model), fabric=load_preset(system, num_gpus=gpus), num_gpus=gpus, gbs=gbs,
                         precision=precision, seq_len=8192, software=software, **kw)


def test_the_loss_follows_the_target():
    launch = _req()
    assert launch.target == "launch" and launch.loss == "native"
    published = _req(target="published")
    assert published.loss == "te"
    # a request re-targeted by dataclasses.replace charges the new target's loss, not the old one's
    assert dataclasses.replace(launch, target="published").loss == "te"
    assert dataclasses.replace(published, target="launch").loss == "native"
    assert _req(software="26.04").loss == "te"   # its Megatron-LM takes te
    for target in ("launch", "published"):   # TorchTitan runs its own cross entropy either way
        assert _req(framework="torchtitan", target=target).loss == "torchtitan"


def test_an_unknown_target_is_one_line():
    with pytest.raises(CommbenchError, match=r"target='bridge' is invalid: .*launch.*published"):
        _req(target="bridge")


def test_the_launch_search_leaves_out_what_the_release_cannot_spell_and_the_published_search_keeps_it():
    """25.09 on GB200, Llama 3 8B: the release's recipes run per-layer graphs over attn + mlp (a multi-module scope
    core_v0.14.0's parse_args has no spelling for); 25.11's FSDP Llama 3 70B recipe offloads activations (no
    --cpu-offloading-num-layers before 26.02). The launch's search drops them, the published-run search keeps them."""
    for model, software, precision, key, value in (("llama3-8b", "25.09", "fp8", "cuda_graph", "layer"),
                                                   ("llama3.1-70b", "25.11", "fp8", "cpu_offload", True)):
        launch = _req(model=model, gpus=64 if model != "llama3-8b" else 8, software=software, precision=precision)
        has = release_features(software, launch.gpu_name, precision, recipe_model(launch.model),
                               launch.model.is_moe, launch.domain_size)
        assert value in has[key], (model, software, key)   # the release's recipes run it
        assert value not in launch.searched_features(has)[key]
        published = dataclasses.replace(launch, target="published")
        assert published.searched_features(has) == has


def test_a_published_25_09_structure_gets_the_graphs_its_release_ran():
    """vendor_layouts' 'structure, search's flags' reading of the 25.09 Llama 3 8B GB200 FP8 row (tp1 pp1 mbs2, per-layer
    graphs): the published-run search picks the per-layer graphs the run ran; the launch's cannot (no 25.09 spelling
    of the recipes' scope)."""
    pins = dict(tp=1, pp=1, vp=1, ep=1, cp=1, mbs=2)
    launch = _req(software="25.09", precision="fp8", pins=pins)
    assert best_for_pins(launch)[0].layout(0).cuda_graph == "none"
    assert best_for_pins(dataclasses.replace(launch, target="published"))[0].layout(0).cuda_graph == "layer"


def test_a_published_25_11_fsdp_structure_offloads_as_its_recipe_did():
    pins = dict(tp=1, pp=1, mbs=2, fsdp=True)
    launch = _req(model="llama3.1-70b", gpus=64, gbs=256, precision="fp8", software="25.11", pins=pins)
    assert best_for_pins(launch)[0].layout(0).cpu_offload_layers == 0
    assert best_for_pins(dataclasses.replace(launch, target="published"))[0].layout(0).cpu_offload_layers > 0
