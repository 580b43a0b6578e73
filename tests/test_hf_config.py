"""`--model hf:PATH`: published config.json files (tests/data/hf/*/config.json, sources in
tests/data/hf/SOURCES.md) read into model descriptions that give each model's published parameter
count and the FLOPs per token of Megatron's formula."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.errors import CommbenchError
from commbench.planner.models.counts import active_params, flops_per_token, param_counts
from commbench.planner.models.zoo import load_model

HF = Path(__file__).parent / "data" / "hf"


def hf(name: str):
    return load_model(f"hf:{HF / name}")


def _near(got: float, published: float, digits_step: float) -> bool:
    """Within 1%, or within the last digit of a figure published to `digits_step`: Qwen3-30B-A3B's
    "3.3B activated" is 3.353B by count (1.6% off; "3.3" is the count cut to two digits, as
    Qwen's 30.532 -> "30.5" and 22.19 -> "22"); Nemotron-H-8B's card says "8B" for 8.10B."""
    return abs(got - published) <= max(0.01 * published, digits_step + 1e-9)


# (config folder, published total B, published active B (None: dense), rounding step of the
#  published figures, what the published counts leave out: "" nothing, "input" the input embedding from
#  the active count, "embeddings" the input embedding and the output layer from both counts)
PUBLISHED = [
    ("Llama-3.1-8B", 8.03, None, 0.01, ""),
    ("Llama-3.1-70B", 70.6, None, 0.1, ""),
    ("Qwen2.5-7B", 7.61, None, 0.01, ""),
    ("Qwen3-8B", 8.2, None, 0.1, ""),
    ("Qwen3-30B-A3B", 30.5, 3.3, 0.1, ""),
    ("Qwen3-235B-A22B", 235.0, 22.0, 1.0, ""),
    ("Mixtral-8x7B-v0.1", 46.7, 12.9, 0.1, ""),
    ("gpt-oss-120b", 116.83, 5.13, 0.01, "input"),
    ("DeepSeek-V3", 671.0, 37.0, 1.0, ""),
    ("Kimi-K2-Instruct", 1026.4, 32.6, 0.1, ""),
    ("Nemotron-H-8B-Base-8K", 8.0, None, 1.0, ""),
    ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 31.6, 3.6, 0.1, ""),
    ("NVIDIA-Nemotron-3-Super-120B-A12B-BF16", 120.67, 12.0, 1.0, ""),
    ("DeepSeek-V4-Flash", 284.0, 13.0, 1.0, "input"),
    ("GLM-4.5-Air", 106.0, 12.0, 1.0, "input"),
    # model types read since: MLA without the query low rank, GLM's MLA model, Qwen3.5 MoE (SOURCES.md)
    ("DeepSeek-V2-Lite", 15.7, 2.4, 0.1, "input"),
    ("Moonlight-16B-A3B", 15.29, 2.24, 0.01, "embeddings"),   # its README's exact figures, embeddings left out
    ("GLM-4.7-Flash", 30.0, 3.0, 1.0, "input"),
    ("Qwen3.5-397B-A17B", 397.0, 17.0, 1.0, ""),
    ("Qwen3.5-122B-A10B", 122.0, 10.0, 1.0, ""),
    ("Qwen3.5-35B-A3B", 35.0, 3.0, 1.0, ""),
    # dense Qwen3.5 (model_type qwen3_5): within 1% of the cards' "27B" and "9B" (a step below 1% of either);
    # Qwen3.5-4B's count is 4.21B, the name's "4B" rounded to whole billions (the vision encoder is left out here)
    ("Qwen3.5-27B", 27.0, None, 0.01, ""),
    ("Qwen3.5-9B", 9.0, None, 0.01, ""),
    ("Qwen3.5-4B", 4.0, None, 1.0, ""),
    # the read model types checked on configs of other sizes
    ("Qwen2-57B-A14B", 57.0, 14.0, 1.0, ""),
    ("Qwen1.5-MoE-A2.7B", 14.3, 2.7, 0.1, ""),
    ("Mixtral-8x22B-v0.1", 141.0, 39.0, 1.0, ""),
    ("GLM-4.5", 355.0, 32.0, 1.0, "input"),
    ("Nemotron-H-47B-Base-8K", 47.0, None, 1.0, ""),
    ("Nemotron-H-56B-Base-8K", 56.0, None, 1.0, ""),
    ("phi-4", 14.0, None, 1.0, ""),   # model_type phi3; the card's "14B" (this count: 14.66B)
    # audited since (SOURCES.md): Qwen3-MoE at 160 experts; a Llama whose output layer is its input embedding
    ("Qwen3-Coder-480B-A35B-Instruct", 480.0, 35.0, 1.0, ""),
    ("Llama-3.2-1B-Instruct", 1.23, None, 0.01, ""),
]


@pytest.mark.parametrize("folder, total_b, active_b, step, leaves_out", PUBLISHED)
def test_config_gives_the_published_parameter_count(folder, total_b, active_b, step, leaves_out):
    m = hf(folder)
    embeddings = param_counts(m).embeddings if leaves_out == "embeddings" else 0
    assert _near((param_counts(m).total - embeddings) / 1e9, total_b, step), param_counts(m).total
    if active_b is not None:
        active = active_params(m) - (m.vocab * m.hidden if leaves_out == "input" else embeddings)
        assert _near(active / 1e9, active_b, step), active


@pytest.mark.parametrize("folder, zoo, seq_len", [
    ("Llama-3.1-8B", "llama3-8b", 8192), ("Llama-3.1-70B", "llama3.1-70b", 8192),
    ("Qwen3-30B-A3B", "qwen3-30b-a3b", 4096), ("Qwen3-235B-A22B", "qwen3-235b-a22b", 4096),
    ("Mixtral-8x7B-v0.1", "mixtral-8x7b", 4096), ("gpt-oss-120b", "gpt-oss-120b", 4096),
    ("DeepSeek-V3", "deepseek-v3", 4096), ("Kimi-K2-Instruct", "kimi-k2", 4096),
    ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nemotron-3-nano-30b-a3b", 8192),
    ("NVIDIA-Nemotron-3-Super-120B-A12B-BF16", "nemotron-3-super-120b-a12b", 8192),
    ("Qwen3-Next-80B-A3B-Instruct", "qwen3-next-80b-a3b", 4096),
    ("DeepSeek-V4-Flash", "deepseek-v4-flash", 4096), ("Mixtral-8x22B-v0.1", "mixtral-8x22b", 4096),
])
def test_config_flops_equal_the_zoo_models_megatron_flops(folder, zoo, seq_len):
    """The zoo entries reproduce Megatron's published FLOPs per token (test_planner.py); the same
    model read from its config.json gives the same figure."""
    got = flops_per_token(hf(folder), seq_len)
    want = load_model(zoo).published_flops_per_token_gflop * 1e9
    assert got == pytest.approx(want, rel=0.005)


def test_nemotron_nano_flops_match_its_published_throughput_rows():
    """Megatron-Bridge 26.02 rows: 756 TFLOP/s at 33,934 tokens/s/GPU (GB200) and 331 at 14,890 (H100)."""
    got = flops_per_token(hf("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"), 8192)
    for tflops, tokens in ((756, 33934), (331, 14890)):
        assert got == pytest.approx(tflops * 1e12 / tokens, rel=0.005)


def test_hybrid_pattern_and_mamba_dims_are_read():
    m = hf("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    assert (m.num_mamba_layers, m.num_moe_layers, m.num_attention_layers, m.num_dense_layers) == (23, 23, 6, 0)
    assert (m.mamba_num_heads, m.mamba_head_dim, m.mamba_state_dim, m.mamba_num_groups) == (64, 64, 128, 8)
    assert not m.glu and m.num_shared_experts == 2
    h8 = hf("Nemotron-H-8B-Base-8K")
    assert (h8.num_mamba_layers, h8.num_attention_layers, h8.num_dense_layers, h8.is_moe) == (24, 4, 24, False)


def test_latent_moe_and_mtp_count_exactly_as_the_published_weights():
    """Nemotron-3 Super's safetensors headers: 123,611,012,096 BF16 weights, 2,942,324,736 of them in the
    MTP layer (latent MoE: experts on 1024 of 4096, h <-> latent projections per MoE layer)."""
    m = hf("NVIDIA-Nemotron-3-Super-120B-A12B-BF16")
    p = param_counts(m)
    assert (m.moe_latent_size, m.num_mtp_layers, m.expert_width) == (1024, 1, 1024)
    assert p.total + p.mtp == 123_611_012_096 and p.mtp == 2_942_324_736


def test_gated_deltanet_model_counts_as_its_published_weights():
    """Qwen3-Next-80B-A3B: 36 Gated DeltaNet + 12 gated full-attention layers, 512 experts top-10. Its
    safetensors hold 79,674,391,296 weights (as a public GitHub test reads the headers; the model card says
    80B total); the count is that exactly, the full-attention layers' q/k norms (12 x 2 x 256) and each MoE layer's
    shared_expert_gate (48 x 2048) included (104,448 weights the count left out before)."""
    m = hf("Qwen3-Next-80B-A3B-Instruct")
    assert (m.num_attention_layers, m.num_linear_attention_layers, m.attention_gate) == (12, 36, True)
    assert param_counts(m).total == 79_674_391_296
    assert active_params(m) == 3_874_929_408   # the same test's active count, exactly
    # Megatron's FLOPs: the GDN term and the gate's extra q-width projection of full attention
    from commbench.planner.models.gdn import gdn_macs_per_token
    fl = __import__("commbench.planner.models.counts", fromlist=["flops_breakdown"]).flops_breakdown(m, 4096)
    assert fl.linear_attention == pytest.approx(6.0 * 36 * gdn_macs_per_token(m))
    assert fl.attention_proj == pytest.approx(6.0 * 12 * (2048 * (2 * 16 * 256 + 2 * 2 * 256) + 16 * 256 * 2048))


def test_layers_block_type_list_reads_as_the_pattern(tmp_path):
    raw = json.loads((HF / "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16" / "config.json").read_text())
    blocks = {"M": "mamba", "E": "moe", "*": "attention", "-": "mlp"}
    raw["layers_block_type"] = [blocks[c] for c in raw.pop("hybrid_override_pattern")]
    (tmp_path / "config.json").write_text(json.dumps(raw))
    assert load_model(f"hf:{tmp_path}").layer_pattern == hf("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16").layer_pattern


def _write(tmp_path, **changes):
    raw = json.loads((HF / "Llama-3.1-8B" / "config.json").read_text())
    raw.update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        raw.pop(key)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    return f"hf:{path}"


@pytest.mark.parametrize("changes, message", [
    (dict(model_type="falcon"), "model_type='falcon' is not known: the planner reads deepseek_v2, deepseek_v3"),
    (dict(hidden_size=None), "lacks 'hidden_size' \\(needed for model_type 'llama'\\)"),
    (dict(num_hidden_layers="32"), "num_hidden_layers='32' is invalid"),
    (dict(use_sliding_window=True), "use_sliding_window=true is not modelled"),
])
def test_unknown_type_or_missing_field_is_one_line_naming_it(tmp_path, changes, message):
    with pytest.raises(CommbenchError, match=message):
        load_model(_write(tmp_path, **changes))


@pytest.mark.parametrize("changes, message", [
    (dict(moe_intermediate_size=0), r"moe_intermediate_size=0 is invalid: > 0"),  # was ZeroDivisionError
    (dict(use_sliding_window=True), "use_sliding_window=true is not modelled"),  # was planned without the window
    (dict(norm_topk_prob="no"), "norm_topk_prob='no' is invalid: true or false"),
])
def test_a_qwen_moe_config_the_planner_cannot_read_is_one_line(tmp_path, changes, message):
    raw = json.loads((HF / "Qwen3-30B-A3B" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(raw, **changes)))
    from commbench.cli.app import app
    result = CliRunner().invoke(app, ["plan", "--model", f"hf:{tmp_path}", "--system", "b200-hgx", "--gpus", "16"])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1
    assert re.search(message, result.output), result.output


@pytest.mark.parametrize("norm, pre_softmax", [(True, False), (False, True), (None, True)])
def test_qwen_moe_norm_topk_prob_is_the_routers_pre_softmax(tmp_path, norm, pre_softmax):
    """norm_topk_prob false (qwen3_moe's default when absent, transformers 4.57.1) keeps the top-k experts' share of
    the full softmax: megatron-core's --moe-router-pre-softmax. It was ignored: every Qwen MoE config was emitted
    with the top-k renormalised."""
    from commbench.planner.emit.megatron import megatron_args
    from commbench.planner import Layout
    raw = json.loads((HF / "Qwen3-30B-A3B" / "config.json").read_text())
    if norm is None:
        raw.pop("norm_topk_prob")
    else:
        raw["norm_topk_prob"] = norm
    (tmp_path / "config.json").write_text(json.dumps(raw))
    model = load_model(f"hf:{tmp_path}")
    assert model.architecture.router_pre_softmax is pre_softmax
    args = megatron_args(Layout(tp=1, pp=1, ep=8, etp=1, dp=8, mbs=1, gbs=64), model)
    assert ("--moe-router-pre-softmax" in args) is pre_softmax


# Qwen/Qwen1.5-MoE-A2.7B-Chat config.json, the fields the planner reads (model_type qwen2_moe)
QWEN1_5_MOE = {"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "hidden_size": 2048,
               "intermediate_size": 5632, "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
               "vocab_size": 151936, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": 32768,
               "num_experts": 60, "num_experts_per_tok": 4, "moe_intermediate_size": 1408,
               "shared_expert_intermediate_size": 5632, "norm_topk_prob": False, "decoder_sparse_step": 1,
               "use_sliding_window": False, "tie_word_embeddings": False, "hidden_act": "silu"}


def test_qwen2_moe_gates_its_shared_expert_and_keeps_its_qkv_bias_flag(tmp_path):
    """Qwen2MoeSparseMoeBlock scales its shared expert by sigmoid(shared_expert_gate(x)) (transformers 4.57.1): the
    plan emitted no --moe-shared-expert-gate, another model. Its attention bias is config.qkv_bias (default true)."""
    from commbench.planner.emit.megatron import megatron_args
    from commbench.planner import Layout
    (tmp_path / "config.json").write_text(json.dumps(QWEN1_5_MOE))
    model = load_model(f"hf:{tmp_path}")
    assert (model.num_shared_experts, model.expert_ffn, model.top_k) == (4, 1408, 4)
    arch = model.architecture
    assert arch.shared_expert_gate and arch.qkv_bias and arch.router_pre_softmax
    args = megatron_args(Layout(tp=1, pp=1, ep=4, etp=1, dp=8, mbs=1, gbs=64), model)
    assert {"--moe-shared-expert-gate", "--add-qkv-bias", "--moe-router-pre-softmax"} <= set(args)
    (tmp_path / "config.json").write_text(json.dumps(dict(QWEN1_5_MOE, qkv_bias=False)))
    assert not load_model(f"hf:{tmp_path}").architecture.qkv_bias


def test_a_shared_expert_size_left_out_is_the_config_class_default(tmp_path):
    """Qwen2MoeConfig defaults shared_expert_intermediate_size to 5632 (transformers configuration_qwen2_moe.py):
    a config without the key has that shared expert; it was planned without one."""
    (tmp_path / "config.json").write_text(json.dumps({k: v for k, v in QWEN1_5_MOE.items()
                                                       if k != "shared_expert_intermediate_size"}))
    assert load_model(f"hf:{tmp_path}").num_shared_experts == 4   # 5632 / 1408


@pytest.mark.parametrize("changes, message", [
    (dict(rope_theta="abc"), "rope_theta='abc' is invalid: a finite number"),
    (dict(rope_theta=float("inf")), "rope_theta=inf is invalid: a finite number"),
    (dict(rms_norm_eps=[1e-5]), r"rms_norm_eps=\[1e-05\] is invalid: a finite number"),
    (dict(rope_scaling="yes"), "rope_scaling='yes' is invalid: an object"),
    (dict(rope_scaling={"rope_type": "yarn", "factor": "big", "original_max_position_embeddings": 8192}),
     "rope_scaling.factor='big' is invalid: a finite number"),
    (dict(rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": "8k"}),
     "rope_scaling.original_max_position_embeddings='8k' is invalid: a whole number"),
    (dict(tie_word_embeddings="no"), "tie_word_embeddings='no' is invalid: true or false"),
    (dict(attention_bias="false"), "attention_bias='false' is invalid: true or false"),
    (dict(hidden_act="gelu"), "hidden_act='gelu' is not modelled for model_type 'llama': one of silu, swish"),
    (dict(hidden_act=5), "hidden_act=5 is not modelled"),
])
def test_an_ill_typed_architecture_field_is_one_line_naming_it(tmp_path, changes, message):
    """These fields were read with bare int()/float()/bool(): a traceback, or "no" read as true (tied
    embeddings emitted for an untied model)."""
    with pytest.raises(CommbenchError, match=message):
        load_model(_write(tmp_path, **changes))
    from commbench.cli.app import app
    result = CliRunner().invoke(app, ["plan", "--model", _write(tmp_path, **changes), "--system", "h100-hgx",
                                      "--gpus", "8"])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1


def test_refusals_name_what_is_not_modelled(tmp_path):
    nxt = json.loads((HF / "Qwen3-Next-80B-A3B-Instruct" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(nxt, layer_types=["full_attention"] * 48)))
    with pytest.raises(CommbenchError, match="layer_types is not modelled unless every 4-th layer"):
        load_model(f"hf:{tmp_path}")
    raw = json.loads((HF / "NVIDIA-Nemotron-3-Super-120B-A12B-BF16" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(raw, mtp_hybrid_override_pattern="*M")))
    with pytest.raises(CommbenchError, match="mtp_hybrid_override_pattern='\\*M' is not modelled"):
        load_model(f"hf:{tmp_path}")
    with pytest.raises(CommbenchError, match="cannot be read"):
        load_model(f"hf:{tmp_path / 'missing'}")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(CommbenchError, match="not valid JSON"):
        load_model(f"hf:{tmp_path}")


def test_plan_cli_takes_hf_model_and_refuses_bad_one_in_one_line(tmp_path):
    from commbench.cli.app import app
    runner = CliRunner()
    ok = runner.invoke(app, ["plan", "--model", f"hf:{HF / 'Qwen3-30B-A3B'}", "--system", "gb200-nvl72",
                             "--gpus", "8", "--layout", "tp=1,pp=1,vp=1,ep=8,mbs=2,gbs=256", "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["inputs"]["model"] == "hf:Qwen3-30B-A3B"
    bad = runner.invoke(app, ["plan", "--model", _write(tmp_path, model_type="falcon"), "--system", "gb200-nvl72",
                              "--gpus", "8"])
    assert bad.exit_code == 2
    assert "model_type='falcon' is not known" in bad.output and "Traceback" not in bad.output


ARCH_FIELDS_COMPARED = ("activation", "glu_linear_offset", "activation_clamp", "normalization", "norm_epsilon",
                        "qk_norm", "linear_bias", "qkv_bias", "position_embedding", "rotary_base", "rope_scaling",
                        "rope_scaling_factor", "rope_original_max_positions", "llama3_low_freq_factor",
                        "llama3_high_freq_factor", "llama3_original_positions", "yarn_beta_fast", "yarn_beta_slow",
                        "yarn_mscale", "yarn_mscale_all_dim", "sliding_window", "window_skip_freq", "softmax_type",
                        "router_score", "router_topk_scaling", "router_groups", "router_group_topk",
                        "router_expert_bias", "norm_zero_centered_gamma", "shared_expert_gate", "router_pre_softmax",
                        "router_bias_update_rate")


@pytest.mark.parametrize("folder, zoo", [
    ("Llama-3.1-70B", "llama3.1-70b"), ("Qwen3-30B-A3B", "qwen3-30b-a3b"), ("Qwen3-235B-A22B", "qwen3-235b-a22b"),
    ("Mixtral-8x7B-v0.1", "mixtral-8x7b"), ("gpt-oss-120b", "gpt-oss-120b"), ("DeepSeek-V3", "deepseek-v3"),
    ("Kimi-K2-Instruct", "kimi-k2"), ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nemotron-3-nano-30b-a3b"),
    ("NVIDIA-Nemotron-3-Super-120B-A12B-BF16", "nemotron-3-super-120b-a12b"),
    ("Qwen3-Next-80B-A3B-Instruct", "qwen3-next-80b-a3b"), ("DeepSeek-V4-Flash", "deepseek-v4-flash"),
    ("Mixtral-8x22B-v0.1", "mixtral-8x22b"),
])
def test_config_architecture_equals_the_zoo_architecture(folder, zoo):
    """The architecture read from config.json (models/hf_arch.py) equals the zoo's, which cites the
    Megatron-Bridge / NeMo / Megatron-LM files it comes from (issue 25)."""
    got, want = hf(folder).architecture, load_model(zoo).architecture
    assert {f: getattr(got, f) for f in ARCH_FIELDS_COMPARED} == {f: getattr(want, f) for f in ARCH_FIELDS_COMPARED}
    assert got.source("activation").path.endswith("config.json")


@pytest.mark.parametrize("published, zoo", [
    ("Nemotron-3-Nano", "nemotron-3-nano-30b-a3b"), ("Nemotron 3 Super", "nemotron-3-super-120b-a12b"),
    ("Kimi-K2-1T", "kimi-k2"), ("Kimi K2", "kimi-k2"), ("NVIDIA-Nemotron-3-Nano-30B-A3B", "nemotron-3-nano-30b-a3b"),
    ("Nemotron_3_Ultra", "nemotron-3-ultra-550b-a55b"),
    ("NVIDIA-Nemotron-3-Ultra-550B-A55B", "nemotron-3-ultra-550b-a55b"),
    ("Nemotron_3_5_Lightning", "nemotron-3.5-lightning-30b-a3b"),
    ("NVIDIA-Nemotron-3.5-Lightning-30B-A3B", "nemotron-3.5-lightning-30b-a3b"),
])
def test_published_names_of_the_new_families_map_to_zoo_models(published, zoo):
    from commbench.planner.calibrate.published import _zoo_name
    assert _zoo_name(published) == zoo


def test_a_runs_row_may_name_an_hf_config(tmp_path):
    """calibrate reads a row whose model is hf:PATH (a user's own model) as that config."""
    from commbench.planner.calibrate.published import published_runs
    row = {"model": f"hf:{HF / 'Qwen3-30B-A3B'}", "gpu": "GB200", "num_gpus": 8, "precision": "MXFP8",
           "seq_len": 4096, "gbs": 512, "mbs": 4, "tp": 1, "pp": 1, "cp": 1, "vp": None, "ep": 8, "etp": None,
           "tokens_per_s_per_gpu": 26373, "notes": ""}
    (run,) = published_runs((row,))
    assert run.layout is not None and run.model.name == "hf:Qwen3-30B-A3B" and run.model.num_routed_experts == 128


def test_torchtitan_plans_an_hf_model_whose_sizes_are_a_shipped_config():
    from commbench.planner import Layout
    from commbench.planner.emit.torchtitan import torchtitan_plan
    lay = Layout(tp=1, pp=1, ep=8, etp=1, dp=8, mbs=1, gbs=64)
    doc = torchtitan_plan(lay, hf("Qwen3-30B-A3B"))
    # qwen3's shipped config as it is: its expert bias stands in for Qwen3's aux loss (noted; TorchTitan has none)
    assert (doc["module"], doc["config"]) == ("qwen3", "qwen3_30b_a3b")
    assert "refused" in torchtitan_plan(lay, hf("Mixtral-8x7B-v0.1"))   # TorchTitan ships no Mixtral


@pytest.mark.parametrize("folder", ["gpt-oss-120b", "Qwen3-30B-A3B"])
def test_plan_framework_torchtitan_takes_an_hf_model_whose_sizes_are_a_shipped_config(folder):
    """--framework torchtitan refused such a model by its name ('TorchTitan 0.3.0 has no hf:gpt-oss-120b model
    ... plan it with --framework megatron', which cannot build gpt-oss), though the emitter writes its config."""
    from commbench.cli.app import app
    # fp8: gpt-oss's expert K (2880) is no multiple of 128, which TorchTitan's MXFP8 grouped GEMM needs on sm_100
    result = CliRunner().invoke(app, ["plan", "--model", f"hf:{HF / folder}", "--system", "b200-hgx", "--gpus", "16",
                                      "--gbs", "256", "--framework", "torchtitan", "--precision", "fp8", "--emit", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert "refused" not in doc["torchtitan"] and doc["layout"]["recompute"] == "full"  # as TorchTitan's config


def _v4(tmp_path, **changes):
    raw = json.loads((HF / "DeepSeek-V4-Flash" / "config.json").read_text())
    raw.update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        del raw[key]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    return f"hf:{path}"


def test_deepseek_v4_reads_its_attention_kinds_from_either_spelling(tmp_path):
    """Legacy compress_ratios (one per layer, then 0 per MTP layer) or the native layer_types + compress_rates,
    as Megatron-Bridge's deepseek_v4_bridge.py reads them: the same model either way."""
    legacy = hf("DeepSeek-V4-Flash")
    assert legacy.csa_pattern.count("C") == 21 and legacy.csa_pattern.count("H") == 20 and legacy.csa_pattern[:2] == "WW"
    kinds = {0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}
    ratios = json.loads((HF / "DeepSeek-V4-Flash" / "config.json").read_text())["compress_ratios"][:43]
    native = load_model(_v4(tmp_path, compress_ratios=None, layer_types=[kinds[r] for r in ratios],
                            compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}))
    assert native.csa_pattern == legacy.csa_pattern and native.hash_layers == legacy.hash_layers == 3


@pytest.mark.parametrize("changes, message", [
    (dict(compress_ratios=[0, 8] + [4] * 42), r"compress_ratios=\[0, 8, .* is not modelled: one of 0, 4, 128 per layer \(43\)"),
    (dict(compress_ratios=[4] * 44), "then 0 per MTP layer"),
    (dict(compress_ratios=None), "lacks 'compress_ratios' \\(or 'layer_types' with 'compress_rates'\\)"),
    (dict(num_key_value_heads=8), "num_key_value_heads=8 is not modelled: 1"),
    (dict(o_groups=7), "o_groups=7 is invalid: must divide heads"),
])
def test_a_deepseek_v4_config_the_planner_cannot_model_is_one_line(tmp_path, changes, message):
    with pytest.raises(CommbenchError, match=message):
        load_model(_v4(tmp_path, **changes))


def test_glm_4_5_air_reads_as_gqa_with_dense_first_layers_shared_experts_and_mtp():
    """zai-org/GLM-4.5-Air (model_type glm4_moe): 1 dense layer then 45 MoE (128 experts, top-8, one shared), GQA
    96 / 8 heads of 128 with a QKV bias, half the head dims rotated, a sigmoid router with its correction bias."""
    m = hf("GLM-4.5-Air")
    assert (m.attention, m.num_dense_layers, m.num_moe_layers, m.num_mtp_layers, m.num_kv_heads) == ("gqa", 1, 45, 1, 8)
    a = m.architecture
    assert (a.qkv_bias, a.rotary_percent, a.router_score, a.router_expert_bias, a.qk_norm) == (True, 0.5, "sigmoid", True, False)


def test_glm_4_5_air_plans_launch_in_megatron_lms_whole_configuration_path(monkeypatch):
    pytest.importorskip("megatron.core", reason="megatron-core is not installed (requirements-frameworks.txt)")
    from tests.megatron_lm import best_plan_through_megatron
    args, _ = best_plan_through_megatron(hf("GLM-4.5-Air"), monkeypatch)
    assert "--add-qkv-bias" in args and args[args.index("--rotary-percent") + 1] == "0.5"


@pytest.mark.parametrize("folder, rate, bridge", [
    ("DeepSeek-V3", 1e-3, "deepseek/deepseek_v3_bridge.py:74"), ("Kimi-K2-Instruct", 1e-3, "kimi/kimi_bridge.py:62"),
    ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 1e-3, "nemotronh/nemotron_h_bridge.py:312"),
    ("DeepSeek-V4-Flash", 1e-3, "deepseek/deepseek_v4_bridge.py:491"),
    ("GLM-4.5-Air", 0.0, "glm/glm45_bridge.py:78"), ("GLM-4.7-Flash", 0.0, "glm/glm47_flash_bridge.py:89")])
def test_an_expert_bias_read_from_a_config_is_updated_as_its_bridge_trains_it(folder, rate, bridge):
    """A config.json names the router's correction bias but no update rate: the rate is the one Megatron-Bridge's
    bridge for the type trains with, credited to that bridge file (not to config.json, which has no such key). GLM's
    bridges set moe_router_bias_update_rate = 0 (probe EA: GLM plans emitted 1e-3 credited to hf-config); the others
    turn the bias on and leave megatron-core's default 1e-3."""
    from commbench.planner.emit.megatron_arch import architecture_args
    m = hf(folder)
    assert m.architecture.router_expert_bias and m.architecture.router_bias_update_rate == pytest.approx(rate)
    source = m.architecture.source("router_bias_update_rate")
    assert source.repo == "NVIDIA-NeMo/Megatron-Bridge" and source.path.endswith(bridge), source
    if m.attention != "dsv4":   # Megatron-LM core_v0.16.1 builds no DeepSeek-V4 (refused before its flags)
        args = architecture_args(m, 4096)
        assert float(args[args.index("--moe-router-bias-update-rate") + 1]) == pytest.approx(rate)


def test_an_expert_bias_no_bridge_sets_updates_at_megatron_cores_default(tmp_path):
    """A type whose bridge has no expert bias (DeepSeek-V2's), asked for one by topk_method noaux_tc: megatron-core's
    TransformerConfig default 1e-3, credited to it."""
    from tests.hf_configs import edited_config
    m = load_model(edited_config(tmp_path, "DeepSeek-V2-Lite", topk_method="noaux_tc", scoring_func="sigmoid",
                                   norm_topk_prob=True))
    assert m.architecture.router_bias_update_rate == pytest.approx(1e-3)
    assert m.architecture.source("router_bias_update_rate").repo == "pypi:megatron-core"


@pytest.mark.parametrize("folder, balancing, coeff", [
    ("Qwen3-30B-A3B", "aux_loss", 1e-3), ("Qwen3-Next-80B-A3B-Instruct", "global_aux_loss", 1e-3),
    ("DeepSeek-V3", "seq_aux_loss", 1e-4), ("Kimi-K2-Instruct", "seq_aux_loss", 1e-3),
    ("GLM-4.5-Air", "seq_aux_loss", 1e-3), ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "seq_aux_loss", 1e-4),
    ("gpt-oss-120b", "none", 0.0), ("Mixtral-8x7B-v0.1", "aux_loss", 0.02),   # AutoBridge: router_aux_loss_coef
])
def test_a_config_trains_with_the_load_balancing_megatron_bridge_gives_its_model_type(folder, balancing, coeff):
    """Emitted plans of an hf: model carry the balancing loss Megatron-Bridge's bridge for that model type sets
    (before: aux_loss at 0 for every config, i.e. none)."""
    from commbench.planner.emit.megatron_arch import architecture_args
    m = hf(folder)
    assert (m.architecture.load_balancing, m.architecture.aux_loss_coeff) == (balancing, pytest.approx(coeff))
    args = architecture_args(m, 4096)
    assert args[args.index("--moe-router-load-balancing-type") + 1] == balancing
    assert float(args[args.index("--moe-aux-loss-coeff") + 1]) == pytest.approx(coeff)


@pytest.mark.parametrize("folder,builds", [
    ("DeepSeek-V2-Lite", ("q_lora_rank=0,", "mscale=0.707,", "router_score_func='softmax'", "router_route_norm=False",
                          "router_route_scale=1.0,", "scaling='yarn', rope_factor=40.0", "eps = 1e-06")),
    ("Moonlight-16B-A3B", ("q_lora_rank=0,", "router_score_func='sigmoid'", "router_route_norm=True",
                           "router_route_scale=2.446,", "theta=50000.0, scaling='none'", "vocab_size=163840",
                           "dense_hidden_dim=11264,", "eps = 1e-05")),
])
def test_plan_framework_torchtitan_builds_an_mla_model_no_flavor_is(folder, builds, tmp_path):
    """DeepSeek-V2-Lite and Moonlight (MLA, q_lora_rank null) were refused with 'TorchTitan 0.3.0 has no ... model':
    TorchTitan's deepseek_v3 model builds them (tests/test_emit_torchtitan_real.py runs the launch through it); the
    plan writes the config function with the HF config's values, and says what TorchTitan's balancing trains."""
    from commbench.cli.app import app
    result = CliRunner().invoke(app, ["plan", "--model", f"hf:{HF / folder}", "--system", "h100-hgx", "--gpus", "8",
                                      "--framework", "torchtitan", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    titan = json.loads((tmp_path / "plan.json").read_text())["torchtitan"]
    assert "refused" not in titan and titan["module"] == "commbench_torchtitan", titan
    text = (tmp_path / "commbench_torchtitan.py").read_text()
    assert text == titan["config_module"]["text"] and f"def {titan['config']}():" in text
    assert [b for b in builds if b not in text] == []
    assert any("balances experts only by an expert bias" in n for n in titan["notes"]), titan["notes"]


@pytest.mark.parametrize("changes,says", [
    ({"rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                       "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 0.707}},
     "architecture.yarn_mscale=1.0 with yarn_mscale_all_dim=0.707, it builds yarn_mscale = yarn_mscale_all_dim only"),
    # norm_topk_prob true and top_k / topk_group = 2: a sigmoid router megatron-core builds as transformers does
    ({"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "scoring_func": "sigmoid",
      "topk_method": "noaux_tc", "n_group": 64, "topk_group": 3, "norm_topk_prob": True},
     "architecture.router_groups=64, it builds groups that divide the 64 experts into groups of >= 2"),
])
def test_plan_framework_torchtitan_refuses_an_mla_model_it_cannot_build_by_field(changes, says, tmp_path):
    """What TorchTitan 0.3.0's deepseek_v3 model cannot express (a RoPE mscale apart from the softmax's: its RoPE
    applies none; expert groups of one) is one line naming the field, the value and what it builds, not 'no model'."""
    from commbench.cli.app import app
    raw = json.loads((HF / "DeepSeek-V2-Lite" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(raw, **changes)))
    result = CliRunner().invoke(app, ["plan", "--model", f"hf:{tmp_path}", "--system", "h100-hgx", "--gpus", "8",
                                      "--framework", "torchtitan", "--out", str(tmp_path / "out")])
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "Traceback" not in result.output, result.output
    assert lines[0].startswith("error: TorchTitan 0.3.0's deepseek_v3 model (DeepSeekV3Model.Config) cannot build hf:")
    assert says in lines[0] and lines[0].endswith("; plan it with --framework megatron"), lines[0]
    assert CliRunner().invoke(app, ["plan", "--model", f"hf:{tmp_path}", "--system", "h100-hgx", "--gpus", "8",
                                    "--emit", "json"]).exit_code == 0   # Megatron-LM builds it


@pytest.mark.parametrize("folder, changes, message", [
    # megatron-core's MambaMixer builds conv_bias=True, bias=False (ssm/mamba_mixer.py): other values were read
    # as the built ones and planned silently (found from outside); the refusal names the plan's release's core
    ("Nemotron-H-8B-Base-8K", dict(use_conv_bias=False), r"use_conv_bias=False is not modelled: Nemotron-H as "
                                                         r"megatron-core [\d.]+ \(release [\d.]+'s Megatron-LM \w+\) "
                                                         r"builds it has use_conv_bias=true"),
    ("Nemotron-H-8B-Base-8K", dict(use_bias=True), "use_bias=True is not modelled"),
    ("Nemotron-H-8B-Base-8K", dict(mlp_bias=True), "mlp_bias=True is not modelled"),
    # transformers and the checkpoints' code clamp each Mamba time step into time_step_limit (dt_limit), and the remote
    # code and Megatron-Bridge keep an fp32 residual stream for residual_in_fp32; the launch builds neither: both were
    # planned silently as the default model (found from outside, session 44 probe P1)
    ("Nemotron-H-8B-Base-8K", dict(time_step_limit=[0.0, 1.0]),
     r"time_step_limit=\[0.0, 1.0\] is not modelled: \[0.0, Infinity\] \(megatron-core's MambaMixer clamps no"),
    ("Nemotron-H-8B-Base-8K", dict(mamba_dt_limit=[0.001, 0.1]), r"mamba_dt_limit=\[0.001, 0.1\] is not modelled"),
    ("Nemotron-H-8B-Base-8K", dict(time_step_limit=[0.0]), r"time_step_limit=\[0.0\] is invalid: a list of two numbers"),
    ("Nemotron-H-8B-Base-8K", dict(residual_in_fp32=True),
     r"residual_in_fp32=true is not modelled: the launch keeps the residual stream in bf16"),
    # HF builds a dense MLP of intermediate_size in every layer of a Qwen MoE config without experts; it was modelled
    # with no MLP at all and emitted without --ffn-hidden-size
    ("Qwen3-30B-A3B", dict(num_experts=0), "num_experts=0 is not modelled as model_type 'qwen3_moe': every layer is "
                                           "then a dense MLP of intermediate_size"),
    ("Qwen3-30B-A3B", dict(decoder_sparse_step=2), "decoder_sparse_step=2 is not modelled: 1"),
    # a RoPE base of 0 or 0.5 (truncated to 0 by int()) was emitted as --rotary-base 0; a scaling factor of 0 accepted
    ("Llama-3.1-8B", dict(rope_theta=0), r"rope_theta=0 is invalid: a whole number > 1"),
    ("Llama-3.1-8B", dict(rope_theta=0.5), r"rope_theta=0.5 is invalid: a whole number > 1"),
    ("Llama-3.1-8B", dict(rope_theta=10000.5), r"rope_theta=10000.5 is invalid: a whole number > 1"),
    ("Llama-3.1-8B", dict(rope_scaling={"rope_type": "llama3", "factor": 0.0, "low_freq_factor": 1.0,
                                        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
     r"rope_scaling.factor=0.0 is invalid: >= 1"),
])
def test_a_config_megatron_core_builds_otherwise_is_refused_in_one_line(tmp_path, folder, changes, message):
    raw = json.loads((HF / folder / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(raw, **changes)))
    from commbench.cli.app import app
    result = CliRunner().invoke(app, ["plan", "--model", f"hf:{tmp_path}", "--system", "gb200-nvl72", "--gpus", "64"])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1
    assert re.search(message, result.output), result.output


@pytest.mark.parametrize("changes", [dict(mamba_proj_bias=True), dict(time_step_limit=[0, float("inf")]),
                                     dict(time_step_limit=[0.0, float("inf")], residual_in_fp32=False),
                                     dict(time_step_limit=[0.0, {"__float__": "Infinity"}])])   # as transformers 5 saves it
def test_a_nemotron_h_key_that_builds_the_same_model_is_accepted(tmp_path, changes):
    """mamba_proj_bias is read by neither transformers' nor the checkpoints' Mamba mixer (both take use_bias) nor
    Megatron-Bridge; a time_step_limit of (0, inf) and residual_in_fp32 false are the defaults: the same model."""
    raw = json.loads((HF / "Nemotron-H-8B-Base-8K" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(raw, **changes)))
    import dataclasses
    released = load_model(f"hf:{HF / 'Nemotron-H-8B-Base-8K'}")
    assert dataclasses.replace(load_model(f"hf:{tmp_path}"), name=released.name) == released


def test_a_mamba_convolution_megatron_core_does_not_build_is_refused_for_megatron(tmp_path):
    raw = json.loads((HF / "Nemotron-H-8B-Base-8K" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(raw, conv_kernel=2)))
    model = load_model(f"hf:{tmp_path}")
    assert model.mamba_conv_kernel == 2   # the step model counts it
    from commbench.planner.search.frameworks import megatron_unbuildable
    assert "its Mamba convolution kernel is 2 wide, and megatron-core's MambaMixer builds 4" in megatron_unbuildable(model)
    assert megatron_unbuildable(load_model(f"hf:{HF / 'Nemotron-H-8B-Base-8K'}")) is None
    mixer = pytest.importorskip("megatron.core.ssm.mamba_mixer")
    import inspect
    defaults = inspect.signature(mixer.MambaMixer.__init__).parameters
    assert (defaults["d_conv"].default, defaults["conv_bias"].default, defaults["bias"].default) == (4, True, False)


def test_a_config_path_to_a_huge_file_is_refused_unread(tmp_path):
    big = tmp_path / "config.json"
    with open(big, "wb") as handle:   # sparse: 17 MiB of nothing, no disk used
        handle.truncate(17 << 20)
    with pytest.raises(CommbenchError, match=r"is over 16 MiB: not the small text file it names"):
        load_model(f"hf:{tmp_path}")


# A key config.json leaves out is the transformers configuration class's default (hf_defaults.CLASS_DEFAULTS); it
# was commbench's generic value, so a hand-written config planned another model than transformers builds from it.
def _dropped(tmp_path, folder: str, drop=(), **changes):
    raw = json.loads((HF / folder / "config.json").read_text())
    text = raw["text_config"] if isinstance(raw.get("text_config"), dict) and "hidden_size" not in raw else raw
    for key in drop:
        text.pop(key)
    text.update(changes)
    (tmp_path / "config.json").write_text(json.dumps(raw))
    return load_model(f"hf:{tmp_path}")


def _arg(model, flag: str, ep: int = 1) -> str:
    from commbench.planner.emit.megatron import megatron_args
    from commbench.planner import Layout
    args = megatron_args(Layout(tp=1, pp=1, ep=ep, etp=1, dp=8, mbs=1, gbs=64), model)
    return args[args.index(flag) + 1]


def test_a_qwen3_config_without_head_dim_takes_qwen3configs_128(tmp_path):
    """Qwen3Config head_dim: int = 128 (transformers@008e574 configuration_qwen3.py). Qwen3-0.6B's shape (1024 wide,
    16 heads) without the key was planned with hidden / heads = 64: --kv-channels 64, another model."""
    m = _dropped(tmp_path, "Qwen3-8B", drop=("head_dim",), hidden_size=1024, num_attention_heads=16,
                 num_key_value_heads=8)
    assert m.head_dim == 128 and _arg(m, "--kv-channels") == "128"


def test_qwen3_kv_heads_left_out_are_the_class_32_and_null_is_the_head_count(tmp_path):
    """Qwen3Config num_key_value_heads: int | None = 32; __post_init__ makes an explicit null num_attention_heads."""
    absent = _dropped(tmp_path, "Qwen3-8B", drop=("num_key_value_heads", "rms_norm_eps"), num_attention_heads=64)
    assert (absent.num_kv_heads, absent.architecture.norm_epsilon) == (32, 1e-6)
    assert _arg(absent, "--num-query-groups") == "32"
    (tmp_path / "null").mkdir()
    null = _dropped(tmp_path / "null", "Qwen3-8B", num_attention_heads=64, num_key_value_heads=None)
    assert null.num_kv_heads == 64


def test_a_glm_4_5_config_without_rope_fraction_eps_or_kv_heads_takes_glm4moeconfigs(tmp_path):
    """Glm4MoeConfig: partial_rotary_factor 0.5, rms_norm_eps 1e-5, num_key_value_heads 8; they were read as 1
    (--rotary-percent 1), 1e-6 and the head count (96)."""
    m = _dropped(tmp_path, "GLM-4.5-Air", drop=("partial_rotary_factor", "rms_norm_eps", "num_key_value_heads"))
    assert (m.architecture.rotary_percent, m.architecture.norm_epsilon, m.num_kv_heads) == (0.5, 1e-5, 8)
    assert _arg(m, "--rotary-percent", ep=8) == "0.5" and _arg(m, "--num-query-groups", ep=8) == "8"
    assert m.architecture == hf("GLM-4.5-Air").architecture


def test_a_mixtral_config_without_rope_theta_takes_mixtralconfigs_default_theta(tmp_path):
    """MixtralConfig default_theta = 1e6, rms_norm_eps 1e-5 (were 10000 and 1e-6)."""
    m = _dropped(tmp_path, "Mixtral-8x7B-v0.1", drop=("rope_theta", "rms_norm_eps"))
    assert (m.architecture.rotary_base, m.architecture.norm_epsilon) == (1000000, 1e-5)
    assert _arg(m, "--rotary-base", ep=8) == "1000000"


def test_llama_nulls_are_derived_as_llamaconfig_does(tmp_path):
    """LlamaConfig.__post_init__: head_dim None -> hidden_size // num_attention_heads, num_key_value_heads None ->
    num_attention_heads (an explicit null of either was refused or kept)."""
    m = _dropped(tmp_path, "Llama-3.1-8B", head_dim=None, num_key_value_heads=None)
    assert (m.head_dim, m.num_kv_heads) == (128, 32)


@pytest.mark.parametrize("folder, drop", [
    # GptOssConfig: head_dim 64, attention_bias True, sliding_window 128, default_theta 150000 and, rope_parameters
    # None, YaRN x32 of 4096: the released config's own values (a config without them lost the biases, the window
    # and YaRN, and head_dim was 2880 / 64 = 45)
    ("gpt-oss-20b", ("head_dim", "attention_bias", "sliding_window", "rope_theta", "rope_scaling", "swiglu_limit")),
    # Qwen3NextConfig: head_dim 256, partial_rotary_factor 0.25, a full attention layer every 4th (was refused)
    ("Qwen3-Next-80B-A3B-Instruct", ("head_dim", "partial_rotary_factor", "full_attention_interval",
                                      "num_key_value_heads")),
    # DeepseekV4Config: head_dim 512, hc_mult 4, n_shared_experts 1, one MTP layer, swiglu_limit 10 (were 64, 0, 0, 0,
    # no clamp)
    ("DeepSeek-V4-Flash", ("head_dim", "hc_mult", "n_shared_experts", "num_nextn_predict_layers", "swiglu_limit")),
    # DeepseekV3Config num_mtp_layers 1 (num_nextn_predict_layers)
    ("DeepSeek-V3", ("num_nextn_predict_layers", "first_k_dense_replace", "n_shared_experts")),
])
def test_a_config_without_keys_it_gives_at_the_class_default_reads_the_same(tmp_path, folder, drop):
    raw = json.loads((HF / folder / "config.json").read_text())
    assert all(key in raw for key in drop)
    assert _dropped(tmp_path, folder, drop=drop) == replace(hf(folder), name=f"hf:{tmp_path.name}")


def _shipped():
    return sorted(p.name for p in HF.iterdir() if (p / "config.json").is_file())


@pytest.mark.parametrize("folder", _shipped())
def test_a_shipped_config_reads_the_same_without_the_keys_it_gives_at_the_class_default(tmp_path, folder):
    """Every key a released config gives at its class's default (hf_defaults.CLASS_DEFAULTS) can be left out."""
    from commbench.planner.models.hf_config import ALIASES
    from commbench.planner.models.hf_defaults import CLASS_DEFAULTS
    raw = json.loads((HF / folder / "config.json").read_text())
    text = raw["text_config"] if isinstance(raw.get("text_config"), dict) and "hidden_size" not in raw else raw
    defaults = CLASS_DEFAULTS.get(ALIASES.get(text["model_type"], text["model_type"]), {})
    rope, dropped = text.get("rope_parameters") or {}, []
    for key, value in defaults.items():
        if key == "rope_parameters" or key == "tie_word_embeddings" and text is not raw:
            continue   # a VL config's top-level tie_word_embeddings is its own key
        for where in (text, rope):
            if key in where and where[key] == value and isinstance(where[key], bool) == isinstance(value, bool):
                dropped.append(where.pop(key))
    assert dropped or folder == "Kimi-K2-Instruct"   # kimi_k2: no transformers class
    (tmp_path / "config.json").write_text(json.dumps(raw))
    assert load_model(f"hf:{tmp_path}") == replace(hf(folder), name=f"hf:{tmp_path.name}")


@pytest.mark.parametrize("folder", _shipped())
def test_a_shipped_config_gives_every_key_the_class_default_table_holds(monkeypatch, folder):
    """The released configs give every key they use: emptying the class-default table changes none of them."""
    from commbench.planner.models import hf_defaults
    model = hf(folder)
    monkeypatch.setattr(hf_defaults, "CLASS_DEFAULTS", {})
    monkeypatch.setattr(hf_defaults, "NULL_DERIVED", {})
    assert hf(folder) == model


@pytest.mark.parametrize("drop", ["experts_per_token", "num_experts_per_tok"])
def test_a_gpt_oss_config_gives_its_top_k_under_either_key(tmp_path, drop):
    # the other key was read eagerly as the fallback's default: a config with num_experts_per_tok alone was refused
    raw = json.loads((HF / "gpt-oss-20b" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({k: v for k, v in raw.items() if k != drop}))
    assert load_model(f"hf:{tmp_path}").top_k == 4
