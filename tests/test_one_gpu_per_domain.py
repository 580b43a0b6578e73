"""A profile fitted with one rank per domain (a 1-GPU-per-node cluster, `ranks_per_rack = 1`) plans: its curves are
all scale_out, every pair of ranks spans two domains, and a group of one rank needs no curve."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from commbench.costmodel import collective_time_s, load_preset
from commbench.planner import load_model
from commbench.planner.layout.placement import pair_domains
from commbench.planner.search.space import SearchRequest, parse_pins, search


@functools.cache
def one_gpu_per_domain(num_gpus: int):
    """What `fit` makes of a ranks_per_rack = 1 sweep: domain_size 1, scale_out curves alone, no NCCL structure."""
    preset = load_preset("h100-hgx", num_gpus=num_gpus)
    return dataclasses.replace(preset, name="one-gpu-per-node", domain_size=1, nccl=None,
                               curves=tuple(c for c in preset.curves if c.tier == "scale_out"))


def test_a_pair_of_ranks_spans_two_domains_of_one_gpu():
    assert pair_domains(np.array([False, True]), 1).tolist() == [2, 2]
    assert pair_domains(np.array([False, True]), 8).tolist() == [1, 2]


def test_a_group_of_one_rank_costs_nothing_without_an_in_domain_curve():
    fabric = one_gpu_per_domain(4)
    times = collective_time_s(fabric, "reduce_scatter", np.array([1e6, 1e6]), np.array([1, 2]), np.array([1, 2]))
    assert times[0] == 0.0 and times[1] > 0.0


@pytest.mark.parametrize("pins", ["", "cp=2", "pp=2", "cp=2,pp=2"])
def test_a_one_gpu_per_domain_profile_plans(pins):
    """It stopped on 'group_size=2 is invalid: a group on one domain holds at most 1 ranks' (the CP ring's and the
    pipeline's pairs put on one domain where the row's own group was 1), then on 'reduce_scatter has no scale_up
    curve' (DP = 1 rows)."""
    res = search(SearchRequest(model=load_model("llama3-8b"), fabric=one_gpu_per_domain(4), num_gpus=4, gbs=32,
                               precision="fp8", pins=parse_pins(pins) if pins else {}))
    assert len(res) > 0
    best = res.layouts.layout(0)
    for key, value in (parse_pins(pins) if pins else {}).items():
        assert getattr(best, key) == value
    assert np.isfinite(res.breakdown.step_s).all() and (res.breakdown.step_s > 0).all()


def test_its_sensitivity_names_no_scale_up_bandwidth():
    """'With half the scale-up (NVLink) bandwidth, the plan stays best (+0.0%)' on a fabric with no NVLink."""
    from commbench.planner.search.explain import sensitivity

    res = search(SearchRequest(model=load_model("llama3-8b"), fabric=one_gpu_per_domain(4), num_gpus=4, gbs=32,
                               precision="fp8"))
    scenarios = [row["scenario"] for row in sensitivity(res)]
    assert scenarios and not any("scale-up" in s for s in scenarios) and any("scale-out" in s for s in scenarios)
