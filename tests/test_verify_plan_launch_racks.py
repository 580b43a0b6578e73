"""`verify-plan` under a launch takes the launch's racks, as `bench` does (comm/topology.resolve_on_ranks: NVML
fabric, else host names), not the plan's rack size and block placement: on 4 ranks over 2 hosts of an HGX plan
(whose domain is one node) it said "4 ranks, 1 scale-up domain(s)" for a DP group that crossed the network, and so
set an NVLink prediction beside a network measurement."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from tests.launched import launch_cli


@pytest.fixture(scope="module")
def hgx_plan(tmp_path_factory):
    """32 H100s (4 HGX nodes of 8): TP2 inside a node, DP16 over the 4 nodes."""
    folder = tmp_path_factory.mktemp("hgx")
    result = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "32",
                                      "--gbs", "256", "--layout", "tp=2,pp=1,vp=1,ep=1,cp=1,mbs=1", "-O", str(folder),
                                      "--emit", "json"])
    assert result.exit_code == 0, result.output
    return folder


def _verify(plan, hosts):
    results = launch_cli(["verify-plan", str(plan), "--max-bytes", "16K", "--iters", "1", "--json"], hosts)
    assert all(code == 0 for code, _, _ in results), results
    return json.loads(results[0][1])


def _point(doc, prefix):
    return next(p for p in doc["points"] if p["collective"].startswith(prefix))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("hosts", [("a", "a", "b", "b"), ("a", "b", "a", "b")], ids=["block", "cyclic"])
def test_verify_plan_under_a_launch_counts_the_launchs_racks(hgx_plan, hosts):
    doc = _verify(hgx_plan, hosts)
    # the run's racks are its hosts (gloo: no NVML fabric), recorded as bench records them
    assert doc["topology"]["racks"] == ([[0, 1], [2, 3]] if hosts[1] == "a" else [[0, 2], [1, 3]])
    # the plan's DP group spans 4 nodes: measured over both hosts here, and said so
    dp = _point(doc, "DP grad bucket")
    assert (dp["group_size"], dp["num_domains"]) == (4, 2), dp
    # the plan's TP pair is inside a node: measured inside one host, on either placement
    tp = _point(doc, "TP reduce_scatter")
    assert (tp["group_size"], tp["num_domains"]) == (2, 1), tp
    assert any("this run's 2 racks" in f for f in doc["unmet_assumptions"]), doc["unmet_assumptions"]


@pytest.mark.timeout(180)
def test_verify_plan_local_ranks_are_one_host(hgx_plan):
    """Local ranks (no launch) share this host: one rack, consecutive groups, as before."""
    result = CliRunner().invoke(app, ["verify-plan", str(hgx_plan), "--nproc", "4", "--max-bytes", "16K", "--iters",
                                      "1", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["topology"]["racks"] == [[0, 1, 2, 3]]
    assert _point(doc, "DP grad bucket")["num_domains"] == 1
