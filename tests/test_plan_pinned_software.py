"""A pinned plan (`plan --layout`) never recorded --software: not in plan.json's inputs, no software_note, no line in
the text, even where a release the table lacks (26.10) read an older release's recipes (probe AX finding 2), though
the release moves the prediction. README: "A release the table lacks ... reads the recipes of the newest table release
not newer than it, and the plan, its JSON (`software_note`) and the row's note say so". A pinned and a searched plan
now build `inputs` and the Software line in one place (emit/plan.plan_inputs, search/explain.software_line)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.layout import recipes

BASE = ["plan", "--model", "qwen3-30b-a3b", "--system", "gb200-nvl72", "--gpus", "8", "--precision", "mxfp8"]
PIN = ["--layout", "tp=1,pp=1,vp=1,ep=8,mbs=1"]
# what only a search records: the HBM headroom it keeps every layout within (a pinned layout is reported, fits or not)
SEARCH_ONLY_INPUTS = {"mem_headroom_fraction"}


def _run(*args: str) -> str:
    done = CliRunner().invoke(app, [*BASE, *args], env={"COLUMNS": "400"})
    assert done.exit_code == 0, done.output
    return done.output


def _software(doc: dict) -> str:
    (line,) = [a for a in doc.get("explanation", doc["assumptions"]) if a.startswith("Software:")]
    return line


@pytest.mark.parametrize("software", ["25.11", "26.10"])
def test_a_pinned_plan_records_the_release_as_a_search_does(software):
    pinned = json.loads(_run(*PIN, "--software", software, "--json"))
    searched = json.loads(_run("--software", software, "--json", "--top", "1"))
    assert set(pinned["inputs"]) == set(searched["inputs"]) - SEARCH_ONLY_INPUTS
    for key in ("software", "software_note"):
        assert pinned["inputs"].get(key) == searched["inputs"].get(key), key
    assert pinned["inputs"]["software"] == (software if software in recipes.releases() else recipes.newest_release())
    assert _software(pinned) == _software(searched) and f"release {pinned['inputs']['software']}'s" in _software(pinned)
    text = " ".join(_run(*PIN, "--software", software).split())
    assert _software(pinned) in text
    if software == "26.10":
        assert "26.10 is not in the recipe table" in pinned["inputs"]["software_note"]
        assert pinned["inputs"]["software_note"] in text
    else:
        assert "software_note" not in pinned["inputs"]


def test_a_pinned_plan_without_software_records_the_newest_release():
    pinned = json.loads(_run(*PIN, "--json"))
    assert pinned["inputs"]["software"] == recipes.newest_release() and "software_note" not in pinned["inputs"]
    assert {"field": "software", "value": recipes.newest_release()} in [
        {k: e[k] for k in ("field", "value")} for e in pinned["defaults_taken"]]
