"""An hf: config whose checkpoint is quantized (config.json quantization_config) is planned in the training precision,
and the plan says where the two differ (probe AV finding 6): DeepSeek-V3's published checkpoint is fp8 e4m3 in
128x128 weight blocks (its config.json: quant_method fp8, weight_block_size [128, 128]), a plan at fp8 trains
per-tensor current scaling (--fp8-recipe tensorwise); gpt-oss's is mxfp4 (quant_method mxfp4)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.layout.precision import checkpoint_note
from commbench.planner.models.zoo import load_model

runner = CliRunner()
HF = Path(__file__).parent / "data" / "hf"
DSV3_FP8 = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}
GPT_OSS_MXFP4 = {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                            "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"}


def _with_quantization(tmp_path: Path, name: str, quantization: dict | None) -> str:
    folder = tmp_path / name
    shutil.copytree(HF / name, folder)
    config = json.loads((folder / "config.json").read_text())
    if quantization is not None:
        config["quantization_config"] = quantization
    (folder / "config.json").write_text(json.dumps(config))
    return f"hf:{folder}"


def test_a_blockwise_fp8_checkpoint_planned_at_fp8_says_the_two_differ(tmp_path):
    model = _with_quantization(tmp_path, "DeepSeek-V3", DSV3_FP8)
    res = runner.invoke(app, ["plan", "--model", model, "--system", "h100-hgx", "--gpus", "256", "--layout",
                              "tp=1,pp=8,vp=1,ep=32,mbs=1", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    said = [a for a in doc["assumptions"] if "quantization_config" in a]
    assert len(said) == 1, doc["assumptions"]
    note = said[0]
    assert "128x128" in note and "per-tensor" in note and "--fp8-recipe tensorwise" in note and "differ" in note
    assert "blockwise" in note   # what commbench does not plan, said
    text = runner.invoke(app, ["plan", "--model", model, "--system", "h100-hgx", "--gpus", "256", "--layout",
                               "tp=1,pp=8,vp=1,ep=32,mbs=1"], env={"COLUMNS": "400"})
    assert text.exit_code == 0 and "quantization_config" in text.output, text.output


def test_the_search_says_it_too(tmp_path):
    model = _with_quantization(tmp_path, "gpt-oss-20b", GPT_OSS_MXFP4)
    res = runner.invoke(app, ["plan", "--model", model, "--system", "b200-hgx", "--gpus", "8", "--precision", "bf16",
                              "--framework", "torchtitan", "--top", "1", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    note = next(a for a in doc["assumptions"] if "quantization_config" in a)
    assert "mxfp4" in note and "bf16" in note and "differ" in note, note
    text = runner.invoke(app, ["plan", "--model", model, "--system", "b200-hgx", "--gpus", "8", "--precision",
                               "bf16", "--framework", "torchtitan", "--top", "1"], env={"COLUMNS": "400"})
    assert text.exit_code == 0 and "quantization_config" in text.output, text.output


def test_no_note_without_a_quantization_config(tmp_path):
    plain = load_model(_with_quantization(tmp_path, "DeepSeek-V3", None))
    assert checkpoint_note(plain, "fp8") is None
    assert checkpoint_note(load_model("deepseek-v3"), "fp8") is None   # a zoo model names no checkpoint


@pytest.mark.parametrize("precision", ["bf16", "fp8", "mxfp8", "nvfp4"])
def test_every_precision_against_a_blockwise_checkpoint_differs(tmp_path, precision):
    model = load_model(_with_quantization(tmp_path, "DeepSeek-V3", DSV3_FP8))
    note = checkpoint_note(model, precision)
    assert note is not None and "differ" in note and f"trains in {precision}" in note, note


def test_a_per_tensor_fp8_checkpoint_matches_an_fp8_plan(tmp_path):
    model = load_model(_with_quantization(tmp_path, "DeepSeek-V3", {"quant_method": "fp8", "fmt": "e4m3"}))
    note = checkpoint_note(model, "fp8")
    assert note is not None and "differ" not in note and "the same per-tensor fp8 format" in note, note
