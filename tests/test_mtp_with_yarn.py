"""MTP beside YaRN RoPE on GQA attention: every recipe-table release's validate_args refuses --mtp-num-layers with
--position-embedding-type yarn (search/frameworks.py MTP_YARN_ASSERTION), so a GLM-4.5 config with YaRN rope_scaling
and num_nextn_predict_layers 1 has no Megatron-LM launch at any release.

Found from outside (probe EA, cfg/glm_yarn): planned at 26.08 it emitted `--position-embedding-type yarn ...
--mtp-num-layers 1` with exit 0 and launch true, and 26.08's validate_args (Megatron-LM cd4afffa
megatron/training/arguments.py:857 and :1846) refuses that line. MLA's YaRN is --position-embedding-type rope with
--rope-type yarn, which those assertions take (DeepSeek-V3 below)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.planner import Layout, check_layout, load_model
from commbench.planner.emit.megatron import launch_env, megatron_args
from tests.megatron_releases import SKIP_REASON, git_dir, release_ref, release_tree, run_cases
from tests.test_hf_launch_fidelity import _refused, _variant

_YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
_LAYOUT = dict(tp=1, pp=2, ep=8, etp=1, mbs=1, gbs=256)


def test_glm_with_an_mtp_head_and_yarn_is_refused_at_26_08_naming_both_keys_and_the_way_out(tmp_path):
    out = _refused(_variant(tmp_path, "GLM-4.5-Air", rope_scaling=_YARN, num_nextn_predict_layers=1),
                   "--gpus", "16", "--software", "26.08")
    assert "release 26.08's" in out and "num_nextn_predict_layers=1" in out and "rope_scaling.rope_type='yarn'" in out
    assert "Multi-Token Prediction (MTP) is not supported with yarn position embedding type" in out
    assert "num_nextn_predict_layers 0 trains the model without the MTP head" in out
    assert "plan it with --software" not in out   # no release builds both


def test_rope_parameters_is_the_key_named_where_the_config_gives_it(tmp_path):
    out = _refused(_variant(tmp_path, "GLM-4.5-Air", rope_parameters=dict(_YARN, rope_theta=1000000),
                            num_nextn_predict_layers=1, drop=("rope_theta",)), "--gpus", "16", "--software", "26.08")
    assert "rope_parameters.rope_type='yarn'" in out


def test_glm_with_yarn_and_no_mtp_head_plans_at_26_08(tmp_path):
    folder = _variant(tmp_path, "GLM-4.5-Air", rope_scaling=_YARN, num_nextn_predict_layers=0)
    res = CliRunner().invoke(app, ["plan", "--model", folder, "--system", "h100-hgx", "--gpus", "32", "--software",
                                   "26.08", "--top", "1", "-O", str(tmp_path / "p")], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    args = json.loads((tmp_path / "p" / "plan.json").read_text())["megatron"]["args"]
    assert args[args.index("--position-embedding-type") + 1] == "yarn" and "--mtp-num-layers" not in args


def _case(model, gpus: int = 32, system: str = "h100-hgx") -> dict:
    layout = Layout.for_world(gpus, **_LAYOUT)
    check_layout(model, layout, gpus)
    return {"argv": megatron_args(layout, model, release="26.08"), "world": gpus,
            "env": launch_env(layout, load_preset(system, num_gpus=gpus).gpu.name),
            "capability": list(load_preset(system, num_gpus=gpus).gpu.compute_capability)}


@pytest.mark.skipif(git_dir() is None, reason=SKIP_REASON)
def test_26_08s_tree_refuses_mtp_with_gqa_yarn_and_takes_it_without_mtp_or_with_mla(tmp_path, tmp_path_factory):
    """Through 26.08's own Megatron-LM (tests/megatron_release_run.py): the GLM YaRN line without MTP validates; the
    same line with the --mtp-num-layers 1 the plan wrote before is refused with the assertion the refusal quotes;
    DeepSeek-V3 (MLA, YaRN rope_scaling, num_nextn_predict_layers 1) validates with its MTP layer."""
    (tmp_path / "glm").mkdir(), (tmp_path / "dsv3").mkdir()
    glm = load_model(_variant(tmp_path / "glm", "GLM-4.5-Air", rope_scaling=_YARN, num_nextn_predict_layers=0))
    without = _case(glm)
    with_mtp = dict(without, argv=without["argv"] + ["--mtp-num-layers", "1"])
    dsv3 = load_model(_variant(tmp_path / "dsv3", "DeepSeek-V3", num_hidden_layers=8, first_k_dense_replace=1))
    assert dsv3.num_mtp_layers == 1 and dsv3.architecture.rope_scaling == "yarn"
    mla = _case(dsv3, gpus=64, system="h100-hgx")
    assert "--mtp-num-layers" in mla["argv"] and mla["argv"][mla["argv"].index("--rope-type") + 1] == "yarn"
    tree = release_tree(release_ref("26.08"), str(tmp_path_factory.getbasetemp().parent / "megatron-releases"))
    ok, refused, mla_ok = run_cases(tree, [without, with_mtp, mla])
    assert ok.get("ok"), ok
    assert refused.get("stage") == "validate" and "Multi-Token Prediction (MTP) is not supported" in refused["error"]
    assert mla_ok.get("ok"), mla_ok
