"""Megatron-FSDP on a MoE model, per release (search/frameworks.py MEGATRON_FSDP_EXPERT_PARALLEL_CORE): megatron-core
0.14 (release 25.09) builds no expert mesh for Megatron-FSDP, so its FSDP layouts of a MoE model run at EP 1 only."""

from __future__ import annotations

import numpy as np
import pytest

from commbench.costmodel import load_preset
from commbench.errors import CommbenchError
from commbench.planner import load_model
from commbench.planner.search.candidates import candidates
from commbench.planner.search.frameworks import megatron_fsdp_runs_expert_parallel
from commbench.planner.search.space import SearchRequest


def _req(software, **pins):
    return SearchRequest(model=load_model("qwen3-30b-a3b"), fabric=load_preset("h100-hgx", num_gpus=16), num_gpus=16,
                         gbs=256, precision="fp8", software=software, pins=pins)


def test_release_25_09_offers_megatron_fsdp_on_a_moe_model_at_ep1_only():
    assert not megatron_fsdp_runs_expert_parallel("megatron", "25.09")
    assert megatron_fsdp_runs_expert_parallel("megatron", "25.11")
    assert megatron_fsdp_runs_expert_parallel("torchtitan", "25.09")
    old, _, _ = candidates(_req("25.09"))
    new, _, _ = candidates(_req("26.02"))
    assert old.fsdp.any() and set(np.unique(old.ep[old.fsdp]).tolist()) == {1}
    assert (new.ep[new.fsdp] > 1).any()
    # the distributed-optimizer rows at EP > 1 are searched at 25.09 as before
    assert (old.ep[~old.fsdp] > 1).any()


def test_pinned_fsdp_at_ep8_on_release_25_09_is_one_line_naming_the_rule():
    with pytest.raises(CommbenchError) as err:
        candidates(_req("25.09", fsdp=True, ep=8))
    text = str(err.value)
    assert "\n" not in text and "fsdp=true" in text and "25.09" in text and "0.14" in text
    pinned, _, _ = candidates(_req("25.09", fsdp=True))   # ep left to the search: EP 1 rows
    assert pinned.fsdp.all() and set(np.unique(pinned.ep).tolist()) == {1}
