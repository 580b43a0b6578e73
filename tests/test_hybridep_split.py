"""HybridEP (the flex dispatcher's backend on NVL72 racks) needs each EP group to hold the same number of ranks in
every NVLink domain it spans: DeepEP's hybrid-ep asserts group_size % ranks_per_domain == 0 (deep_ep/
hybrid_ep_buffer.py:76 at eb9cee7). Probe P9: the default plan for DeepSeek-V3 on 288 GB200 was HybridEP EP32 with
groups split 8 + 24 over racks, a launch that stops at the first dispatch."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.search.hybridep_split import uneven_split


@pytest.mark.parametrize("ep, etp, per_rack, gpus, split", [
    (32, 1, 72, 288, (8, 24)),     # probe P9: DeepSeek-V3 on 4 GB200 racks
    (96, 1, 72, 576, (72, 24)),    # Kimi-K2 tp=2,pp=3,ep=96 on 8 GB300 racks
    (64, 1, 72, 1152, (8, 56)),
    (16, 1, 72, 288, None),        # 8 + 8 where a group straddles
    (128, 1, 64, 256, None),       # 64 + 64
    (8, 1, 72, 288, None),         # inside one rack
    (1, 1, 72, 288, None),         # no EP
    (32, 2, 72, 288, (4, 28)),     # ETP2: the EP group is every 2nd rank of 64
])
def test_the_split_is_each_domains_count_of_the_first_uneven_group(ep, etp, per_rack, gpus, split):
    assert uneven_split(ep, etp, per_rack, gpus) == split


def _plan(*args: str):
    return CliRunner().invoke(app, ["plan", *args])


def test_the_default_hybridep_plan_splits_every_ep_group_evenly_over_racks(tmp_path):
    result = _plan("--model", "deepseek-v3", "--system", "gb200-nvl72", "--gpus", "288", "-O", str(tmp_path))
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert "hybridep" in (tmp_path / "megatron_args.txt").read_text()
    per_rack = 72
    for group in doc["placement"]["groups"]["ep"]:
        counts = set(Counter(rank // per_rack for rank in group).values())
        assert len(counts) == 1, (len(group), Counter(rank // per_rack for rank in group))


def test_a_pin_that_forces_an_uneven_hybridep_split_is_refused_in_one_line():
    result = _plan("--model", "kimi-k2", "--system", "gb300-nvl72", "--gpus", "576", "--layout", "tp=2,pp=3,ep=96")
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert "\n" not in line and "Traceback" not in line
    for part in ("ep=96", "72 + 24", "HybridEP", "hybrid_ep_buffer.py", "dispatcher=alltoall"):
        assert part in line, (part, line)


def test_the_same_pin_with_the_alltoall_dispatcher_is_planned():
    result = _plan("--model", "kimi-k2", "--system", "gb300-nvl72", "--gpus", "576", "--layout",
                   "tp=2,pp=3,ep=96,dispatcher=alltoall")
    assert result.exit_code == 0, result.output
