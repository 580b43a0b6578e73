"""The memory model against what ran: Hopper's cached fp8 weight transposes (step/memory.py), and
benchmarks/memory_fit.py, the diagnostic that prints each published layout's predicted memory by term."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import memory_fit  # noqa: E402
import vendor_layouts  # noqa: E402

from commbench.costmodel import load_preset  # noqa: E402
from commbench.data.reference import gpu_spec  # noqa: E402
from commbench.planner.calibrate.published import published_runs  # noqa: E402
from commbench.planner.layout.spec import PRECISIONS, Layout, LayoutArrays  # noqa: E402
from commbench.planner.models.counts import param_counts, step_vocab  # noqa: E402
from commbench.planner.models.zoo import load_model  # noqa: E402
from commbench.planner.step.evaluate import evaluate_layouts  # noqa: E402
from commbench.planner.step.memory import fp8_transpose_needed, quantized_weight_cache_bytes  # noqa: E402


def test_per_tensor_fp8_weight_transpose_is_cached_where_the_gpu_needs_it():
    """Hopper's fp8 GEMMs take only TN operands, so dgrad reads a transposed fp8 copy of each weight: 1 B per
    parameter beside fp8 primary weights, 2 B (rowwise copy + transpose) beside bf16 ones; none on Blackwell;
    the block-scaled formats are unchanged by it."""
    code = np.array([PRECISIONS.index(p) for p in ("fp8", "fp8", "bf16", "mxfp8")])
    primary = np.array([1.0, 2.0, 2.0, 1.0])
    assert list(quantized_weight_cache_bytes(code, primary, fp8_transpose=True)) == pytest.approx(
        [1.0, 2.0, 0.0, 1 + 1 / 32])
    assert list(quantized_weight_cache_bytes(code, primary, fp8_transpose=False)) == pytest.approx(
        [0.0, 0.0, 0.0, 1 + 1 / 32])
    assert not np.any(quantized_weight_cache_bytes(code, primary, "torchtitan", fp8_transpose=True))


def test_which_gpus_need_the_fp8_transpose():
    """Transformer Engine's nvte_is_non_tn_fp8_gemm_supported: compute capability 10.x (and >= 13) only."""
    assert fp8_transpose_needed(gpu_spec("h100")) and fp8_transpose_needed(gpu_spec("h200"))
    for name in ("b200", "gb200", "b300", "gb300"):
        assert not fp8_transpose_needed(gpu_spec(name))


def _llama8b(system: str, **kw):
    m = load_model("llama3-8b")
    lay = Layout(tp=1, pp=1, dp=8, mbs=1, gbs=128, precision="fp8", distributed_optimizer=True, **kw)
    return m, evaluate_layouts(m, load_preset(system, num_gpus=8), LayoutArrays.from_layouts([lay]), seq_len=8192)


def test_fp8_weights_by_hand_on_hopper_and_blackwell():
    """Llama3-8B, DP8 with the distributed optimizer, fp8 (fp8_param_gather): 1 B per parameter of the fp8 transformer
    layers, plus the 1 B transpose on H100; on B200 the weights alone; the embedding and output layer 2 B."""
    m, h100 = _llama8b("h100-hgx")
    _, b200 = _llama8b("b200-hgx")
    pc = param_counts(m, vocab=step_vocab(m, 1, "megatron"))
    p = pc.total
    # the embedding and output layer: bf16 parameters at every precision, no fp8 copy (step/module_precision.py)
    assert h100.mem_weights_bytes[0] == pytest.approx(2.0 * p)
    assert b200.mem_weights_bytes[0] == pytest.approx(1.0 * (p - pc.embeddings) + 2.0 * pc.embeddings)


def test_plain_dp8_llama3_8b_no_longer_fits_an_h100():
    """The case that prompted the audit: NVIDIA's 25.11 recipe for Llama3-8B on 8 H100 in fp8 pays for FSDP and
    block recompute; plain DP8 mbs1 without recompute was predicted to leave ~9% of HBM free. With the transposes
    (8 GB more) it leaves less than the search's default headroom of the 79.11 GiB (84.9e9 B) an H100 exposes: 2p
    weights + 2p grads + 12p/8 optimizer + activations + reserve take more, so the search does not propose it."""
    from commbench.planner.search.space import DEFAULT_HEADROOM
    m, bd = _llama8b("h100-hgx", recompute="none")
    p = param_counts(m, vocab=step_vocab(m, 1, "megatron")).total
    static = 2 * p + 2 * p + 12 * p / 8
    room = bd.mem_capacity_bytes[0] * (1.0 - DEFAULT_HEADROOM)
    assert bd.mem_weights_bytes[0] + bd.mem_grads_bytes[0] + bd.mem_optimizer_bytes[0] == pytest.approx(static)
    assert bd.mem_total_bytes[0] > room
    assert bd.mem_total_bytes[0] - p < room   # without the transposes it would have left the headroom


def test_published_layouts_are_predicted_to_fit():
    """They ran, so a published layout over HBM is a model error, and one the search refuses (inside its default
    headroom, commbench/limits.py DEFAULT_MEM_HEADROOM) is a layout the planner would never propose though NVIDIA
    ran it. Since the attention output is charged in bf16 (step/memory.py: linear_proj saves the original input,
    megatron-core set_save_original_input) and the QK norms' inputs and the router's maps are charged, the tightest
    (Llama3-70B on 64 GB200 in fp8: FSDP, 40 layers offloaded; Llama3.1-405B on 256 GB200 in fp8 / nvfp4;
    Qwen3-235B-A22B on 64 B200; Qwen3-30B-A3B and Nemotron-3-Nano on 16 H100) sit at 95.3% to 98.3% of HBM (the
    Llama3-70B FSDP rows since their double-buffered unit pools are charged, step/fsdp.py), the model's reserve of
    4 GB + 5% of HBM included: inside a 5% headroom, outside the 1.5% default. gpt-oss-120b on 64
    B200 in 25.11 is modelled at its release recipe's EP 64 (published.recipe_size_if_release_contradicts).
    The newer releases' Nemotron-3-Ultra rows (26.08, TP1/TP2 PP1 EP64 on 256 GB300 / GB200) fit since their release
    recipe's memory savers are read (Megatron-FSDP HSDP with the optimizer sharded across replicas, the fused grouped
    MLP's FC1 output offloaded, megatron-core 0.19.0's Mamba FSDP units: tests/test_nemotron_ultra_recipe.py); before,
    they were predicted at 460 / 264 GB of 297 / 198."""
    rows = memory_fit.memory_rows(published_runs())
    assert not [r["run"].label for r in rows if memory_fit.over_hbm(r)]
    assert not [r["run"].label for r in rows if memory_fit.within_headroom(r)]
    near = [r for r in rows if r["published"]["total"] > 0.95 * r["published"]["capacity"]]
    assert {r["run"].model.name for r in near} >= {"llama3.1-405b", "llama3.1-70b", "qwen3-235b-a22b"}
    for table in memory_fit.TABLES[1:]:
        held = memory_fit.memory_rows(published_runs(tuple(json.loads(table[1].read_text()))))
        assert held and not [r["run"].label for r in held if memory_fit.within_headroom(r) and not memory_fit.over_hbm(r)]
        assert not [r["run"].label for r in held if memory_fit.over_hbm(r)]


def test_memory_fit_terms_add_up_and_savers_are_removed(capsys):
    """Each row's terms add to its total; a row paying for savers (Llama3-8B on 8 H100, 25.11: FSDP and 5 layers
    of block recompute) is re-evaluated without them, and needs more memory there."""
    runs = [r for r in published_runs() if r.layout is not None and r.row.get("release") == "25.11"
            and r.row["gpu"].lower().startswith("h100") and r.model.name == "llama3-8b"]
    rows = memory_fit.memory_rows(runs)
    (row,) = rows
    p = row["published"]
    assert p["total"] == pytest.approx(sum(p[t] for t in memory_fit.TERMS))
    assert row["savers"] == ["recompute=full/5", "fsdp"]
    assert row["removed"]["total"] > p["total"]
    # without FSDP and recompute: inside the search's headroom of the HBM CUDA exposes (it would not propose it)
    assert row["removed"]["total"] > row["removed"]["capacity"] * (1.0 - memory_fit.DEFAULT_HEADROOM)
    memory_fit.show(rows, "t", only_flagged=False)
    out = capsys.readouterr().out
    assert "fsdp ->" in out and "0 PREDICTED over HBM" in out
    fake = dict(row, published=dict(p, total=p["capacity"] + 1e9))
    memory_fit.show([fake], "t", only_flagged=True)
    assert "OVER HBM" in capsys.readouterr().out
    tight = dict(row, published=dict(p, total=p["capacity"] * 0.99))   # fits, inside the search's headroom
    memory_fit.show([row, tight], "t", only_flagged=False)
    assert (f"1 more fit but leave less than the search's {memory_fit.DEFAULT_HEADROOM * 100:g}% HBM headroom"
            in capsys.readouterr().out)


def test_moe_norm_output_is_kept_in_bf16_by_the_router():
    """Per token of a MoE layer (tp = cp = etp = 1, no recompute), in bf16-element units: residual input h, the norm
    output the router keeps in bf16 (h; megatron-core 0.16.1 RouterGatingLinearFunction saves its input; a shared
    expert's FC1 saves that same tensor, set_save_original_input, no fp8 copy), the top-k probabilities k, the
    router's and the permutation's maps (memory.router_map_elements: E x (1 B routing map + 4 B fused top-k
    intermediate + 4 B aux-loss scores) + int32 row_id_map of 2E + 1, over 2 B), and per routed copy the fp8 FC1
    input (w/2), the bf16 SwiGLU input (2 ffn) and the fp8 FC2 input (ffn/2); a shared expert 2 ffn + ffn/2.
    Qwen3-30B-A3B (h 2048, k 8, ffn 768, E 128, no shared; maps (1152 + 1028) / 2 = 1090): fp8 2048 + 2048 + 8 +
    1090 + 8 (1024 + 1536 + 384) = 28746; bf16 2048 + 2048 + 8 + 1090 + 8 (2048 + 1536 + 768) = 40010.
    DeepSeek-V3 (h 7168, k 8, ffn 2048, one shared, E 256; maps (2304 + 2052) / 2 = 2178) fp8: 7168 + 7168 + 8 +
    2178 + 8 (3584 + 4096 + 1024) + (4096 + 1024) = 91274."""
    from commbench.planner.step import memory
    one, sp, none = np.array([1]), np.array([True]), np.array([0])
    fp8, bf16 = np.array([PRECISIONS.index("fp8")]), np.array([PRECISIONS.index("bf16")])

    def moe(name, precision):
        return memory._per_token_elements(load_model(name), one, one, one, sp, none, precision)[2][0]

    assert memory.router_map_elements(load_model("qwen3-30b-a3b")) == pytest.approx(1090)
    assert moe("qwen3-30b-a3b", fp8) == pytest.approx(28746)
    assert moe("qwen3-30b-a3b", bf16) == pytest.approx(40010)
    assert moe("deepseek-v3", fp8) == pytest.approx(91274)


def test_attention_keeps_its_output_in_bf16_and_qk_norm_inputs():
    """Per token of an attention block (tp = cp = 1, no recompute), Megatron: the attention output once in bf16 at
    every precision (flash attention saves it; linear_proj saves that original input: set_save_original_input), and
    with --qk-layernorm the pre-norm query and key the QK norms keep. Qwen3-30B-A3B (h 2048, q 4096, k + v 1024,
    out 4096) fp8: 2048 + 1024 (norm output, fp8) + 4096 + 1024 + (4096 + 512) (QK norms' inputs) + 4096 = 16896;
    TorchTitan keeps the former count: 2048 + 1024 + 5120 + 2048 = 10240."""
    from commbench.planner.step import memory
    one, sp, none = np.array([1]), np.array([True]), np.array([0])
    fp8 = np.array([PRECISIONS.index("fp8")])
    m = load_model("qwen3-30b-a3b")
    assert memory._per_token_elements(m, one, one, one, sp, none, fp8)[0][0] == pytest.approx(16896)
    assert memory._per_token_elements(m, one, one, one, sp, none, fp8, framework="torchtitan")[0][0] \
        == pytest.approx(10240)
