"""A `commbench calibrate -O` file records its format version; a later version is refused in one line, and terms a
file does not set (a file of an older commbench fitted fewer) are named where a plan states its efficiency terms
(plan.json inputs and assumptions, the printed plan), not filled from the shipped values without a word."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.calibrate.fit import read_calibration_file
from commbench.planner.step.terms import CALIBRATED, CALIBRATION_VERSION, FITTED_TERMS, calibration_json

MEGATRON = Path(__file__).parent / "data" / "megatron_deepseek_v3_gb300.log"
PLAN = ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "8", "--gbs", "64"]
PINNED = ["--layout", "tp=1,pp=1,vp=1,ep=8,mbs=1"]
OLD_TERMS = {"grouped_gemm_efficiency": 0.4, "overlap_efficiency": 0.5}   # fewer terms than this release fits


def _write(path: Path, data: dict) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def test_calibrate_writes_its_format_version_and_plan_reads_every_term_from_it(tmp_path):
    out = tmp_path / "cal.json"
    fit = CliRunner().invoke(app, ["calibrate", str(MEGATRON), "--model", "deepseek-v3", "--system", "gb300-nvl72",
                                   "--no-loo", "-O", str(out)])
    assert fit.exit_code == 0, fit.output
    data = json.loads(out.read_text())
    assert data["version"] == CALIBRATION_VERSION and isinstance(data["commbench_version"], str)
    assert set(data["terms"]) == set(FITTED_TERMS)
    own_gpu = [a.replace("b200-hgx", "gb300-nvl72") for a in PLAN]   # the GPU of the file's runs: every term is its
    planned = CliRunner().invoke(app, [*own_gpu, *PINNED, "--json", "--calibration", str(out)])
    doc = json.loads(planned.stdout)
    assert "fitted on runs of" not in planned.stderr
    assert doc["inputs"]["calibration"] == str(out) and doc["inputs"]["calibration_shipped_terms"] == []
    assert doc["inputs"]["calibration_terms"] == data["terms"]
    fitted = doc["inputs"]["calibration_terms_fitted"]   # it sets every term; its fit determined these alone
    assert fitted == data["terms_fitted"] and fitted and len(fitted) < len(FITTED_TERMS)
    assert any(f"{len(fitted)} of {len(FITTED_TERMS)} terms fitted to its runs" in a for a in doc["assumptions"])
    other = CliRunner().invoke(app, [*PLAN, *PINNED, "--json", "--calibration", str(out)])
    # stderr: the file was fitted on GB300 runs only, for B200 its kernel terms are the shipped ones
    assert "fitted on runs of gb300 only; for b200: its kernel terms" in other.stderr
    assert json.loads(other.stdout)["inputs"]["calibration_shipped_terms"] == []   # the file sets every term


def test_a_file_the_current_release_writes_still_loads(tmp_path):
    """No "version" (written before it was recorded) and every fitted term: read as version 1, nothing filled in."""
    current = calibration_json(CALIBRATED, fitted_on=["runs.json"], runs=[])
    current = {k: v for k, v in current.items() if k not in ("version", "commbench_version")}
    loaded = read_calibration_file(_write(tmp_path / "cal.json", current))
    assert loaded.calibration == CALIBRATED and loaded.shipped_terms == () and loaded.note() == ""


@pytest.mark.parametrize("layout", [[], PINNED], ids=["search", "pinned"])
def test_terms_a_file_does_not_set_are_named_in_the_plan(tmp_path, layout):
    old = _write(tmp_path / "old.json", {"kind": "commbench-calibration", "terms": OLD_TERMS})
    missing = [t for t in FITTED_TERMS if t not in OLD_TERMS]
    doc = json.loads(CliRunner().invoke(app, [*PLAN, *layout, "--json", "--calibration", old]).stdout)
    assert doc["inputs"]["calibration"] == old and doc["inputs"]["calibration_shipped_terms"] == missing
    (line,) = [a for a in doc["assumptions"] if a.startswith("efficiency terms:")]
    assert f"except {', '.join(missing)}:" in line and "shipped values" in line
    text = CliRunner().invoke(app, [*PLAN, *layout, "--calibration", old], env={"COLUMNS": "300"})
    assert text.exit_code == 0, text.output
    assert f"except {', '.join(missing)}:" in " ".join(text.output.split())


def test_calibrate_with_an_older_file_says_which_terms_are_the_shipped_ones(tmp_path):
    old = _write(tmp_path / "old.json", {"kind": "commbench-calibration", "terms": OLD_TERMS})
    args = ["calibrate", "--evaluate", str(MEGATRON), "--model", "deepseek-v3", "--system", "gb300-nvl72",
            "--calibration", old]
    text = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert text.exit_code == 0, text.output
    assert f"calibration file {old} sets no gemm_efficiency_hopper" in text.output and "not fitted to your runs" in text.output
    doc = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert doc["calibration_shipped_terms"] == [t for t in FITTED_TERMS if t not in OLD_TERMS]


@pytest.mark.parametrize("version, message", [
    (CALIBRATION_VERSION + 1, f"field 'version' = {CALIBRATION_VERSION + 1}; this commbench"),
    ("1", "field 'version' = '1'; allowed: a format version from 1"),
    (True, "field 'version' = True; allowed"),
    (0, "field 'version' = 0; allowed"),
])
def test_an_unknown_format_version_is_refused_in_one_line(tmp_path, version, message):
    path = _write(tmp_path / "cal.json", {"kind": "commbench-calibration", "version": version,
                                          "commbench_version": "9.0.0", "terms": {"grouped_gemm_efficiency": 0.4}})
    for command in ([*PLAN, *PINNED], [*PLAN], ["calibrate", "--evaluate", str(MEGATRON), "--model", "deepseek-v3",
                                                "--system", "gb300-nvl72"]):
        result = CliRunner().invoke(app, [*command, "--calibration", path], env={"COLUMNS": "80"})
        assert result.exit_code == 2, result.output
        assert message in result.output and len(result.output.strip().splitlines()) == 1, result.output
    if version == CALIBRATION_VERSION + 1:
        assert "written by a newer commbench (9.0.0)" in result.output


def test_a_term_this_release_does_not_fit_names_the_file_and_its_release(tmp_path):
    # a file of another release's step model (a term since removed or renamed) was refused as "calibration
    # term='old_term' is invalid: one of ..." with neither the file nor the release that wrote it named
    data = dict(calibration_json(CALIBRATED, fitted_on=["x.log"]), commbench_version="0.0.9")
    path = _write(tmp_path / "old.json", dict(data, terms=dict(data["terms"], old_term=0.5)))
    result = CliRunner().invoke(app, [*PLAN, *PINNED, "--calibration", path])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert f"error: calibration file {path}: term 'old_term' is not one this commbench" in said
    assert "the file was written by commbench 0.0.9" in said and "calibrate -O" in said


def test_a_file_that_does_not_name_its_gpus_keeps_the_shipped_kernel_terms_on_every_gpu(tmp_path):
    """A file written before runs were recorded cannot show which GPUs it was fitted on: its kernel terms are used on
    none (README: "only on the GPUs of its runs"), said in one line; its software terms carry
    (tests/test_calibration_file_runs.py has the plan's side). Before, it was used whole on every GPU, silently."""
    from commbench.planner.calibrate.fit import kernel_terms_of
    from commbench.planner.step.terms import KERNEL_TERMS

    moved = CALIBRATED.with_values(gemm_efficiency_blackwell=0.6, layer_overhead_s=0.004)
    path = _write(tmp_path / "old.json", calibration_json(moved, fitted_on=["runs.json"], runs=[]))
    whole = read_calibration_file(path)
    assert whole.gpus == () and whole.for_gpu("h100") == (kernel_terms_of(moved, CALIBRATED), KERNEL_TERMS)
    assert "records no runs" in whole.other_gpu_note("h100")
    scoped = kernel_terms_of(moved, CALIBRATED)
    assert scoped.gemm_efficiency_blackwell == CALIBRATED.gemm_efficiency_blackwell and scoped.layer_overhead_s == 0.004
    assert set(KERNEL_TERMS) < set(FITTED_TERMS)


def test_a_kernel_term_the_file_does_not_set_is_named_once():
    """Planned on a GPU the file was not fitted on, a kernel term it does not set is one of its shipped_terms, not also
    one of the kernel terms taken from the shipped calibration (the efficiency-terms line names each term once)."""
    from commbench.planner.calibrate.fit import CalibrationFile
    from commbench.planner.step.terms import KERNEL_TERMS

    cal_file = CalibrationFile(path="f.json", calibration=CALIBRATED, shipped_terms=("grouped_gemm_8bit_efficiency",),
                               gpus=("gb300",))
    _, other = cal_file.for_gpu("h100")
    assert "grouped_gemm_8bit_efficiency" not in other and set(other) | {"grouped_gemm_8bit_efficiency"} == set(KERNEL_TERMS)
    assert cal_file.for_gpu("gb300") == (CALIBRATED, ())


def test_a_newer_format_from_this_same_version_is_not_called_newer(tmp_path):
    # probe BL 8: a file saying version 2 and commbench_version 0.1.0 (this one) was called "written by a newer
    # commbench (0.1.0)"
    from commbench import __version__
    path = _write(tmp_path / "cal.json", {"kind": "commbench-calibration", "version": CALIBRATION_VERSION + 1,
                                          "commbench_version": __version__, "terms": {"grouped_gemm_efficiency": 0.4}})
    result = CliRunner().invoke(app, [*PLAN, "--calibration", path], env={"COLUMNS": "80"})
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    text = " ".join(result.output.split())
    assert "newer commbench" not in text and f"written by commbench {__version__}, this very version" in text, text
