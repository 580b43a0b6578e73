"""The plan's exposed-communication lines name the DP groups the step model prices, HSDP's shard groups included.

Probe P4 (session 45): `plan --model llama3-8b --system b200-hgx --gpus 24 --framework torchtitan --precision bf16
--layout tp=1,pp=1,fsdp_replicas=3` said "DP dense param all-gather ... a group of 24 ranks over 3 rack(s)", where
TorchTitan gathers over dp_shard = 8 ranks in one node (parallel_dims.py:236-239) and the step model prices that
(step/evaluate.py shard_group); a MoE HSDP plan's expert group read "12 ranks over 12 racks" where efsdp is 6 per
replica (parallel_dims.py:279).
"""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.layout.spec import Layout
from commbench.planner.search.explain import dp_groups_text


def test_hsdp_dense_lines_name_the_shard_group_and_the_replicas():
    result = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "b200-hgx", "--gpus", "24",
                                      "--framework", "torchtitan", "--precision", "bf16",
                                      "--layout", "tp=1,pp=1,fsdp_replicas=3"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "a group of 24 ranks" not in text
    assert ("DP dense param all-gather" in text and "HSDP: shard groups of 8 ranks over 1 rack(s) (3 replicas)"
            in text), text
    assert "the gradient shards all-reduced across 3 replicas over 3 rack(s)" in text


def test_hsdp_expert_group_is_efsdp_per_replica():
    # qwen3-30b-a3b's P4 plan on 96 H100s (8 a node): ep=8, edp=12, two replicas of 48 ranks
    lay = Layout(tp=1, pp=1, ep=8, etp=1, dp=96, mbs=8, gbs=1536, fsdp=True, fsdp_replicas=2)
    assert dp_groups_text(lay, lay.edp, 8, grads=False) == "HSDP: shard groups of 6 ranks over 6 rack(s) (2 replicas)"
    assert dp_groups_text(lay, lay.edp, 8).endswith("all-reduced across 2 replicas over 2 rack(s)")
    flat = Layout(tp=1, pp=1, ep=8, etp=1, dp=96, mbs=8, gbs=1536, fsdp=True)
    assert dp_groups_text(flat, flat.edp, 8) == "a group of 12 ranks over 12 rack(s)"
