"""A --calibration file fitted on runs of another release or precision than the plan's is said in one line (probe
P6: a file fitted on 25.09 BF16 runs planned 26.08 MXFP8 without a word, where another GPU gets a warning), on the
terminal and among plan.json's assumptions, for plan and tune; a Megatron-LM log's run, whose row has release
"user", is of a release unknown unless `calibrate --software REL` names it (validated as plan's --software), which
the calibration file records (run_releases)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.step.terms import CALIBRATED, calibration_json
from tests.megatron_log import megatron_log
from tests.test_plan_files_guarded import DATA

PLAN = ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "64", "--layout",
        "tp=1,pp=1,ep=8,mbs=1", "--json"]
RUN_2509 = "qwen3-30b-a3b 64x B200 BF16 25.09 tp1 pp1 vp1 ep8 etp1 cp1 mbs1 gbs512 seq4096: 11000 tokens/s/GPU"
RUN_LOG = "qwen3-30b-a3b 64x b200-hgx BF16 user tp1 pp1 vp1 ep8 etp1 cp1 mbs1 gbs512 seq4096: 15945.5 tokens/s/GPU"


def _file(tmp_path, runs, **extra):
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(calibration_json(CALIBRATED, fitted_on=["runs.json"], runs=runs, **extra)))
    return str(path)


def _invoke(*args):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})


def _said(result) -> list[str]:
    doc = json.loads(result.stdout)
    return [a for a in doc["assumptions"] if a.startswith("calibration runs:")]


def test_a_plan_at_another_release_and_precision_says_both(tmp_path):
    result = _invoke(*PLAN, "--calibration", _file(tmp_path, [RUN_2509]), "--precision", "mxfp8",
                     "--software", "26.08")
    assert result.exit_code == 0, result.output
    (line,) = _said(result)
    assert line.startswith("calibration runs: 25.09 BF16; this plan: 26.08 MXFP8: the fitted terms carry over only "
                           "as far as"), line
    assert "note: calibration runs: 25.09 BF16" in result.stderr, result.stderr


def test_a_plan_at_the_runs_release_and_precision_says_nothing(tmp_path):
    result = _invoke(*PLAN, "--calibration", _file(tmp_path, [RUN_2509]), "--precision", "bf16", "--software", "25.09")
    assert result.exit_code == 0, result.output
    assert _said(result) == [] and "calibration runs" not in result.stderr


def test_a_log_run_without_software_is_of_a_release_unknown(tmp_path):
    result = _invoke(*PLAN, "--calibration", _file(tmp_path, [RUN_LOG]), "--precision", "bf16", "--software", "26.02")
    assert result.exit_code == 0, result.output
    (line,) = _said(result)
    assert "release unknown BF16" in line and "calibrate --software" in line, line
    named = _file(tmp_path, [RUN_LOG], run_releases={RUN_LOG: "26.02"})
    again = _invoke(*PLAN, "--calibration", named, "--precision", "bf16", "--software", "26.02")
    assert again.exit_code == 0 and _said(again) == [], again.output


def test_calibrate_software_names_a_logs_release_and_records_it(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(megatron_log())
    out = tmp_path / "fit.json"
    result = _invoke("calibrate", str(log), "--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--software", "26.02",
                     "--no-loo", "-O", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert list(data["run_releases"].values()) == ["26.02"] and list(data["run_releases"]) == data["runs"], data
    plan = ["plan", "--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "16", "--layout",
            "tp=1,pp=4,ep=4,mbs=1", "--json", "--calibration", str(out), "--precision", "bf16"]
    assert _said(_invoke(*plan, "--software", "26.02")) == []
    (line,) = _said(_invoke(*plan, "--software", "25.11"))
    assert line.startswith("calibration runs: 26.02 BF16; this plan: 25.11 BF16"), line


@pytest.mark.parametrize("release", ["26.13", "latest", "24.01"])
def test_calibrate_software_is_validated_as_plans(tmp_path, release):
    log = tmp_path / "run.log"
    log.write_text(megatron_log())
    result = _invoke("calibrate", str(log), "--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--software", release,
                     "--evaluate")
    assert result.exit_code == 2 and "--software" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


@pytest.mark.timeout(240)
def test_tune_says_it_too(tmp_path):
    out = tmp_path / "t"
    result = _invoke("tune", "--model", "mixtral-8x7b", "--system", "h100-hgx", "--gpus", "16", "--top", "1",
                     "--results", str(DATA), "-O", str(out), "--calibration", _file(tmp_path, [RUN_2509]),
                     "--precision", "bf16", "--software", "26.02")
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "plan.json").read_text())
    (line,) = [a for a in doc["assumptions"] if a.startswith("calibration runs:")]
    assert line.startswith("calibration runs: 25.09 BF16; this plan: 26.02 BF16"), line
    assert "note: calibration runs: 25.09 BF16" in result.stderr, result.stderr
