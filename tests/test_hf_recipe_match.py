"""Probe P, finding 2: a config.json that is a zoo model (Kimi-K2-Instruct's against kimi-k2, Qwen3-30B-A3B's against
qwen3-30b-a3b) was planned as a model no recipe covers: "No recipe of the release covers hf:...", the features of other
models' recipes searched (moe_a2a_overlap, per-layer CUDA graphs that the Kimi recipe does not run: 5,895 against the
zoo's 5,413 tokens/s/GPU on 256 GB300), no "NVIDIA's tuned layout" line, and 16 sequences per GPU for the global batch
instead of the recipe's (Qwen3-30B-A3B on 16 H100: 256 against 1,024). An hf: model now reads the recipes of the zoo
model whose architecture it has (layout/recipe_model.py), and says so; one that differs in a structural field does
not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.layout.recipe_model import recipe_match, recipe_model
from commbench.planner.models.zoo import load_model

# The probe's Kimi-K2-Instruct config.json (moonshotai/Kimi-K2-Instruct, as the probe wrote it: the published values,
# without auto_map, token ids and quantization_config).
KIMI_K2 = {
    "architectures": ["DeepseekV3ForCausalLM"], "aux_loss_alpha": 0.001, "first_k_dense_replace": 1,
    "hidden_act": "silu", "hidden_size": 7168, "intermediate_size": 18432, "kv_lora_rank": 512,
    "max_position_embeddings": 131072, "model_type": "kimi_k2", "moe_intermediate_size": 2048, "moe_layer_freq": 1,
    "n_group": 1, "n_routed_experts": 384, "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 64,
    "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 64, "num_nextn_predict_layers": 0,
    "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                     "original_max_position_embeddings": 4096, "type": "yarn"},
    "rope_theta": 50000.0, "routed_scaling_factor": 2.827, "scoring_func": "sigmoid", "seq_aux": True,
    "tie_word_embeddings": False, "topk_group": 1, "topk_method": "noaux_tc", "v_head_dim": 128, "vocab_size": 163840}

# The probe's Qwen3-30B-A3B config.json (Qwen/Qwen3-30B-A3B: rope_theta 1e6, max_position_embeddings 40960), the same
# values as tests/data/hf/Qwen3-30B-A3B/config.json.
QWEN3_30B = {
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144, "max_position_embeddings": 40960,
    "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
    "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 48, "num_key_value_heads": 4, "output_router_logits": False, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000, "router_aux_loss_coef": 0.001, "sliding_window": None,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936}

CASES = {"kimi": (KIMI_K2, "kimi-k2", "gb300-nvl72", 256), "qwen3": (QWEN3_30B, "qwen3-30b-a3b", "h100-hgx", 16)}


def _write(tmp_path: Path, name: str, config: dict, **changes) -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    return f"hf:{folder}"


def _plan(model: str, system: str, gpus: int, *more: str) -> dict:
    res = CliRunner().invoke(app, ["plan", "--model", model, "--system", system, "--gpus", str(gpus), "--top", "1",
                                   "--json", *more])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def _line(doc: dict, start: str) -> str:
    return next((line for line in doc["explanation"] if line.startswith(start)), "")


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_zoo_models_config_json_plans_as_the_zoo_model(tmp_path, case):
    config, zoo, system, gpus = CASES[case]
    hf = _write(tmp_path, case, config)
    ours, theirs = _plan(hf, system, gpus), _plan(zoo, system, gpus)
    # the same search: layout, prediction, global batch and NVIDIA's tuned layout
    assert ours["layout"] == theirs["layout"]
    assert ours["predicted"]["tokens_per_s_per_gpu"] == pytest.approx(theirs["predicted"]["tokens_per_s_per_gpu"],
                                                                       rel=1e-9)
    assert ours["layout"]["gbs"] == theirs["layout"]["gbs"]
    assert "versus_recipe" in ours
    assert ours["versus_recipe"]["recipe_config"] == theirs["versus_recipe"]["recipe_config"]
    assert ours["versus_recipe"]["recipe_model"] == zoo
    # the same software line, and no claim that no recipe covers it
    name = load_model(hf).name
    assert _line(ours, "Software:") == _line(theirs, "Software:") and f"for {zoo} " in _line(ours, "Software:")
    assert not any("No recipe of the release covers" in line for line in ours["explanation"])
    # the plan says whose recipes it read and why
    said = _line(ours, f"{name} has {zoo}'s architecture")
    assert said and f"Megatron-Bridge 26.08's recipes for {zoo}" in said
    assert f"recipe {theirs['versus_recipe']['recipe_config']} for {zoo} (whose architecture {name} has)" in \
        _line(ours, "gbs ")
    assert f"for {zoo}, whose architecture {name} has" in _line(ours, "NVIDIA's tuned layout")


def test_the_recipe_gbs_and_pinned_layout_match_the_zoo_model(tmp_path):
    """The probe's pinned Qwen3-30B-A3B layout: 12,362 tokens/s/GPU for the hf: config (other models' EP overlap
    searched), 11,582 for the zoo name; and its default gbs 256 against the recipe's 1,024."""
    hf = _write(tmp_path, "qwen3", QWEN3_30B)
    pins = ("--layout", "tp=1,pp=1,vp=1,ep=16,mbs=2", "--gbs", "1024")
    ours, theirs = _plan(hf, "h100-hgx", 16, *pins), _plan("qwen3-30b-a3b", "h100-hgx", 16, *pins)
    assert ours["layout"] == theirs["layout"]
    assert ours["predicted"]["tokens_per_s_per_gpu"] == pytest.approx(theirs["predicted"]["tokens_per_s_per_gpu"],
                                                                       rel=1e-9)
    res = CliRunner().invoke(app, ["plan", "--model", hf, "--system", "h100-hgx", "--gpus", "16", *pins],
                             env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    assert "has qwen3-30b-a3b's architecture" in res.output
    from commbench.cli.plan import resolve_gbs
    gbs, note = resolve_gbs(None, {}, model=load_model(hf), gpu="h100", precision="fp8", num_gpus=16, software=None)
    assert gbs == 1024 and "qwen3_30b_a3b_pretrain_16gpu_h100_fp8cs_config" in note


def test_rope_and_max_positions_do_not_change_the_match(tmp_path):
    """Qwen3-30B-A3B-Instruct-2507's config: rope_theta 1e7, 262144 positions; the match lists what it ignored."""
    hf = load_model(_write(tmp_path, "q2507", QWEN3_30B, rope_theta=10000000, max_position_embeddings=262144))
    name, ignored = recipe_match(hf)
    assert name == "qwen3-30b-a3b"
    assert any(s.startswith("rotary_base 10000000") for s in ignored)
    assert any(s.startswith("max_position_embeddings 262144") for s in ignored)


@pytest.mark.parametrize("change", [{"num_hidden_layers": 60}, {"n_routed_experts": 256}, {"num_experts_per_tok": 6},
                                    {"first_k_dense_replace": 2}, {"num_nextn_predict_layers": 1},
                                    {"moe_intermediate_size": 1536}, {"vocab_size": 160000}])
def test_a_structural_change_is_another_model(tmp_path, change):
    hf = load_model(_write(tmp_path, "kimi", KIMI_K2, **change))
    assert recipe_model(hf) == hf.name


def test_a_changed_layer_count_plans_without_the_recipe(tmp_path):
    hf = _write(tmp_path, "q47", QWEN3_30B, num_hidden_layers=47, max_window_layers=47)
    doc = _plan(hf, "h100-hgx", 16)
    name = load_model(hf).name
    assert "versus_recipe" not in doc
    assert doc["layout"]["gbs"] == 16 * 16   # no recipe: 16 sequences per GPU
    assert f"No recipe of the release covers {name} there" in _line(doc, "Software:")
    assert not any("architecture (the same" in line for line in doc["explanation"])
