"""A config.json whose `architectures` class is not one of its model_type's is refused, not planned as model_type's
network (models/hf_classes.py): Arctic's config labelled mixtral was planned as Mixtral (473B / 11.9B, its dense
residual MLP lost), MiniMax's as Mixtral (its lightning attention lost), dots.llm1's as DeepSeek-V3, Ling's as
Qwen2-MoE."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.planner.models.hf_classes import MODEL_CLASSES
from commbench.planner.models.hf_config import READERS, load_hf_model
from tests.hf_configs import HF, edited_config

RESAVED = Path(__file__).parent / "data" / "hf-resaved"

# another model's class under a model_type the planner reads (the outside probe's four), with one of its own keys
OTHER_MODELS = [
    ("Mixtral-8x7B-v0.1", "ArcticForCausalLM", {"parallel_attn_mlp_res": True, "moe_layer_frequency": 1}),
    ("Mixtral-8x7B-v0.1", "MiniMaxForCausalLM", {"rotary_dim": 64, "postnorm": True}),
    ("DeepSeek-V3", "Dots1ForCausalLM", {}),
    ("Qwen1.5-MoE-A2.7B", "BailingMoeForCausalLM", {}),
]


def test_every_model_type_read_has_its_classes():
    assert sorted(MODEL_CLASSES) == sorted(READERS)


@pytest.mark.parametrize("folder", sorted(p.parent.name for p in HF.glob("*/config.json")))
def test_every_published_config_names_a_class_of_its_model_type(folder):
    raw = json.loads((HF / folder / "config.json").read_text())
    model_type = raw.get("model_type")
    assert set(raw["architectures"]) <= set(MODEL_CLASSES[model_type]), (folder, raw["architectures"])
    load_hf_model(f"hf:{HF / folder}")


@pytest.mark.parametrize("folder", sorted(p.parent.name for p in RESAVED.glob("*/config.json")))
def test_every_resaved_config_loads(folder):
    load_hf_model(f"hf:{RESAVED / folder}")


@pytest.mark.parametrize("folder,cls,keys", OTHER_MODELS)
def test_another_models_class_under_a_model_type_read_is_refused(tmp_path, folder, cls, keys):
    model_type = json.loads((HF / folder / "config.json").read_text())["model_type"]
    with pytest.raises(CommbenchError) as err:
        load_hf_model(edited_config(tmp_path, folder, architectures=[cls], **keys))
    message = str(err.value)
    assert f"architectures=['{cls}'] is not modelled for model_type='{model_type}'" in message, message
    assert all(own in message for own in MODEL_CLASSES[model_type]), message
    assert "\n" not in message


def test_the_class_of_another_type_read_is_named_as_that_types(tmp_path):
    with pytest.raises(CommbenchError, match=r"Qwen3MoeForCausalLM is not a class of model_type 'mixtral' \(which has "
                                             r"MixtralForCausalLM\) but the class of model_type 'qwen3_moe'"):
        load_hf_model(edited_config(tmp_path, "Mixtral-8x7B-v0.1", architectures=["Qwen3MoeForCausalLM"]))


def test_kimi_k2_names_deepseek_v3s_class_as_its_release_does(tmp_path):
    load_hf_model(f"hf:{HF / 'Kimi-K2-Instruct'}")
    with pytest.raises(CommbenchError, match="KimiK2ForCausalLM is not a class of model_type 'kimi_k2'"):
        load_hf_model(edited_config(tmp_path, "Kimi-K2-Instruct", architectures=["KimiK2ForCausalLM"]))


def test_a_config_without_architectures_is_read_by_its_model_type(tmp_path):
    load_hf_model(edited_config(tmp_path, "Mixtral-8x7B-v0.1", drop=("architectures",)))


def test_the_plan_command_refuses_it_in_one_line_with_exit_2(tmp_path):
    model = edited_config(tmp_path, "Mixtral-8x7B-v0.1", architectures=["ArcticForCausalLM"],
                          parallel_attn_mlp_res=True)
    result = CliRunner().invoke(app, ["plan", "--model", model, "--system", "h100-hgx", "--gpus", "128"])
    assert result.exit_code == 2, result.output
    assert "architectures=['ArcticForCausalLM']" in result.output and "Traceback" not in result.output
