"""bench's title for moe_all_to_all left out the routing seed (probe PE): --seed 0 and --seed 1 printed the same
title (terminal, --format markdown, the nccl-tests banner) though their routed sizes differed. The title names the
seed where the routing draws from it; a trace's replay draws nothing, so its records hold seed null (was 0)."""

from __future__ import annotations

import numpy as np

from commbench.moe.params import MoeParams, non_default
from commbench.results.importers.moe_banner import parse_moe_banner
from commbench.results.nccl_tests_text import point_value, point_value_text
from commbench.results.render import run_title

LAYER = dict(tokens_per_rank=8, hidden=64, top_k=2, num_experts=4, dispatch_mode="per-expert",
             dispatch_dtype="bf16", combine_dtype="bf16")


def test_seeds_apart_have_titles_apart():
    titles = {seed: run_title("moe_all_to_all", 2, MoeParams(**LAYER, routing="zipf:1.2", seed=seed).as_params())
              for seed in (0, 1)}
    assert titles[0] != titles[1]
    assert "zipf:1.2 routing (seed 1), per-expert dispatch" in titles[1], titles[1]


def test_a_trace_records_no_seed_and_its_title_names_none(tmp_path):
    trace = tmp_path / "t.npy"
    np.save(trace, np.array([[0, 1], [2, 3]] * 8, dtype=np.int64))
    params = MoeParams(**LAYER, routing=f"trace:{trace}", seed=0).as_params()
    assert params["seed"] is None
    assert "(seed" not in run_title("moe_all_to_all", 2, params)
    assert "seed" not in non_default(params)   # a report label names no 'seed None'
    assert point_value("seed", point_value_text(params["seed"])) is None   # the text's point line reads back


def test_the_banner_with_its_seed_reads_back():
    body = ("tokens per rank: 8 (hidden 64, 4 experts, top-2, uniform routing (seed 3), per-expert dispatch in bf16, "
            "combine in bf16; size: the busiest rank's dispatch bytes)")
    layer = parse_moe_banner(body)
    assert layer["routing"] == "uniform" and layer["seed"] == 3 and layer["dispatch_mode"] == "per-expert", layer
