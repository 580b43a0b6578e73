"""plan.json's `defaults_taken` names every input the plan took by default, searched or pinned: a search's document
recorded only a defaulted gbs (as an explanation line), so `--precision fp8 --seq-len 4096 --software 26.08` and
none of them gave the same document (found from outside). Each entry: the field, the value taken (as
`inputs` records it) and why; none where every input is given."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app
from tests.test_json_output import validate

SEARCH = ["plan", "--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "16", "--json"]
GIVEN = ["--precision", "fp8", "--seq-len", "4096", "--software", "26.08", "--gbs", "1024"]
INPUTS = {"precision", "seq_len", "software", "gbs"}


def _plan(*args: str) -> dict:
    result = CliRunner().invoke(app, [*SEARCH, *args])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    validate(doc, "plan")
    return doc


def test_a_search_names_each_input_it_took_by_default():
    doc = _plan()
    taken = {e["field"]: e for e in doc["defaults_taken"]}
    assert set(taken) == INPUTS, taken
    for field in INPUTS:
        assert taken[field]["value"] == doc["inputs"][field] and taken[field]["why"], taken[field]
    assert "H100" in taken["precision"]["why"] and "recipes.json" in taken["software"]["why"]
    given = _plan(*GIVEN)
    assert given["defaults_taken"] == [] and {k: given["inputs"][k] for k in INPUTS} == {
        k: doc["inputs"][k] for k in INPUTS}   # the same inputs: only defaults_taken tells them apart
    some = _plan("--precision", "fp8", "--software", "26.08")
    assert {e["field"] for e in some["defaults_taken"]} == {"seq_len", "gbs"}


def test_a_pinned_plan_names_the_inputs_it_took_by_default_beside_the_layout_fields():
    pinned = ["--layout", "tp=1,pp=1,vp=1,ep=8,mbs=1"]
    doc = _plan(*pinned)
    fields = [e["field"] for e in doc["defaults_taken"]]
    assert INPUTS <= set(fields) and "etp" in fields, fields
    given = _plan(*pinned, *GIVEN)
    assert INPUTS.isdisjoint(e["field"] for e in given["defaults_taken"])
    text = " ".join(CliRunner().invoke(app, [*SEARCH[:-1], *pinned], env={"COLUMNS": "300"}).stdout.split())
    assert "Defaults taken (not in --layout): etp=1" in text and "not given as options: precision=fp8" in text, text
