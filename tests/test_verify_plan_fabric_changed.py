"""`commbench verify-plan` on a plan whose fabric (a fabric .json, a preset) changed since `plan` read it: said in
one line and in --json (fabric_check), and no prediction is made from a fabric the plan was not made on."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

FAST = ["--nproc", "2", "--max-bytes", "64K", "--iters", "1", "--json"]


@pytest.fixture
def fabric_plan(tmp_path):
    """(fabric .json, plan folder): a plan made on a fabric file (the b200-hgx preset saved as a fitted profile)."""
    from commbench.costmodel import load_preset

    fabric = tmp_path / "fab.json"
    dataclasses.replace(load_preset("b200-hgx"), name="myfab", source="fitted").to_json(fabric)
    folder = tmp_path / "plan"
    result = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", str(fabric), "--gpus", "4",
                                      "--gbs", "64", "--layout", "tp=2,pp=1,ep=2,mbs=1", "-O", str(folder),
                                      "--emit", "json"])
    assert result.exit_code == 0, result.output
    return fabric, folder


def _verify(folder) -> dict:
    result = CliRunner().invoke(app, ["verify-plan", str(folder)] + FAST, env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_an_unchanged_fabric_is_checked_the_same(fabric_plan):
    fabric, folder = fabric_plan
    doc = _verify(folder)
    assert doc["fabric_check"]["status"] == "same", doc["fabric_check"]
    assert doc["fabric_check"]["plan_sha256"] == doc["fabric_check"]["now_sha256"]
    assert all(p["predicted_time_us"] is not None for p in doc["points"])
    assert not [f for f in doc["unmet_assumptions"] if "FABRIC CHANGED" in f or "digest" in f]


def test_a_fabric_edited_after_the_plan_is_named_and_predicts_nothing(fabric_plan):
    # busbw / 10 in the file after `plan`: verify-plan predicted from the edited file without a word
    fabric, folder = fabric_plan
    data = json.loads(fabric.read_text())
    for curve in data["curves"]:
        curve["busbw_gbps"] /= 10
    fabric.write_text(json.dumps(data))
    doc = _verify(folder)
    check = doc["fabric_check"]
    assert check["status"] == "changed" and check["plan_sha256"] != check["now_sha256"], check
    first = doc["unmet_assumptions"][0]
    assert first.startswith("FABRIC CHANGED") and str(fabric) in first and check["now_sha256"][:12] in first
    assert all(p["predicted_time_us"] is None and p["plan_predicted_time_us"] is None for p in doc["points"])
    assert all(p["measured_time_us"] for p in doc["points"])   # the measurements stand


def test_a_plan_without_the_digest_is_noted_as_unchecked(fabric_plan, tmp_path):
    fabric, folder = fabric_plan
    doc = json.loads((folder / "plan.json").read_text())
    del doc["inputs"]["fabric"]["content_sha256"]
    old = tmp_path / "old-plan.json"
    old.write_text(json.dumps(doc))
    out = _verify(old)
    assert out["fabric_check"]["status"] == "unchecked" and out["fabric_check"]["plan_sha256"] is None
    assert [f for f in out["unmet_assumptions"] if "no content digest" in f]
    assert all(p["predicted_time_us"] is not None for p in out["points"])


def test_a_preset_changed_since_the_plan_is_named(small_plan, monkeypatch):
    # a preset is code and hardware.toml: an upgrade that moves its numbers moves the plan's figures too
    from commbench.costmodel import presets

    real = presets.load_preset

    def slower(name, **kw):
        fabric = real(name, **kw)
        return dataclasses.replace(fabric, curves=tuple(dataclasses.replace(c, latency_us=c.latency_us + 1)
                                                        for c in fabric.curves))

    assert _verify(small_plan)["fabric_check"]["status"] == "same"
    monkeypatch.setattr("commbench.costmodel.load_preset", slower)
    check = _verify(small_plan)["fabric_check"]
    assert check["status"] == "changed" and check["fabric"] == "preset b200-hgx", check


def test_a_digest_that_is_not_one_is_a_one_line_error(fabric_plan, tmp_path):
    fabric, folder = fabric_plan
    doc = json.loads((folder / "plan.json").read_text())
    doc["inputs"]["fabric"]["content_sha256"] = 5   # hand-edited: was a TypeError traceback slicing it
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    result = CliRunner().invoke(app, ["verify-plan", str(bad)] + FAST)
    line = result.output.strip()
    assert result.exit_code == 2 and len(line.splitlines()) == 1, result.output
    assert line.startswith("error: inputs.fabric.content_sha256=5 is invalid")
