"""`plan --model hf:PATH` plans launch the model and precision the config.json asks for, or refuse in one line
naming the config.json key, its value and what is allowed (found from outside: probe D, 2026-12-05)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.planner.models.zoo import load_model

HF = Path(__file__).parent / "data" / "hf"


def _variant(tmp_path, folder: str, drop=(), **changes) -> str:
    from tests.test_hf_model_types import _config

    return _config(tmp_path, folder, drop, **changes)


def _refused(model: str, *args: str, gpus: int = 64) -> str:
    """The CLI's one-line refusal of a plan (asserted to be one line, exit 2, no traceback)."""
    res = CliRunner().invoke(app, ["plan", "--model", model, "--system", "h100-hgx", "--gpus", str(gpus), *args],
                             env={"COLUMNS": "400"})
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert res.output.startswith("error: ") and len(res.output.strip().splitlines()) == 1, res.output
    return res.output.strip()


# --- gpt-oss layer_types: which layers slide, not only how many ---------------------------------------------------

def _oss_kinds(pattern: str) -> list[str]:
    return ["sliding_attention" if k == "s" else "full_attention" for k in pattern]


@pytest.mark.parametrize("pattern, shown", [
    ("fs" * 12, "sliding layers 1, 3, 5, 7, 9, 11, ..."),        # the alternation shifted by one layer
    ("s" * 12 + "f" * 12, "sliding layers 0, 1, 2, 3, 4, 5, ..."),  # half sliding, as a block
])
def test_gpt_oss_layer_types_sliding_elsewhere_than_the_flavor_s_layers_are_refused(tmp_path, pattern, shown):
    """Half the layers sliding anywhere was read as gpt-oss's alternation and launched as TorchTitan's gpt_oss 20b,
    whose windows sit on the even layers: a model with windows on the odd layers trained with them on the even."""
    model = _variant(tmp_path, "gpt-oss-20b", layer_types=_oss_kinds(pattern))
    line = _refused(model, "--layout", "tp=1,pp=1,ep=8,mbs=1", "--framework", "torchtitan")
    assert f"layer_types is not modelled for model_type 'gpt_oss' with {shown}" in line, line
    assert "'sliding_attention' on layers 0, 2, 4, ... and 'full_attention' on 1, 3, 5, ..." in line, line


def test_gpt_oss_layer_types_of_another_length_are_refused(tmp_path):
    with pytest.raises(CommbenchError, match=r"layer_types has 22 entries for num_hidden_layers=24: one per layer"):
        load_model(_variant(tmp_path, "gpt-oss-20b", layer_types=_oss_kinds("sf" * 11)))


def test_the_released_gpt_oss_alternation_is_where_torchtitan_builds_its_windows():
    """The pattern read (sliding on layers 0, 2, ...) is gpt-oss-20b's config.json and TorchTitan 0.3.0's gpt_oss
    20b flavor's per-layer sliding_window_size, layer by layer."""
    kinds = json.loads((HF / "gpt-oss-20b" / "config.json").read_text())["layer_types"]
    assert kinds == _oss_kinds("sf" * 12)
    assert load_model(f"hf:{HF / 'gpt-oss-20b'}").architecture.window_skip_freq == 2
    pytest.importorskip("torchtitan")
    from tests.torchtitan_train import install_stand_ins
    install_stand_ins()   # triton / GPU-only imports, as the other TorchTitan tests answer them on a CPU machine
    import torchtitan.models.gpt_oss as gpt_oss
    layers = gpt_oss.model_registry("20b").model.layers
    assert [("sliding_attention" if layer.attention.sliding_window_size else "full_attention")
            for layer in layers] == kinds


# --- Nemotron-H activations: what the emitted flags build, or one line ------------------------------------------

@pytest.mark.parametrize("changes, line", [
    # NemotronHMLP applies ACT2FN["silu"] ungated; it was planned as activation "gelu" and emitted with neither
    # --squared-relu nor --swiglu, so Megatron built F.gelu
    (dict(mlp_hidden_act="silu"), "mlp_hidden_act='silu' is not modelled for model_type 'nemotron_h': 'relu2'"),
    (dict(mlp_hidden_act="gelu"), "mlp_hidden_act='gelu' is not modelled for model_type 'nemotron_h': 'relu2'"),
    # megatron-core's MambaMixer applies SiLU whatever the config says; it was accepted unread
    (dict(mamba_hidden_act="gelu"), "mamba_hidden_act='gelu' is not modelled for model_type 'nemotron_h': 'silu'"),
])
def test_a_nemotron_h_activation_megatron_does_not_build_is_one_line(tmp_path, changes, line):
    said = _refused(_variant(tmp_path, "Nemotron-H-8B-Base-8K", **changes), "--layout", "tp=2,pp=1,ep=1,vp=1,mbs=1",
                    "--emit", "megatron", gpus=16)
    assert line in said, said


@pytest.mark.parametrize("changes, drop", [
    ({}, ("mlp_hidden_act", "hidden_act", "mamba_hidden_act")),   # NemotronHConfig's defaults: relu2, silu
    (dict(mamba_hidden_act="swish"), ()),                          # ACT2FN["swish"] is SiLU
])
def test_nemotron_h_activations_at_the_class_defaults_are_squared_relu_and_silu(tmp_path, changes, drop):
    """A config without mlp_hidden_act (NemotronHConfig's default relu2) read as "silu" and was planned with GELU."""
    model = load_model(_variant(tmp_path, "Nemotron-H-8B-Base-8K", drop=drop, **changes))
    assert model.architecture.activation == "squared_relu" and not model.glu
    from commbench.planner.emit.megatron_arch import architecture_args
    assert "--squared-relu" in architecture_args(model, 4096)


# --- MLA latent norms: megatron-core builds them at --norm-epsilon, HF at 1e-6 ----------------------------------

@pytest.mark.parametrize("folder, norms", [("Moonlight-16B-A3B", "(kv_a_layernorm)"),
                                           ("GLM-4.7-Flash", "(q_a_layernorm / kv_a_layernorm)")])
def test_a_megatron_plan_says_its_mla_latent_norms_train_at_the_model_s_norm_epsilon(folder, norms, monkeypatch):
    """Moonlight (rms_norm_eps 1e-5) was emitted with --norm-epsilon 1e-05 --qk-layernorm and no note: megatron-core
    0.16.1 builds the latent q/kv norms at that eps, HF's modeling code at 1e-6 (as the TorchTitan plan sets them)."""
    res = CliRunner().invoke(app, ["plan", "--model", f"hf:{HF / folder}", "--system", "h100-hgx", "--gpus", "64",
                                   "--layout", "tp=1,pp=1,ep=8,vp=1,mbs=1", "--json"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    notes = json.loads(res.output)["megatron"]["notes"]
    said = [n for n in notes if "latent norms" in n]
    assert len(said) == 1 and f"MLA latent norms {norms} have eps 1e-06" in said[0] and \
        "--norm-epsilon 1e-05" in said[0], notes
    mla = pytest.importorskip("megatron.core.transformer.multi_latent_attention")
    import inspect
    source = inspect.getsource(mla.MLASelfAttention.__init__)   # what the note says of the installed megatron-core
    assert re.search(r"q_layernorm = build_module\([^)]*eps=self\.config\.layernorm_epsilon", source, re.S)
    assert re.search(r"kv_layernorm = build_module\([^)]*eps=self\.config\.layernorm_epsilon", source, re.S)
    from tests.megatron_lm import best_plan_through_megatron
    model = load_model(f"hf:{HF / folder}")
    _, config = best_plan_through_megatron(model, monkeypatch)
    if config is not None:   # MEGATRON_LM_ROOT: the config pretrain_gpt.py builds the latent norms from
        assert config.layernorm_epsilon == 1e-5 and config.qk_layernorm


def test_an_mla_model_whose_norms_are_the_latent_norms_eps_has_no_such_note():
    from commbench.planner.emit.megatron_arch import architecture_notes
    assert not [n for n in architecture_notes(load_model(f"hf:{HF / 'DeepSeek-V3'}")) if "latent norms" in n]


# --- a window on every layer (Mistral-7B-v0.1): full attention where the sequence fits in it ---------------------

MISTRAL_7B_V01 = {"architectures": ["MistralForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
                  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
                  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
                  "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": False, "vocab_size": 32000}


def _mistral(tmp_path, name: str, **changes) -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(dict(MISTRAL_7B_V01, **changes)))
    return f"hf:{folder}"


def _plan_json(model: str, *args: str) -> dict:
    res = CliRunner().invoke(app, ["plan", "--model", model, "--system", "h100-hgx", "--gpus", "8", "--layout",
                                   "tp=1,pp=1,mbs=1", "--json", *args], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


@pytest.mark.parametrize("seq", [[], ["--seq-len", "4096"], ["--seq-len", "2048"]])
def test_a_window_on_every_layer_no_shorter_than_the_sequence_is_planned_as_full_attention(tmp_path, seq):
    """Mistral-7B-v0.1 (sliding_window 4096 on every layer) was refused at any sequence length; over at most 4096
    tokens the window masks nothing (token i sees tokens i-4095..i), so it plans as the same config with null (full
    attention) does, and both frameworks' notes say so."""
    windowed, full = _mistral(tmp_path, "w"), _mistral(tmp_path, "f", sliding_window=None)
    plan, same = _plan_json(windowed, *seq), _plan_json(full, *seq)
    assert plan["predicted"] == same["predicted"]
    assert plan["megatron"]["args"] == same["megatron"]["args"] and "--window-size" not in plan["megatron"]["args"]
    for notes in (plan["megatron"]["notes"], plan["torchtitan"]["notes"]):
        said = [n for n in notes if "a window on every layer" in n]
        assert len(said) == 1 and "sliding_window=4096 (a window on every layer) is planned as full attention" in \
            said[0] and "masks nothing" in said[0], notes
    # (the TorchTitan tokenizer note names the hf: folder, whose pytest path holds this test's name)
    assert not [n for n in same["megatron"]["notes"] + same["torchtitan"]["notes"]
                if "window" in n.replace(str(tmp_path), "")]


def test_mistral_7b_v0_1_planned_as_full_attention_launches_in_megatron(tmp_path, monkeypatch):
    """Its arguments through Megatron-LM's parse/validate and core_transformer_config_from_args (MEGATRON_LM_ROOT), else
    the installed megatron-core's checks: full attention (no window) with Mistral's sizes."""
    pytest.importorskip("megatron.core")
    from tests.megatron_lm import best_plan_through_megatron
    args, config = best_plan_through_megatron(load_model(_mistral(tmp_path, "w")), monkeypatch, preset="h100-hgx",
                                              gpus=8, gbs=64, precision="bf16")
    assert "--window-size" not in args
    if config is not None:
        assert config.window_size is None and (config.num_layers, config.num_query_groups) == (32, 8)


@pytest.mark.parametrize("changes, seq, shown", [
    ({}, "8192", "sliding_window=4096"),
    (dict(sliding_window=2048), None, "sliding_window=2048"),   # the default 4096-token sequence crosses it
])
def test_a_sequence_longer_than_a_window_on_every_layer_is_refused_naming_the_key(tmp_path, changes, seq, shown):
    said = _refused(_mistral(tmp_path, "w", **changes), *(["--seq-len", seq] if seq else []), gpus=8)
    window = changes.get("sliding_window", 4096)
    assert f"{shown} (a window on every layer) is not modelled at seq_len {seq or 4096}" in said, said
    assert f"plan with --seq-len <= {window}, where a {window}-token window masks nothing (full attention)" in said


def test_a_mixtral_window_on_every_layer_is_read_as_mistral_s(tmp_path):
    """MixtralAttention passes sliding_window on every layer as MistralAttention does: within the window it plans."""
    raw = json.loads((HF / "Mixtral-8x7B-v0.1" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(raw, sliding_window=4096)))
    model = load_model(f"hf:{tmp_path}")
    assert model.extra["every_layer_window"] == 4096 and model.sliding_window == 0
    (tmp_path / "config.json").write_text(json.dumps(dict(raw, sliding_window=1024)))
    assert "sliding_window=1024 (a window on every layer) is not modelled at seq_len 4096" in _refused(f"hf:{tmp_path}")


@pytest.mark.parametrize("value", [0, "4k", True])
def test_an_ill_typed_every_layer_window_is_one_line(tmp_path, value):
    with pytest.raises(CommbenchError, match=r"sliding_window=.* is invalid: a whole number of tokens > 0, or null"):
        load_model(_mistral(tmp_path, "w", sliding_window=value))


# --- refusals name the config.json key and value the user wrote ---------------------------------------------------

@pytest.mark.parametrize("folder, changes, line", [
    # was `architecture.router_group_topk=9 is invalid: 0 < group_topk <= groups (8), or both 0` (no --model prefix)
    ("DeepSeek-V3", dict(topk_group=9), "topk_group=9 is invalid: 0 < topk_group <= n_group (8), or both 0"),
    # was `hf:NAME.arch.router_groups=7 is invalid: a divisor of routed_experts`
    ("DeepSeek-V3", dict(n_group=7), "n_group=7 is invalid: a divisor of n_routed_experts (256)"),
    # was `hf:NAME.kv_heads=6 is invalid: a divisor of heads (32)`
    ("Llama-3.1-8B", dict(num_key_value_heads=6), "num_key_value_heads=6 is invalid: a divisor of num_attention_heads (32)"),
    # was `hf:NAME.glu=True is invalid: False (architecture.activation = squared_relu)`: the user never wrote glu
    ("Llama-3.1-8B", dict(hidden_act="relu2"), "hidden_act='relu2' is not modelled for model_type 'llama': one of silu, swish"),
    ("Qwen3-30B-A3B", dict(hidden_act="relu2"), "hidden_act='relu2' is not modelled for model_type 'qwen3_moe'"),
    # was `hf:NAME.top_k=200 is invalid: MoE models need 0 < top_k <= routed_experts and expert_ffn > 0`
    ("Qwen3-30B-A3B", dict(num_experts_per_tok=200), "num_experts_per_tok=200 is invalid: 0 < num_experts_per_tok <= "
                                                     "num_experts (128)"),
    ("Mixtral-8x7B-v0.1", dict(num_experts_per_tok=0), "num_experts_per_tok=0 is invalid: 0 < num_experts_per_tok <= "
                                                       "num_local_experts (8)"),
    ("DeepSeek-V3", dict(first_k_dense_replace=70), "first_k_dense_replace=70 is invalid: 0..60 (num_hidden_layers 61 less one"),
])
def test_a_refusal_names_the_config_json_key_and_value(tmp_path, folder, changes, line):
    said = _refused(_variant(tmp_path, folder, **changes), gpus=256)
    assert said.startswith(f"error: --model hf:{tmp_path / 'config.json'}: {line}"), said
