"""`--model hf:PATH` for model_type phi3 (Phi-3, Phi-3.5, Phi-4): read where it is exactly Llama's network with fused
qkv_proj / gate_up_proj (microsoft/phi-4: plain RoPE, no window), refused by name where it is not (LongRoPE, which
Phi3Config also reads from "su" and "yarn"; partial rotary; a window shorter than max_position_embeddings, as
Phi-3-mini-4k's 2047). It was refused as an unknown model type. The count: test_counts_hf_exact.py test_phi_4."""

from __future__ import annotations

import json
import re
import shlex

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.models.zoo import load_model
from tests.hf_configs import HF, edited_config
from tests.test_hf_model_types import _refusal

PHI4 = f"hf:{HF / 'phi-4'}"


def _config(tmp_path, drop=(), **changes) -> str:
    return edited_config(tmp_path, "phi-4", drop, **changes)


def test_phi_4_reads_as_llamas_network_with_its_own_sizes():
    m = load_model(PHI4)
    assert (m.num_layers, m.hidden, m.num_heads, m.num_kv_heads, m.head_dim) == (40, 5120, 40, 10, 128)
    assert (m.dense_ffn, m.vocab, m.tied_embeddings, m.is_moe, m.attention) == (17920, 100352, False, False, "gqa")
    a = m.architecture
    assert (a.activation, a.rotary_base, a.rotary_percent, a.norm_epsilon) == ("swiglu", 250000, 1.0, 1e-5)
    assert (a.qkv_bias, a.linear_bias, a.qk_norm, a.sliding_window, a.max_position_embeddings) == (
        False, False, False, 0, 16384)


def test_phi_4_emits_the_megatron_arguments_of_its_config():
    result = CliRunner().invoke(app, ["plan", "--model", PHI4, "--system", "gb200-nvl72", "--gpus", "64",
                                      "--gbs", "512", "--emit", "megatron"])
    assert result.exit_code == 0, result.output
    args = shlex.split(result.stdout.strip().splitlines()[-1])
    value = {flag: args[args.index(flag) + 1] for flag in ("--num-layers", "--hidden-size", "--ffn-hidden-size",
                                                           "--num-attention-heads", "--num-query-groups",
                                                           "--rotary-base", "--kv-channels")}
    assert value == {"--num-layers": "40", "--hidden-size": "5120", "--ffn-hidden-size": "17920",
                     "--num-attention-heads": "40", "--num-query-groups": "10", "--rotary-base": "250000",
                     "--kv-channels": "128"}
    assert {"--swiglu", "--group-query-attention", "--untie-embeddings-and-output-weights"} <= set(args)
    assert "--add-qkv-bias" not in args and "--window-size" not in args


def test_phi_4_plan_launches_in_megatron_lms_configuration_path(monkeypatch):
    """The plan's arguments pass Megatron-LM's own parse_args / validate_args and megatron-core's TransformerConfig
    and build this model's architecture (tests/megatron_lm.py), as the other hf model types' plans do."""
    pytest.importorskip("megatron.core", reason="megatron-core is not installed (requirements-frameworks.txt)")
    from tests.megatron_lm import best_plan_through_megatron
    _, config = best_plan_through_megatron(load_model(PHI4), monkeypatch)
    if config is not None:
        assert (config.num_layers, config.num_query_groups, config.ffn_hidden_size) == (40, 10, 17920)


@pytest.mark.parametrize("window", [16384, 262144])
def test_a_window_no_shorter_than_the_positions_is_full_attention(tmp_path, window):
    """Phi-3-mini-128k's config gives sliding_window 262144 over 131072 positions: it masks nothing."""
    m = load_model(_config(tmp_path, sliding_window=window))
    assert m.architecture == load_model(PHI4).architecture and m.architecture.sliding_window == 0


@pytest.mark.parametrize("changes, message", [
    # Phi-3-mini-4k-instruct / Phi-3-medium-4k-instruct: sliding_window 2047 over 4096 positions
    (dict(sliding_window=2047, max_position_embeddings=4096),
     r"sliding_window=2047 is not modelled for model_type 'phi3': a window on every layer shorter than "
     r"max_position_embeddings=4096"),
    # Phi-3-mini-128k / Phi-3.5-mini: rope_scaling type "su" / "longrope" with short_factor and long_factor
    (dict(rope_scaling={"type": "su", "short_factor": [1.0] * 64, "long_factor": [1.5] * 64}),
     r"rope_scaling.type='su' is not modelled for model_type 'phi3': LongRoPE"),
    (dict(rope_scaling={"rope_type": "longrope", "short_factor": [1.0] * 64, "long_factor": [1.5] * 64}),
     r"rope_scaling.rope_type='longrope' is not modelled for model_type 'phi3': LongRoPE"),
    # Phi3Config turns "yarn" into "longrope": read as YaRN it would be another model
    (dict(rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}),
     r"rope_scaling.type='yarn' is not modelled for model_type 'phi3': LongRoPE \(Phi3Config reads 'su' and 'yarn'"),
    (dict(rope_scaling={"rope_type": "llama3", "factor": 8.0}),
     r"rope_scaling.rope_type='llama3' is not modelled for model_type 'phi3': Phi3Config allows only"),
    (dict(rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0}),
     r"rope_parameters.rope_type='longrope' is not modelled for model_type 'phi3'"),
    # Phi-4-mini: a quarter of each head unrotated
    (dict(partial_rotary_factor=0.75), r"partial_rotary_factor=0.75 is not modelled for model_type 'phi3'"),
    (dict(rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}),
     r"partial_rotary_factor=0.5 is not modelled for model_type 'phi3'"),
    (dict(sliding_window="2047"), r"sliding_window='2047' is invalid: a whole number"),
])
def test_a_phi3_config_the_planner_cannot_model_is_one_line(tmp_path, changes, message):
    out = _refusal(_config(tmp_path, **changes))
    assert re.search(message, out), out



@pytest.mark.parametrize("folder", ["phi-4", "Mistral-Nemo-Base-2407", "Mixtral-8x7B-v0.1"])
def test_attention_bias_a_model_type_never_builds_is_read_as_none(tmp_path, folder):
    """modeling_phi3.py, modeling_mistral.py and modeling_mixtral.py (transformers 5.25.0) build Q/K/V and the output
    projection with bias=False whatever config.attention_bias says: a config with it true is the same model (it was
    refused as biases no Megatron-LM flag gives)."""
    from commbench.planner.models.counts import param_counts

    raw = json.loads((HF / folder / "config.json").read_text())
    raw["attention_bias"] = True
    (tmp_path / "config.json").write_text(json.dumps(raw))
    biased, plain = load_model(f"hf:{tmp_path}"), load_model(f"hf:{HF / folder}")
    assert biased.architecture == plain.architecture
    assert param_counts(biased).total == param_counts(plain).total
