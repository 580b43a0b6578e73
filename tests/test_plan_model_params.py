"""A plan reports the model's total and per-token active parameters, computed from its architecture, in its text and
in plan.json (inputs.model_params, commbench/data/schemas/plan.schema.json).

Found from outside (probe EA): no plan reported the model's size (plan.json's published_params_total_b is null for
an hf: config, and the text had no total)."""

from __future__ import annotations

import json

import jsonschema
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner import active_params, load_model, param_counts
from tests.test_json_output import schema

GLM = "hf:tests/data/hf/GLM-4.5-Air"
SEARCHED = ["plan", "--model", GLM, "--system", "h100-hgx", "--gpus", "32", "--top", "1"]


@pytest.mark.parametrize("pinned", [False, True], ids=["searched", "pinned"])
def test_plan_text_and_json_report_the_computed_parameter_counts(pinned, tmp_path):
    model = load_model(GLM)
    counts = param_counts(model)
    args = SEARCHED
    if pinned:   # the search's winner, pinned
        found = json.loads(CliRunner().invoke(app, SEARCHED + ["--json"]).stdout)["layout"]
        args = SEARCHED[:-2] + ["--layout", ",".join(f"{k}={str(v).lower()}" for k, v in found.items()
                                                     if k not in ("dp", "precision"))]
    res = CliRunner().invoke(app, args + ["-O", str(tmp_path / "p")], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "p" / "plan.json").read_text())
    jsonschema.validate(doc, schema("plan"), cls=jsonschema.Draft202012Validator)
    got = doc["inputs"]["model_params"]
    assert got["total_b"] == pytest.approx(counts.total / 1e9) and got["active_b"] == pytest.approx(
        active_params(model) / 1e9) and got["mtp_b"] == pytest.approx(counts.mtp / 1e9)
    assert got["how"].startswith("computed")
    # GLM-4.5-Air: 106.9B with 13.42B active, its one MTP layer's 2.375B apart (the card: 106B total, 12B active)
    line = ("hf:GLM-4.5-Air: 106.9B parameters, 13.42B active per token (computed from the architecture; its MTP "
            "layers' 2.375B apart)")
    assert line in res.output


def test_the_line_names_published_figures_and_a_dense_model_as_dense():
    from commbench.planner.emit.plan import model_params_line
    assert model_params_line(load_model("deepseek-v3")).endswith("published: total 671B, active 37.4B)")
    dense = model_params_line(load_model("hf:tests/data/hf/Llama-3.1-8B"))
    assert "(dense: every parameter active)" in dense and "active per token" not in dense
