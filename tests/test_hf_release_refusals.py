"""hf: refusals and bad values as a user meets them (found from outside, session 45 probe P1): a refusal resting on a
megatron-core rule names the release the plan is for (--software) and that release's file:line, not one fixed release;
a size of 0 names the config.json key, not commbench's field; max_position_embeddings 0 is refused, not replaced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.layout.recipes import releases
from commbench.planner.layout.release_flags import release_core
from commbench.planner.models.hf_core_rules import CORE_RULES

HF = Path(__file__).parent / "data" / "hf"


def _variant(tmp_path: Path, folder: str | None, **changes) -> Path:
    raw = json.loads((HF / folder / "config.json").read_text()) if folder else {}
    (tmp_path / "config.json").write_text(json.dumps(dict(raw, **changes)))
    return tmp_path


def _plan_error(path: Path, *args: str) -> str:
    result = CliRunner().invoke(app, ["plan", "--model", f"hf:{path}", "--system", "gb300-nvl72", "--gpus", "256",
                                      *args])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1, result.output
    return result.output


def test_every_table_release_has_a_line_for_every_rule():
    for rule, (_, _, lines) in CORE_RULES.items():
        assert set(lines) == set(releases()), rule


REFUSALS = [   # (folder, changes, the rule the refusal rests on)
    (None, dict(model_type="ernie4_5_moe"), "expert_bias"),
    ("DeepSeek-V3", dict(scoring_func="softmax", topk_method="noaux_tc"), "expert_bias"),
    ("DeepSeek-V2-Lite", dict(topk_method="group_limited_greedy", n_group=8, topk_group=3), "group_scores"),
    ("GLM-4.5-Air", dict(norm_topk_prob=False), "sigmoid_renorm"),
    ("GLM-4.5-Air", dict(n_group=8, topk_group=8), "group_scores"),
    ("Nemotron-H-8B-Base-8K", dict(use_conv_bias=False), "mamba_bias"),
    ("Nemotron-H-8B-Base-8K", dict(mamba_hidden_act="gelu"), "mamba_silu"),
    ("Mixtral-8x7B-v0.1", dict(router_jitter_noise=0.01), "input_jitter"),
]


@pytest.mark.parametrize("release", ["25.09", "26.02.01", "26.08"])
@pytest.mark.parametrize("folder, changes, rule", REFUSALS)
def test_a_refusal_names_the_asked_releases_core_and_line(tmp_path, folder, changes, rule, release):
    """Each named megatron-core 0.16.1 whatever --software said (26.08's is 0.19.0)."""
    out = _plan_error(_variant(tmp_path, folder, **changes), "--software", release)
    path, _, lines = CORE_RULES[rule]
    assert f"megatron-core {release_core(release)[1]} (release {release}'s Megatron-LM" in out, out
    assert f"{path}:{lines[release]}" in out, out
    assert "0.16.1" not in out or release == "26.02.01", out


def test_without_software_the_refusal_names_the_newest_release(tmp_path):
    out = _plan_error(_variant(tmp_path, None, model_type="ernie4_5_moe"))
    newest = releases()[-1]
    assert f"(release {newest}'s Megatron-LM" in out and f"{CORE_RULES['expert_bias'][2][newest]}" in out, out


def test_expert_bias_scores_follow_the_release(tmp_path):
    """megatron-core 0.18.0 (26.06) on takes sqrtsoftplus scores with an expert bias as well as sigmoid ones."""
    path = _variant(tmp_path, None, model_type="ernie4_5_moe")
    assert "with sigmoid scores only" in _plan_error(path, "--software", "26.04")
    assert "with sigmoid or sqrtsoftplus scores only" in _plan_error(path, "--software", "26.06")


@pytest.mark.parametrize("folder, key", [
    ("Qwen2.5-7B", "hidden_size"), ("Qwen2.5-7B", "vocab_size"), ("Qwen3-8B", "head_dim"),
    ("DeepSeek-V3", "kv_lora_rank"), ("DeepSeek-V3", "v_head_dim"),
    ("Qwen3-Next-80B-A3B-Instruct", "linear_key_head_dim"),
])
def test_a_zero_size_names_the_config_key(tmp_path, folder, key):
    """hidden_size 0 said 'hf:NAME.hidden=0 is invalid', vocab_size 0 '...vocab=0': commbench's fields."""
    out = _plan_error(_variant(tmp_path, folder, **{key: 0}))
    assert f"{key}=0 is invalid: > 0" in out and f".{key}" not in out, out


def test_max_position_embeddings_zero_is_refused(tmp_path):
    """It planned (rc 0) and launched --max-position-embeddings 4096 silently."""
    out = _plan_error(_variant(tmp_path, "Qwen2.5-7B", max_position_embeddings=0))
    assert "max_position_embeddings=0 is invalid: > 0" in out, out


def test_a_sequence_longer_than_max_position_embeddings_is_said(tmp_path):
    """--seq-len 8192 over a config's max_position_embeddings 2048 launched --max-position-embeddings 8192 without a
    word (Megatron-LM's validate_args needs max_position_embeddings >= seq_length, so the launch must raise it)."""
    path = _variant(tmp_path, "Qwen2.5-7B", max_position_embeddings=2048)
    result = CliRunner().invoke(app, ["plan", "--model", f"hf:{path}", "--system", "gb300-nvl72", "--gpus", "8",
                                      "--seq-len", "8192", "--layout", "tp=1,pp=1,dp=8", "--software", "26.02.01",
                                      "--emit", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert "--max-position-embeddings 8192" in " ".join(doc["megatron"]["args"])
    said = [n for n in doc["megatron"]["notes"] if "max_position_embeddings is 2,048" in n]
    assert len(said) == 1 and f"arguments.py:{CORE_RULES['max_positions'][2]['26.02.01']}" in said[0], said
    result = CliRunner().invoke(app, ["plan", "--model", f"hf:{path}", "--system", "gb300-nvl72", "--gpus", "8",
                                      "--seq-len", "2048", "--layout", "tp=1,pp=1,dp=8", "--emit", "json"])
    assert not [n for n in json.loads(result.output)["megatron"]["notes"] if "max_position_embeddings is" in n]


_LINEAR = {"type": "linear", "factor": 4.0}


def _megatron_doc(path: Path, release: str) -> dict:
    result = CliRunner().invoke(app, ["plan", "--model", f"hf:{path}", "--system", "gb300-nvl72", "--gpus", "8",
                                      "--layout", "tp=1,pp=1,dp=8", "--software", release, "--emit", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_linear_rope_scaling_is_launched_where_the_release_builds_it(tmp_path):
    """rope_scaling linear was refused, though 26.08's pretrain_gpt.py builds it from
    --rotary-seq-len-interpolation-factor (megatron-core 0.19.0: gpt_config_from_args passes it to GPTModel)."""
    path = _variant(tmp_path, "Qwen2.5-7B", rope_scaling=_LINEAR)
    doc = _megatron_doc(path, "26.08")["megatron"]
    assert " ".join(doc["args"]).count("--rotary-seq-len-interpolation-factor 4") == 1, doc["args"]
    # the target names the release whose pretrain_gpt.py builds it: core_v0.16.1 parses the flag and ignores it
    assert "megatron-core 0.19.0" in doc["target"] and "linear RoPE interpolation" in doc["target"], doc["target"]


@pytest.mark.parametrize("release", ["25.09", "26.02.01", "26.06.01"])
def test_linear_rope_scaling_is_refused_where_pretrain_gpt_ignores_the_flag(tmp_path, release):
    """Before megatron-core 0.19.0 the flag parses but pretrain_gpt.py's GPTModel gets no interpolation factor: the
    launch would train unscaled RoPE, so the plan is refused naming the release and where it is built."""
    path = _variant(tmp_path, "Qwen2.5-7B", rope_scaling=_LINEAR)
    out = _plan_error(path, "--software", release)
    assert f"(release {release}'s, megatron-core {release_core(release)[1]}) cannot build" in out, out
    assert "linear RoPE interpolation (x4)" in out and "--software 26.08" in out, out


@pytest.mark.parametrize("folder, rope, message", [
    ("Qwen2.5-7B", {"type": "linear", "factor": 2.5},
     "rope_scaling.factor=2.5 is not modelled for rope_type 'linear': a whole number >= 1"),
    ("Qwen2.5-7B", {"type": "linear"}, "lacks rope_scaling.'factor'"),
    ("DeepSeek-V3", {"type": "linear", "factor": 4.0}, "rope_scaling.type='linear' is not modelled for model_type "
                                                       "'deepseek_v3'"),
])
def test_linear_rope_scaling_megatron_cannot_build_is_one_line(tmp_path, folder, rope, message):
    assert message in _plan_error(_variant(tmp_path, folder, rope_scaling=rope), "--software", "26.08")


def test_linear_factor_one_is_plain_rope(tmp_path):
    path = _variant(tmp_path, "Qwen2.5-7B", rope_scaling={"type": "linear", "factor": 1.0})
    assert "--rotary-seq-len-interpolation-factor" not in " ".join(_megatron_doc(path, "25.09")["megatron"]["args"])
