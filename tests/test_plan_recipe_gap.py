"""NVIDIA's tuned layout beside a searched plan (search/recipe_gap.py): the release's recipe for the request, predicted
with the same model, ranked, and the plan's gain over it read against the measured gain error."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.planner.layout.recipes import recipe_entry
from commbench.planner.layout.spec import LayoutArrays
from commbench.planner.models.zoo import load_model
from commbench.planner.search.recipe_gap import recipe_layout, versus_recipe, versus_recipe_lines
from commbench.planner.search.space import SearchRequest, search
from commbench.planner.step.evaluate import evaluate_layouts
from commbench.planner.step.terms import MODEL_GAIN_MEDIAN_ABS_ERROR, MODEL_GAIN_P80_ABS_ERROR


def _result(model="deepseek-v3", system="gb300-nvl72", gpus=256, gbs=4096, precision="mxfp8", **kw):
    req = SearchRequest(model=load_model(model), fabric=load_preset(system, num_gpus=gpus), num_gpus=gpus, gbs=gbs,
                        precision=precision, **kw)
    return search(req)


@pytest.fixture(scope="module")
def dsv3_2604():
    return _result(software="26.04")


def test_the_recipe_layout_is_the_releases_entry_predicted_by_the_same_model(dsv3_2604):
    v = versus_recipe(dsv3_2604)
    entry = recipe_entry("26.04", "deepseek-v3", "gb300", "mxfp8", {"num_gpus": 256, "gbs": 4096})
    lay = recipe_layout(dsv3_2604, entry)
    assert (lay.tp, lay.pp, lay.vp, lay.ep, lay.mbs) == (entry["tp"], entry["pp"], entry["vp"], entry["ep"], entry["mbs"])
    assert (lay.recompute, lay.cuda_graph) == (entry["recompute"], entry["cuda_graph"])
    req = dsv3_2604.request
    bd = evaluate_layouts(req.model, req.fabric, LayoutArrays.from_layouts([lay]), calibration=req.calibration,
                          loss="te")   # the recipe's cross entropy (search/recipe_gap.py: run_loss)
    assert v["pinned_tokens_per_s_per_gpu"] == pytest.approx(float(bd.tokens_per_s_per_gpu[0]))
    assert v["recipe_release"] == "26.04" and entry["config"] == v["recipe_config"]
    assert entry["commit"] in v["recipe_source"]
    faster = int((dsv3_2604.fitting_tokens_desc > v["pinned_tokens_per_s_per_gpu"] * (1 + 1e-9)).sum())
    assert v["rank"] == faster + 1


def test_the_verdict_follows_the_measured_gain_errors(dsv3_2604):
    v = versus_recipe(dsv3_2604)
    gain = v["best_tokens_per_s_per_gpu"] / v["pinned_tokens_per_s_per_gpu"] - 1
    assert v["best_gain_pct"] == pytest.approx(100 * gain)
    median, p80 = MODEL_GAIN_MEDIAN_ABS_ERROR["moe"], MODEL_GAIN_P80_ABS_ERROR["moe"]
    want = "best" if gain <= 1e-9 else "tie" if gain <= median else "likely" if gain <= p80 else "beyond_p80"
    assert v["gain_verdict"] == want
    lines = versus_recipe_lines(v)
    assert lines[0].startswith("NVIDIA's tuned layout (Megatron-Bridge 26.04 recipe ")
    assert f"{v['best_gain_pct']:+.1f}%" in lines[1]


def test_a_large_predicted_gain_over_the_recipe_says_the_tuned_layout_is_more_likely_right():
    v = versus_recipe(_result("qwen3-235b-a22b", "h100-hgx", 256, 8192, "fp8", software="26.04"))
    assert v["gain_verdict"] == "beyond_p80"
    assert "more likely right" in versus_recipe_lines(v)[1]


def test_a_recipe_running_what_the_search_cannot_is_said_faster_and_names_it():
    """26.08's DeepSeek-V3 GB300 recipe runs the fused grouped MLP, which Megatron-LM core_v0.16.1 cannot: the search
    does not offer it, so the recipe is predicted faster than the plan, and the line names the feature."""
    v = versus_recipe(_result(software="26.08"))
    assert v["best_gain_pct"] < 0 and v["gap_pct"] > 0
    lines = versus_recipe_lines(v)
    assert "faster than this plan" in lines[1] and "fused_moe" in lines[1]
    assert "above every one of the" in lines[0]
    # its fp8 attention is one the search can run but leaves off unless pinned: the plan says what pinning gives,
    # and it is the pinned search's own best
    fp8 = v["with_fp8_attention"]
    pinned = _result(software="26.08", pins={"fp8_attention": True})
    assert fp8["tokens_per_s_per_gpu"] == pytest.approx(float(pinned.fitting_tokens_desc[0]))
    assert fp8["gain_pct"] > 0 and "fp8_attention=true" in lines[2] and f"{fp8['gain_pct']:+.1f}%" in lines[2]


def test_no_fp8_attention_line_where_the_recipe_runs_none(dsv3_2604):
    # 26.04's DeepSeek-V3 GB300 recipe runs no fp8 attention and is not predicted faster than the plan
    v = versus_recipe(dsv3_2604)
    assert "fp8_attention" not in v["recipe_flags"] and "with_fp8_attention" not in v
    assert not any("fp8_attention is off unless pinned" in line for line in versus_recipe_lines(v))


def test_the_fp8_attention_follow_up_is_in_the_plan_json(tmp_path):
    from tests.test_json_output import validate
    args = ["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256", "--gbs", "4096",
            "--precision", "mxfp8", "--software", "26.06", "--json"]
    doc = json.loads(CliRunner().invoke(app, args).stdout)
    assert doc["versus_recipe"]["with_fp8_attention"]["gain_pct"] > 0
    validate(doc, "plan")


@pytest.mark.parametrize("kw", [dict(gpus=512), dict(framework="torchtitan", precision="bf16"),
                                dict(pins={"tp": 2})])
def test_no_comparison_without_a_recipe_for_exactly_the_request(kw):
    gpus = kw.pop("gpus", 256)
    assert versus_recipe(_result(gpus=gpus, software="26.04", **kw)) is None
    assert versus_recipe_lines(None) == []


def test_a_model_the_recipe_table_lacks_has_no_comparison():
    assert versus_recipe(_result("mixtral-8x7b", "gb200-nvl72", 64, 512, "mxfp8")) is None


def test_the_searched_plan_prints_the_recipe_line_and_its_json_carries_it():
    args = ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "8", "--gbs", "512",
            "--precision", "bf16", "--software", "26.04"]
    text = CliRunner().invoke(app, args)
    assert text.exit_code == 0, text.output
    assert "NVIDIA's tuned layout (Megatron-Bridge 26.04 recipe" in text.output
    doc = json.loads(CliRunner().invoke(app, args + ["--json"]).stdout)
    assert doc["versus_recipe"]["recipe_release"] == "26.04"
    assert doc["versus_recipe"]["recipe_layout"].startswith("TP1 PP1 VP1 EP8")


def test_a_recipe_layout_that_cannot_run_at_the_request_says_which_rule_it_breaks():
    v = versus_recipe(_result(gbs=384, software="26.04"))
    assert "gbs = 384 is not a multiple of mbs*dp" in v["unavailable"]
    assert versus_recipe_lines(v)[0].endswith(v["unavailable"] + ".")
    assert "rank" not in v and "gain_verdict" not in v


def test_the_line_gives_the_recipe_structure_as_plan_layout_takes_it(dsv3_2604):
    v = versus_recipe(dsv3_2604)
    pins = dict(kv.split("=") for kv in v["recipe_pins"].split(","))
    entry = recipe_entry("26.04", "deepseek-v3", "gb300", "mxfp8", {"num_gpus": 256, "gbs": 4096})
    assert {k: int(x) for k, x in pins.items()} == {k: int(entry.get(k) or 1) for k in pins}
    assert set(pins) == {"tp", "pp", "vp", "ep", "etp", "cp", "mbs"}
    assert f"`plan --layout {v['recipe_pins']}`" in versus_recipe_lines(v)[0]


def test_a_recipe_layout_that_does_not_fit_is_said_so_not_faster_or_as_fast(dsv3_2604):
    """A recipe layout that does not fit the HBM headroom was given the gain verdict 'best' when predicted faster
    (pinned_gap.gain_verdict): its lines say it does not fit and the plan is the fastest that does."""
    v = dict(versus_recipe(dsv3_2604), rank=None, fits_headroom=False, gain_verdict="does_not_fit")
    lines = versus_recipe_lines(v)
    assert "does not fit the HBM headroom here" in lines[-1] and "fastest layout that fits" in lines[-1]
    assert not any("predicted as fast" in line or "faster than this plan" in line for line in lines)
