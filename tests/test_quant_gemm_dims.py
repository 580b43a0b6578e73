"""Quantized GEMMs' size rules beyond the weights' block sizes (outside probe S): the token dimension M (mbs x seq_len
/ cp and the like: layout/quant_dims.py gemm_tokens) a multiple of each framework's and precision's block, FP8's
per-rank weight rule (Transformer Engine's assert_dim_for_fp8_exec; TorchTitan's Float8 converter skipping a Linear
whose size is not a multiple of 16), and a precision rule that rules out every layout said as that rule (not "world")."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.planner.emit.torchtitan import torchtitan_plan
from commbench.planner.layout.quant_dims import (QUANT_TOKEN_BLOCK, converted_dims, gemm_tokens, quant_tokens_ok,
                                                 quant_tp_misfits)
from commbench.planner.layout.spec import Layout
from commbench.planner.models.zoo import load_model
from commbench.planner.search.space import SearchRequest, search
from tests.test_titan_probe_n import _one_line_error, nvfp4_refuses

runner = CliRunner()
ODD = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1000, "intermediate_size": 2700,
       "num_attention_heads": 8, "num_key_value_heads": 8, "num_hidden_layers": 8, "vocab_size": 32000,
       "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
       "tie_word_embeddings": False}


@pytest.fixture()
def odd_model(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(ODD))
    return f"hf:{tmp_path}"


# 1: the token dimension ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("framework,precision,seq_len", [("megatron", "mxfp8", 8200), ("megatron", "nvfp4", 8200),
                                                         ("torchtitan", "mxfp8", 8200), ("megatron", "fp8", 4097)])
def test_search_proposes_only_token_dimensions_the_kernels_take(framework, precision, seq_len):
    req = SearchRequest(model=load_model("llama3-8b"), fabric=load_preset("b200-hgx", num_gpus=8), num_gpus=8, gbs=128,
                        precision=precision, seq_len=seq_len, framework=framework)
    lay = search(req).layouts
    num, den = gemm_tokens(framework, precision, seq_len, lay.mbs, lay.cp, lay.tp, lay.sequence_parallel)
    assert len(lay) and (num % den == 0).all() and ((num // den) % QUANT_TOKEN_BLOCK[(framework, precision)] == 0).all()


def test_a_seq_len_no_mbs_or_cp_mends_is_refused_naming_the_multiple():
    _one_line_error(runner.invoke(app, ["plan", "--model", "llama3-8b", "--system", "b200-hgx", "--gpus", "8",
                                        "--seq-len", "4097", "--precision", "nvfp4", "--framework", "torchtitan"]),
                    "--seq-len 4097", "nvfp4", "multiple of 128", "nvfp4_mm_triton")
    line = _one_line_error(runner.invoke(app, ["plan", "--model", "llama3-8b", "--system", "b200-hgx", "--gpus", "8",
                                               "--seq-len", "4097"]),
                           "--seq-len 4097", "mxfp8 (not given: the default on B200)", "multiple of 32", "pin mbs=32")
    assert "fp8" in line.split("use ")[-1]      # Megatron's FP8 takes mbs=8 x 4097: offered instead


def test_a_pinned_layout_whose_token_dimension_misses_is_refused():
    _one_line_error(runner.invoke(app, ["plan", "--model", "llama3-8b", "--system", "b200-hgx", "--gpus", "8",
                                        "--seq-len", "4097", "--precision", "fp8",
                                        "--layout", "tp=1,pp=1,vp=1,ep=1,mbs=1"]),
                    "mbs=1", "M = 4097", "multiple of 8", "assert_dim_for_fp8_exec")


def test_megatron_checks_the_sequence_parallel_shard_and_torchtitan_nvfp4_the_local_sequence():
    # TE checks and quantizes the local input before sequence parallelism's all-gather: M = mbs x seq / cp / tp
    assert quant_tokens_ok("megatron", "mxfp8", 1024, [1, 1], [8, 8], [8, 8], [True, False]).tolist() == [False, True]
    # nvfp4_mm_triton's M is input.shape[-2], the local sequence: no micro-batch size mends it
    assert not quant_tokens_ok("torchtitan", "nvfp4", 4160, [8], [1], [1], [True])[0]
    assert quant_tokens_ok("torchtitan", "nvfp4", 8192, [1], [2], [1], [True])[0]
    # a Megatron-searched layout is not emitted as a TorchTitan launch torchao refuses
    refused = torchtitan_plan(Layout(tp=1, pp=1, dp=8, mbs=2, gbs=128, precision="nvfp4"), load_model("llama3-8b"),
                              seq_len=8200)
    assert "8200" in refused["refused"] and "multiple of 128" in refused["refused"]


def test_the_nvfp4_token_rule_agrees_with_torchaos_own_check():
    torch = pytest.importorskip("torch")
    nvfp4 = pytest.importorskip("torchao.prototype.moe_training.nvfp4_training.nvfp4_linear")
    for mbs, seq in ((1, 4096), (4, 4160), (2, 1000), (1, 8200)):
        refused = nvfp4_refuses(nvfp4, torch.zeros(mbs, seq, 128, dtype=torch.bfloat16),
                                torch.zeros(128, 128, dtype=torch.bfloat16))
        assert refused == (not quant_tokens_ok("torchtitan", "nvfp4", seq, [mbs], [1], [1], [True])[0]), (mbs, seq)


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


def test_a_torchtitan_fp8_plan_of_a_model_its_converter_would_skip_is_refused(odd_model):
    _one_line_error(runner.invoke(app, ["plan", "--model", odd_model, "--system", "h100-hgx", "--gpus", "8",
                                        "--framework", "torchtitan", "--precision", "fp8"]),
                    "Float8LinearConverter", "hidden 1000 (not a multiple of 16)", "use --precision bf16")


def test_a_pinned_torchtitan_fp8_layout_its_converter_would_skip_is_refused(odd_model):
    _one_line_error(runner.invoke(app, ["plan", "--model", odd_model, "--system", "h100-hgx", "--gpus", "8",
                                        "--framework", "torchtitan", "--precision", "fp8", "--layout", "tp=1"]),
                    "Float8LinearConverter", "hidden 1000 (not a multiple of 16)")


# 3: the precision's rule, said as such -------------------------------------------------------------------------------

def test_the_default_precision_ruling_out_every_layout_says_so(odd_model):
    line = _one_line_error(runner.invoke(app, ["plan", "--model", odd_model, "--system", "b200-hgx", "--gpus", "8"]),
                           "--precision mxfp8 (not given: the default on B200)", "hidden 1000", "use --precision bf16")
    assert "world" not in line and "pick a tp" not in line      # the hidden size is not split by tp
    pinned = _one_line_error(runner.invoke(app, ["plan", "--model", odd_model, "--system", "b200-hgx", "--gpus", "8",
                                                 "--precision", "mxfp8", "--layout", "tp=2"]), "hidden 1000")
    assert "pick a tp" not in pinned



def test_distinct_small_integers_are_np_unique_s():
    """quant_tp_ok walks each distinct tp and etp of ~400,000 candidate rows, counted rather than sorted: the same
    values, in order, of the same Python type as np.unique(...).tolist()."""
    import numpy as np
    from commbench.planner.layout.quant_dims import _distinct
    rng = np.random.default_rng(0)
    for dtype in (np.int8, np.int16, np.int64, np.uint8, np.float64):
        for _ in range(100):
            low, high = (0, 255) if dtype == np.uint8 else (-128, 127)
            values = rng.integers(low, high, int(rng.integers(0, 50))).astype(dtype)
            got, want = _distinct(values), np.unique(values).tolist()
            assert got == want and [type(v) for v in got] == [type(v) for v in want]
