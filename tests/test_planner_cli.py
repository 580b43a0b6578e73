"""`commbench plan`: table, JSON, and one-line user errors."""

from __future__ import annotations

import json

import pytest
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


def test_a_full_layout_is_evaluated_whether_gbs_is_pinned_or_given_with_gbs():
    # `--layout tp=..,pp=..,vp=..,ep=..,mbs=..` evaluates that one layout (--layout help, README, json-output.md:
    # mode pinned, versus_best, defaults_taken); given the batch as --gbs 4096 instead of gbs=4096 it silently
    # searched instead (mode search, no versus_best), for the same request
    pinned = CliRunner().invoke(app, ARGS + ["--json"])
    assert pinned.exit_code == 0, pinned.output
    with_option = CliRunner().invoke(app, ARGS[:-1] + ["tp=1,pp=2,vp=8,ep=32,mbs=1", "--gbs", "4096", "--json"])
    assert with_option.exit_code == 0, with_option.output
    a, b = json.loads(pinned.output), json.loads(with_option.output)
    assert b["mode"] == "pinned" and "versus_best" in b and "defaults_taken" in b
    assert a["layout"] == b["layout"] and a["predicted"] == b["predicted"]


def test_emit_prints_a_pinned_layouts_plan_as_it_does_a_searched_one():
    # README: `plan ... --emit megatron -O plan/`, `plan ... --emit torchtitan --torchtitan-version 0.2`; with a
    # --layout naming tp, pp, vp, ep and mbs --emit was dropped without a word (the breakdown table was printed)
    megatron = CliRunner().invoke(app, ARGS + ["--emit", "megatron"])
    assert megatron.exit_code == 0, megatron.output
    assert "--pipeline-model-parallel-size 2" in megatron.output and "predicted step" not in megatron.output
    # a 0.2 TOML cannot set DeepSeek-V3's RMSNorm eps 1e-6 (0.2.2's 671B builds 1e-5): refused in one line
    toml = CliRunner().invoke(app, ARGS + ["--emit", "torchtitan", "--torchtitan-version", "0.2"])
    assert toml.exit_code == 2 and "norm epsilon 1e-05 (the model: 1e-06)" in toml.output, toml.output
    as_json = CliRunner().invoke(app, ARGS + ["--emit", "json"])
    assert as_json.exit_code == 0 and json.loads(as_json.output)["mode"] == "pinned"
    bad = CliRunner().invoke(app, ARGS + ["--emit", "yaml"])
    assert bad.exit_code == 2 and "--emit" in bad.output and "Traceback" not in bad.output


def test_pareto_sample_keeps_every_starred_layout():
    """Probe Q: the text Pareto table showed front[::len//12][:12] without saying so, and could drop a layout the
    top table marks * (on the front)."""
    from types import SimpleNamespace

    import numpy as np

    from commbench.cli.search_view import pareto_shown
    front = [0, 2, 3, 5, 7, 11, 13, 17, 19] + list(range(20, 80, 3))
    result = SimpleNamespace(pareto=np.array(front))
    for top in (1, 5, 20, 100):
        shown = pareto_shown(result, top)
        marked = [i for i in front if i < top]
        assert set(marked) <= set(shown) and set(shown) <= set(front)
        assert shown == sorted(shown, key=front.index)              # the front's order
        assert len(shown) == max(12, len(marked))                    # 12 rows unless the * rows need more
    short = SimpleNamespace(pareto=np.array(front[:7]))
    assert pareto_shown(short, 3) == front[:7]


def test_pareto_table_says_it_is_a_sample():
    args = ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "64", "--top", "5"]
    doc = json.loads(CliRunner().invoke(app, args + ["--json"]).stdout)
    text = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
    assert text.exit_code == 0, text.output
    front = len(doc["pareto"])
    assert front > 12   # this request's front is longer than the table (a sample is shown)
    assert f"12 of {front} shown, the top table's * rows among them; --json has all" in text.output



@pytest.mark.parametrize("emit", ["megatron", "torchtitan"])
@pytest.mark.parametrize("layout", [[], ["--layout", "tp=2,pp=1,vp=1,ep=2,etp=1,cp=1,mbs=1,gbs=64"]])
def test_json_with_a_launch_emit_is_refused_in_one_line(emit, layout):
    """Probe Q: `plan --json --emit megatron` printed the JSON and silently ignored --emit (both choose stdout)."""
    args = ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "4", "--gbs", "64", *layout]
    refused = CliRunner().invoke(app, args + ["--json", "--emit", emit])
    assert refused.exit_code == 2 and refused.stdout == ""
    lines = refused.output.strip().splitlines()
    assert len(lines) == 1 and f"--emit='{emit}'" in lines[0] and "--json" in lines[0]
    same = CliRunner().invoke(app, args + ["--json", "--emit", "json"])   # the same document: accepted
    assert same.exit_code == 0 and json.loads(same.stdout)["format"] == "commbench-plan"
