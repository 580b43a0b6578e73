"""verify-plan on a profile of one GPU per domain (a 1-GPU-per-node cluster): the measured pair is priced across two
domains, as the plan prices it. It printed 'no prediction (group_size=2 is invalid: a group on one domain holds at
most 1 ranks; pass num_domains)', an internal message, for every collective: the measured group's domains were
min(domains measured, group, fabric domains) = 1, which such a profile cannot hold."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from tests.test_one_gpu_per_domain import one_gpu_per_domain


def test_a_pair_measured_on_one_host_is_priced_across_two_one_gpu_domains():
    from commbench.workflows.verify import priced_domains

    fabric = one_gpu_per_domain(4)
    assert priced_domains(fabric, 2, 1) == 2 and priced_domains(fabric, 1, 1) == 1


@pytest.mark.timeout(180)
@pytest.mark.parametrize("layout", ["tp=1,pp=2,vp=1,ep=1,mbs=1", "tp=1,cp=2,pp=1,vp=1,ep=1,mbs=1"])
def test_verify_plan_predicts_on_a_one_gpu_per_domain_profile(tmp_path, layout):
    system, folder = tmp_path / "one_gpu_per_node.json", tmp_path / "plan"
    one_gpu_per_domain(2).to_json(system)
    planned = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", str(system), "--gpu", "h100",
                                       "--gpus", "2", "--layout", layout, "--allow-unfit",   # 8B on 2 GPUs with no
                                       "-O", str(folder)])   # DP: over HBM since the optimizer step's fp32 grad copy
    assert planned.exit_code == 0, planned.output
    result = CliRunner().invoke(app, ["verify-plan", str(folder), "--max-bytes", "64K", "--iters", "1", "--json"],
                                env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "pass num_domains" not in result.output and "no prediction" not in result.output
    doc = json.loads(result.stdout)
    assert doc["points"] and all(p["predicted_time_us"] and p["predicted_time_us"] > 0 for p in doc["points"])
    assert all(p["plan_predicted_time_us"] and p["plan_predicted_time_us"] > 0 for p in doc["points"])
