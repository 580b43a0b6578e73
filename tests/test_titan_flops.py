"""Model TFLOP/s and MFU in the framework's own FLOPs count (probe AI, session 35).

A `--framework torchtitan` plan printed model TFLOP/s/GPU and MFU in Megatron-LM's count (training.py
num_floating_point_operations: causal attention halved, no router or norms), 4-18% below what TorchTitan 0.3.0
logs for the same tokens/s: its MetricsProcessor logs tflops = num_flops_per_token x tps / 1e12 with
num_flops_per_token from model_config.get_nparams_and_flops(model, seq_len) (trainer.py; torchtitan/models/utils.py
get_dense_model_nparams_and_flops / get_moe_model_nparams_and_flops: 6 x the non-embedding parameters a token uses
+ 6 x layers x heads x head_dims x seq_len, "we follow the convention and do not account for sparsity in causal
attention"). Tokens/s is unchanged: only the count the throughput is expressed in.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.models.counts import (flops_breakdown, framework_flops_per_token, step_vocab,
                                             titan_flops_per_token)

HF = Path(__file__).parent / "data" / "hf"

# TorchTitan 0.3.0's num_flops_per_token for the launch `plan --framework torchtitan` emits (ConfigManager().parse_args
# on torchtitan_args.txt, the model built on the meta device, model_config.get_nparams_and_flops(model,
# training.seq_len)), at the plan's seq_len: probe AI (session 35), one per family it builds (llama3 dense and tied,
# qwen3 dense and MoE, deepseek_v3 with and without the query low rank, gpt_oss with biases, sinks and windows).
TITAN_LOGGED = {
    ("llama3-8b", 8192): 57_914_449_920,
    ("llama3.1-70b", 8192): 481_442_709_504,
    ("llama3.1-405b", 8192): 2_625_449_459_712,
    ("deepseek-v3", 4096): 281_158_232_064,       # no MTP: TorchTitan's launch trains none
    ("qwen3-30b-a3b", 4096): 27_914_883_072,
    ("qwen3-235b-a22b", 4096): 167_260_001_280,
    ("gpt-oss-120b", 4096): 38_044_854_144,
    ("gpt-oss-20b", 4096): 26_481_681_792,
    ("hf:Qwen3-8B", 4096): 52_658_190_336,
    ("hf:Llama-3.2-1B-Instruct", 4096): 9_025_499_136,   # tied: the shared embedding counted once, as lm_head
    ("hf:Moonlight-16B-A3B", 4096): 18_872_767_488,      # MLA without the query low rank
    ("hf:Kimi-K2-Instruct", 4096): 220_824_741_888,
}


def _model(name: str):
    return load_model(f"hf:{HF / name[3:]}" if name.startswith("hf:") else name)


@pytest.mark.parametrize("name,seq", sorted(TITAN_LOGGED), ids=[n for n, _ in sorted(TITAN_LOGGED)])
def test_the_torchtitan_count_is_what_torchtitan_0_3_logs_for_each_family(name, seq):
    model = _model(name)
    assert titan_flops_per_token(model, seq) == TITAN_LOGGED[name, seq]
    assert framework_flops_per_token(model, seq, "torchtitan") == TITAN_LOGGED[name, seq]
    # Megatron's count of the same model stays FLOPS.md's (MTP and the padded vocabulary included)
    assert framework_flops_per_token(model, seq, "megatron") == flops_breakdown(model, seq).total


def _row(name: str, gpus: int, framework: str, seq: int, **lay):
    model, fabric = _model(name), load_preset("gb300-nvl72", num_gpus=gpus)
    arr = LayoutArrays.from_layouts([Layout(**lay)])
    bd = evaluate_layouts(model, fabric, arr, seq_len=seq, framework=framework)
    assert bd.valid[0]
    return model, bd


@pytest.mark.parametrize("name,gpus,lay", [
    ("llama3-8b", 8, dict(tp=1, pp=1, vp=1, dp=8, mbs=1, gbs=128, fsdp=True)),
    ("qwen3-30b-a3b", 16, dict(tp=1, pp=1, vp=1, ep=16, etp=1, dp=16, mbs=8, gbs=256, fsdp=True,
                               recompute="full")),
    ("deepseek-v3", 64, dict(tp=1, pp=4, vp=1, ep=16, etp=1, dp=16, mbs=1, gbs=256, recompute="full"))])
def test_a_torchtitan_prediction_s_model_tflops_and_mfu_are_in_torchtitan_s_count(name, gpus, lay):
    seq = 8192 if name == "llama3-8b" else 4096
    model, titan = _row(name, gpus, "torchtitan", seq, **lay)
    tokens = titan.tokens_per_s_per_gpu[0]
    assert titan.model_tflops_per_gpu[0] == pytest.approx(tokens * TITAN_LOGGED[name, seq] / 1e12, rel=1e-12)
    assert titan.mfu[0] == pytest.approx(titan.model_tflops_per_gpu[0] / titan.peak_tflops[0], rel=1e-12)
    # a Megatron prediction of the same layout stays in Megatron's count (its padded rows at this TP)
    _, mega = _row(name, gpus, "megatron", seq, **lay)
    rows = step_vocab(model, np.array([lay["tp"]]), "megatron")
    assert mega.model_tflops_per_gpu[0] == pytest.approx(
        mega.tokens_per_s_per_gpu[0] * flops_breakdown(model, seq, vocab=rows).total[0] / 1e12, rel=1e-12)


L8 = ["plan", "--model", "llama3-8b", "--system", "gb300-nvl72", "--gpus", "8", "--precision", "bf16",
      "--layout", "tp=1,pp=1,vp=1,ep=1,mbs=1"]


def test_the_probe_s_llama3_8b_torchtitan_plan_reads_what_torchtitan_logs_and_says_whose_count():
    """The probe's repro: 19,251 tokens/s/GPU, 991 TFLOP/s/GPU, MFU 39.6% where TorchTitan logs 1,115 and 44.6%."""
    out = CliRunner().invoke(app, L8 + ["--framework", "torchtitan", "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    p = doc["predicted"]
    assert p["model_tflops_per_gpu"] == pytest.approx(p["tokens_per_s_per_gpu"] * 57_914_449_920 / 1e12, rel=1e-12)
    assert p["mfu"] == pytest.approx(p["model_tflops_per_gpu"] / 2500.0, rel=1e-12)
    said = [a for a in doc["assumptions"] if a.startswith("model TFLOP/s and MFU: ")]
    assert len(said) == 1 and "57.91 GFLOP/token" in said[0] and "TorchTitan 0.3.0's count" in said[0]
    text = CliRunner().invoke(app, L8 + ["--framework", "torchtitan"], env={"COLUMNS": "400"})
    assert text.exit_code == 0, text.output
    line = next(x for x in text.stdout.splitlines() if x.startswith("tokens/s/GPU "))
    assert f"model TFLOP/s/GPU {p['model_tflops_per_gpu']:,.0f} (TorchTitan 0.3.0's count)" in line


def test_a_megatron_plan_says_its_count_and_its_torchtitan_launch_notes_say_torchtitan_s():
    """A Megatron plan's figures stay Megatron's (FLOPS.md: 51.47 GFLOP/token); the TorchTitan launch it writes beside
    them says what TorchTitan's log counts for that launch, each count named."""
    out = CliRunner().invoke(app, L8 + ["--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    p = doc["predicted"]
    assert p["model_tflops_per_gpu"] / p["tokens_per_s_per_gpu"] * 1e12 == pytest.approx(51.47e9, rel=1e-4)
    said = [a for a in doc["assumptions"] if a.startswith("model TFLOP/s and MFU: ")]
    assert len(said) == 1 and "51.47 GFLOP/token" in said[0] and "Megatron-LM core_v0.16.1's count" in said[0]
    notes = [n for n in doc["torchtitan"]["notes"] if "GFLOP/token" in n]
    assert len(notes) == 1 and "57.91 GFLOP/token" in notes[0] and "51.47" in notes[0] \
        and "1.125x" in notes[0], notes


@pytest.mark.parametrize("name,gpus", [("llama3-8b", 8), ("qwen3-30b-a3b", 16), ("gpt-oss-20b", 8),
                                       ("hf:Moonlight-16B-A3B", 16), ("hf:Llama-3.2-1B-Instruct", 8),
                                       ("hf:Qwen3-8B", 8)])
def test_the_count_is_what_torchtitan_computes_for_the_launch_the_plan_writes(name, gpus, tmp_path, monkeypatch):
    """TorchTitan 0.3.0 itself: the emitted launch through its configuration path, the model built on the meta
    device, and trainer.py's `model_config.get_nparams_and_flops(model, config.training.seq_len)`: the plan's model
    TFLOP/s over its tokens/s is that count, for each family commbench emits (llama3, qwen3 dense and MoE, gpt_oss,
    a generated deepseek_v3, a tied flavor)."""
    pytest.importorskip("torchtitan", reason="torchtitan is not installed")
    pytest.importorskip("torchao", reason="torchao is not installed")
    import torch

    from commbench.planner.emit.torchtitan import torchtitan_plan
    from commbench.planner.search.space import SearchRequest, search
    from tests.test_emit_torchtitan_real import run_titan
    model = _model(name)
    res = search(SearchRequest(model=model, fabric=load_preset("h100-hgx", num_gpus=gpus), num_gpus=gpus,
                               gbs=8 * gpus, precision="bf16", framework="torchtitan", keep=1))
    lay, bd = res.layouts.layout(0), res.breakdown
    doc = torchtitan_plan(lay, model, framework="torchtitan")
    assert "refused" not in doc, doc
    config, _, _ = run_titan(doc, gpus, "h100-hgx", tmp_path, monkeypatch)
    with torch.device("meta"):
        built = config.model_spec.model.build()
    _, logged = config.model_spec.model.get_nparams_and_flops(built, config.training.seq_len)
    assert titan_flops_per_token(model, config.training.seq_len) == logged
    assert bd.model_tflops_per_gpu[0] * 1e12 / bd.tokens_per_s_per_gpu[0] == pytest.approx(logged, rel=1e-12)
