"""`commbench plan`: table, JSON, and one-line user errors."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app

ARGS = ["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256", "--precision", "mxfp8",
        "--layout", "tp=1,pp=2,vp=8,ep=32,mbs=1,gbs=4096"]


def test_plan_json_breakdown_is_consistent():
    result = CliRunner().invoke(app, ARGS + ["--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    bd = out["predicted"]
    assert out["kind"] == "predicted" and out["mode"] == "pinned" and out["layout"]["dp"] == 128
    assert bd["valid"] and bd["step_s"] >= bd["compute_s"] > 0
    assert bd["tokens_per_s_per_gpu"] == __import__("pytest").approx(4096 * 4096 / (bd["step_s"] * 256))


def test_plan_table_names_terms():
    result = CliRunner().invoke(app, ARGS, env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "EP all-to-all" in result.output and "tokens/s/GPU" in result.output and "activations" in result.output


def test_plan_user_errors_are_one_line():
    bad_rule = CliRunner().invoke(app, ARGS[:-1] + ["tp=1,pp=2,vp=8,ep=24,mbs=1,gbs=4096"])
    assert bad_rule.exit_code == 2 and "expert_fold" in bad_rule.output
    bad_model = CliRunner().invoke(app, ["plan", "--model", "gpt5", "--system", "gb300-nvl72", "--gpus", "8",
                                         "--layout", "tp=1"])
    assert bad_model.exit_code == 2 and "known models" in bad_model.output
    bad_system = CliRunner().invoke(app, ARGS[:4] + ["nosuch"] + ARGS[5:])
    assert bad_system.exit_code == 2 and "--system" in bad_system.output
