"""A --framework torchtitan --torchtitan-version 0.2 plan writes the launch it asks for, or is refused in one line.

Probe P1 (session 43): `--model hf:DeepSeek-V2-Lite --framework torchtitan --torchtitan-version 0.2` searched and
exited 0 with plan.json only (0.2.2 has no MLA flavor); `--model gpt-oss-20b` on 16 B200 searched, picked MoE HSDP and
then said 0.2 cannot emit it (exit 0); and a model without any TorchTitan model was refused naming "TorchTitan 0.3.0"
under --torchtitan-version 0.2. Now a model 0.2 cannot train is refused before the search, naming 0.2.2 (exit 2), and
the search proposes only what the 0.2 TOML can write (emit/torchtitan.titan_02_pins).
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app

# DeepSeek-V2-Lite's config.json (huggingface.co/deepseek-ai/DeepSeek-V2-Lite), the fields the reader takes
DSV2_LITE = {"architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2", "hidden_size": 2048,
             "intermediate_size": 10944, "moe_intermediate_size": 1408, "num_hidden_layers": 27,
             "num_attention_heads": 16, "num_key_value_heads": 16, "n_shared_experts": 2, "n_routed_experts": 64,
             "num_experts_per_tok": 6, "first_k_dense_replace": 1, "moe_layer_freq": 1, "kv_lora_rank": 512,
             "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
             "topk_method": "greedy", "n_group": 1, "topk_group": 1, "norm_topk_prob": False,
             "routed_scaling_factor": 1.0, "scoring_func": "softmax", "aux_loss_alpha": 0.001, "seq_aux": True,
             "hidden_act": "silu", "max_position_embeddings": 163840, "rms_norm_eps": 1e-06, "rope_theta": 10000,
             "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                              "beta_fast": 32, "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707},
             "attention_bias": False, "attention_dropout": 0.0, "tie_word_embeddings": False, "vocab_size": 102400,
             "torch_dtype": "bfloat16"}


def _plan(*args):
    return CliRunner().invoke(app, ["plan", "--framework", "torchtitan", "--torchtitan-version", "0.2", *args])


def _one_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip() and not line.startswith("note:")]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    return lines[0]


def test_a_model_without_a_0_2_flavor_is_refused_before_the_search(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(DSV2_LITE))
    line = _one_line(_plan("--model", f"hf:{tmp_path}", "--system", "gb200-nvl72", "--gpus", "128",
                           "-O", str(tmp_path / "out")))
    assert line.startswith("error: TorchTitan 0.2.2 has no") and "--torchtitan-version 0.3" in line, line
    assert not (tmp_path / "out" / "plan.json").exists()


def test_a_model_without_any_torchtitan_model_names_the_asked_version():
    line = _one_line(_plan("--model", "mixtral-8x7b", "--system", "h100-hgx", "--gpus", "64"))
    assert line.startswith("error: TorchTitan 0.2.2 has no mixtral-8x7b model") and "0.3.0" not in line, line
    assert "--framework megatron" in line


def test_the_search_proposes_only_what_0_2_writes(tmp_path):
    out = tmp_path / "out"
    result = _plan("--model", "gpt-oss-20b", "--system", "b200-hgx", "--gpus", "16", "-O", str(out))
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "plan.json").read_text())
    assert doc["layout"]["fsdp_replicas"] == 1                     # no MoE HSDP: 0.2 cannot write it
    assert "refused" not in doc["torchtitan"], doc["torchtitan"].get("refused")
    assert (out / "torchtitan.toml").exists()


def test_a_pin_0_2_cannot_write_is_refused_in_one_line():
    line = _one_line(_plan("--model", "gpt-oss-20b", "--system", "b200-hgx", "--gpus", "16",
                           "--layout", "fsdp_replicas=2"))
    assert "fsdp_replicas=2 is invalid with --torchtitan-version 0.2" in line and "TorchTitan 0.2.2" in line
    line = _one_line(_plan("--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "16",
                           "--precision", "nvfp4"))
    assert "--precision nvfp4 is invalid with --torchtitan-version 0.2" in line
