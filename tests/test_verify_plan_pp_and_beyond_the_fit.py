"""verify-plan on plans commbench writes (probe PC): a PP-only plan (llama3-8b TP1 PP2 on 2 GPUs, whose only
communication is the pipeline send/recv) was refused with exit 2, 'no collective of more than one rank to verify', and
no plan with PP > 1 had its send/recv verified; a one-GPU plan was refused as '--nproc 1'. And a plan on a profile
fitted from a 1K..4M bench, verified at the default 16M, was 'MISMATCH 4.1x ... measure the fabric (`tune` or `sweep`
+ `fit`) and plan on the fitted profile': its 'predicted' lay beyond the fitted sizes, unmarked, and the plan was
already on a fitted profile."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app


def _pp_plan(tmp_path):
    from tests.test_verify import plan_on_a_gloo_fitted_profile

    fabric, _ = plan_on_a_gloo_fitted_profile(tmp_path)
    folder = tmp_path / "pp"
    planned = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", str(fabric), "--gpu", "gb300",
                                       "--gpus", "2", "--layout", "tp=1,pp=2,vp=1,ep=1,mbs=1", "-O", str(folder)])
    assert planned.exit_code == 0, planned.output
    return folder


@pytest.mark.timeout(180)
def test_a_pp_only_plan_is_verified_on_its_send_recv_as_the_step_model_charges_it(tmp_path):
    folder = _pp_plan(tmp_path)
    result = CliRunner().invoke(app, ["verify-plan", str(folder), "--max-bytes", "64K", "--iters", "1", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (point,) = doc["points"]
    assert point["collective"] == "PP send/recv" and (point["group_size"], point["plan_group_size"]) == (2, 2)
    assert point["plan_size_bytes"] == 8192 * 4096 * 2   # one bf16 activation of llama3-8b's 8192-token micro-batch
    assert point["measured_size_bytes"] == 64 << 10 and point["num_wrong"] == 0 and point["measured_time_us"] > 0
    # 'plan predicted' is the step model's own send/recv: 2 x VP calls a micro-batch make the plan's pp_total_s
    plan = json.loads((folder / "plan.json").read_text())
    calls = 2 * plan["layout"]["vp"] * plan["predicted"]["num_microbatches"]
    assert point["plan_predicted_time_us"] * 1e-6 * calls == pytest.approx(plan["predicted"]["pp_total_s"], rel=1e-9)


def test_a_plan_with_pp_and_tp_lists_its_send_recv_beside_the_tp_collective(tmp_path):
    from commbench.planner.emit.plan import load_plan
    from commbench.workflows.verify import plan_items

    folder = tmp_path / "tp2pp2"
    planned = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "b200-hgx", "--gpus", "4", "--layout",
                                       "tp=2,pp=2,vp=1,ep=1,mbs=1,sequence_parallel=true", "-O", str(folder)])
    assert planned.exit_code == 0, planned.output
    items, _ = plan_items(load_plan(str(folder / "plan.json")), 4, 1 << 20)
    pp = next(i for i in items if i.kind == "pp")
    assert pp.collective == "sendrecv" and pp.plan_size_bytes == 8192 * 4096 * 2 // 2   # scattered over TP (SP)
    # the plan's own PP pairs at its rank count: Megatron-Core's PP groups stride over a stage's 2 ranks (probe P7:
    # they were the TP pairs (0, 1), (2, 3))
    assert pp.groups == ((0, 2), (1, 3)) and pp.size_bytes == 1 << 20
    assert {i.kind for i in items} >= {"tp", "pp"}


@pytest.mark.timeout(120)
def test_a_one_gpu_plan_says_there_is_nothing_to_verify(tmp_path):
    folder = tmp_path / "one"
    planned = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "b200-hgx", "--gpus", "1",
                                       "-O", str(folder)])
    assert planned.exit_code == 0, planned.output
    result = CliRunner().invoke(app, ["verify-plan", str(folder)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "nothing to verify: the plan runs on one GPU" in result.output


def _verdict(tmp_path, max_bytes: int, ratio: float):
    """(point, flags) of the fitted-profile TP2 plan's all-reduce measured at `max_bytes`, taking `ratio` x the
    prediction (rows as the ranks return them: the verdict, not gloo's speed, is under test)."""
    from commbench.cli.verify_plan import _fabric_backends, _points
    from commbench.costmodel import load_fabric
    from commbench.planner.emit.plan import load_plan
    from commbench.workflows.verify import plan_context, plan_items, predicted_s
    from tests.test_verify import plan_on_a_gloo_fitted_profile

    fabric_path, folder = plan_on_a_gloo_fitted_profile(tmp_path)   # fitted from 1 KiB..16 MiB, 2 ranks
    doc = load_plan(str(folder / "plan.json"))
    ctx = plan_context(doc)
    (item,), flags = plan_items(doc, 2, max_bytes, ctx)
    fabric = load_fabric(str(fabric_path)).scaled(num_gpus=2)
    pred_us = predicted_s(fabric, item, ctx, size_bytes=item.size_bytes, tokens=0, group=2, domains=1) * 1e6
    rows = [{"label": item.label, "time_us_median": ratio * pred_us, "num_wrong": 0, "size_bytes": item.size_bytes,
             "group_size": 2, "metrics": {}}]
    (point,) = _points([item], rows, fabric, ctx, _fabric_backends(doc, fabric), "gloo", None, flags)
    return point, flags


def test_a_mismatch_beyond_the_fitted_sizes_is_said_extrapolated_with_the_sizes_to_measure(tmp_path):
    from commbench.cli.verify_plan import verify_rows

    point, flags = _verdict(tmp_path, 32 << 20, 4.0)
    assert point["predicted_extrapolated"] is True and point["plan_predicted_extrapolated"] is True
    assert " extrapolated" in verify_rows([point])[0][5]   # the 'predicted (µs)' cell
    assert ("TP all_reduce: 'predicted' is EXTRAPOLATED: the 32 MiB on 2 ranks lies beyond what the profile 'fitted' "
            "measured for all_reduce (scale_up) (1 KiB to 16 MiB, group size(s) 2)") in " ".join(flags)
    (verdict,) = [f for f in flags if f.startswith("MISMATCH")]
    assert verdict.startswith("MISMATCH ON AN EXTRAPOLATION: TP all_reduce measured 4.0x the prediction")
    assert ("re-sweep all_reduce from 1 KiB to 64 MiB on 2 rank(s) (`commbench bench all_reduce --nproc 2 -b 1K "
            "-e 64M -f 2 -O FILE`)") in verdict
    assert "plan on the fitted profile" not in verdict   # it already is


def test_a_mismatch_inside_the_fitted_sizes_blames_the_fit_not_a_missing_profile(tmp_path):
    point, flags = _verdict(tmp_path, 1 << 20, 4.0)
    assert point["predicted_extrapolated"] is False
    assert not any("'predicted' is EXTRAPOLATED" in f for f in flags)
    (verdict,) = [f for f in flags if f.startswith("MISMATCH")]
    assert verdict.startswith("MISMATCH: TP all_reduce measured 4.0x the prediction (beyond 1.5x either way), inside "
                              "what the profile measured for all_reduce (scale_up) (1 KiB to 16 MiB, group size(s) 2)")
    assert "plan on the fitted profile" not in verdict
