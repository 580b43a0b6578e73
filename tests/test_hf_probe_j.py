"""`plan --model hf:PATH` on configs an outside probe (probe J, 2026-12-05) found planned silently as another model:
vision-language configs, a classification head, Mixtral's router jitter, the config's dropout, Nemotron-H's norm
epsilon, and the TorchTitan refusal of a Qwen3-MoE config with a dense first layer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.models.hf_config import load_hf_model

HF = Path(__file__).parent / "data" / "hf"


def _variant(tmp_path, folder: str, drop=(), **changes) -> str:
    from tests.test_hf_model_types import _config

    return _config(tmp_path, folder, drop, **changes)


def _refused(model: str, *args: str, gpus: int = 64) -> str:
    """The CLI's one-line refusal of a plan (one line, exit 2, no traceback)."""
    res = CliRunner().invoke(app, ["plan", "--model", model, "--system", "h100-hgx", "--gpus", str(gpus), *args],
                             env={"COLUMNS": "400"})
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert res.output.startswith("error: ") and len(res.output.strip().splitlines()) == 1, res.output
    return res.output.strip()


def _plan(model: str, *args: str, gpus: int = 8) -> dict:
    res = CliRunner().invoke(app, ["plan", "--model", model, "--system", "h100-hgx", "--gpus", str(gpus), "--json",
                                   *args], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


# --- J4: Nemotron-H's norms take layer_norm_epsilon -------------------------------------------------------------------

def test_nemotron_h_norm_epsilon_is_layer_norm_epsilon_whatever_rms_norm_eps_says(tmp_path):
    """transformers' NemotronH builds every norm with eps=config.layer_norm_epsilon; an rms_norm_eps beside it (1e-6)
    was read first and emitted as --norm-epsilon."""
    model = load_hf_model(_variant(tmp_path, "Nemotron-H-8B-Base-8K", rms_norm_eps=1e-6, layer_norm_epsilon=1e-5))
    assert model.architecture.norm_epsilon == 1e-5


# --- J1: a multimodal config is not planned as its text decoder --------------------------------------------------------

def _multimodal(tmp_path, top: str, folder: str, **parts) -> str:
    """A multimodal config.json: model_type `top`, the text model of tests/data/hf/`folder` as its text_config."""
    text = json.loads((HF / folder / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(model_type=top, text_config=text, **parts)))
    return f"hf:{tmp_path}"


@pytest.mark.parametrize("top, folder, parts, shown", [
    ("kimi_vl", "Moonlight-16B-A3B", dict(vision_config={"model_type": "moonvit", "hidden_size": 1152}), "vision_config"),
    ("llava", "Llama-3.1-8B", dict(vision_config={"model_type": "clip_vision_model"}), "vision_config"),
    ("mistral3", "Mistral-Nemo-Base-2407", dict(vision_config={"model_type": "pixtral"}), "vision_config"),
    ("some_vlm", "Qwen3-8B", dict(mm_vision_tower="openai/clip-vit-large-patch14"), "mm_vision_tower"),
    ("qwen2_audio", "Qwen2.5-7B", dict(audio_config={"model_type": "qwen2_audio_encoder"}), "audio_config"),
])
def test_a_multimodal_config_is_refused_naming_its_model_type_and_encoder(tmp_path, top, folder, parts, shown):
    """Kimi-VL, LLaVA and Mistral-Small-3.1 (mistral3) were planned and launched as their text decoder with no word of
    the vision tower (exit 0), while Qwen3-VL was refused; any config with another modality's part is now refused."""
    out = _refused(_multimodal(tmp_path, top, folder, **parts), gpus=16)
    assert f"model_type={top!r} is not modelled: a multimodal model (config.json has {shown})" in out, out
    assert "alone is not the model trained" in out, out


def test_qwen3_5_with_its_vision_config_is_planned_as_its_language_model_and_the_plan_says_so(tmp_path):
    """The README documents Qwen3.5's language model planned alone: kept, and both the plan's notes and the terminal
    say the vision encoder is not in it."""
    raw = json.loads((HF / "Qwen3.5-27B" / "config.json").read_text())
    raw["vision_config"] = {"model_type": "qwen3_5", "depth": 27, "hidden_size": 1152}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    doc = _plan(f"hf:{tmp_path}", gpus=16)
    notes = [n for n in doc["megatron"]["notes"] if "language model alone" in n]
    assert len(notes) == 1 and "vision encoder (vision_config)" in notes[0], doc["megatron"]["notes"]


# --- J5: a head other than a causal language model's -------------------------------------------------------------------

@pytest.mark.parametrize("head", ["LlamaForSequenceClassification", "LlamaForTokenClassification",
                                  "LlamaForQuestionAnswering", "LlamaModel"])
def test_a_config_whose_architectures_is_not_a_causal_lm_is_refused_naming_the_key(tmp_path, head):
    """A reward model (LlamaForSequenceClassification, num_labels 1) was planned with a 128256-wide output layer and
    launched as pretrain_gpt.py."""
    out = _refused(_variant(tmp_path, "Llama-3.1-8B", architectures=[head], num_labels=1), gpus=8)
    assert f"architectures=[{head!r}] is not modelled: {head} is not a causal language model" in out, out


def test_causal_lm_heads_are_read(tmp_path):
    assert load_hf_model(_variant(tmp_path, "Llama-3.1-8B", architectures=["LlamaForCausalLM"])).vocab == 128256


# --- J6: TorchTitan's refusal of a Qwen3-MoE config with a dense first layer names the key ---------------------------

def test_torchtitan_refusal_of_a_qwen3_moe_with_a_dense_first_layer_names_mlp_only_layers(tmp_path):
    """It said 'TorchTitan 0.3.0 has no hf:... model (its modules: llama3, qwen3, ...)' and no reason, while the same
    config without the key launches as TorchTitan's qwen3 30B-A3B: its qwen3 MoE layers are MoE on every layer."""
    out = _refused(_variant(tmp_path, "Qwen3-30B-A3B", mlp_only_layers=[0]), "--framework", "torchtitan", gpus=16)
    assert "its qwen3 MoE layers" in out and "mlp_only_layers=[0] (1 dense MLP layer(s) before the MoE ones" in out, out


def test_torchtitan_refusal_of_a_shared_expert_moe_names_what_its_qwen3_layers_build_otherwise():
    out = _refused(f"hf:{HF / 'Qwen2-57B-A14B'}", "--framework", "torchtitan", gpus=16)
    assert "architecture.qkv_bias True (the flavor: False)" in out and "num_shared_experts 8" in out, out
