"""`plan --system fab.json -O plan/` recorded inputs.system 'fab.json' (relative to where plan ran); `verify-plan` run
from another directory could not read it ('no prediction: the plan's fabric fab.json cannot be read here'). plan.json
now records the absolute path and the path from the plan's folder (inputs.input_files), as a fitted profile records
its results files; verify-plan tries both, says which it read, and refuses one found nowhere in one line (exit 2)."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

FAST = ["--nproc", "2", "--max-bytes", "64K", "--iters", "1", "--json"]


@pytest.fixture
def relative_plan(tmp_path, monkeypatch):
    """(work dir, plan folder): `plan --system fab.json -O plan/` run in work dir, fab.json a fitted profile there."""
    from commbench.costmodel import load_preset

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    dataclasses.replace(load_preset("b200-hgx"), name="myfab", source="fitted").to_json(work / "fab.json")
    result = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "fab.json", "--gpus", "4",
                                      "--gbs", "64", "--layout", "tp=2,pp=1,ep=2,mbs=1", "-O", "plan",
                                      "--emit", "json"])
    assert result.exit_code == 0, result.output
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(other)   # verify-plan runs from another directory
    return work, work / "plan"


def test_plan_records_where_its_fitted_profile_is(relative_plan):
    work, folder = relative_plan
    inputs = json.loads((folder / "plan.json").read_text())["inputs"]
    assert inputs["system"] == "fab.json"
    assert inputs["input_files"] == {"system": {"path": "fab.json", "absolute": str(work / "fab.json"),
                                                "from_plan": "../fab.json"}}


def test_verify_plan_from_another_directory_reads_the_profile_and_says_where(relative_plan):
    work, folder = relative_plan
    result = CliRunner().invoke(app, ["verify-plan", str(folder / "plan.json")] + FAST, env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["fabric_check"]["status"] == "same", doc["unmet_assumptions"]
    assert all(p["predicted_time_us"] is not None for p in doc["points"])
    assert not [f for f in doc["unmet_assumptions"] if "cannot be read here" in f]
    assert (f"note: plan inputs.system 'fab.json': read {work / 'fab.json'} (from the plan's folder: ../fab.json)"
            in result.stderr)


def test_moved_together_the_path_from_the_plan_finds_it(relative_plan, tmp_path):
    work, _ = relative_plan
    moved = tmp_path / "moved"
    shutil.move(str(work), str(moved))   # the absolute path recorded is gone; ../fab.json from the plan still holds
    result = CliRunner().invoke(app, ["verify-plan", str(moved / "plan")] + FAST, env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert f"read {moved / 'fab.json'} (from the plan's folder" in result.stderr


def test_a_profile_found_nowhere_is_one_line_and_exit_2(relative_plan):
    work, folder = relative_plan
    (work / "fab.json").unlink()
    result = CliRunner().invoke(app, ["verify-plan", str(folder)] + FAST)
    assert result.exit_code == 2 and "Traceback" not in result.output
    line = " ".join(result.output.split())
    assert "plan field 'inputs.system'='fab.json' is a fabric profile found nowhere here: tried" in line
    assert str(work / "fab.json") in line and "(from the plan's folder: ../fab.json)" in line
