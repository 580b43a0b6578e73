"""gpt-oss at a release whose pretrain_gpt.py cannot build it: predicted, with no Megatron-LM launch.

Found from outside (session 39): `plan --model gpt-oss-120b ... --software 26.02.01` (or 25.11, 26.02, 26.04, 26.04.01,
26.06, 26.06.01) was refused in one line, so no prediction at all, though NVIDIA published gpt-oss-120b runs at those
releases (calibration rows, benchmarks/data/newer-release-runs.json) trained with Megatron-Bridge, whose GPT-OSS model
sets the TransformerConfig's yarn_*, softmax_type, window and clamped quick-GELU GLU fields in Python
(models/gpt_oss/gpt_oss_bridge.py GPTOSSBridge.provider_bridge; before v0.3.1 the GPTOSSProvider dataclass in
gpt_oss_provider.py it returns), not through pretrain_gpt.py's flags. Now plan / tune / verify-plan predict it there
and the plan says, in place of the launch, why that release's Megatron-LM cannot launch it and what can
(search/frameworks.py megatron_cannot_launch, as for DeepSeek-V4); `--emit megatron` is refused in one line before any
file is written. 25.09's Megatron-Bridge v0.1.0rc3 has no GPT-OSS model: still refused there. 26.08 (megatron-core
0.19.0) still emits the launch.

The Megatron-Bridge citations are checked against each release's own commit (recipes.json) where
MEGATRON_BRIDGE_GIT names a git directory of github.com/NVIDIA-NeMo/Megatron-Bridge."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.planner import load_model
from commbench.planner.layout.recipes import recipes_json_releases, releases
from commbench.planner.search.frameworks import (BRIDGE_GPT_OSS_BUILDER, framework_pins, megatron_cannot_launch,
                                                 megatron_unbuildable)

BUILDS = ["26.08"]   # megatron-core 0.19.0's pretrain_gpt.py builds it from flags
NO_BRIDGE = ["25.09"]   # Megatron-Bridge v0.1.0rc3: no models/gpt_oss
BRIDGE_ONLY = [r for r in releases() if r not in BUILDS + NO_BRIDGE]


def _bridge(release: str) -> tuple[str, str]:
    entry = recipes_json_releases()[release]
    return entry["megatron_bridge"], entry["commit"]


def _plan(*args: str):
    return CliRunner().invoke(app, ["plan", "--model", "gpt-oss-120b", "--system", "gb200-nvl72", "--gpus", "64",
                                    *args], env={"COLUMNS": "400"})


def test_the_releases_are_split_three_ways():
    assert set(BUILDS) | set(NO_BRIDGE) | set(BRIDGE_ONLY) == set(releases())
    assert "26.02.01" in BRIDGE_ONLY and "25.11" in BRIDGE_ONLY and "26.06.01" in BRIDGE_ONLY
    assert sorted(BRIDGE_GPT_OSS_BUILDER) == sorted(BRIDGE_ONLY + BUILDS)


@pytest.mark.parametrize("release", BRIDGE_ONLY)
def test_a_release_whose_bridge_builds_it_predicts_and_says_why_there_is_no_launch(release):
    model = load_model("gpt-oss-120b")
    assert framework_pins("megatron", model, {"tp": 1}, release=release) == {"tp": 1}   # the search runs
    why = megatron_cannot_launch(model, release)
    core = recipes_json_releases()[release]["megatron_core"]["version"]
    version, commit = _bridge(release)
    path, line, symbol = BRIDGE_GPT_OSS_BUILDER[release]
    assert "\n" not in why
    assert f"(release {release}'s, megatron-core {core}) cannot launch gpt-oss-120b" in why, why
    assert "pretrain_gpt.py" in why and "YaRN" in why, why   # what is missing, from megatron_unbuildable
    assert f"release {release}'s Megatron-Bridge {version} ({commit[:12]}) builds and trains it" in why, why
    assert f"({path}:{line} {symbol})" in why, why
    assert "--software 26.08" in why and "--framework torchtitan" in why, why
    # the refusal text is the pretrain_gpt.py fact, unchanged: other refusals still read it
    assert megatron_unbuildable(model, release=release)


@pytest.mark.parametrize("release", BUILDS)
def test_a_release_whose_megatron_lm_builds_it_launches(release):
    model = load_model("gpt-oss-120b")
    assert megatron_cannot_launch(model, release) is None and megatron_unbuildable(model, release=release) is None


@pytest.mark.parametrize("release", NO_BRIDGE)
def test_a_release_with_no_gpt_oss_anywhere_is_still_refused(release):
    model = load_model("gpt-oss-120b")
    assert megatron_cannot_launch(model, release) is None
    with pytest.raises(CommbenchError, match=rf"^Megatron-LM [^\n]*\(release {re.escape(release)}'s, megatron-core "
                                             r"0\.14\) cannot build gpt-oss-120b[^\n]*$"):
        framework_pins("megatron", model, {}, release=release)


def test_without_a_release_the_target_is_still_refused():
    """No release: the target core_v0.16.1 alone, with no Megatron-Bridge named: refused as before."""
    model = load_model("gpt-oss-120b")
    assert megatron_cannot_launch(model) is None
    with pytest.raises(CommbenchError, match="^Megatron-LM core_v0.16.1 cannot build gpt-oss-120b"):
        framework_pins("megatron", model, {})


def test_a_model_the_bridge_would_build_otherwise_is_still_refused():
    """Megatron-Bridge's GPT-OSS model sets YaRN x32 over 4096 itself: a gpt-oss with another YaRN factor is not
    what it builds, so the release refuses it as before (never a prediction of a model nothing at that release runs)."""
    model = load_model("gpt-oss-120b")
    other = dataclasses.replace(model, architecture=dataclasses.replace(model.architecture, rope_scaling_factor=16.0))
    assert megatron_cannot_launch(other, "26.02.01") is None
    with pytest.raises(CommbenchError, match=r"cannot build gpt-oss-120b"):
        framework_pins("megatron", other, {}, release="26.02.01")


def test_the_plan_at_26_02_01_is_predicted_and_plan_json_says_there_is_no_launch(tmp_path):
    res = _plan("--software", "26.02.01", "-O", str(tmp_path / "p"), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["kind"] == "predicted" and doc["predicted"]["tokens_per_s_per_gpu"] > 0
    meg = doc["megatron"]
    assert meg["launch"] is False and "args" not in meg and doc["megatron_args"] == []
    assert "(release 26.02.01's, megatron-core 0.16.1) cannot launch gpt-oss-120b" in meg["refused"]
    assert "gpt_oss_bridge.py:63 GPTOSSBridge.provider_bridge" in meg["refused"]
    assert meg["release"]["name"] == "26.02.01"
    written = sorted(p.name for p in (tmp_path / "p").iterdir())
    assert "megatron_args.txt" not in written and "launch.env" not in written and "plan.json" in written
    # verify-plan reads it (its collectives are the prediction's)
    from commbench.planner.emit.plan import load_plan
    from commbench.workflows.verify import plan_context
    plan_context(load_plan(str(tmp_path / "p" / "plan.json")))


def test_the_plan_at_26_02_01_prints_the_prediction_and_the_note():
    res = _plan("--software", "26.02.01")
    assert res.exit_code == 0, res.output
    assert "Plan (predicted):" in res.output
    line = [ln for ln in res.output.splitlines() if ln.startswith("Megatron-LM: ")]
    assert len(line) == 1 and "cannot launch gpt-oss-120b" in line[0] and "Megatron-Bridge v0.3.1" in line[0], line


def test_a_pinned_plan_at_26_02_01_is_predicted_too():
    res = _plan("--software", "26.02.01", "--layout", "tp=1,pp=1,vp=1,cp=1,ep=64,etp=1,mbs=4", "--gbs", "1280", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["mode"] == "pinned" and doc["kind"] == "predicted" and doc["megatron"]["launch"] is False


@pytest.mark.parametrize("layout", [(), ("--layout", "tp=1,pp=1,vp=1,cp=1,ep=64,etp=1,mbs=4", "--gbs", "1280")])
def test_emit_megatron_at_26_02_01_is_refused_in_one_line_with_nothing_written(tmp_path, layout):
    out = tmp_path / "p"
    res = _plan("--software", "26.02.01", "--emit", "megatron", "-O", str(out), *layout)
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert len([ln for ln in res.output.splitlines() if ln.strip()]) == 1, res.output
    assert "cannot launch gpt-oss-120b" in res.output, res.output
    assert not out.exists() or not list(out.iterdir())


def test_26_08_still_emits_the_launch():
    res = _plan("--emit", "megatron")
    assert res.exit_code == 0, res.output
    assert "pretrain_gpt.py" in res.output and "--position-embedding-type yarn" in res.output
    doc = json.loads(_plan("--json").output)
    assert doc["megatron"]["launch"] is True and doc["megatron_args"]


def test_25_09_is_still_refused_in_one_line():
    res = _plan("--software", "25.09")
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert len([ln for ln in res.output.splitlines() if ln.strip()]) == 1, res.output
    assert "release 25.09's, megatron-core 0.14) cannot build gpt-oss-120b" in res.output, res.output


def test_torchtitan_still_refuses_what_it_cannot_run():
    """The refusal stays where the framework cannot run the model's features at all: TorchTitan's gpt_oss and CP."""
    res = _plan("--software", "26.02.01", "--framework", "torchtitan", "--layout", "cp=2")
    assert res.exit_code == 2 and "VarlenAttention" in res.output, res.output


# ---- the citations, read at each release's own Megatron-Bridge commit (MEGATRON_BRIDGE_GIT) -------------------------

def _bridge_git() -> str | None:
    path = os.environ.get("MEGATRON_BRIDGE_GIT")
    return path if path and Path(path).exists() else None


def _show(commit: str, path: str) -> str | None:
    done = subprocess.run(["git", "--git-dir", _bridge_git(), "show", f"{commit}:{path}"], capture_output=True,
                          text=True)
    return done.stdout if done.returncode == 0 else None


SYMBOL_LINE = {"GPTOSSProvider": "class GPTOSSProvider(GPTModelProvider):",
               "GPTOSSBridge.provider_bridge": "def provider_bridge("}


@pytest.mark.skipif(_bridge_git() is None, reason="MEGATRON_BRIDGE_GIT does not name a git directory of "
                                                  "github.com/NVIDIA-NeMo/Megatron-Bridge")
@pytest.mark.parametrize("release", releases())
def test_the_cited_bridge_file_builds_gpt_oss_at_that_release(release):
    _, commit = _bridge(release)
    if release not in BRIDGE_GPT_OSS_BUILDER:
        assert _show(commit, "src/megatron/bridge/models/gpt_oss/__init__.py") is None   # no GPT-OSS model there
        return
    path, line, symbol = BRIDGE_GPT_OSS_BUILDER[release]
    text = _show(commit, path)
    assert text is not None, (release, path)
    assert text.splitlines()[line - 1].strip().startswith(SYMBOL_LINE[symbol]), (release, text.splitlines()[line - 1])
    # the Python sets what pretrain_gpt.py cannot: YaRN x32 over 4096 with betas 32 / 1, sinks, the window pattern
    for setting in (r"yarn_rotary_scaling_factor(: float)? = 32\.0", r"yarn_original_max_position_embeddings(: int)? = "
                    r"4096", r"softmax_type.* = \"learnable\"", r"window_attn_skip_freq.* = 2",
                    r"glu_linear_offset(: float)? = 1\.0", r"activation_func_clamp_value.* = 7\.0"):
        assert re.search(setting, text), (release, setting)
    # the release's recipe builds the model through that bridge (AutoBridge.from_hf_pretrained)
    bridge = _show(commit, "src/megatron/bridge/models/gpt_oss/gpt_oss_bridge.py")
    assert bridge is not None and "def provider_bridge(" in bridge
    if symbol == "GPTOSSProvider":
        assert re.search(r"provider = GPTOSSProvider\(", bridge), release


def test_tune_at_26_02_01_predicts_and_writes_no_megatron_launch(tmp_path):
    """tune (here from a results file, no sweep) plans as `plan` does: refused before the sweep no longer."""
    from tests.test_plan_files_guarded import DATA
    res = CliRunner().invoke(app, ["tune", "--results", str(DATA), "--model", "gpt-oss-120b", "--system", "gb200-nvl72",
                                   "--gpus", "64", "--software", "26.02.01", "-O", str(tmp_path / "t")],
                             env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "t" / "plan.json").read_text())
    assert doc["kind"] == "predicted" and doc["megatron"]["launch"] is False
    assert "cannot launch gpt-oss-120b" in doc["megatron"]["refused"]
    assert not (tmp_path / "t" / "megatron_args.txt").exists()
