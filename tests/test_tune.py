"""`commbench tune` end to end on CPU (built-in gloo sweep + fit + plan) and `plan` search via the CLI."""

from __future__ import annotations

import json
import shlex

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner import Layout, check_layout, load_model
from commbench.planner.emit.plan import load_plan, parse_megatron_args


@pytest.mark.timeout(180)
def test_tune_defaults_run_end_to_end(tmp_path):
    result = CliRunner().invoke(app, ["tune", "--out", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "1/3 sweep" in result.output and "2/3 fit" in result.output and "Plan (predicted)" in result.output
    doc = load_plan(tmp_path / "plan.json")
    assert (tmp_path / "tune-sweep.jsonl").stat().st_size > 0 and (tmp_path / "fabric.json").exists()
    # gloo on CPU covers no tier of an NVL72 rack: the plan says which preset numbers it used and why
    used = [a for a in doc["assumptions"] if a.startswith("network: preset gb300-nvl72")]
    assert len(used) == 1 and "gloo" in used[0] and "scale_up" in used[0] and "scale_out" in used[0]
    sources = next(a for a in doc["assumptions"] if a.startswith("network sources: ")).removeprefix("network sources: ")
    assert len(sources.split("; ")) == len(set(sources.split("; "))) > 1  # each source named once
    lay = Layout(**doc["layout"])
    check_layout(load_model("deepseek-v3"), lay, 256)
    args = shlex.split((tmp_path / "megatron_args.txt").read_text())
    assert parse_megatron_args(args, 256) == lay
    # tune -> plan: fabric.json is what tune planned with (re-plannable as it is); the fit alone,
    # fabric-measured.json, was measured on CPU ranks and names no GPU
    # (it measured one CPU machine: plan inside one scale-up domain)
    replanned = CliRunner().invoke(app, ["plan", "--model", "deepseek-v3", "--system", str(tmp_path / "fabric.json"),
                                         "--gpus", "256", "--gbs", "4096", "--precision", "mxfp8"],
                                   env={"COLUMNS": "200"})
    assert replanned.exit_code == 0, replanned.output
    plan = ["plan", "--model", "mixtral-8x22b", "--system", str(tmp_path / "fabric-measured.json"), "--gpus", "2",
            "--layout", "tp=2,pp=1,vp=1,ep=1,mbs=1,gbs=64"]
    refused = CliRunner().invoke(app, plan)
    assert refused.exit_code == 2 and "names no GPU" in refused.output and "--gpu" in refused.output
    planned = CliRunner().invoke(app, [*plan, "--gpu", "gb300"], env={"COLUMNS": "200"})
    assert planned.exit_code == 0, planned.output
    assert "GB300" in planned.output.upper()


def test_tune_plans_a_model_from_model_file(tmp_path):
    """--model's help names --model-file models: tune takes --model-file as plan does (it had no such option)."""
    from tests.test_plan_files_guarded import DATA, TINY
    model_file = tmp_path / "m.toml"
    model_file.write_text(TINY)
    result = CliRunner().invoke(app, ["tune", "--results", str(DATA), "--model", "tiny", "--model-file", str(model_file),
                                      "--system", "h100-hgx", "--gpus", "8", "--gbs", "64", "-O", str(tmp_path / "t")],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    doc = load_plan(tmp_path / "t" / "plan.json")
    assert doc["inputs"]["model"] == "tiny" and doc["inputs"]["model_spec"]["num_layers"] == 4
    assert shlex.split((tmp_path / "t" / "megatron_args.txt").read_text())[:4] == ["--num-layers", "4", "--hidden-size", "1024"]


def test_plan_searches_when_layout_is_partial():
    result = CliRunner().invoke(app, ["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256",
                                      "--precision", "mxfp8", "--gbs", "4096", "--layout", "ep=32,etp=1",
                                      "--emit", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["layout"]["ep"] == 32 and doc["kind"] == "predicted" and doc["search"]["fit"] > 0
    assert doc["predicted"]["fits"] and len(doc["top"]) == 10


def test_plan_search_bad_input_exit_2():
    none_fit = CliRunner().invoke(app, ["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "8"])
    assert none_fit.exit_code == 2 and "smallest GPU count" in none_fit.output
    bad_emit = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8",
                                        "--emit", "yaml"])
    assert bad_emit.exit_code == 2 and "--emit" in bad_emit.output
    bad_system = CliRunner().invoke(app, ["tune", "--system", "nosuch"])
    assert bad_system.exit_code == 2 and "gb300-nvl72" in bad_system.output
