"""A fabric profile whose domain_size contradicts the GPU or the preset it names (a gb300-nvl72 profile with 8-GPU
domains, an H100 one with a 72-GPU NVLink domain) is refused in one line naming both fields and values; a smaller
domain under another name (an NVLink partition) and a profile fitted without a GPU are kept."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import Fabric, load_preset
from commbench.errors import CommbenchError


def _profile(tmp_path, preset: str, **changes) -> str:
    data = load_preset(preset).to_dict() | changes
    path = tmp_path / "fabric.json"
    path.write_text(json.dumps(data))
    return str(path)


CONTRADICTIONS = [
    (("gb300-nvl72", dict(domain_size=8)),
     "field 'domain_size' = 8 contradicts field 'name' = 'gb300-nvl72': preset gb300-nvl72 has 72 GPUs per NVLink domain"),
    (("gb300-nvl72", dict(name="gb300-nvl72+fitted", domain_size=36)),   # as `fit --system gb300-nvl72` names it
     "field 'domain_size' = 36 contradicts field 'name' = 'gb300-nvl72+fitted'"),
    (("h100-hgx", dict(name="my-cluster", domain_size=72)),
     "field 'domain_size' = 72 contradicts field 'gpu' = 'h100': one H100 NVLink domain joins at most 8 GPUs"),
    (("b200-hgx", dict(name="b200-hgx", gpu=None, domain_size=16)),      # no GPU stated: the name still says 8
     "field 'domain_size' = 16 contradicts field 'name' = 'b200-hgx': preset b200-hgx has 8 GPUs per NVLink domain"),
]


@pytest.mark.parametrize("profile, message", CONTRADICTIONS)
def test_a_contradicting_domain_is_refused_in_one_line_by_plan_and_predict(tmp_path, profile, message):
    path = _profile(tmp_path, profile[0], **profile[1])
    with pytest.raises(CommbenchError, match="contradicts field"):
        Fabric.from_json(path)
    gpu = ["--gpu", "b200"] if profile[1].get("gpu", "") is None else []
    for command in (["plan", "--model", "qwen3-30b-a3b", "--system", path, "--gpus", "64", *gpu],
                    ["predict", "--fabric", path, "-c", "all_reduce", "-g", "8", "-b", "1M", "-e", "1M"]):
        result = CliRunner().invoke(app, command, env={"COLUMNS": "80"})
        assert result.exit_code == 2, result.output
        assert message in result.output and path in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


@pytest.mark.parametrize("preset, changes", [
    ("gb300-nvl72", dict(name="gb300-partition16", domain_size=16)),   # an NVLink partition of a rack
    ("gb300-nvl72", dict(num_gpus=16)),                                 # a job on 16 GPUs of one rack
    ("gb300-nvl72", dict(name="gb300-nvl72+fitted")),
    ("h100-hgx", dict(name="hgx-4gpu", domain_size=4)),                # a 4-GPU board
    ("h100-hgx", dict(name="fitted", gpu=None, domain_size=2)),         # fitted on CPU ranks, no GPU
])
def test_legitimate_domains_still_load(tmp_path, preset, changes):
    fabric = Fabric.from_json(_profile(tmp_path, preset, **changes))
    assert fabric.domain_size == changes.get("domain_size", load_preset(preset).domain_size)


def test_every_preset_and_its_saved_profile_agree_with_their_hardware():
    from commbench.costmodel import preset_names
    for name in preset_names():
        preset = load_preset(name, num_racks=2)
        assert Fabric.from_json(preset.to_json()).domain_size == preset.domain_size
