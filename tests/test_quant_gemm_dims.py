"""Quantized GEMMs' size rules beyond the weights' block sizes (outside probe S): the token dimension M (mbs x seq_len
/ cp and the like: layout/quant_dims.py gemm_tokens) a multiple of each framework's and precision's block, FP8's
per-rank weight rule (Transformer Engine's assert_dim_for_fp8_exec; TorchTitan's Float8 converter skipping a Linear
whose size is not a multiple of 16), a precision rule that rules out every layout said as that rule (not "world"),
and a no-fit line that names the global batch its GPU count was found at."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.layout.quant_dims import converted_dims, quant_tp_misfits
from commbench.planner.models.zoo import load_model

runner = CliRunner()
ODD = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1000, "intermediate_size": 2700,
       "num_attention_heads": 8, "num_key_value_heads": 8, "num_hidden_layers": 8, "vocab_size": 32000,
       "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
       "tie_word_embeddings": False}


def _one_line_error(res, *needles: str) -> str:
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.output, res.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture()
def odd_model(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(ODD))
    return f"hf:{tmp_path}"


# 2: FP8's weight rule ------------------------------------------------------------------------------------------------

def test_fp8_weight_rules(odd_model):
    model = load_model(odd_model)
    titan = {name: m for name, _, _, m in converted_dims(model, "torchtitan", "fp8")}
    assert titan and set(titan.values()) == {16} and not any("lm_head" in n for n in titan)   # lm_head stays BF16
    assert any("hidden 1000" in m for m in quant_tp_misfits(model, "torchtitan", "fp8", 1))
    moe = load_model("qwen3-30b-a3b")    # Float8GroupedExperts' grouped GEMM: expert_ffn / etp a multiple of 16
    assert any("expert_ffn" in n for n, *_ in converted_dims(moe, "torchtitan", "fp8"))
    # Transformer Engine's assert_dim_for_fp8_exec: in features a multiple of 16, out features (wqkv out) of 8
    mega = {name: m for name, _, _, m in converted_dims(model, "megatron", "fp8")}
    assert mega["(heads + 2 kv_heads) x head_dim (wqkv out)"] == 8 and mega["hidden"] == 16
    assert not any("expert" in n for n, *_ in converted_dims(moe, "megatron", "fp8"))   # GroupedLinear: no check
    assert not quant_tp_misfits(load_model("llama3-8b"), "megatron", "fp8", 8)


def test_a_pinned_torchtitan_fp8_layout_its_converter_would_skip_is_refused(odd_model):
    _one_line_error(runner.invoke(app, ["plan", "--model", odd_model, "--system", "h100-hgx", "--gpus", "8",
                                        "--framework", "torchtitan", "--precision", "fp8", "--layout", "tp=1"]),
                    "Float8LinearConverter", "hidden 1000 (not a multiple of 16)")
