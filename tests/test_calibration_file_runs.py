"""A calibration file's `runs` decide where its kernel terms (step.terms.KERNEL_TERMS) are used: only on the GPUs of
its runs (README, `--calibration`). A `runs` that is not a list of run names is a corrupt file, refused in one line
naming the field; a file that records no runs (written before they were) or whose runs name no GPU commbench knows
cannot show it was fitted on the plan's GPU, so there its kernel terms are the shipped values, said in one line and
recorded (inputs.calibration_other_gpu_terms). Before, all three were used whole on every GPU without a word (found
from outside: a GB300 fit planned H100 7% faster)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.calibrate.fit import read_calibration_file
from commbench.planner.step.terms import CALIBRATED, KERNEL_TERMS, calibration_json

MEGATRON = Path(__file__).parent / "data" / "megatron_deepseek_v3_gb300.log"
PLAN = ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "8", "--gbs", "64",
        "--layout", "tp=1,pp=1,vp=1,ep=8,mbs=1"]
FITTED = CALIBRATED.with_values(hbm_efficiency=0.5052, layer_overhead_s=0.004)   # a GB300 fit's kind of terms
GB300_RUN = "deepseek-v3 256x gb300-nvl72 MXFP8 user tp1 pp8 vp1 ep32 etp1 cp1 mbs1 gbs4096 seq4096: 1 tokens/s/GPU"


def _file(tmp_path: Path, **change) -> str:
    data = calibration_json(FITTED, fitted_on=["runs.json"], runs=[GB300_RUN])
    for key, value in change.items():
        if value is ...:
            data.pop(key)
        else:
            data[key] = value
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("runs", ["notalist", {"a": 1}, [1, 2], [GB300_RUN, None], 3])
def test_a_runs_field_that_is_not_a_list_of_run_names_is_refused_in_one_line(tmp_path, runs):
    path = _file(tmp_path, runs=runs)
    for command in (PLAN, ["calibrate", "--evaluate", str(MEGATRON), "--model", "deepseek-v3", "--system",
                           "gb300-nvl72"]):
        result = CliRunner().invoke(app, [*command, "--calibration", path], env={"COLUMNS": "80"})
        assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
        said = " ".join(result.output.split())
        assert len(result.output.strip().splitlines()) == 1 or said.startswith("error:"), result.output
        assert f"calibration file {path}: field 'runs' = " in said and "a list of" in said, said


@pytest.mark.parametrize("runs, why", [(..., "records no runs"), ([], "records no runs"),
                                       (["llama3-8b 8x a100-hgx BF16 user tp1 pp1: 1 tokens/s/GPU"],
                                        "no GPU commbench knows"),
                                       (["free text"], "no GPU commbench knows")])
def test_a_file_that_cannot_show_its_gpus_keeps_the_shipped_kernel_terms_and_says_so(tmp_path, runs, why):
    path = _file(tmp_path, runs=runs)
    cal_file = read_calibration_file(path)
    assert cal_file.gpus == () and not cal_file.fitted_on("b200")
    used, shipped_here = cal_file.for_gpu("b200")
    assert shipped_here == KERNEL_TERMS
    assert used.hbm_efficiency == CALIBRATED.hbm_efficiency and used.layer_overhead_s == 0.004   # software carries
    result = CliRunner().invoke(app, [*PLAN, "--calibration", path, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["inputs"]["calibration_other_gpu_terms"] == list(KERNEL_TERMS)
    assert doc["inputs"]["calibration_terms"]["hbm_efficiency"] == CALIBRATED.hbm_efficiency
    said = " ".join(result.stderr.split())
    assert said.count(f"calibration file {path}") == 1 and why in said, said
    assert "for b200: its kernel terms (" in said and "are the shipped values" in said, said


def test_a_file_of_the_plan_s_gpu_uses_every_term(tmp_path):
    path = _file(tmp_path)
    cal_file = read_calibration_file(path)
    assert cal_file.gpus == ("gb300",) and cal_file.for_gpu("gb300") == (cal_file.calibration, ())
    assert not cal_file.other_gpu_note("gb300")
