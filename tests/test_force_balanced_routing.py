"""Published "force-balanced" MoE runs route at random (Megatron's random router logits), not in exact balance:
the step model prices their busiest EP rank at the expected maximum of uniform random top-k (step/random_routing.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from commbench.planner import LayoutArrays, evaluate_layouts, load_model
from commbench.planner.step.random_routing import expected_max_std_normal, force_balanced_imbalance


def test_expected_max_of_standard_normals_matches_the_closed_forms():
    assert expected_max_std_normal(1) == 0.0
    assert expected_max_std_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-6)
    assert expected_max_std_normal(3) == pytest.approx(1.5 / math.sqrt(math.pi), rel=1e-6)


def test_busiest_rank_matches_a_monte_carlo_of_random_logit_routing():
    tokens_rank, ep, experts, top_k = 256, 8, 32, 4
    rng = np.random.default_rng(0)
    ratios = []
    for _ in range(400):   # RandomSTE: normal logits, then top-k
        logits = rng.standard_normal((tokens_rank * ep, experts))
        picked = np.argpartition(logits, -top_k, axis=1)[:, -top_k:]
        counts = np.bincount((picked // (experts // ep)).ravel(), minlength=ep)
        ratios.append(counts.max() / counts.mean())
    predicted = float(force_balanced_imbalance(np.array([tokens_rank]), np.array([ep]), experts, top_k)[0])
    assert predicted - 1 == pytest.approx(np.mean(ratios) - 1, rel=0.1)
    assert force_balanced_imbalance(np.array([4096]), np.array([1]), 256, 8)[0] == 1.0


def test_a_force_balanced_run_is_slower_than_exact_balance_at_its_tokens_per_rank():
    """DeepSeek-V3 at EP64 with 4096 tokens per rank: the busiest rank gets ~1.3% more (Monte Carlo 1.013)."""
    from commbench.costmodel import load_preset
    from commbench.planner import parse_layout

    assert force_balanced_imbalance(np.array([4096]), np.array([64]), 256, 8)[0] == pytest.approx(1.013, abs=0.002)
    model, fabric = load_model("deepseek-v3"), load_preset("gb300-nvl72", num_gpus=256)
    layout = parse_layout("tp=1,pp=4,vp=4,ep=64,mbs=1,gbs=4096,precision=mxfp8,dispatcher=flex", num_gpus=256)
    arrays = LayoutArrays.from_layouts([layout, layout])
    exact = evaluate_layouts(model, fabric, arrays)
    forced = evaluate_layouts(model, fabric, arrays, force_balanced_routing=True)
    assert np.all(forced.ep_total_s > exact.ep_total_s)
    assert np.all(forced.step_s > exact.step_s)


def test_published_rows_route_force_balanced_and_a_users_run_does_not():
    from commbench.planner.calibrate.published import forced_routing
    assert forced_routing({"release": "26.02"}) and forced_routing({})
    assert not forced_routing({"release": "user"})


def test_the_search_for_a_published_run_prices_its_random_routing_and_a_launch_does_not():
    from commbench.costmodel import load_preset
    from commbench.planner.search.space import SearchRequest
    fabric = load_preset("gb300-nvl72", num_gpus=256)
    base = dict(model=load_model("deepseek-v3"), fabric=fabric, num_gpus=256, gbs=4096, precision="mxfp8")
    assert SearchRequest(**base, target="published").force_balanced_routing
    assert not SearchRequest(**base).force_balanced_routing
    assert not SearchRequest(**base, target="published", moe_imbalance=1.5).force_balanced_routing
