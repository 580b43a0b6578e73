"""`--model hf:PATH` for the model types read beyond the first ones: MLA without the query low rank
(DeepSeek-V2-Lite, Moonlight), GLM-4.7-Flash (glm4_moe_lite), Qwen3.5 MoE and dense; the RoPE of configs that
transformers >= 5 writes (rope_parameters); and the model types refused by name, each in one line
through the CLI. Published parameter counts of these configs: test_hf_config.py PUBLISHED; sources:
tests/data/hf/SOURCES.md."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.planner.models.counts import flops_breakdown, param_counts
from commbench.planner.models.hf_refused import NOT_MODELLED
from commbench.planner.models.zoo import load_model
from tests.hf_configs import HF, edited_config



def hf(name: str):
    return load_model(f"hf:{HF / name}")


_config = edited_config


def _plan_args(model: str, gpus: int = 64) -> list[str]:
    """The Megatron-LM arguments `commbench plan --emit megatron` prints for the best layout."""
    result = CliRunner().invoke(app, ["plan", "--model", model, "--system", "gb200-nvl72", "--gpus", str(gpus),
                                      "--gbs", "512", "--emit", "megatron"])
    assert result.exit_code == 0, result.output
    return shlex.split(result.stdout.strip().splitlines()[-1])


def _value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def _refusal(model: str) -> str:
    result = CliRunner().invoke(app, ["plan", "--model", model, "--system", "b200-hgx", "--gpus", "16"])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1, result.output
    assert "Traceback" not in result.output
    return result.output


@pytest.mark.parametrize("folder", ["DeepSeek-V2-Lite", "Moonlight-16B-A3B"])
def test_mla_without_the_query_low_rank_is_read_counted_and_emitted(folder):
    """q_lora_rank null (DeepSeek-V2-Lite, Moonlight): one h -> heads x (nope + rope) query projection, as
    megatron-core builds without --q-lora-rank (linear_q_proj) and Megatron-LM core_v0.16.1 training.py's q_term
    counts. Both were refused ("q_lora_rank=null ... is not modelled"), Moonlight though it is model_type deepseek_v3."""
    m = hf(folder)
    assert (m.attention, m.q_lora_rank, m.kv_lora_rank, m.num_dense_layers, m.num_moe_layers) == ("mla", 0, 512, 1, 26)
    h, H = 2048, 16
    q = h * H * (128 + 64)
    kv = 512 * (h + H * (128 + 128) + 1) + h * 64
    per_layer = q + kv + H * 128 * h
    assert flops_breakdown(m, 4096).attention_proj == pytest.approx(6.0 * 27 * per_layer)
    assert param_counts(m).attention == pytest.approx(27 * per_layer)   # weights = multiply-adds (+ the kv norm's)
    args = _plan_args(f"hf:{HF / folder}")
    assert "--multi-latent-attention" in args and "--q-lora-rank" not in args
    assert (_value(args, "--kv-lora-rank"), _value(args, "--moe-layer-freq")) == ("512", "[0]*1+[1]*26")


def test_deepseek_v2_lite_trains_its_softmax_router_and_yarn():
    """DeepSeek-V2-Lite (model_type deepseek_v2): softmax over all 64 experts, top-6 kept unnormalised
    (norm_topk_prob false: --moe-router-pre-softmax, as DeepSeekV2Bridge), no expert bias (topk_method greedy),
    seq_aux_loss at aux_loss_alpha, two shared experts, YaRN x40 with mscale 0.707 applied by MLA."""
    a = hf("DeepSeek-V2-Lite").architecture
    assert (a.router_score, a.router_pre_softmax, a.router_expert_bias, a.router_groups) == ("softmax", True, False, 0)
    assert (a.load_balancing, a.aux_loss_coeff, a.qk_norm) == ("seq_aux_loss", pytest.approx(1e-3), True)
    args = _plan_args(f"hf:{HF / 'DeepSeek-V2-Lite'}")
    assert {"--moe-router-pre-softmax", "--qk-layernorm"} <= set(args) and "--moe-router-enable-expert-bias" not in args
    assert (_value(args, "--rope-type"), _value(args, "--rotary-scaling-factor"), _value(args, "--mscale")) == (
        "yarn", "40", "0.707")
    assert _value(args, "--moe-shared-expert-intermediate-size") == "2816"


def test_moonlight_and_glm_4_7_flash_train_a_sigmoid_router_with_its_bias():
    moon, flash = hf("Moonlight-16B-A3B"), hf("GLM-4.7-Flash")
    for m, scaling in ((moon, 2.446), (flash, 1.8)):
        a = m.architecture
        assert (a.router_score, a.router_expert_bias, a.router_topk_scaling) == ("sigmoid", True, pytest.approx(scaling))
    assert (flash.q_lora_rank, flash.qk_nope_head_dim, flash.v_head_dim, flash.num_mtp_layers) == (768, 192, 256, 1)
    args = _plan_args(f"hf:{HF / 'GLM-4.7-Flash'}")
    assert (_value(args, "--q-lora-rank"), _value(args, "--qk-head-dim"), _value(args, "--v-head-dim")) == (
        "768", "192", "256")
    assert (_value(args, "--moe-router-score-function"), _value(args, "--mtp-num-layers"),
            _value(args, "--rope-type"), _value(args, "--rotary-base")) == ("sigmoid", "1", "rope", "1000000")
    assert "--moe-router-enable-expert-bias" in args


def test_qwen3_5_moe_reads_as_qwen3_next_with_mtp_from_its_vl_config():
    """Qwen3.5-397B-A17B's config.json is a vision-language one (model_type qwen3_5_moe, the language model in
    text_config, model_type qwen3_5_moe_text); its RoPE is in rope_parameters (rope_theta 1e7, a quarter of each
    head rotated). Before, rope_theta was read as the 10000 default: another model."""
    m = hf("Qwen3.5-397B-A17B")
    assert (m.num_layers, m.num_attention_layers, m.num_linear_attention_layers, m.num_mtp_layers) == (60, 15, 45, 1)
    assert (m.num_routed_experts, m.top_k, m.expert_ffn, m.num_shared_experts) == (512, 10, 1024, 1)
    assert (m.gdn_num_key_heads, m.gdn_num_value_heads, m.attention_gate) == (16, 64, True)
    a = m.architecture
    assert (a.rotary_base, a.rotary_percent, a.norm_zero_centered_gamma, a.shared_expert_gate) == (10**7, 0.25, True, True)
    assert (a.router_pre_softmax, a.load_balancing, a.qk_norm) == (False, "global_aux_loss", True)
    args = _plan_args(f"hf:{HF / 'Qwen3.5-397B-A17B'}", gpus=256)
    assert {"--attention-output-gate", "--moe-shared-expert-gate", "--apply-layernorm-1p", "--qk-layernorm"} <= set(args)
    assert (_value(args, "--experimental-attention-variant"), _value(args, "--linear-num-value-heads"),
            _value(args, "--rotary-base"), _value(args, "--rotary-percent"), _value(args, "--mtp-num-layers")) == (
        "gated_delta_net", "64", "10000000", "0.25", "1")
    assert "--moe-router-pre-softmax" not in args


def test_a_qwen3_5_text_config_alone_reads_as_the_vl_one(tmp_path):
    raw = json.loads((HF / "Qwen3.5-35B-A3B" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(raw["text_config"]))   # model_type qwen3_5_moe_text
    vl = hf("Qwen3.5-35B-A3B")
    assert dataclasses.replace(load_model(f"hf:{tmp_path}"), name=vl.name) == vl
    text = dict(raw["text_config"], layer_types=["full_attention"] * 40)
    (tmp_path / "config.json").write_text(json.dumps(text))
    with pytest.raises(CommbenchError, match="layer_types is not modelled unless every 4-th layer"):
        load_model(f"hf:{tmp_path}")


@pytest.mark.parametrize("folder, hidden, ffn, layers, heads, value_heads, tied", [
    ("Qwen3.5-27B", 5120, 17408, 64, 24, 48, False), ("Qwen3.5-9B", 4096, 12288, 32, 16, 32, False),
    ("Qwen3.5-4B", 2560, 9216, 32, 16, 32, True)])
def test_dense_qwen3_5_reads_as_gated_deltanet_with_a_dense_mlp(folder, hidden, ffn, layers, heads, value_heads, tied):
    """The dense Qwen3.5 models (model_type qwen3_5, text_config qwen3_5_text) were refused ("model_type='qwen3_5_text'
    is not known"). Every 4th layer gated full attention (4 KV heads of 256), the rest Gated DeltaNet (16 key heads,
    value heads as the config, of 128), a dense SwiGLU MLP on every layer, one MTP layer, Qwen3-Next's norms."""
    m = hf(folder)
    assert (m.hidden, m.num_layers, m.num_heads, m.num_kv_heads, m.head_dim, m.vocab) == (
        hidden, layers, heads, 4, 256, 248320)
    assert (m.is_moe, m.num_dense_layers, m.dense_ffn, m.num_mtp_layers, m.tied_embeddings) == (
        False, layers, ffn, 1, tied)
    assert (m.num_attention_layers, m.num_linear_attention_layers, m.linear_attention_freq) == (
        layers // 4, layers - layers // 4, 4)
    assert (m.gdn_num_key_heads, m.gdn_num_value_heads, m.gdn_key_head_dim, m.gdn_value_head_dim, m.gdn_conv_kernel,
            m.attention_gate) == (16, value_heads, 128, 128, 4, True)
    a = m.architecture
    assert (a.activation, a.norm_zero_centered_gamma, a.qk_norm, a.shared_expert_gate) == ("swiglu", True, True, False)
    assert (a.rotary_base, a.rotary_percent, a.norm_epsilon) == (10**7, 0.25, 1e-6)


def test_a_dense_mtp_layer_is_gated_attention_and_the_dense_mlp():
    """Qwen3.5-27B's MTP layer: gated full attention + the dense MLP (Megatron-Bridge qwen35_bridge.py
    _get_dense_mtp_mappings; Megatron-LM core_v0.16.1 gpt_builders.py builds it from the last decoder layer's spec),
    its 2h -> h projection and norms. Before, a dense model's MTP layer had no MLP in the weights or the FLOPs
    (training.py num_floating_point_operations counts it as one more dense layer when the last layer is dense)."""
    m = hf("Qwen3.5-27B")
    h, ffn = 5120, 17408
    attention = h * (2 * 24 * 256 + 2 * 4 * 256) + 24 * 256 * h + 2 * 256   # + its q/k norms (Qwen3_5Attention)
    assert param_counts(m).mtp == attention + 3 * h * ffn + 2 * h + 2 * h * h + 3 * h
    fl, without = flops_breakdown(m, 4096), flops_breakdown(m, 4096, include_mtp=False)
    assert (fl.dense_mlp, without.dense_mlp) == (6.0 * 3 * h * ffn * 65, 6.0 * 3 * h * ffn * 64)


def test_a_vl_configs_top_level_tie_word_embeddings_is_the_models(tmp_path):
    """Megatron-Bridge qwen35_vl_bridge.py: "For VLMs, tie_word_embeddings lives on the top-level config, not
    text_config" (text_config inherits PretrainedConfig's True, "wrong for 9B/27B")."""
    raw = json.loads((HF / "Qwen3.5-9B" / "config.json").read_text())
    raw["text_config"]["tie_word_embeddings"] = True
    (tmp_path / "config.json").write_text(json.dumps(raw))
    assert not load_model(f"hf:{tmp_path}").tied_embeddings
    raw["tie_word_embeddings"] = True
    (tmp_path / "config.json").write_text(json.dumps(raw))
    assert load_model(f"hf:{tmp_path}").tied_embeddings


def test_dense_qwen3_5_plans_dense_gated_deltanet_flags():
    args = _plan_args(f"hf:{HF / 'Qwen3.5-27B'}")
    assert {"--attention-output-gate", "--apply-layernorm-1p", "--qk-layernorm",
            "--untie-embeddings-and-output-weights"} <= set(args)
    assert "--num-experts" not in args and "--moe-layer-freq" not in args
    assert (_value(args, "--experimental-attention-variant"), _value(args, "--linear-attention-freq"),
            _value(args, "--linear-num-value-heads"), _value(args, "--ffn-hidden-size"),
            _value(args, "--mtp-num-layers"), _value(args, "--num-query-groups")) == (
        "gated_delta_net", "4", "48", "17408", "1", "4")
    assert "--untie-embeddings-and-output-weights" not in _plan_args(f"hf:{HF / 'Qwen3.5-4B'}", gpus=8)


def test_a_transformers_5_config_reads_its_rope_from_rope_parameters(tmp_path):
    """transformers >= 5 saves rope_theta and the scaling keys in rope_parameters: the same Llama 3.1 read either way
    (before, rope_theta fell back to 10000 and the llama3 scaling was dropped, without a word)."""
    raw = json.loads((HF / "Llama-3.1-8B" / "config.json").read_text())
    rope = dict(raw.pop("rope_scaling"), rope_theta=raw.pop("rope_theta"))
    (tmp_path / "config.json").write_text(json.dumps(dict(raw, rope_parameters=rope)))
    assert load_model(f"hf:{tmp_path}").architecture == hf("Llama-3.1-8B").architecture


@pytest.mark.parametrize("model_type", sorted(NOT_MODELLED))
def test_a_model_type_the_planner_does_not_model_is_refused_naming_why(tmp_path, model_type):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type, "hidden_size": 4096}))
    out = _refusal(f"hf:{tmp_path}")
    assert f"model_type='{model_type}' is not modelled: " in out and NOT_MODELLED[model_type][:40] in out


def test_a_refused_vl_language_model_is_named_by_its_text_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gemma3", "text_config": {
        "model_type": "gemma3_text", "hidden_size": 5376, "sliding_window_pattern": 6}}))
    assert "model_type='gemma3_text' is not modelled: its sliding window on 5 of every 6 layers" in _refusal(
        f"hf:{tmp_path}")


def test_qwen3_vl_is_refused_saying_it_is_a_vision_language_model(tmp_path):
    """Its text_config reads like a Qwen3 decoder, but the model trained adds visual features to its early layers
    (DeepStack): refused, not planned as the text model; it was 'model_type='qwen3_vl_text' is not known'."""
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "qwen3_vl", "vision_config": {"model_type": "qwen3_vl", "depth": 27},
        "text_config": {"model_type": "qwen3_vl_text", "hidden_size": 4096, "num_hidden_layers": 36}}))
    out = _refusal(f"hf:{tmp_path}")
    assert "model_type='qwen3_vl_text' is not modelled: a vision-language model" in out, out


@pytest.mark.parametrize("folder, changes, drop, message", [
    # DeepSeek-V2 (236B)'s router: groups by their best expert, megatron-core by the sum of their top experts
    ("DeepSeek-V2-Lite", dict(topk_method="group_limited_greedy", n_group=8, topk_group=3), (),
     r"topk_method='group_limited_greedy' is not modelled: it picks topk_group=3 of n_group=8 expert groups"),
    ("DeepSeek-V2-Lite", {}, ("q_lora_rank",), r"lacks 'q_lora_rank' \(needed for model_type 'deepseek_v2'\)"),
    # linear is read (tests/test_hf_release_refusals.py); dynamic NTK is not
    ("Llama-3.1-8B", dict(rope_scaling={"rope_type": "dynamic", "factor": 4.0}), (),
     r"rope_scaling.rope_type='dynamic' is not modelled: one of default, llama3, yarn, linear"),
    ("Llama-3.1-8B", dict(rope_parameters={"full_attention": {"rope_theta": 1e6}}), (),
     r"rope_parameters.full_attention is not modelled: one RoPE for every layer"),
    ("Llama-3.1-8B", dict(attention_bias=True), (),
     r"attention_bias=true is not modelled for model_type 'llama': biases on Q, K, V and the output projection"),
    ("GLM-4.7-Flash", dict(first_k_dense_replace=None, mlp_layer_types=["sparse", "dense"] + ["sparse"] * 45), (),
     r"mlp_layer_types is not modelled unless the dense layers come first"),
    # a string or number where a list belongs was iterated character by character, or a TypeError traceback
    ("GLM-4.7-Flash", dict(first_k_dense_replace=None, mlp_layer_types="dense"), (),
     r"mlp_layer_types='dense' is invalid: a list"),
    ("Qwen3-Next-80B-A3B-Instruct", dict(layer_types=4), (), r"layer_types=4 is invalid: a list"),
    ("Qwen2-57B-A14B", dict(mlp_only_layers=["0"]), (), r"mlp_only_layers\[0\]='0' is invalid: a whole number"),
    # a dense Qwen3.5 config: its Gated DeltaNet sizes named, its layer kinds as full_attention_interval
    ("Qwen3.5-27B", dict(text_config=dict(json.loads((HF / "Qwen3.5-27B" / "config.json").read_text())["text_config"],
                                          linear_num_key_heads=None)), (),
     r"lacks 'linear_num_key_heads' \(needed for model_type 'qwen3_5'\)"),
    ("Qwen3.5-9B", dict(text_config=dict(json.loads((HF / "Qwen3.5-9B" / "config.json").read_text())["text_config"],
                                         layer_types=["linear_attention", "full_attention"] * 16)), (),
     r"layer_types is not modelled unless every 4-th layer is full attention"),
])
def test_an_mla_or_rope_config_the_planner_cannot_model_is_one_line(tmp_path, folder, changes, drop, message):
    out = _refusal(_config(tmp_path, folder, drop, **changes))
    assert re.search(message, out), out


def test_mlp_layer_types_give_the_leading_dense_layers(tmp_path):
    """transformers >= 5's glm4_moe_lite config lists mlp_layer_types in place of first_k_dense_replace."""
    model = load_model(_config(tmp_path, "GLM-4.7-Flash", ("first_k_dense_replace",),
                               mlp_layer_types=["dense"] + ["sparse"] * 46))
    assert (model.num_dense_layers, model.num_moe_layers) == (1, 46)


@pytest.mark.parametrize("folder", ["DeepSeek-V2-Lite", "Moonlight-16B-A3B", "GLM-4.7-Flash", "Qwen3.5-35B-A3B",
                                    "Qwen3.5-27B", "Qwen3.5-4B"])
def test_the_new_model_types_plan_launches_in_megatron(folder, monkeypatch):
    """The plan's arguments pass Megatron-LM's own parse/validate and megatron-core's TransformerConfig (MLA without
    --q-lora-rank builds linear_q_proj), and build this model's architecture (tests/megatron_lm.py)."""
    pytest.importorskip("megatron.core", reason="megatron-core is not installed (requirements-frameworks.txt)")
    from tests.megatron_lm import best_plan_through_megatron
    best_plan_through_megatron(hf(folder), monkeypatch)


def test_mistral_nemo_reads_with_its_own_head_dim_and_counts_as_transformers_builds_it():
    """Mistral-Nemo-Base-2407 (model_type mistral, sliding_window null): head_dim 128 where hidden / heads is 160.
    transformers modeling_mistral.py: q/k/v/o_proj without bias, gate/up/down, two RMSNorms a layer, untied
    lm_head: 12,247,782,400 parameters (the model card's "12B")."""
    m = hf("Mistral-Nemo-Base-2407")
    h, heads, kv, d, ffn, vocab, layers = 5120, 32, 8, 128, 14336, 131072, 40
    layer = h * heads * d + 2 * h * kv * d + heads * d * h + 3 * h * ffn + 2 * h
    assert (m.head_dim, m.num_kv_heads, m.architecture.sliding_window) == (128, 8, 0)
    assert param_counts(m).total == layers * layer + 2 * vocab * h + h == 12_247_782_400


@pytest.mark.parametrize("window, shown", [(4096, "sliding_window=4096"),
                                           (None, "sliding_window=absent (the configuration class's 4096)")])
def test_a_mistral_window_on_every_layer_longer_sequences_cross_is_refused_by_name(tmp_path, window, shown):
    """Mistral-7B-v0.1's config.json has sliding_window 4096, which MistralAttention applies on every layer (and
    MistralConfig defaults the key to 4096 where a config leaves it out). It was planned as full attention, silently:
    only Qwen's use_sliding_window was checked. Over more than 4096 tokens the window masks, and the step model prices
    no window on every layer: refused in one line (at most 4096 tokens it is full attention: test_hf_launch_fidelity)."""
    model = _config(tmp_path, "Mistral-Nemo-Base-2407", sliding_window=window) if window else \
        _config(tmp_path, "Mistral-Nemo-Base-2407", drop=("sliding_window",))
    result = CliRunner().invoke(app, ["plan", "--model", model, "--system", "b200-hgx", "--gpus", "16",
                                      "--seq-len", "8192"])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1, result.output
    assert f"{shown} (a window on every layer) is not modelled at seq_len 8192" in result.output.replace("\n", " ")


@pytest.mark.parametrize("fixture, drop, want", [
    ("DeepSeek-V3", ("n_shared_experts",), dict(num_shared_experts=1)),
    ("DeepSeek-V3", ("first_k_dense_replace",), dict(num_dense_layers=3)),
    ("DeepSeek-V2-Lite", ("n_shared_experts", "first_k_dense_replace"), dict(num_shared_experts=2, num_dense_layers=0)),
    ("GLM-4.7-Flash", ("n_shared_experts", "first_k_dense_replace"),
     dict(num_shared_experts=1, num_dense_layers=1)),
])
def test_an_mla_config_without_its_shared_experts_or_dense_layers_takes_its_class_defaults(tmp_path, fixture, drop,
                                                                                          want):
    """A key config.json leaves out is what transformers' class for its model_type builds (hf_defaults.CLASS_DEFAULTS,
    transformers 5.25.0): DeepseekV3Config n_shared_experts 1, first_k_dense_replace 3; DeepseekV2Config 2 and 0;
    Glm4MoeLiteConfig 1 and one leading dense layer. They were refused in one line; read as none (session 19) they
    planned a model without its shared expert or dense layers."""
    m = load_model(_config(tmp_path, fixture, drop=drop))
    assert {k: getattr(m, k) for k in want} == want
    given = {key: want[field] for key, field in (("n_shared_experts", "num_shared_experts"),
                                                  ("first_k_dense_replace", "num_dense_layers")) if field in want}
    (tmp_path / "explicit").mkdir()
    explicit = load_model(_config(tmp_path / "explicit", fixture, drop=tuple(k for k in drop if k not in given),
                                  **given))
    assert param_counts(m).total == param_counts(explicit).total


@pytest.mark.parametrize("drop", ["n_shared_experts", "first_k_dense_replace"])
def test_kimi_k2_without_its_shared_experts_or_dense_layers_is_one_line(tmp_path, drop):
    """Kimi-K2 has no transformers class (its hub remote code): a key it leaves out has no default to take."""
    assert f"lacks '{drop}'" in _refusal(_config(tmp_path, "Kimi-K2-Instruct", drop=(drop,)))


def test_an_explicit_null_shared_expert_count_is_refused(tmp_path):
    assert "n_shared_experts=null is invalid" in _refusal(_config(tmp_path, "DeepSeek-V3", n_shared_experts=None))


def test_a_glm4_moe_config_without_its_shared_expert_or_dense_layer_takes_the_class_defaults(tmp_path):
    """Glm4MoeConfig: first_k_dense_replace=1, n_shared_experts=1; both were read as 0 when left out."""
    m = load_model(_config(tmp_path, "GLM-4.5-Air", drop=("n_shared_experts", "first_k_dense_replace")))
    assert (m.num_dense_layers, m.num_shared_experts) == (1, 1)
    assert param_counts(m).total == param_counts(hf("GLM-4.5-Air")).total


def test_a_key_given_twice_is_one_line_naming_it(tmp_path):
    """json.loads keeps the last of two equal keys silently: a hand-edited config.json giving hidden_size twice was
    planned at one of them without a word."""
    text = (HF / "Qwen3-8B" / "config.json").read_text().replace('"hidden_size": 4096', '"hidden_size": 4096, "hidden_size": 1024')
    (tmp_path / "config.json").write_text(text)
    assert "key 'hidden_size' appears twice" in _refusal(f"hf:{tmp_path}")


def test_a_llama_mlp_bias_is_refused_by_name(tmp_path):
    """LlamaMLP builds gate/up/down_proj with bias=config.mlp_bias; mlp_bias true was planned (and counted) without
    those biases, silently. false (Llama 3.x configs) is read."""
    assert "mlp_bias=true is not modelled for model_type 'llama'" in _refusal(_config(tmp_path, "Llama-3.1-8B", mlp_bias=True))
    assert load_model(_config(tmp_path, "Llama-3.1-8B", mlp_bias=False)).num_layers == 32


@pytest.mark.parametrize("folder, want", [("Mixtral-8x7B-v0.1", 4096 // 32), ("Mixtral-8x22B-v0.1", 6144 // 48),
                                          ("Mistral-Nemo-Base-2407", 5120 // 32), ("Llama-3.1-8B", 4096 // 32)])
def test_a_null_head_dim_is_hidden_over_heads_as_transformers_builds_it(tmp_path, folder, want):
    """"head_dim": null is hidden_size // num_attention_heads for these types: transformers@00d4b3d modeling_mixtral.py
    MixtralAttention `getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads` (its
    MixtralConfig keeps head_dim None, transformers@008e574 configuration_mixtral.py, so a saved config carries the
    null: llm-d/llm-d-benchmark issue #426 reads it from mistralai/Mixtral-8x22B-Instruct-v0.1; tenstorrent/vllm PR
    #148 and HabanaAI/vllm-fork PR #1294 from Mistral-7B configs); transformers@001f85b configuration_mistral.py
    MistralConfig `head_dim if head_dim is not None else hidden_size // num_attention_heads`; LlamaConfig the same.
    It was one line, `lacks 'head_dim' (needed for model_type 'mixtral')`, for a config transformers loads."""
    m = load_model(_config(tmp_path, folder, head_dim=None))
    assert m.head_dim == want
    (tmp_path / "explicit").mkdir()
    assert param_counts(m).total == param_counts(load_model(_config(tmp_path / "explicit", folder, head_dim=want))).total
