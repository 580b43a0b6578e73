"""A DeepSeek-style config.json that leaves a router key out (n_group, topk_group, routed_scaling_factor, scoring_func,
topk_method, norm_topk_prob) is the model transformers' configuration class for its model_type builds: the key at
the class default (commbench/planner/models/hf_router.py, transformers 5.25.0 configuration_<type>.py). Each key
was read as "none": DeepSeek-V3 without n_group / topk_group / routed_scaling_factor was emitted without
--moe-router-num-groups 8 --moe-router-group-topk 4 --moe-router-topk-scaling-factor 2.5, another model. A model type
transformers has no class for (kimi_k2) names the key it lacks."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.models.zoo import load_model

HF = Path(__file__).parent / "data" / "hf"
ROUTER_KEYS = ("n_group", "topk_group", "routed_scaling_factor", "scoring_func", "topk_method", "norm_topk_prob")


def _write(tmp_path, folder: str, name: str, drop=(), **changes) -> str:
    raw = json.loads((HF / folder / "config.json").read_text())
    raw.update(changes)
    for key in drop:
        raw.pop(key, None)
    out = tmp_path / name
    out.mkdir()
    (out / "config.json").write_text(json.dumps(raw))
    return f"hf:{out}"


def _plan_args(model: str, gpus: int) -> list[str]:
    """The Megatron-LM arguments `commbench plan --emit megatron` prints for the best layout."""
    result = CliRunner().invoke(app, ["plan", "--model", model, "--system", "gb200-nvl72", "--gpus", str(gpus),
                                      "--gbs", "512", "--emit", "megatron"])
    assert result.exit_code == 0, result.output
    return shlex.split(result.stdout.strip().splitlines()[-1])


def _refusal(model: str) -> str:
    result = CliRunner().invoke(app, ["plan", "--model", model, "--system", "b200-hgx", "--gpus", "16"])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1, result.output
    return result.output


def _value(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


# (fixture, gpus, the class defaults written out explicitly, the router flags they emit: None = flag absent, "" = a
# switch present). The defaults are transcribed here from transformers 5.25.0, not taken from hf_router.py.
CASES = [
    # DeepseekV3Config: n_group 8, topk_group 4, routed_scaling_factor 2.5, norm_topk_prob True; DeepseekV3TopkRouter:
    # sigmoid scores, e_score_correction_bias always
    ("DeepSeek-V3", 256, dict(n_group=8, topk_group=4, routed_scaling_factor=2.5, scoring_func="sigmoid",
                              topk_method="noaux_tc", norm_topk_prob=True),
     {"--moe-router-num-groups": "8", "--moe-router-group-topk": "4", "--moe-router-topk-scaling-factor": "2.5",
      "--moe-router-score-function": "sigmoid", "--moe-router-enable-expert-bias": ""}),
    # Glm4MoeLiteConfig: n_group 1, topk_group 1, routed_scaling_factor 1.8, norm_topk_prob True
    ("GLM-4.7-Flash", 64, dict(n_group=1, topk_group=1, routed_scaling_factor=1.8, norm_topk_prob=True),
     {"--moe-router-num-groups": None, "--moe-router-topk-scaling-factor": "1.8",
      "--moe-router-score-function": "sigmoid", "--moe-router-enable-expert-bias": ""}),
    # Glm4MoeConfig: n_group 1, topk_group 1, routed_scaling_factor 1.0, norm_topk_prob True
    ("GLM-4.5-Air", 64, dict(n_group=1, topk_group=1, routed_scaling_factor=1.0, norm_topk_prob=True),
     {"--moe-router-num-groups": None, "--moe-router-topk-scaling-factor": "1",
      "--moe-router-score-function": "sigmoid", "--moe-router-enable-expert-bias": ""}),
    # NemotronHConfig: n_group 1, topk_group 1, routed_scaling_factor 1.0 (the Nano's own config says 2.5)
    ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 64, dict(n_group=1, topk_group=1, routed_scaling_factor=1.0,
                                                     norm_topk_prob=True),
     {"--moe-router-num-groups": None, "--moe-router-topk-scaling-factor": "1",
      "--moe-router-score-function": "sigmoid", "--moe-router-enable-expert-bias": ""}),
    # DeepseekV2Config: topk_method greedy, n_group / topk_group None, routed_scaling_factor 1.0, norm_topk_prob False;
    # DeepseekV2TopkRouter: softmax
    ("DeepSeek-V2-Lite", 64, dict(n_group=None, topk_group=None, routed_scaling_factor=1.0, topk_method="greedy",
                                  norm_topk_prob=False, scoring_func="softmax"),
     {"--moe-router-num-groups": None, "--moe-router-topk-scaling-factor": "1",
      "--moe-router-score-function": "softmax", "--moe-router-pre-softmax": "", "--moe-router-enable-expert-bias": None}),
]


@pytest.mark.parametrize("folder, gpus, defaults, flags", CASES, ids=[c[0] for c in CASES])
def test_router_keys_left_out_emit_the_flags_of_the_class_defaults(tmp_path, folder, gpus, defaults, flags):
    explicit = _write(tmp_path, folder, "explicit", **defaults)
    left_out = _write(tmp_path, folder, "left_out", drop=ROUTER_KEYS)
    args = _plan_args(left_out, gpus)
    assert args == _plan_args(explicit, gpus)
    for flag, value in flags.items():
        if value is None:
            assert flag not in args, flag
        elif value == "":
            assert flag in args, flag
        else:
            assert _value(args, flag) == value, (flag, _value(args, flag))


def test_deepseek_v3_left_out_router_keys_launch_in_megatron_lms_configuration_path(tmp_path, monkeypatch):
    """The plan of DeepSeek-V3 without its router keys passes Megatron-LM's parse_args / validate_args and builds
    8 groups of which 4 per token, scaled by 2.5 (tests/megatron_lm.py)."""
    pytest.importorskip("megatron.core", reason="megatron-core is not installed (requirements-frameworks.txt)")
    from tests.megatron_lm import best_plan_through_megatron
    m = load_model(_write(tmp_path, "DeepSeek-V3", "left_out", drop=ROUTER_KEYS))
    a = m.architecture
    assert (a.router_groups, a.router_group_topk, a.router_topk_scaling, a.router_expert_bias) == (8, 4, 2.5, True)
    _, config = best_plan_through_megatron(m, monkeypatch, gpus=256)
    if config is not None:
        assert (config.moe_router_num_groups, config.moe_router_group_topk) == (8, 4)
        assert config.moe_router_topk_scaling_factor == 2.5 and config.moe_router_score_function == "sigmoid"


def test_deepseek_v4_left_out_router_keys_are_its_class_defaults(tmp_path):
    """DeepseekV4Config: scoring_func sqrtsoftplus, routed_scaling_factor 1.5; DeepseekV4TopKRouter always adds the
    correction bias (it has no topk_method). Left out, they were read as softmax, no scaling, no bias."""
    a = load_model(_write(tmp_path, "DeepSeek-V4-Flash", "left_out", drop=ROUTER_KEYS)).architecture
    assert (a.router_score, a.router_topk_scaling, a.router_expert_bias) == ("sqrtsoftplus", 1.5, True)
    assert a == load_model(f"hf:{HF / 'DeepSeek-V4-Flash'}").architecture


@pytest.mark.parametrize("key", ROUTER_KEYS)
def test_a_kimi_k2_config_without_a_router_key_is_one_line_naming_it(tmp_path, key):
    """transformers has no kimi_k2 class (the hub repository ships its own remote code): no default to take."""
    out = _refusal(_write(tmp_path, "Kimi-K2-Instruct", "k", drop=(key,)))
    assert f"lacks {key!r} (needed for model_type 'kimi_k2': transformers has no configuration class" in out, out


@pytest.mark.parametrize("folder, changes, drop, message", [
    # transformers keeps an explicit null over the class default; DeepseekV3TopkRouter cannot group by None
    ("DeepSeek-V3", dict(n_group=None), (), r"n_group=null is invalid for model_type 'deepseek_v3'.*class's 8"),
    # megatron-core renormalises a sigmoid router's top-k always
    ("DeepSeek-V3", dict(norm_topk_prob=False), (), r"norm_topk_prob=false is not modelled with scoring_func 'sigmoid'"),
    ("GLM-4.5-Air", dict(norm_topk_prob=False), (), r"norm_topk_prob=false is not modelled with scoring_func 'sigmoid'"),
    # 8 / 2 = 4: megatron-core would rank groups by their top-4 sum, transformers by the top-2
    ("DeepSeek-V3", dict(topk_group=2), (), r"n_group=8 with topk_group=2 is not modelled for num_experts_per_tok=8"),
    ("DeepSeek-V3", dict(scoring_func=5), (), r"scoring_func=5 is invalid: a string"),
    ("DeepSeek-V3", dict(routed_scaling_factor="2.5"), (), r"routed_scaling_factor='2.5' is invalid: a finite number"),
    # DeepseekV2Config has no aux_loss_alpha: Megatron-Bridge's seq_aux_loss coefficient would be 0
    ("DeepSeek-V2-Lite", {}, ("aux_loss_alpha",), r"lacks 'aux_loss_alpha' \(needed for model_type 'deepseek_v2'"),
    ("DeepSeek-V2-Lite", dict(topk_method="group_limited_greedy"), ("n_group",),
     r"topk_method='group_limited_greedy' lacks 'n_group'"),
])
def test_a_router_key_the_planner_cannot_take_is_one_line(tmp_path, folder, changes, drop, message):
    out = _refusal(_write(tmp_path, folder, "c", drop=drop, **changes))
    assert re.search(message, out), out


def test_a_softmax_router_keeps_norm_topk_prob_false_as_pre_softmax(tmp_path):
    """DeepSeek-V2's softmax router with norm_topk_prob false is megatron-core's --moe-router-pre-softmax (read)."""
    assert load_model(_write(tmp_path, "DeepSeek-V2-Lite", "c", norm_topk_prob=False)).architecture.router_pre_softmax


@pytest.mark.parametrize("folder, model_type", [("Mixtral-8x7B-v0.1", "mixtral"), ("Qwen2-57B-A14B", "qwen2_moe")])
def test_a_left_out_aux_loss_coefficient_is_the_class_default(tmp_path, folder, model_type):
    """MixtralConfig and Qwen2MoeConfig default router_aux_loss_coef to 0.001; left out, it was read as 0 (no
    load-balancing loss at all)."""
    m = load_model(_write(tmp_path, folder, "c", drop=("router_aux_loss_coef",)))
    assert m.architecture.load_balancing == "aux_loss" and m.architecture.aux_loss_coeff == pytest.approx(1e-3)


@pytest.mark.parametrize("folder", ["Qwen3-30B-A3B", "Mixtral-8x7B-v0.1", "gpt-oss-20b"])
def test_router_keys_a_softmax_model_type_never_reads_change_nothing(tmp_path, folder):
    """transformers' Qwen3-MoE, Mixtral and gpt-oss code reads no scoring_func / topk_method / n_group / topk_group /
    routed_scaling_factor: stray ones in config.json leave the model as it is (a sigmoid scoring_func was planned)."""
    raw = json.loads((HF / folder / "config.json").read_text())
    raw.update(scoring_func="sigmoid", topk_method="noaux_tc", n_group=4, topk_group=2, routed_scaling_factor=2.5)
    (tmp_path / "config.json").write_text(json.dumps(raw))
    assert load_model(f"hf:{tmp_path}").architecture == load_model(f"hf:{HF / folder}").architecture
