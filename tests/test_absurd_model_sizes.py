"""Model files of absurd size answer at once (fix-FL's fuzz: mtp_layers = 100,000 or layers = 1,000,000 kept `plan`
busy for over 120 s, one returning after 92 s with a correct 'no layout fits'): MTP depths beyond the decoder layers
and decoder layers beyond MAX_MODEL_LAYERS are refused in one line, and GPU counts whose HBM cannot hold the
optimizer state (memory_floor.py) are never searched, so a model that fits no count up to 65,536 says so before
any layout is built."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from commbench.costmodel import load_preset
from commbench.errors import CommbenchError
from commbench.planner import load_model
from commbench.planner.search import space
from commbench.planner.step.terms import CALIBRATED


@pytest.mark.parametrize("name, changes, field", [
    ("deepseek-v3", {"num_layers": 1_000_000}, "layers"),
    ("llama3-8b", {"num_layers": 10_000, "num_dense_layers": 10_000}, "layers"),
    ("deepseek-v3", {"num_mtp_layers": 100_000}, "mtp_layers"),
    ("mixtral-8x7b", {"num_mtp_layers": 33}, "mtp_layers"),
])
def test_absurd_depths_are_refused_in_one_line(name, changes, field):
    with pytest.raises(CommbenchError, match=rf"\.{field}=\d+ is invalid: \d") as err:
        replace(load_model(name), **changes)
    assert "\n" not in str(err.value)


def test_depths_up_to_the_bounds_stay_valid():
    assert replace(load_model("deepseek-v3"), num_layers=1024, num_mtp_layers=1024).num_layers == 1024
    assert replace(load_model("llama3.1-405b"), num_layers=1024, num_dense_layers=1024).num_layers == 1024


def _h100(num_gpus: int = 16):
    return load_preset("h100-hgx", num_gpus=num_gpus)


def _no_layouts(monkeypatch, tried: list[int]):
    """candidates() that records the GPU count it was asked for and builds nothing."""
    def refuse(req):
        tried.append(req.num_gpus)
        raise CommbenchError("no layouts built in this test")
    monkeypatch.setattr(space, "candidates", refuse)


def test_a_model_no_count_can_hold_is_refused_before_any_layout_is_built(monkeypatch):
    from commbench.planner.search.memory_floor import min_gpus_for_optimizer_state, trained_params

    huge = replace(load_model("llama3-8b"), num_layers=1024, num_dense_layers=1024, hidden=1_000_000,
                   dense_ffn=1_000_000)
    assert min_gpus_for_optimizer_state(huge, _h100().gpu, CALIBRATED, 0.015, "megatron") > 65_536
    tried: list[int] = []
    _no_layouts(monkeypatch, tried)
    with pytest.raises(CommbenchError, match="optimizer state alone .* needs at least [0-9,]+ GPUs") as err:
        space.search(space.SearchRequest(model=huge, fabric=_h100(), num_gpus=16, gbs=256))
    assert tried == [] and "\n" not in str(err.value) and "65,536" in str(err.value)


def test_counts_below_the_optimizer_state_floor_are_not_searched(monkeypatch):
    from commbench.planner.search.memory_floor import min_gpus_for_optimizer_state, trained_params

    model = replace(load_model("deepseek-v3"), num_layers=1024)   # ~11T parameters: ~1,800 H100s at least
    floor = min_gpus_for_optimizer_state(model, _h100().gpu, CALIBRATED, 0.015, "megatron")
    assert floor == math.ceil(12 * trained_params(model, "megatron")
                              / (_h100().gpu.usable_hbm_bytes * (1 - 0.015 - 0.05) - 4e9))
    assert 16 < floor < 65_536
    tried: list[int] = []
    _no_layouts(monkeypatch, tried)
    with pytest.raises(CommbenchError, match="nor on any count up to 65536"):
        space.search(space.SearchRequest(model=model, fabric=_h100(), num_gpus=16, gbs=256))
    assert tried and min(tried) >= floor


@pytest.mark.parametrize("name, published_gpus", [("deepseek-v3", 256), ("kimi-k2", 256), ("llama3.1-405b", 128)])
def test_large_published_models_lie_above_the_floor(name, published_gpus):
    """The floor is a necessary condition only: the zoo's largest models on the counts they are planned on pass it
    (DeepSeek-V3 ~683B trained parameters: 109 H100s' HBM for the optimizer state alone)."""
    from commbench.planner.search.memory_floor import min_gpus_for_optimizer_state

    assert min_gpus_for_optimizer_state(load_model(name), _h100().gpu, CALIBRATED, 0.015, "megatron") <= published_gpus
