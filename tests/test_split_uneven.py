"""probe M finding 4: `plan --model nemotron-3-nano-30b-a3b --layout pp=8` was refused ("8 virtual stages cannot each
hold a layer ...") though megatron-core builds 52 layers over pp=8 with first/last-stage counts (5 + 6 x 7 + 5): the
split search tried only first/last counts within a step or two of the middle ranks'. It now weighs every pair
TransformerConfig accepts, and a hybrid with no split says why (MambaStack gives every rank a layer)."""

from __future__ import annotations

import dataclasses
import warnings

import pytest

from commbench.errors import CommbenchError
from commbench.planner import load_model
from commbench.planner.layout.split import PipelineSplit, _with_ends, best_split, choose_split, stage_weights

NANO = load_model("nemotron-3-nano-30b-a3b")   # 52 layers, hybrid


def _accepted_by_megatron(num_layers: int, pp: int, vp: int) -> set:
    """Every (first, last) megatron-core's TransformerConfig accepts, by trying them all, that leaves the middle ranks
    no negative share (TransformerConfig passes first + last > num_layers when there are middle ranks: its check is
    bool(remaining layers) == bool(middle ranks), and a negative remainder is truthy; nothing builds from it)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("megatron.core")
    from megatron.core.transformer.transformer_config import TransformerConfig
    out = set()
    for first in [None, *range(0, num_layers + 2)]:
        for last in [None, *range(0, num_layers + 2)]:
            if first is None and last is None:
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    TransformerConfig(num_layers=num_layers, hidden_size=64, num_attention_heads=4,
                                      pipeline_model_parallel_size=pp, pipeline_dtype=torch.bfloat16,
                                      virtual_pipeline_model_parallel_size=vp if vp > 1 else None,
                                      num_layers_in_first_pipeline_stage=first, num_layers_in_last_pipeline_stage=last)
            except (ValueError, AssertionError):
                continue
            if (first or 0) + (last or 0) <= num_layers:
                out.add((first, last))
    return out


@pytest.mark.parametrize("num_layers,pp,vp", [(52, 8, 1), (20, 4, 2), (13, 3, 1), (9, 2, 3)])
def test_uneven_pairs_are_every_pair_megatron_accepts(num_layers, pp, vp):
    from commbench.planner.layout.split import uneven_pairs
    assert set(uneven_pairs(num_layers, pp, vp)) == _accepted_by_megatron(num_layers, pp, vp)


def test_nano_pp8_builds_and_the_mamba_stack_slices_it_so():
    split = choose_split(NANO, 8, 1)
    assert split.method in ("even", "uneven") and sum(split.decoder_layers()) == 52 and all(split.decoder_layers())
    mid = split.decoder_layers()[1:-1]
    assert len(set(mid)) == 1                                    # equal middle ranks, as MambaStack slices them


@pytest.mark.parametrize("model,pp,vp", [(NANO, 3, 1), (NANO, 8, 1), (NANO, 16, 1),
                                         (load_model("qwen3-next-80b-a3b"), 6, 3), (load_model("llama3-8b"), 5, 1)])
def test_the_chosen_uneven_split_is_the_lightest_of_every_accepted_pair(model, pp, vp):
    """The vectorised weighing (_uneven) picks what weighing each pair's PipelineSplit one by one picks."""
    from commbench.planner.layout.split import _uneven, uneven_pairs
    w = stage_weights(model)

    def split_of(first, last):
        middle = pp - (first is not None) - (last is not None)
        rest = model.num_layers - (first or 0) - (last or 0)
        ranks = [rest // middle if middle else 0] * pp
        ranks[0] = ranks[0] if first is None else first
        ranks[-1] = ranks[-1] if last is None else last
        stages = _with_ends([ranks[s % pp] // vp for s in range(pp * vp)], model.num_mtp_layers)
        return PipelineSplit(pp=pp, vp=vp, method="uneven", stages=stages, first_stage_layers=first,
                             last_stage_layers=last)

    def key(s):
        ranks = s.rank_costs(w)
        return round(max(ranks), 6), round(max(w.stage_costs(s.stages)), 6), round(sum(c * c for c in ranks), 6)

    lightest = min(key(split_of(f, la)) for f, la in uneven_pairs(model.num_layers, pp, vp))
    (chosen,) = _uneven(model, pp, vp)
    assert key(chosen) == lightest


def test_a_hybrid_with_more_ranks_than_layers_says_why():
    tiny = dataclasses.replace(NANO, name="tiny-hybrid", layer_pattern=NANO.layer_pattern[:6], num_layers=6)
    assert best_split(tiny, 6, 1) is not None
    with pytest.raises(CommbenchError, match=r"MambaStack gives each of the 7 pipeline ranks at least one of the 6"):
        choose_split(tiny, 7, 1)
