"""`plan --model hf:PATH` on configs an outside probe (probe P, 2026-12-05) found planned as another model or with a
launch a framework rejects: DeepSeek-V3.2 written as deepseek_v3 / kimi_k2, Nemotron-H's attention biases and window,
a softmax router with an expert bias; and the TorchTitan launch's RoPE and tokenizer folder of hf: models."""

from __future__ import annotations

import pytest

from commbench.errors import CommbenchError
from commbench.planner.models.hf_config import load_hf_model
from commbench.planner.models.hf_refused import ARCHITECTURE_KEYS, architecture_key_refusal, refused_class
from tests.test_hf_launch_fidelity import _refused, _variant

_INDEXER = dict(index_topk=2048, index_n_heads=64, index_head_dim=128)


# --- P1: DeepSeek-V3.2 under model_type deepseek_v3 / kimi_k2 ---------------------------------------------------------

def test_deepseek_v32_class_under_deepseek_v3_model_type_is_refused_naming_the_class(tmp_path):
    """sglang / miles ship DeepSeek-V3.2 as architectures DeepseekV32ForCausalLM with model_type deepseek_v3; it was
    planned as dense-MLA DeepSeek-V3."""
    out = _refused(_variant(tmp_path, "DeepSeek-V3", architectures=["DeepseekV32ForCausalLM"], **_INDEXER),
                   "--gpus", "256")
    assert "architectures=['DeepseekV32ForCausalLM']" in out and "'deepseek_v32'" in out
    assert "DeepSeek Sparse Attention" in out


@pytest.mark.parametrize("folder", ["DeepSeek-V3", "Kimi-K2-Instruct"])
def test_indexer_keys_on_an_mla_type_are_refused_naming_the_key(tmp_path, folder):
    out = _refused(_variant(tmp_path, folder, **_INDEXER), "--gpus", "256")
    assert "index_topk=2048 is not modelled" in out and "lightning indexer" in out


def test_indexer_keys_stay_read_by_deepseek_v4():
    assert architecture_key_refusal(dict(_INDEXER), "deepseek_v4") is None


def test_a_null_or_identity_architecture_key_is_not_refused():
    """Harmless values (a key at null, a muP multiplier of 1) leave the network as the reader builds it."""
    assert architecture_key_refusal({"attention_chunk_size": None, "logits_scaling": 1.0,
                                     "torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8"}},
                                    "llama") is None
    assert "attention_chunk_size=8192" in architecture_key_refusal({"attention_chunk_size": 8192}, "llama")
    assert "residual_multiplier=0.22" in architecture_key_refusal({"residual_multiplier": 0.22}, "qwen3_moe")
    assert all(why for _, why, _ in ARCHITECTURE_KEYS.values())


def test_refused_class_matches_transformers_class_names_of_refused_types_only():
    assert refused_class(["Ernie4_5_MoeForCausalLM"]) == ("Ernie4_5_MoeForCausalLM", "ernie4_5_moe")
    assert refused_class(["GlmMoeDsaForCausalLM"]) == ("GlmMoeDsaForCausalLM", "glm_moe_dsa")
    assert refused_class(["DeepseekV3ForCausalLM"]) is None and refused_class(["Qwen3MoeForCausalLM"]) is None


def test_released_configs_are_still_read():
    for folder in ("DeepSeek-V3", "Kimi-K2-Instruct", "DeepSeek-V4-Flash", "Nemotron-H-8B-Base-8K"):
        load_hf_model(f"hf:{__import__('pathlib').Path(__file__).parent / 'data' / 'hf' / folder}")


# --- P4: Nemotron-H's attention_bias and sliding_window ----------------------------------------------------------------

def test_nemotron_h_attention_bias_is_refused(tmp_path):
    """The checkpoints' remote code (NemotronHAttention) biases q/k/v/o_proj with attention_bias; it was dropped."""
    out = _refused(_variant(tmp_path, "Nemotron-H-8B-Base-8K", attention_bias=True), "--gpus", "16")
    assert "attention_bias=true is not modelled for model_type 'nemotron_h'" in out


def test_nemotron_h_sliding_window_is_refused_unless_it_covers_max_positions(tmp_path):
    out = _refused(_variant(tmp_path, "Nemotron-H-8B-Base-8K", sliding_window=1024), "--gpus", "16")
    assert "sliding_window=1024 is not modelled for model_type 'nemotron_h'" in out
    wide = load_hf_model(_variant(tmp_path, "Nemotron-H-8B-Base-8K", sliding_window=8192))   # max positions 8192
    assert wide.sliding_window == 0


# --- P5: a softmax router with DeepSeek-V3's correction bias -----------------------------------------------------------

@pytest.mark.parametrize("folder", ["DeepSeek-V3", "Kimi-K2-Instruct"])
def test_softmax_scores_with_noaux_tc_are_refused(tmp_path, folder):
    """megatron-core 0.16.1 raises 'Expert bias for aux-loss-free routing only supports sigmoid score function' on the
    --moe-router-score-function softmax --moe-router-enable-expert-bias that was emitted."""
    out = _refused(_variant(tmp_path, folder, scoring_func="softmax", topk_method="noaux_tc"), "--gpus", "256")
    assert "scoring_func='softmax' with topk_method='noaux_tc' is not modelled" in out and "sigmoid" in out
    greedy = load_hf_model(_variant(tmp_path, folder, scoring_func="softmax", topk_method="greedy"))
    assert greedy.architecture.router_score == "softmax" and not greedy.architecture.router_expert_bias


def test_commbench_error_type_is_what_the_reader_raises(tmp_path):
    with pytest.raises(CommbenchError, match="index_n_heads|index_topk"):
        load_hf_model(_variant(tmp_path, "DeepSeek-V3", index_n_heads=64))


# --- P3: Qwen3 / GLM with YaRN: neither refusal points at the other framework ------------------------------------------

_YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}


@pytest.mark.parametrize("folder", ["Qwen3-30B-A3B", "Qwen3-8B", "GLM-4.5-Air"])
def test_yarn_on_gqa_attention_refusals_are_not_circular(tmp_path, folder):
    """Megatron-LM before megatron-core 0.19.0 (release 26.02.01's: 0.16.1) has no YaRN for GQA attention; TorchTitan
    0.3.0's GQAttention has no YaRN attention factor. Each refusal sent the user to the other framework."""
    model = _variant(tmp_path, folder, rope_scaling=_YARN)
    megatron = _refused(model, "--gpus", "16", "--framework", "megatron", "--software", "26.02.01")
    titan = _refused(model, "--gpus", "16", "--framework", "torchtitan", "--software", "26.02.01")
    assert "plan it with --framework torchtitan" not in megatron and "TorchTitan 0.3.0 cannot build it either" in megatron
    assert "plan it with --framework megatron" not in titan and "megatron-core 0.16.1) cannot build it either" in titan
    assert "YaRN attention factor" in titan


def test_gpt_oss_megatron_refusal_still_points_at_torchtitan():
    # 25.09: neither its Megatron-LM nor its Megatron-Bridge builds gpt-oss (26.02 to 26.06.01 predict it with no
    # Megatron-LM launch, tests/test_gpt_oss_predicted_without_launch.py)
    assert _refused("gpt-oss-20b", "--gpus", "16", "--framework", "megatron", "--software", "25.09").endswith(
        "plan it with --framework torchtitan")


# --- P6: the TorchTitan launch's hf_assets_path is the hf: folder when it holds the tokenizer ---------------------------

def _titan_plan(tmp_path, folder: str, system: str = "h100-hgx", gpus: int = 16, *args: str) -> tuple[str, list[str]]:
    """(commbench_torchtitan.py's text, the TorchTitan notes) of `plan --framework torchtitan` for hf:tmp_path."""
    import json

    from typer.testing import CliRunner

    from commbench.cli.app import app
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["plan", "--model", f"hf:{tmp_path}", "--system", system, "--gpus", str(gpus),
                                   "--top", "1", "--framework", "torchtitan", "-O", str(out), "--force", *args],
                             env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    plan = json.loads((out / "plan.json").read_text())
    return (out / "commbench_torchtitan.py").read_text(), plan["torchtitan"]["notes"]


@pytest.mark.parametrize("folder,system,gpus", [("Qwen3-30B-A3B", "h100-hgx", 16),
                                                ("Moonlight-16B-A3B", "h100-hgx", 16)])
def test_hf_folder_with_tokenizer_is_the_launch_hf_assets_path(tmp_path, folder, system, gpus):
    """A flavor-matched model (Qwen3-30B-A3B) and a generated MLA one (Moonlight) kept ./assets/hf/<name>."""
    _variant(tmp_path, folder)
    (tmp_path / "tokenizer.json").write_text("{}")
    text, notes = _titan_plan(tmp_path, folder, system, gpus)
    assert f"config.hf_assets_path = {str(tmp_path.resolve())!r}" in text
    assert "./assets/hf/" not in text and not any("holds no tokenizer.json" in n for n in notes)


def test_hf_folder_without_tokenizer_says_where_torchtitan_looks(tmp_path):
    _variant(tmp_path, "Moonlight-16B-A3B")
    text, notes = _titan_plan(tmp_path, "Moonlight-16B-A3B")
    note = next(n for n in notes if "holds no tokenizer.json" in n)
    assert f"config.hf_assets_path = './assets/hf/{tmp_path.name}'" in note and str(tmp_path.resolve()) in note


# --- P7: an hf: model's own max_position_embeddings beyond its flavor's RoPE --------------------------------------------

_Q3_2507 = dict(max_position_embeddings=262144, rope_theta=10000000)   # Qwen3-30B-A3B-Instruct-2507's config.json


def test_own_max_positions_lets_torchtitan_train_past_the_flavor_rope(tmp_path, monkeypatch):
    """Qwen3-30B-A3B-Instruct-2507 (262144 positions) was refused at --seq-len 65536 with the qwen3 30B-A3B flavor's
    40960; the config function now sets the model's length on every layer's RoPE, and TorchTitan 0.3.0's
    update_from_config (the seq_len <= rope.max_seq_len check) takes the launch."""
    import shlex

    _variant(tmp_path, "Qwen3-30B-A3B", **_Q3_2507)
    text, _ = _titan_plan(tmp_path, "Qwen3-30B-A3B", "h100-hgx", 16, "--seq-len", "65536", "--gbs", "64")
    assert "layer.attention.rope.max_seq_len = 262144" in text
    pytest.importorskip("torchtitan")
    from tests.torchtitan_train import titan_config
    out = tmp_path / "out"
    argv = shlex.split((out / "torchtitan_args.txt").read_text())
    config, _, _ = titan_config(argv, world=16, capability=(9, 0), plan_dir=out, monkeypatch=monkeypatch)
    assert config.training.seq_len == 65536
    assert all(layer.attention.rope.max_seq_len == 65536 for layer in config.model_spec.model.layers)


def test_seq_len_past_the_hf_model_positions_names_the_hf_model_and_key(tmp_path):
    out = _refused(_variant(tmp_path, "Qwen3-30B-A3B", **_Q3_2507), "--gpus", "16", "--framework", "torchtitan",
                   "--seq-len", "300000")
    assert f"hf:{tmp_path.name} is TorchTitan 0.3.0's qwen3 30B-A3B" in out and "max_position_embeddings=262144" in out
    out = _refused(_variant(tmp_path, "Qwen3-30B-A3B"), "--gpus", "16", "--framework", "torchtitan",
                   "--seq-len", "65536")
    assert f"hf:{tmp_path.name}" in out and "max_position_embeddings=40960" in out and "--seq-len <= 40960" in out


# --- probe R (session 33): a MoE config whose every layer is dense ----------------------------------------------------

@pytest.mark.parametrize("folder,changes,named", [
    ("DeepSeek-V3", dict(first_k_dense_replace=61), "first_k_dense_replace=61 is invalid: 0..60"),
    ("Qwen3-30B-A3B", dict(mlp_only_layers=list(range(48)), intermediate_size=6144), "dense_layers=48 is invalid: 0..47"),
])
def test_a_moe_config_with_no_moe_layer_is_refused_not_planned_with_expert_parallelism(tmp_path, folder, changes,
                                                                                       named):
    """transformers builds every layer dense there (DeepseekV3 layer_idx >= first_k_dense_replace, Qwen MoE
    mlp_only_layers); it was planned as MoE with EP/ETP over experts that do not exist and --num-experts emitted."""
    out = _refused(_variant(tmp_path, folder, **changes), "--gpus", "64")
    assert named in out and "at least one MoE layer" in out


# --- probe P1 (session 43): no decoder layer at all --------------------------------------------------------------------

def test_zero_hidden_layers_is_refused_naming_num_hidden_layers(tmp_path):
    """num_hidden_layers=0 with first_k_dense_replace=1 was refused as "first_k_dense_replace=1 is invalid: 0..-1":
    the key at fault is num_hidden_layers, checked first."""
    out = _refused(_variant(tmp_path, "DeepSeek-V3", num_hidden_layers=0), "--gpus", "64")
    assert "num_hidden_layers=0 is invalid: 1..1,024" in out and "first_k_dense_replace" not in out, out
