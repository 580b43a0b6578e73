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
from tests.test_hf_launch_fidelity import _refused, _variant

HF = Path(__file__).parent / "data" / "hf"


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


# --- J2: Mixtral's router jitter ---------------------------------------------------------------------------------------

def test_mixtral_router_jitter_noise_is_refused_naming_the_key(tmp_path):
    """It was dropped silently. megatron-core 0.16.1's --moe-input-jitter-eps jitters the router's input alone
    (TopKRouter.forward), transformers' Mixtral the whole MoE input (experts too): not the same model."""
    out = _refused(_variant(tmp_path, "Mixtral-8x7B-v0.1", router_jitter_noise=0.01))
    assert "router_jitter_noise=0.01 is not modelled for model_type 'mixtral'" in out, out
    assert "--moe-input-jitter-eps the router's input alone" in out, out


def test_mixtral_without_jitter_is_read(tmp_path):
    assert load_hf_model(_variant(tmp_path, "Mixtral-8x7B-v0.1", router_jitter_noise=0.0)).num_routed_experts == 8


# --- J3: the config's dropout is launched, not replaced by 0 -----------------------------------------------------------

def _megatron_args(doc: dict) -> dict[str, str]:
    args = doc["megatron"]["args"]
    return {a: b for a, b in zip(args, args[1:]) if a.startswith("--")}


def test_attention_dropout_from_the_config_is_launched_and_noted(tmp_path):
    """Llama with attention_dropout 0.1 was launched with --attention-dropout 0.0 and no word."""
    doc = _plan(_variant(tmp_path, "Llama-3.1-8B", attention_dropout=0.1), "--layout", "tp=1,pp=1,mbs=1")
    args = _megatron_args(doc)
    assert args["--attention-dropout"] == "0.1" and args["--hidden-dropout"] == "0.0", args
    assert any("attention dropout 0.1" in n and "charge no dropout" in n for n in doc["megatron"]["notes"]), doc


def test_phi3_resid_pdrop_is_megatron_s_hidden_dropout(tmp_path):
    """Phi3DecoderLayer drops the attention and MLP outputs before each residual add with resid_pdrop."""
    doc = _plan(_variant(tmp_path, "phi-4", resid_pdrop=0.05), "--layout", "tp=1,pp=1,mbs=1")
    assert _megatron_args(doc)["--hidden-dropout"] == "0.05"
    assert any("also drops the embedding output" in n for n in doc["megatron"]["notes"]), doc["megatron"]["notes"]


def test_released_configs_launch_without_dropout():
    assert _megatron_args(_plan(f"hf:{HF / 'Llama-3.1-8B'}", "--layout", "tp=1,pp=1,mbs=1"))["--attention-dropout"] \
        == "0.0"


def test_a_dropout_probability_out_of_range_is_one_line(tmp_path):
    out = _refused(_variant(tmp_path, "Llama-3.1-8B", attention_dropout=1.5), gpus=8)
    assert "attention_dropout=1.5 is invalid: a dropout probability, 0 <= attention_dropout < 1" in out, out


def test_torchtitan_which_builds_no_dropout_refuses_naming_it(tmp_path):
    out = _refused(_variant(tmp_path, "Llama-3.1-8B", attention_dropout=0.1), "--framework", "torchtitan", gpus=8)
    assert "architecture.attention_dropout 0.1 (the flavor: 0.0)" in out, out


def test_attention_dropout_with_graphed_core_attn_recompute_is_refused_pinned_and_never_proposed(tmp_path):
    """megatron-core 0.16.1's TransformerConfig refuses attention dropout with core_attn recomputed in a CUDA graph
    over attention: a pin of it is one line, and the search drops those rows."""
    import numpy as np

    from commbench.planner.layout.spec import CODE_FIELDS
    from commbench.planner.search.frameworks import restrict_columns

    model = _variant(tmp_path, "Llama-3.1-8B", attention_dropout=0.1)
    out = _refused(model, "--layout", "cuda_graph=layer,recompute=selective", "--system", "gb200-nvl72", gpus=8)
    assert "attention dropout 0.1 with core_attn recomputed inside a CUDA graph" in out, out
    graphs, recomputes = CODE_FIELDS["cuda_graph"], CODE_FIELDS["recompute"]
    cols = {"cuda_graph": np.array([graphs.index(g) for g in ("layer", "layer", "none", "full")]),
            "recompute": np.array([recomputes.index(r) for r in ("selective", "none", "selective", "selective")]),
            "cuda_graph_scope": np.zeros(4, dtype=np.int64), "tp": np.arange(4), "fsdp": np.zeros(4, dtype=bool)}
    kept = restrict_columns("megatron", dict(cols), False, load_hf_model(model))
    assert list(kept["tp"]) == [1, 2]
    assert list(restrict_columns("megatron", dict(cols), False, load_hf_model(f"hf:{HF / 'Llama-3.1-8B'}"))["tp"]) \
        == [0, 1, 2, 3]


def test_a_dropout_plan_passes_megatron_s_checks_with_the_config_s_dropout(tmp_path, monkeypatch):
    """Through Megatron-LM's parse_args / validate_args / TransformerConfig (MEGATRON_LM_ROOT), else the installed
    megatron-core's checks: the launch builds attention_dropout 0.1."""
    from tests.megatron_lm import best_plan_through_megatron

    model = load_hf_model(_variant(tmp_path, "Llama-3.1-8B", attention_dropout=0.1))
    args, config = best_plan_through_megatron(model, monkeypatch, gpus=8, gbs=64)
    assert args[args.index("--attention-dropout") + 1] == "0.1"
    assert config is None or config.attention_dropout == 0.1
