"""gpt-oss under Megatron-LM, per recipe-table release: planned where the release's pretrain_gpt.py builds every one of
its architecture features from flags; where one is missing, that release's Megatron-LM and megatron-core are named:
in the plan's note in place of the launch where the release's Megatron-Bridge builds it (the prediction stands:
tests/test_gpt_oss_predicted_without_launch.py), in a one-line refusal where nothing at that release builds it (25.09).

Found from outside (helper CI, session 39): `plan --model gpt-oss-120b --system gb200-nvl72 --gpus 64` refused at every
release, naming "Megatron-LM core_v0.16.1" whatever --software said (26.08, the default release, runs megatron-core
0.19.0), though megatron-core 0.19.0's pretrain_gpt.py builds YaRN on non-MLA attention from flags
(--position-embedding-type yarn, --yarn-original-max-position-embeddings, --yarn-beta-fast/slow,
--no-yarn-correction-range-round-to-int; Megatron-LM cd4afffa6484 arguments.py, argument_utils.py
_apply_yarn_config_from_args). The release-tree tests run the emitted arguments through each release's own
parse_args -> validate_args -> core_transformer_config_from_args (MEGATRON_LM_GIT; tests/megatron_releases.py) and read
the built config back field by field against openai/gpt-oss-120b's config.json (36 layers, hidden 2880, 64 q / 8 kv
heads of 64, 128 experts top-4 of ffn 2880, a 128-token window on alternate layers, learned sinks, YaRN x32 over 4096
with beta 32 / 1 and truncate false, SwiGLU alpha 1.702 / limit 7 on (up + 1), biases, vocab 201088)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.errors import CommbenchError
from commbench.planner import Layout, check_layout, load_model
from commbench.planner.emit.megatron import launch_env, megatron_args
from commbench.planner.layout.recipes import recipes_json_releases, releases
from commbench.planner.search.frameworks import megatron_unbuildable
from tests.megatron_releases import SKIP_REASON, git_dir, release_ref, release_tree, run_cases

BUILDS = ["26.08"]   # megatron-core 0.19.0: the first release whose pretrain_gpt.py builds non-MLA YaRN from flags
REFUSES = [r for r in releases() if r not in BUILDS]


def _core(release: str) -> str:
    return recipes_json_releases()[release]["megatron_core"]["version"]


def _plan(*args: str):
    return CliRunner().invoke(app, ["plan", "--model", "gpt-oss-120b", "--system", "gb200-nvl72", "--gpus", "64",
                                    *args], env={"COLUMNS": "400"})


def test_the_table_releases_are_split_by_megatron_core_0_19():
    assert set(BUILDS) | set(REFUSES) == set(releases()) and BUILDS
    assert all(_core(r).startswith("0.19") for r in BUILDS) and not any(_core(r).startswith("0.19") for r in REFUSES)


@pytest.mark.parametrize("release", REFUSES)
def test_a_release_that_cannot_build_gpt_oss_is_named_with_its_own_megatron_core(release):
    why = megatron_unbuildable(load_model("gpt-oss-120b"), release=release)
    assert why and f"(release {release}'s, megatron-core {_core(release)}) cannot build gpt-oss-120b" in why, why
    assert "YaRN" in why and "--software 26.08" in why and why.endswith("plan it with --framework torchtitan"), why
    if release == "25.09":   # core 0.14: the window, sinks and clamped GLU are missing too, each named
        for flag in ("--window-size", "--window-attn-skip-freq", "--softmax-type", "--activation-func-clamp-value",
                     "--glu-linear-offset", "--quick-geglu"):
            assert flag in why, why
    if _core(release).startswith("0.18"):   # parses 'yarn', but GPTModel reads config.yarn_* nothing sets
        assert "AttributeError" in why, why


def test_the_refusal_on_the_cli_is_one_line_naming_the_release_asked():
    """25.09: neither its Megatron-LM nor its Megatron-Bridge (v0.1.0rc3, no GPT-OSS model) builds gpt-oss. Releases
    whose Megatron-Bridge builds it predict it with no launch (tests/test_gpt_oss_predicted_without_launch.py)."""
    res = _plan("--software", "25.09")
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert len([ln for ln in res.output.splitlines() if ln.strip()]) == 1, res.output
    assert "release 25.09's, megatron-core 0.14) cannot build gpt-oss-120b" in res.output, res.output


def test_without_a_release_the_target_core_v0_16_1_refuses_in_one_line():
    """megatron_args with no release checks against the target (core_v0.16.1, the installed megatron-core's)."""
    model = load_model("gpt-oss-120b")
    layout = Layout.for_world(64, tp=1, pp=1, ep=8, etp=1, mbs=1, gbs=256)
    with pytest.raises(CommbenchError) as refused:
        megatron_args(layout, model)
    assert str(refused.value).startswith("Megatron-LM core_v0.16.1 cannot build gpt-oss-120b"), refused.value
    assert "\n" not in str(refused.value)


# openai/gpt-oss-120b as megatron-core 0.19.0's pretrain_gpt.py must build it: flag -> its values
GPT_OSS_FLAGS = {
    "--num-layers": ["36"], "--hidden-size": ["2880"], "--num-attention-heads": ["64"], "--num-query-groups": ["8"],
    "--kv-channels": ["64"], "--num-experts": ["128"], "--moe-router-topk": ["4"], "--moe-ffn-hidden-size": ["2880"],
    "--vocab-size": ["201088"], "--quick-geglu": [], "--glu-linear-offset": ["1"],
    "--activation-func-clamp-value": ["7"], "--window-size": ["127,0"], "--window-attn-skip-freq": ["2"],
    "--softmax-type": ["learnable"], "--position-embedding-type": ["yarn"], "--rotary-base": ["150000"],
    "--rotary-scaling-factor": ["32"], "--yarn-original-max-position-embeddings": ["4096"],
    "--yarn-beta-fast": ["32"], "--yarn-beta-slow": ["1"], "--no-yarn-correction-range-round-to-int": [],
    "--normalization": ["RMSNorm"], "--untie-embeddings-and-output-weights": [],
}


def _values(argv: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for token in argv:
        if token.startswith("--"):
            out[token] = []
            last = token
        else:
            out[last].append(token)
    return out


def test_the_default_release_26_08_plans_gpt_oss_with_every_feature_flag():
    res = _plan("--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    meg = doc["megatron"]
    assert "refused" not in meg and meg["launch"] is True
    assert meg["release"]["name"] == "26.08" and meg["release"]["refused_flags"] == []
    got = _values(meg["args"])
    assert {flag: got.get(flag) for flag in GPT_OSS_FLAGS} == GPT_OSS_FLAGS
    assert "--disable-bias-linear" not in got   # biases in attention, router and experts (add_bias_linear)
    assert "megatron-core 0.19.0" in meg["target"] and "release 26.08's" in meg["target"], meg["target"]


# ---- through each release's own Megatron-LM (MEGATRON_LM_GIT) -----------------------------------------------------

# the TransformerConfig fields gpt-oss-120b is built with (megatron-core 0.19.0 names) and openai/gpt-oss-120b's values
GPT_OSS_CONFIG = {
    "num_layers": 36, "hidden_size": 2880, "num_attention_heads": 64, "num_query_groups": 8, "kv_channels": 64,
    "num_moe_experts": 128, "moe_router_topk": 4, "moe_ffn_hidden_size": 2880, "moe_router_pre_softmax": False,
    "moe_router_score_function": "softmax", "gated_linear_unit": True, "activation_func": "quick_gelu",
    "glu_linear_offset": 1.0, "activation_func_clamp_value": 7.0, "window_size": [127, 0],
    "window_attn_skip_freq": 2, "softmax_type": "learnable", "add_bias_linear": True, "normalization": "RMSNorm",
    "layernorm_epsilon": 1e-5, "yarn_rotary_scaling_factor": 32.0, "yarn_original_max_position_embeddings": 4096,
    "yarn_beta_fast": 32.0, "yarn_beta_slow": 1.0, "yarn_mscale": 1.0, "yarn_mscale_all_dim": 0.0,
    "yarn_correction_range_round_to_int": False,
}


def _case(release: str | None, **fields) -> dict:
    model = load_model("gpt-oss-120b")
    layout = Layout.for_world(64, **fields)
    check_layout(model, layout, 64)
    gpu = load_preset("gb200-nvl72", num_gpus=64).gpu
    return {"argv": megatron_args(layout, model, release=release), "world": 64, "env": launch_env(layout, gpu.name),
            "capability": list(gpu.compute_capability), "fields": sorted(GPT_OSS_CONFIG)}


LAYOUTS = [dict(tp=1, pp=1, ep=64, etp=1, mbs=4, gbs=1280, dispatcher="flex", moe_a2a_overlap=True),
           dict(tp=2, pp=4, vp=3, ep=8, etp=1, mbs=1, gbs=512, precision="mxfp8")]


def _tree(release: str, tmp_path_factory) -> str:
    return release_tree(release_ref(release), str(tmp_path_factory.getbasetemp().parent / "megatron-releases"))


@pytest.mark.skipif(git_dir() is None, reason=SKIP_REASON)
@pytest.mark.parametrize("release", BUILDS)
def test_a_release_that_builds_gpt_oss_builds_it_field_by_field(release, tmp_path_factory):
    """parse_args -> validate_args -> core_transformer_config_from_args of the release's own tree take the plan, and
    the config is gpt-oss-120b's (the yarn_* attributes GPTModel's YarnRotaryEmbedding reads included)."""
    cases = [_case(release, **fields) for fields in LAYOUTS]
    for result in run_cases(_tree(release, tmp_path_factory), cases):
        assert result.get("ok"), result
        assert result["config"] == GPT_OSS_CONFIG


@pytest.mark.skipif(git_dir() is None, reason=SKIP_REASON)
@pytest.mark.parametrize("release", REFUSES)
def test_a_release_refused_cannot_build_gpt_oss_from_these_flags(release, tmp_path_factory):
    """The refusal is the tree's: 26.08's arguments do not parse there (no 'yarn' position embedding, no --yarn-*), and
    where 'yarn' parses without them (26.06, 26.06.01) the config has none of the yarn_* attributes GPTModel reads with
    no default (so it raises AttributeError building the model)."""
    argv = _case("26.08", tp=1, pp=2, ep=8, etp=1, mbs=1, gbs=512)   # nothing but gpt-oss's flags newer than 0.14
    (result,) = run_cases(_tree(release, tmp_path_factory), [argv])
    assert result.get("stage") == "parse", result
    yarn_only = {**argv, "argv": [t for t in argv["argv"] if t not in ("--no-yarn-correction-range-round-to-int",)]}
    values = _values(yarn_only["argv"])
    yarn_only["argv"] = [tok for flag, vals in values.items() if not flag.startswith("--yarn-") for tok in (flag, *vals)]
    (result,) = run_cases(_tree(release, tmp_path_factory), [yarn_only])
    if _core(release).startswith("0.18"):
        assert result.get("ok") and result["config"]["yarn_rotary_scaling_factor"] == "<absent>", result
    else:
        assert result.get("stage") == "parse" and "yarn" in result["error"], result


@pytest.mark.skipif(git_dir() is None, reason=SKIP_REASON)
def test_core_v0_16_1_the_installed_target_refuses_the_26_08_arguments_at_parse(tmp_path_factory):
    """The plan's target (and the installed megatron-core's release) cannot take gpt-oss's YaRN: its parse_args refuses
    them, so a plan without a building release is refused, never emitted as another model."""
    tree = release_tree("core_v0.16.1", str(tmp_path_factory.getbasetemp().parent / "megatron-releases"))
    (result,) = run_cases(tree, [_case("26.08", **LAYOUTS[0])])
    assert result.get("stage") == "parse", result


def test_the_feature_flags_the_release_check_reads_are_the_ones_emitted():
    """search/frameworks.py NON_MLA_YARN_FEATURE_FLAGS (what a release must parse to build gpt-oss besides YaRN) names
    the flags the emitter writes for each gpt-oss feature."""
    from commbench.planner.emit.megatron import model_args
    from commbench.planner.search.frameworks import NON_MLA_YARN_FEATURE_FLAGS
    model = load_model("gpt-oss-120b")
    emitted = _values(model_args(model, release="26.08"))
    assert all(has(model.architecture) for _, has, _ in NON_MLA_YARN_FEATURE_FLAGS)
    assert [flag for _, _, flag in NON_MLA_YARN_FEATURE_FLAGS if flag not in emitted] == []
