"""`plan --model hf:Qwen3-8B --system h100-hgx --gpus 8` took gbs 4096 (plan.DEFAULT_GBS, on any GPU count): 512
sequences per GPU, a predicted 133.18 s step no Megatron-Bridge recipe runs (its llama3_8b on 8 H100: gbs 128). The
default is now the --software release's recipe gbs for exactly that model, GPU, precision and GPU count, else 16
per GPU (the median of the newest release's recipes); the plan says it took a default and where it comes from."""

from __future__ import annotations

import json
import statistics

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.cli.plan import resolve_gbs
from commbench.data.reference import recipes_json
from commbench.planner.layout.recipes import GBS_PER_GPU, newest_release


def test_gbs_per_gpu_is_the_median_of_the_newest_recipes():
    rows = [r for r in recipes_json()["recipes"] if r["release"] == newest_release() and not r.get("unresolved")]
    assert statistics.median(r["gbs"] / r["num_gpus"] for r in rows) == GBS_PER_GPU


def test_a_model_without_a_recipe_plans_16_per_gpu_and_says_so():
    result = CliRunner().invoke(app, ["plan", "--model", "hf:tests/data/hf/Qwen3-8B", "--system", "h100-hgx",
                                      "--gpus", "8", "--top", "1", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["layout"]["gbs"] == 128 and doc["predicted"]["step_s"] < 20
    note = next(line for line in doc["assumptions"] if line.startswith("gbs 128 (default"))
    assert "16 sequences per GPU" in note and note in doc["explanation"]
    result = CliRunner().invoke(app, ["plan", "--model", "hf:tests/data/hf/Qwen3-8B", "--system", "h100-hgx",
                                      "--gpus", "8", "--top", "1"], env={"COLUMNS": "250"})
    assert "gbs 128 (default)" in result.output.splitlines()[0]


def test_recipe_models_take_the_recipes_gbs_and_given_ones_are_kept():
    common = dict(gpu="h100", precision="fp8", software=None)
    # Megatron-Bridge 26.08 llama3_70b_pretrain_64gpu_h100_fp8cs_config: global_batch_size 256 (not 16 x 64)
    gbs, note = resolve_gbs(None, {}, model="llama3.1-70b", num_gpus=64, **common)
    assert gbs == 256 and "llama3_70b_pretrain_64gpu_h100_fp8cs_config" in note
    gbs, note = resolve_gbs(None, {}, model="deepseek-v3", gpu="gb300", precision="mxfp8", num_gpus=256, software=None)
    assert gbs == 4096 and "recipe" in note   # what DeepSeek-V3 on 256 GB300 planned before, now with its source
    assert resolve_gbs(512, {}, model="llama3.1-70b", num_gpus=64, **common) == (512, None)
    assert resolve_gbs(None, {"gbs": 64}, model="llama3.1-70b", num_gpus=64, **common) == (64, None)
    gbs, note = resolve_gbs(None, {}, model="llama3.1-70b", num_gpus=48, **common)   # no recipe at 48 GPUs
    assert gbs == 16 * 48 and "median" in note


def test_the_default_line_names_the_release_planned():
    """With --software 25.09 the line cited "Megatron-Bridge 26.08's performance recipes" alone (probe P1): it names
    the release whose recipes it looked in, and 26.08 as where the 16 per GPU comes from."""
    gbs, note = resolve_gbs(None, {}, model="hf:tests/data/hf/Qwen3-8B", gpu="h100", precision="fp8", num_gpus=8,
                            software="25.09")
    assert gbs == 128 and "no performance recipe of Megatron-Bridge 25.09 (the release planned)" in note, note
    assert f"the median global batch per GPU of {newest_release()}'s recipes" in note
