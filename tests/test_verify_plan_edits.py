"""`commbench verify-plan` on a plan.json whose model or precision was edited by hand: named, not measured as if
it were the plan `commbench plan` wrote."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.emit.plan import load_plan
from commbench.workflows.verify import plan_context


def _edited(small_plan, tmp_path, edit) -> str:
    doc = json.loads(small_plan.read_text())
    edit(doc)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_the_plan_as_written_has_no_edit_flag(small_plan):
    assert not [f for f in plan_context(load_plan(small_plan)).flags if "model_spec" in f]


def test_a_model_spec_that_is_not_the_zoo_model_it_names_is_flagged(small_plan, tmp_path):
    # hidden 2048 -> 4096 by hand: the sizes measured were another model's, with no word
    path = _edited(small_plan, tmp_path, lambda d: d["inputs"]["model_spec"].__setitem__("hidden", 4096))
    flags = plan_context(load_plan(path)).flags
    named = [f for f in flags if "model_spec" in f]
    assert len(named) == 1 and "hidden=4096" in named[0] and "qwen3-30b-a3b has 2048" in named[0], flags


def test_a_layout_precision_other_than_the_inputs_is_refused(small_plan, tmp_path):
    path = _edited(small_plan, tmp_path, lambda d: d["inputs"].__setitem__("precision", "bf16"))
    result = CliRunner().invoke(app, ["verify-plan", path, "--nproc", "2"], env={"COLUMNS": "400"})
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert line.startswith("error:") and len(line.splitlines()) == 1
    assert "'inputs.precision'='bf16'" in line and "'layout.precision'='mxfp8'" in line


def test_a_calibration_file_changed_since_the_plan_is_flagged(tmp_path):
    # the plan records only the file's path: a refit since then was read as the plan's terms, not a word
    from pathlib import Path
    megatron = Path(__file__).parent / "data" / "megatron_deepseek_v3_gb300.log"
    cal = tmp_path / "cal.json"
    fit = CliRunner().invoke(app, ["calibrate", str(megatron), "--model", "deepseek-v3", "--system", "gb300-nvl72",
                                   "-O", str(cal), "--no-loo"])
    assert fit.exit_code == 0, fit.output
    folder = tmp_path / "plan"
    result = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "4",
                                      "--gbs", "64", "--layout", "tp=2,pp=1,ep=2,mbs=1", "-O", str(folder),
                                      "--emit", "json", "--calibration", str(cal)])
    assert result.exit_code == 0, result.output
    doc = load_plan(folder / "plan.json")
    assert not [f for f in plan_context(doc).flags if "changed since" in f]
    edited = json.loads(cal.read_text())
    edited["terms"]["all_to_all_efficiency"] = 0.5
    cal.write_text(json.dumps(edited))
    flags = [f for f in plan_context(doc).flags if "changed since" in f]
    assert len(flags) == 1 and str(cal) in flags[0] and "all_to_all_efficiency" in flags[0], plan_context(doc).flags


def _refused(path) -> str:
    result = CliRunner().invoke(app, ["verify-plan", path, "--nproc", "2"], env={"COLUMNS": "400"})
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert line.startswith("error:") and len(line.splitlines()) == 1 and "Traceback" not in result.output
    return line


def test_a_deleted_layout_field_is_refused_not_defaulted(small_plan, tmp_path):
    """A plan missing layout.precision was read as bf16 (every size doubled, the arguments still fp8) and one missing
    layout.ep as ep 1 (the all-to-all dropped), each with exit 0; a missing tp blamed ep and etp. Every field a plan
    writes must be there; a key Layout does not have is named too (found from outside)."""
    for name in ("precision", "ep", "tp"):
        line = _refused(_edited(small_plan, tmp_path, lambda d, n=name: d["layout"].pop(n)))
        assert f"field 'layout.{name}' is missing" in line, line
    line = _refused(_edited(small_plan, tmp_path, lambda d: d["layout"].__setitem__("foo", 3)))
    assert "'layout.foo' is not a layout field" in line


def test_a_layout_edited_apart_from_its_launch_arguments_is_refused(small_plan, tmp_path):
    """tp, etp and dp edited in layout (the rank count kept) while megatron_args, pins and predictions still said the
    plan's: verify-plan measured the edit and exited 0. The plan's arguments must describe its layout."""
    doc = json.loads(small_plan.read_text())
    lay = doc["layout"]
    assert doc["megatron_args"], "the fixture's plan has Megatron arguments"
    line = _refused(_edited(small_plan, tmp_path, lambda d: d["layout"].update(
        mbs=lay["mbs"] * 2, gbs=lay["gbs"] * 2)))
    assert "field 'layout' and field 'megatron_args' describe different layouts" in line
    assert f"mbs {lay['mbs'] * 2} vs {lay['mbs']}" in line
    assert load_plan(small_plan)["layout"] == lay   # the plan as written still loads


def test_a_plan_renamed_to_another_model_is_refused(small_plan, tmp_path):
    """inputs.model changed to deepseek-v3 (the model_spec, arguments and predictions still qwen3-30b-a3b's): verify-plan
    measured qwen3's sizes and exited 0 with one 'unmet assumption' line, a verdict on model A given as model B (probe
    P4). plan writes both from one model, so they must agree, as inputs.precision and layout.precision must."""
    line = _refused(_edited(small_plan, tmp_path, lambda d: d["inputs"].__setitem__("model", "deepseek-v3")))
    assert "field 'inputs.model'='deepseek-v3'" in line and "'inputs.model_spec.name'='qwen3-30b-a3b'" in line, line


def test_a_plan_without_its_predicted_figures_is_refused(small_plan, tmp_path):
    """The whole `predicted` block deleted: verify-plan recomputed and exited 0 with no word, a plan predicted not to
    fit then passing as one that fits (its DOES NOT FIT flag reads predicted.fits) and its figures unchecked against
    its layout (probe P4). So is a figure verify-plan reads deleted or made a string, and `fits` made a string."""
    line = _refused(_edited(small_plan, tmp_path, lambda d: d.pop("predicted")))
    assert "field 'predicted' is missing" in line, line
    line = _refused(_edited(small_plan, tmp_path, lambda d: d["predicted"].pop("step_s")))
    assert "field 'predicted.step_s'=None is invalid" in line, line
    line = _refused(_edited(small_plan, tmp_path, lambda d: d["predicted"].__setitem__("mem_total_bytes", "1e9")))
    assert "field 'predicted.mem_total_bytes'='1e9' is invalid" in line, line
    line = _refused(_edited(small_plan, tmp_path, lambda d: d["predicted"].__setitem__("fits", "false")))
    assert "field 'predicted.fits'='false' is invalid: true or false" in line, line
