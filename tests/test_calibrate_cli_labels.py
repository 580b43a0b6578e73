"""calibrate's command line as a new user meets it: several values after one --model / --system land in RUNS (typer
takes one value per flag), and the run labels write the GPU count as the table does ('16x h100-hgx')."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

MEGATRON = Path(__file__).parent / "data" / "megatron_deepseek_v3_gb300.log"


@pytest.mark.parametrize("flags, flag", [
    (["--model", "deepseek-v3", "deepseek-v3", "--system", "gb300-nvl72"], "--model"),
    (["--model", "deepseek-v3", "--system", "gb300-nvl72", "gb300-nvl72"], "--system")])
def test_a_second_value_after_one_flag_says_repeat_the_flag(tmp_path, flags, flag):
    other = tmp_path / "b.log"
    other.write_text(MEGATRON.read_text().replace("elapsed time per iteration (ms): 104", "elapsed time per iteration "
                                                  "(ms): 105"))
    result = CliRunner().invoke(app, ["calibrate", "--evaluate", str(MEGATRON), str(other), *flags])
    assert result.exit_code == 2
    assert f"repeat {flag} for each log ({flag} A {flag} B)" in " ".join(result.output.split()), result.output
    assert "cannot be read" not in result.output


def test_run_labels_write_the_gpu_count_as_the_table_does(tmp_path):
    rows = [dict(model="qwen3-30b-a3b", gpu="h100-hgx", num_gpus=16, seq_len=4096, gbs=128, mbs=2, tp=1, pp=1, ep=8,
                 precision="BF16", tokens_per_s_per_gpu=6000.0, release="user", notes="FSDP=16")]
    from commbench.planner.calibrate.published import published_runs
    assert published_runs(tuple(rows))[0].label == "qwen3-30b-a3b 16x h100-hgx BF16 user"


def test_a_calibration_file_of_the_older_labels_still_knows_its_runs(tmp_path):
    """Files written before list their runs as 'gb300-nvl72x256': --evaluate still says in-sample, and a fit from
    it still refuses those runs (they would count twice)."""
    out = tmp_path / "cal.json"
    args = ["--model", "deepseek-v3", "--system", "gb300-nvl72"]
    fit = CliRunner().invoke(app, ["calibrate", str(MEGATRON), *args, "-O", str(out), "--no-loo"])
    assert fit.exit_code == 0, fit.output
    doc = json.loads(out.read_text())
    doc["runs"] = [doc["runs"][0].replace("256x gb300-nvl72", "gb300-nvl72x256")]
    out.write_text(json.dumps(doc))
    ev = json.loads(CliRunner().invoke(app, ["calibrate", "--evaluate", str(MEGATRON), *args, "--json",
                                             "--calibration", str(out)]).stdout)
    assert ev["rows"][0]["in_sample"] is True
    again = CliRunner().invoke(app, ["calibrate", str(MEGATRON), *args, "--calibration", str(out), "-O",
                                     str(tmp_path / "b.json"), "--no-loo"])
    assert again.exit_code == 2 and "was fitted on 1 of these runs already" in again.output


@pytest.mark.parametrize("run", ["deepseek-v3 256x gb300-nvl72 MXFP8 user tp1 pp2: 1 tokens/s/GPU",
                                 "deepseek-v3 gb300-nvl72x256 MXFP8 user tp1 pp2: 1 tokens/s/GPU"])
def test_a_calibration_file_s_gpus_are_read_from_either_label(tmp_path, run):
    from commbench.planner.calibrate.fit import fitted_gpus
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({"runs": [run]}))
    assert fitted_gpus(str(path)) == ("gb300",)
