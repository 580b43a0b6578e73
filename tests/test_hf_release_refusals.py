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
    ("DeepSeek-V3", "kv_lora_rank"), ("DeepSeek-V3", "v_head_dim"), ("Qwen3-Next-80B-A3B-Instruct", "linear_key_head_dim"),
])
def test_a_zero_size_names_the_config_key(tmp_path, folder, key):
    """hidden_size 0 said 'hf:NAME.hidden=0 is invalid', vocab_size 0 '...vocab=0': commbench's fields."""
    out = _plan_error(_variant(tmp_path, folder, **{key: 0}))
    assert f"{key}=0 is invalid: > 0" in out and f".{key}" not in out, out


def test_max_position_embeddings_zero_is_refused(tmp_path):
    """It planned (rc 0) and launched --max-position-embeddings 4096 silently."""
    out = _plan_error(_variant(tmp_path, "Qwen2.5-7B", max_position_embeddings=0))
    assert "max_position_embeddings=0 is invalid: > 0" in out, out
