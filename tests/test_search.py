"""Layout search: every returned layout is valid, fits, respects placement and pins; Pareto; bad input."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from commbench.costmodel import load_preset
from commbench.errors import CommbenchError
from commbench.planner import check_layout, evaluate_layouts, load_model
from commbench.planner.search.space import (SearchRequest, best_for_pins, pareto_front, parse_pins, rank_of, search,
                                            structure_codes, structure_key, structure_rank_of)


@functools.cache
def deepseek_256():
    model = load_model("deepseek-v3")
    fabric = load_preset("gb300-nvl72", num_gpus=256)
    return search(SearchRequest(model=model, fabric=fabric, num_gpus=256, gbs=4096, precision="mxfp8"))


def test_every_kept_layout_is_valid_fits_and_ranked():
    res = deepseek_256()
    bd = res.breakdown
    assert len(res) > 10 and res.num_fit <= res.num_valid <= res.num_enumerated
    for i in range(len(res)):
        check_layout(res.request.model, res.layouts.layout(i), 256)  # raises if a rule is broken
    assert bd.valid.all() and bd.fits.all()
    assert (bd.mem_total_bytes <= (1 - res.request.headroom_fraction) * bd.mem_capacity_bytes).all()   # the stated headroom
    assert (64 % res.layouts.tp == 0).all() and (64 % res.layouts.etp == 0).all()  # TP inside a rack
    tok = bd.tokens_per_s_per_gpu
    assert tok[0] == tok.max() and tok[0] == res.fitting_tokens_desc[0]
    assert rank_of(res, tok[0]) == 1 and rank_of(res, 0.0) == res.num_fit + 1


def test_structure_ranks_count_each_structure_once_at_its_best():
    res = deepseek_256()
    tok = res.breakdown.tokens_per_s_per_gpu
    structures = res.fitting_structures_desc
    assert structures[0] == res.fitting_tokens_desc[0] and np.all(np.diff(structures) <= 0)
    assert len(np.unique(structures)) <= len(structures) < res.num_fit
    kept = {structure_key(res.layouts, i) for i in range(len(res))}
    assert len(structures) >= len(kept)
    for i in range(len(res)):   # a kept layout never ranks worse among structures than among layouts
        assert 1 <= structure_rank_of(res, tok[i]) <= rank_of(res, tok[i])
    # The second-best structure's figure is below the best of the first structure's variants.
    first = structure_key(res.layouts, 0)
    other = next(i for i in range(len(res)) if structure_key(res.layouts, i) != first)
    assert structure_rank_of(res, tok[other]) == 2 < rank_of(res, tok[other]) or rank_of(res, tok[other]) == 2


def test_structure_codes_agree_across_arrays():
    res = deepseek_256()
    both = res.layouts.take(np.concatenate([np.arange(0, 6), np.arange(3, 9)]))
    codes = structure_codes(both)
    for i in range(12):
        for j in range(12):
            assert (codes[i] == codes[j]) == (structure_key(both, i) == structure_key(both, j))


def test_search_agrees_with_a_direct_evaluation():
    res = deepseek_256()
    again = evaluate_layouts(res.request.model, res.request.fabric, res.layouts.take(np.arange(3)))
    assert np.allclose(again.tokens_per_s_per_gpu, res.breakdown.tokens_per_s_per_gpu[:3])


def test_pareto_front_by_hand():
    tokens = np.array([10.0, 9.0, 8.0, 7.0, 9.5])
    room = np.array([1.0, 3.0, 2.0, 5.0, 0.5])
    assert pareto_front(tokens, room).tolist() == [0, 1, 3]


def test_pins_are_respected():
    model = load_model("deepseek-v3")
    fabric = load_preset("gb300-nvl72", num_gpus=256)
    res = search(SearchRequest(model=model, fabric=fabric, num_gpus=256, gbs=4096, precision="mxfp8",
                               pins=parse_pins("tp=1,ep=32,etp=1,recompute=selective")))
    assert (res.layouts.tp == 1).all() and (res.layouts.ep == 32).all() and (res.layouts.etp == 1).all()
    assert (res.layouts.recompute == 1).all()


def test_bad_input_is_one_clear_error():
    model = load_model("deepseek-v3")
    fabric = load_preset("gb300-nvl72", num_gpus=256)
    with pytest.raises(CommbenchError, match="ep=24 breaks rule"):
        search(SearchRequest(model=model, fabric=fabric, num_gpus=256, gbs=4096, pins=parse_pins("ep=24")))
    with pytest.raises(CommbenchError, match="tp_in_rack"):
        search(SearchRequest(model=model, fabric=fabric, num_gpus=256, gbs=4096, pins=parse_pins("tp=128")))
    small = load_preset("gb300-nvl72", num_gpus=8)
    with pytest.raises(CommbenchError, match="smallest GPU count where one fits is"):
        search(SearchRequest(model=model, fabric=small, num_gpus=8, gbs=4096, precision="mxfp8"))


def test_no_fit_names_the_global_batch_its_gpu_count_was_found_at():
    """The GPU count is searched at this request's gbs; a rerun on it without --gbs would take the default batch for
    that count (16 per GPU without a recipe), another question: the line names the batch and the rerun."""
    small = load_preset("gb300-nvl72", num_gpus=8)
    with pytest.raises(CommbenchError, match=r"smallest GPU count where one fits is (\d+) at gbs 4096 "
                                             r"\(rerun with --gpus \1 --gbs 4096\)"):
        search(SearchRequest(model=load_model("deepseek-v3"), fabric=small, num_gpus=8, gbs=4096, precision="mxfp8"))
    with pytest.raises(CommbenchError, match="--layout"):
        parse_pins("tp=1,nonsense=3")


def test_band_line_counts_layouts_and_structures_within_the_error():
    from commbench.planner.search.explain import band_lines
    from commbench.planner.step.terms import MODEL_GAIN_MEDIAN_ABS_ERROR
    res = deepseek_256()
    floor = res.fitting_tokens_desc[0] * (1.0 - MODEL_GAIN_MEDIAN_ABS_ERROR["moe"])
    tied = int(np.sum(res.fitting_tokens_desc >= floor))
    structures = int(np.sum(res.fitting_structures_desc >= floor))
    line = band_lines(res)[0]
    assert f"Band: {tied:,} fitting layouts ({structures:,} distinct" in line and structures <= tied
    # the band is stated as the model's error is, not rounded to a whole percent
    assert f"within {100 * MODEL_GAIN_MEDIAN_ABS_ERROR['moe']:.1f}% of the best" in line


@pytest.mark.parametrize("pins, rule", [("tp=1,pp=1,mbs=1,recompute=selective,recompute_layers=5", "recompute_layers"),
                                        ("tp=1,pp=2,mbs=1,cpu_offload_layers=4", "offload")])
def test_pinned_counts_that_break_a_flag_rule_are_refused_naming_it(pins, rule):
    """cpu_offload_layers and recompute_layers are only ever pinned; their rules depend on other flags
    (pp, recompute), so the search checks them on the flagged layouts and names the rule when none passes."""
    model = load_model("llama3-8b")
    fabric = load_preset("h100-hgx", num_gpus=8)
    with pytest.raises(CommbenchError, match=f"most often broken: {rule}"):
        search(SearchRequest(model=model, fabric=fabric, num_gpus=8, gbs=128, precision="fp8", pins=parse_pins(pins)))
    ok = search(SearchRequest(model=model, fabric=fabric, num_gpus=8, gbs=128, precision="fp8",
                              pins=parse_pins("tp=1,pp=1,mbs=1,recompute=full,recompute_layers=5")))
    assert (ok.layouts.recompute_layers == 5).all() and (ok.layouts.recompute == 2).all()


@pytest.mark.parametrize("pins", ["moe_a2a_overlap=true,recompute=full", "moe_a2a_overlap=true,pp=2,vp=1",
                                  "moe_a2a_overlap=true,ep=1"])
def test_a_pinned_ep_overlap_megatron_refuses_is_refused_naming_the_rule(pins):
    """A pinned moe_a2a_overlap=true was silently planned without it where Megatron refuses it (full recompute,
    pp > 1 without vp, no EP); with a pinned full-iteration graph the plan kept both and emitted no Megatron-LM
    arguments."""
    model = load_model("qwen3-30b-a3b")
    fabric = load_preset("b200-hgx", num_gpus=16)
    with pytest.raises(CommbenchError, match=r"moe_a2a_overlap=True is invalid: Megatron's --overlap-moe-expert-parallel"):
        search(SearchRequest(model=model, fabric=fabric, num_gpus=16, gbs=256, precision="fp8", pins=parse_pins(pins)))
    one = parse_pins("tp=1,pp=2,vp=1,ep=8,mbs=1,moe_a2a_overlap=true")   # one layout (plan --layout)
    with pytest.raises(CommbenchError, match="no layout with tp=1, pp=2, vp=1, ep=8, mbs=1 allows it"):
        best_for_pins(SearchRequest(model=model, fabric=fabric, num_gpus=16, gbs=256, precision="fp8", pins=one))
    kept = search(SearchRequest(model=model, fabric=fabric, num_gpus=16, gbs=256, precision="fp8",
                                pins=parse_pins("moe_a2a_overlap=true")))   # searched: every layout has it
    assert kept.layouts.moe_a2a_overlap.all()


def test_a_pinned_full_iteration_graph_of_a_moe_model_is_refused_in_one_line():
    """DeepSeek-V3 with cuda_graph=full pinned: the search chose the EP overlap beside it, a layout Megatron refuses
    (megatron-core: the full-iteration graph with --overlap-moe-expert-parallel-comm), so the plan had no arguments.
    megatron-core 0.16.1 cannot capture dropless MoE in a full-iteration graph at all (frameworks.py
    MEGATRON_NO_FULL_GRAPH_MOE): the pin, with or without the EP overlap, is refused in one line naming cuda_graph."""
    model = load_model("deepseek-v3")
    for pins in ("cuda_graph=full,mbs=1", "moe_a2a_overlap=true,cuda_graph=full"):
        with pytest.raises(CommbenchError, match=r"^cuda_graph='full' is invalid for deepseek-v3 with --framework "
                                                 r"megatron: .*cannot capture dropless MoE[^\n]*$"):
            search(SearchRequest(model=model, fabric=load_preset("gb200-nvl72", num_gpus=256), num_gpus=256, gbs=4096,
                                 precision="mxfp8", pins=parse_pins(pins), keep=5))


@pytest.mark.parametrize("pins, others", [("tp=1,tp_comm_overlap=true", "tp=1"),
                                          ("tp=2,sequence_parallel=false,tp_comm_overlap=true",
                                           "tp=2, sequence_parallel=False")])
def test_a_pinned_tp_overlap_megatron_refuses_is_refused(pins, others):
    """tp_comm_overlap=true with tp=1 or without sequence parallel was planned without it, unsaid; with tp not
    pinned the search planned tp=1 without it."""
    model, fabric = load_model("llama3-8b"), load_preset("h100-hgx", num_gpus=16)
    with pytest.raises(CommbenchError, match=f"tp_comm_overlap=True is invalid: .*no layout with {others} allows it"):
        search(SearchRequest(model=model, fabric=fabric, num_gpus=16, gbs=256, precision="fp8", pins=parse_pins(pins)))
    kept = search(SearchRequest(model=model, fabric=fabric, num_gpus=16, gbs=256, precision="fp8",
                                pins=parse_pins("tp_comm_overlap=true")))
    assert kept.layouts.tp_comm_overlap.all() and (kept.layouts.tp > 1).all()


def test_a_pinned_ep_overlap_beside_a_per_layer_mlp_graph_is_refused_naming_the_rule():
    """The EP overlap with a per-layer graph over the dense MLP (megatron-core 0.16.1 refuses the pair), on a model
    whose dense layers make the mlp scope itself valid (Moonlight: its first layer is dense)."""
    from pathlib import Path

    model = load_model(f"hf:{Path(__file__).parent / 'data' / 'hf' / 'Moonlight-16B-A3B'}")
    assert model.num_dense_layers > 0
    fabric = load_preset("b200-hgx", num_gpus=16)
    pins = parse_pins("moe_a2a_overlap=true,cuda_graph=layer,cuda_graph_scope=attn+mlp")
    with pytest.raises(CommbenchError, match=r"moe_a2a_overlap=True is invalid: Megatron's --overlap-moe-expert-parallel"):
        search(SearchRequest(model=model, fabric=fabric, num_gpus=16, gbs=256, precision="fp8", pins=pins))
