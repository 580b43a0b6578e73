"""TorchTitan 0.3.0 plan artifacts (outside probe N): gpt-oss never at cp > 1 (its varlen attention refuses CP), block-
scaled precisions only at TP sizes whose per-rank GEMM sizes torchao's kernels take, MoE experts split over TP at
ep = 1 (etp = tp, as TorchTitan's moe_sharding runs it), HSDP pinned without fsdp=true accepted."""

from __future__ import annotations

import dataclasses
import json
import shlex

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.planner.emit.torchtitan import torchtitan_plan
from commbench.planner.layout.quant_dims import converted_dims, quant_tp_misfits, quant_tp_ok
from commbench.planner.layout.spec import Layout
from commbench.planner.models.zoo import load_model
from commbench.planner.search.frameworks import framework_pins

runner = CliRunner()

QWEN3_4B = {"architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "head_dim": 128,
            "hidden_act": "silu", "hidden_size": 2560, "intermediate_size": 9728, "max_position_embeddings": 40960,
            "model_type": "qwen3", "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
            "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
            "tie_word_embeddings": True, "torch_dtype": "bfloat16", "use_sliding_window": False, "vocab_size": 151936}


def _plan(*args: str):
    return runner.invoke(app, ["plan", *args])


def _one_line_error(res, *needles: str) -> str:
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.output, res.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def nvfp4_refuses(nvfp4, x, w) -> bool:
    """Whether torchao's nvfp4_mm_triton refuses input `x` against weight `w` at its size check ("divisible by
    128"); past that check its Triton kernels need a GPU, which is not a refusal."""
    import torch
    try:
        nvfp4.nvfp4_mm_triton.apply(x, w, None, torch.zeros(1, dtype=torch.int64), (1,) * 16)
    except ValueError as exc:
        return "divisible by 128" in str(exc)
    except Exception:   # past the size check: the Triton kernels need a GPU
        return False
    return False


@pytest.fixture()
def qwen3_4b(tmp_path):
    folder = tmp_path / "qwen3-4b"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN3_4B))
    return f"hf:{folder}"


# N1 ---------------------------------------------------------------------------------------------------------------

def test_gpt_oss_cp_pin_is_refused_and_the_search_keeps_cp_1(tmp_path):
    res = _plan("--model", "gpt-oss-20b", "--system", "h100-hgx", "--gpus", "16", "--framework", "torchtitan",
                "--layout", "tp=1,pp=1,vp=1,ep=8,cp=2,mbs=1")
    _one_line_error(res, "cp=2", "VarlenAttention", "pin cp=1")
    assert framework_pins("torchtitan", load_model("gpt-oss-120b"), {})["cp"] == 1   # the search is held at cp = 1
    assert "cp" not in framework_pins("torchtitan", load_model("deepseek-v3"), {})   # flex attention: CP searched
    refused = torchtitan_plan(Layout(tp=1, pp=1, cp=2, ep=8, etp=1, dp=8, gbs=64), load_model("gpt-oss-20b"))
    assert "VarlenAttention" in refused["refused"]


# N2 ---------------------------------------------------------------------------------------------------------------

def test_nvfp4_tp_whose_per_rank_ffn_is_not_a_multiple_of_128_is_refused_and_not_searched(qwen3_4b, tmp_path):
    res = _plan("--model", qwen3_4b, "--system", "gb300-nvl72", "--gpus", "8", "--framework", "torchtitan",
                "--precision", "nvfp4", "--layout", "tp=8,pp=1,vp=1,ep=1,mbs=1")
    _one_line_error(res, "tp=8", "9728 / tp 8 = 1216", "multiple of 128")
    out = tmp_path / "searched"
    res = _plan("--model", qwen3_4b, "--system", "gb300-nvl72", "--gpus", "8", "--framework", "torchtitan",
                "--precision", "nvfp4", "--layout", "tp=4", "--out", str(out))
    assert res.exit_code == 0, res.output   # 9728 / 4 = 2432 = 19 x 128
    res = _plan("--model", qwen3_4b, "--system", "gb300-nvl72", "--gpus", "8", "--framework", "torchtitan",
                "--precision", "nvfp4", "--top", "50")
    assert res.exit_code == 0, res.output
    assert "TP8 " not in res.output and "TP1 " in res.output


def test_mxfp8_dense_lm_head_vocab_split_and_moe_experts_split_over_tp(qwen3_4b):
    res = _plan("--model", qwen3_4b, "--system", "gb300-nvl72", "--gpus", "8", "--framework", "torchtitan",
                "--precision", "mxfp8", "--layout", "tp=8,pp=1,vp=1,ep=1,mbs=1")
    _one_line_error(res, "tp=8", "vocab (lm_head out) 151936 / tp 8 = 18992", "multiple of 32")
    # a plan searched for Megatron does not write a TorchTitan launch torchao refuses either
    refused = torchtitan_plan(Layout(tp=8, pp=1, dp=1, mbs=1, gbs=8, precision="nvfp4"), load_model(qwen3_4b))
    assert "1216" in refused["refused"]
    model = dataclasses.replace(load_model("llama3-8b"), name="qwen-vocab", vocab=151936)
    assert any("lm_head" in m and "18992" in m for m in quant_tp_misfits(model, "torchtitan", "mxfp8", 8))
    assert not quant_tp_misfits(load_model("llama3-8b"), "torchtitan", "mxfp8", 8)       # 128256 / 8 = 16032
    assert not quant_tp_misfits(model, "torchtitan", "nvfp4", 8)   # nvfp4 keeps lm_head in BF16 (fqns=["layers"])
    moe = load_model("qwen3-30b-a3b")   # TorchTitan splits its experts over TP at ep = 1: K = 768 / tp
    assert quant_tp_misfits(moe, "torchtitan", "mxfp8", 4, 4) and not quant_tp_misfits(moe, "torchtitan", "mxfp8", 4, 1)
    ok = quant_tp_ok(moe, "torchtitan", "mxfp8", np.array([2, 4, 4]), np.array([2, 4, 1]))
    assert ok.tolist() == [True, False, True]
    # Megatron / Transformer Engine: NVFP4 needs multiples of 16, MXFP8 of 32 (quantizer.cpp's block sizes)
    nano = load_model("nemotron-3-nano-30b-a3b")   # expert_ffn 1856: / 4 = 464 (16 x 29), / 2 = 928 (32 x 29)
    assert quant_tp_misfits(nano, "megatron", "mxfp8", 1, 4) and not quant_tp_misfits(nano, "megatron", "mxfp8", 1, 2)
    assert not quant_tp_misfits(nano, "megatron", "nvfp4", 1, 4)
    odd = dataclasses.replace(load_model("llama3-8b"), name="odd", dense_ffn=14344)   # 14344 / 8 = 1793
    assert quant_tp_misfits(odd, "megatron", "nvfp4", 8) and not quant_tp_misfits(load_model("qwen3-30b-a3b"),
                                                                                   "megatron", "nvfp4", 4, 4)


def test_the_rule_agrees_with_torchaos_own_checks():
    """torchao 0.18's MXFP8 cast (the one MXFP8Linear runs on the input and the output gradient) and NVFP4 GEMM
    (nvfp4_mm_triton checks its sizes before any kernel) refuse exactly the per-rank sizes the rule refuses."""
    torch = pytest.importorskip("torch")
    mx_tensor = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
    nvfp4 = pytest.importorskip("torchao.prototype.moe_training.nvfp4_training.nvfp4_linear")
    model = dataclasses.replace(load_model("llama3-8b"), name="qwen-sized", dense_ffn=9728, vocab=151936)
    for tp in (1, 2, 4, 8):
        for name, size, shard, multiple in converted_dims(model, "torchtitan", "mxfp8"):
            local = size // (tp if shard == "tp" else 1)
            try:
                mx_tensor.MXTensor.to_mx(torch.zeros(32, local, dtype=torch.bfloat16), torch.float8_e4m3fn, 32)
                refused = False
            except AssertionError:
                refused = True
            assert refused == bool(local % multiple), (name, tp, local)
        for name, size, shard, _ in converted_dims(model, "torchtitan", "nvfp4"):
            local = size // (tp if shard == "tp" else 1)
            refused = nvfp4_refuses(nvfp4, torch.zeros(1, 128, 128, dtype=torch.bfloat16),
                                    torch.zeros(local, 128, dtype=torch.bfloat16))
            assert refused == any(name in m for m in quant_tp_misfits(model, "torchtitan", "nvfp4", tp)), (name, tp)


# N3 ---------------------------------------------------------------------------------------------------------------

def test_moe_at_ep1_is_planned_as_etp_tp_which_torchtitan_runs(tmp_path, monkeypatch):
    from tests.torchtitan_train import titan_config
    out = tmp_path / "plan"
    res = _plan("--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "8", "--framework", "torchtitan",
                "--layout", "tp=2,pp=1,vp=1,ep=1,mbs=1", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert json.loads((out / "plan.json").read_text())["layout"]["etp"] == 2
    argv = shlex.split((out / "torchtitan_args.txt").read_text())
    config, dims, _ = titan_config(argv, world=8, capability=(9, 0), plan_dir=out, monkeypatch=monkeypatch)
    layer = config.model_spec.model.layers
    layer = layer[0] if isinstance(layer, list) else layer
    shardings = layer.moe.routed_experts.inner_experts.sharding_config.state_shardings
    assert dims.tp == 2 and all("tp" in str(s) and "S(" in str(s) for s in shardings.values())   # split over TP


def test_etp_pins_are_what_torchtitan_runs():
    for layout, runs in (("tp=2,pp=1,vp=1,ep=1,etp=1,mbs=1", "runs etp=2"), ("tp=2,pp=1,vp=1,ep=8,etp=2,mbs=1",
                                                                             "runs etp=1")):
        res = _plan("--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "8", "--framework", "torchtitan",
                    "--layout", layout)
        _one_line_error(res, runs, "moe_sharding.py")
    pins = framework_pins("torchtitan", load_model("qwen3-30b-a3b"), {"tp": 4, "ep": 1})
    assert pins["etp"] == 4
    assert framework_pins("torchtitan", load_model("qwen3-30b-a3b"), {"tp": 4, "ep": 8})["etp"] == 1
    with pytest.raises(CommbenchError, match="etp=1"):
        framework_pins("torchtitan", load_model("qwen3-30b-a3b"), {"tp": 4, "ep": 1, "etp": 1})


def test_searched_torchtitan_moe_rows_carry_the_etp_it_runs():
    from commbench.cli.plan import _system
    from commbench.planner.search.candidates import candidates
    from commbench.planner.search.space import SearchRequest
    req = SearchRequest(model=load_model("qwen3-30b-a3b"), fabric=_system("h100-hgx", 16, None), num_gpus=16, gbs=128,
                        precision="fp8", pins={"tp": 2}, framework="torchtitan")
    arr = candidates(req)[0]
    cols = {"tp": arr.tp, "ep": arr.ep, "etp": arr.etp}
    assert len(cols["tp"]) and (cols["etp"] == np.where(cols["ep"] == 1, cols["tp"], 1)).all()
    assert (cols["ep"] == 1).any() and (cols["ep"] > 1).any()


def test_torchtitan_etp_charge_gathers_the_tokens_once_in_bf16():
    """TorchTitan gathers the MoE block's input before routing (tokens x hidden), Megatron's alltoall dispatcher the
    dispatched copies (x top-k) and scatters them in the router's fp32: TorchTitan's charge is well under it."""
    from commbench.planner.step.evaluate import evaluate_layouts
    from commbench.cli.plan import _system
    from commbench.planner.layout.spec import LayoutArrays
    model = load_model("qwen3-30b-a3b")
    system = _system("h100-hgx", 8, None)
    arr = LayoutArrays.from_layouts([Layout(tp=2, pp=1, vp=1, ep=1, etp=2, cp=1, dp=4, mbs=1, gbs=64, fsdp=True,
                                            sequence_parallel=True, dispatcher="alltoall", precision="bf16")])
    titan = evaluate_layouts(model, system, arr, framework="torchtitan").etp_total_s[0]
    megatron = evaluate_layouts(model, system, arr, framework="megatron").etp_total_s[0]
    assert 0 < titan < megatron / 4


# N4 ---------------------------------------------------------------------------------------------------------------

def test_hsdp_pinned_without_fsdp_is_fsdp_under_torchtitan(tmp_path):
    out = tmp_path / "hsdp"
    res = _plan("--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "64", "--framework", "torchtitan",
                "--layout", "tp=1,pp=1,vp=1,ep=1,mbs=1,fsdp_replicas=4", "--out", str(out))
    assert res.exit_code == 0, res.output
    args = (out / "torchtitan_args.txt").read_text()
    assert "--parallelism.data_parallel_replicate_degree 4 " in args
    assert "--parallelism.data_parallel_shard_degree 16 " in args
    res = _plan("--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "64", "--framework", "torchtitan",
                "--layout", "tp=1,pp=1,vp=1,ep=1,mbs=1,fsdp_replicas=4,fsdp=false")
    _one_line_error(res, "fsdp_replicas=4", "fsdp=false", "fsdp=true")


def test_torchtitan_etp_is_explained_as_it_runs():
    res = _plan("--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "16", "--framework", "torchtitan",
                "--layout", "tp=2,ep=1", "--top", "2")
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "EP1 ETP2" in text and "EP1 ETP1" not in text
    assert "gathers its input over TP2 before the router" in text and "dispatched tokens (x top-8)" not in text
