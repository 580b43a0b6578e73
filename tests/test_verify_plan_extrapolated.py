"""verify-plan's 'plan predicted' on a fitted profile says, per row and in --json, when the plan's own figure lies
beyond what the profile measured (predict's fitted_range / extrapolated): a llama3-8b TP2 plan on a profile fitted
from 1 KiB..16 MiB gloo sweeps charges its 64 MiB all-reduce at 32,999 µs, printed as if measured-backed."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app


@pytest.mark.timeout(180)
def test_plan_predicted_beyond_the_fitted_sizes_is_said_per_row_and_in_json(tmp_path):
    from commbench.cli.verify_plan import _plan_extrapolated
    from commbench.costmodel import load_fabric
    from commbench.planner.emit.plan import load_plan
    from commbench.workflows.verify import plan_context, plan_items
    from tests.test_verify import plan_on_a_gloo_fitted_profile

    fabric_path, folder = plan_on_a_gloo_fitted_profile(tmp_path)
    verify = ["verify-plan", str(folder), "--max-bytes", "64K", "--iters", "1"]
    doc = json.loads(CliRunner().invoke(app, [*verify, "--json"]).stdout)
    (point,) = doc["points"]
    assert point["plan_size_bytes"] == 64 << 20 and point["plan_predicted_extrapolated"] is True
    said = ("TP all_reduce: 'plan predicted' is EXTRAPOLATED: the plan's 64 MiB on 2 ranks lies beyond what the "
            "profile 'fitted' measured for all_reduce (scale_up) (1 KiB to 16 MiB, group size(s) 2)")
    assert said in doc["unmet_assumptions"]
    table = CliRunner().invoke(app, verify, env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.output
    (row,) = [line for line in table.output.splitlines() if line.startswith("│ TP all_reduce")]
    assert f"{point['plan_predicted_time_us']:,.1f} extrapolated" in row
    # the same plan's collective inside the fitted sizes and group: not extrapolated, no flag
    plan = load_plan(str(folder / "plan.json"))
    ctx = plan_context(plan)
    (item,) = plan_items(plan, 2, 64 << 10, ctx)[0]
    fabric, flags = load_fabric(str(fabric_path)).scaled(num_gpus=2), []
    assert not _plan_extrapolated(fabric, dataclasses.replace(item, plan_size_bytes=1 << 20), ctx, flags) and not flags
    assert _plan_extrapolated(fabric, dataclasses.replace(item, plan_size_bytes=1 << 20, plan_group_size=4), ctx, flags)


@pytest.mark.timeout(180)
def test_a_preset_plan_is_never_said_extrapolated(tmp_path):
    folder = tmp_path / "plan"
    planned = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "b200-hgx", "--gpus", "2",
                                       "--layout", "tp=2,pp=1,vp=1,ep=1,mbs=1", "-O", str(folder)])
    assert planned.exit_code == 0, planned.output
    doc = json.loads(CliRunner().invoke(app, ["verify-plan", str(folder), "--max-bytes", "64K", "--iters", "1",
                                              "--json"]).stdout)
    assert doc["points"] and all(p["plan_predicted_extrapolated"] is False for p in doc["points"])
    assert not any("EXTRAPOLATED" in f for f in doc["unmet_assumptions"])
