"""Probe PA (outside): calibrate told runs apart by their raw spelling. A shipped row with precision 'fp8' for 'FP8' (or
gpu 'h100', model 'llama3.1-70b' for 'H100', 'Llama3-70B') was not in-sample, the same run twice in one file was not
refused as a repeat, and a --calibration file's own run spelled another way was fitted twice. One identity now
(published.run_label: zoo model, system preset, the step model's precision, the release as read) serves every check.
Also: an hf: row read the default recipe where plan reads its zoo twin's; a typed "fsdp" field was dropped ("not read");
the calibration terms' range, --layout precision and a one-digit release patch were said badly."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.data.reference import calibration_runs

SHIPPED = next(r for r in calibration_runs()
               if r["gpu"] == "H100" and r["model"] == "Llama3-70B" and r["release"] == "26.02.01")
LLAMA8B = dict(model="Llama3-8B", gpu="H100", num_gpus=8, precision="FP8", seq_len=8192, gbs=128, mbs=1, tp=1, pp=1,
               cp=1, tokens_per_s_per_gpu=13000, release="26.02.01")


def _invoke(*args: str):
    return CliRunner().invoke(app, ["calibrate", *args], env={"COLUMNS": "400"})


def _write(tmp_path, name: str, rows: list[dict]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(rows))
    return str(path)


@pytest.mark.parametrize("spelling", [dict(precision="fp8"), dict(gpu="h100"), dict(model="llama3.1-70b"),
                                      dict(gpu="h100-hgx", model="LLAMA3-70B", precision="FP8-CS")])
def test_a_shipped_run_spelled_another_way_is_in_sample(tmp_path, spelling):
    runs = _write(tmp_path, "runs.json", [dict(SHIPPED, **spelling)])
    doc = json.loads(_invoke("--evaluate", runs, "--json").stdout)
    assert doc["num_in_sample"] == 1 and doc["rows"][0]["in_sample"] is True


def test_the_same_run_spelled_twice_is_refused_as_a_repeat(tmp_path):
    runs = _write(tmp_path, "runs.json", [SHIPPED, dict(SHIPPED, precision="fp8", gpu="h100", model="llama3.1-70b",
                                                        ep=1, etp=1)])
    result = _invoke("--evaluate", runs)
    assert result.exit_code == 2 and "row 2 is" in result.output and "row 1 again" in result.output, result.output


def test_lower_case_shipped_rows_count_as_in_start(tmp_path):
    rows = [r for r in calibration_runs() if r["gpu"] == "H100" and r["model"] == "Llama3-70B"][:2]
    runs = _write(tmp_path, "runs.json", [dict(r, gpu="h100", precision=str(r.get("precision")).lower())
                                          for r in rows])
    result = _invoke(runs, "-O", str(tmp_path / "cal.json"), "--no-loo", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["num_in_start"] == 2


def test_a_calibration_file_s_own_run_spelled_another_way_is_refused(tmp_path):
    first = _write(tmp_path, "a.json", [LLAMA8B])
    fit = _invoke(first, "-O", str(tmp_path / "cal.json"), "--no-loo")
    assert fit.exit_code == 0, fit.output
    again = _write(tmp_path, "b.json", [dict(LLAMA8B, precision="fp8", gpu="h100-hgx", model="llama3-8b")])
    result = _invoke(again, "--calibration", str(tmp_path / "cal.json"), "-O", str(tmp_path / "next.json"), "--no-loo")
    assert result.exit_code == 2 and "was fitted on 1 of these runs already" in result.output, result.output
    doc = json.loads(_invoke("--evaluate", again, "--calibration", str(tmp_path / "cal.json"), "--json").stdout)
    assert doc["rows"][0]["in_sample"] is True


@pytest.mark.parametrize("written", ["Llama3-8B 8x H100 FP8 26.02.01 tp1 pp1: 1 tokens/s/GPU",
                                     "llama3-8b 8x h100-hgx fp8 26.02.01 tp1 pp1: 1 tokens/s/GPU",
                                     "Llama3-8B H100x8 FP8 NeMo26.02.01 tp1 pp1: 1 tokens/s/GPU"])
def test_a_listed_run_reads_as_one_identity(written):
    from commbench.cli.calibrate import run_identity
    assert run_identity(written) == "llama3-8b 8x h100-hgx fp8 26.02.01 tp1 pp1: 1 tokens/s/GPU"
    assert run_identity("deepseek-v3 256x gb300-nvl72 ? 25.09 tp1 pp2: 1 tokens/s/GPU").startswith(
        "deepseek-v3 256x gb300-nvl72 fp8 25.09 tp1")   # a 25.09 row without a precision is read as FP8


def test_an_hf_row_reads_the_recipe_of_its_zoo_twin():
    from commbench.planner.calibrate.published import published_runs
    zoo, hf = published_runs((LLAMA8B, dict(LLAMA8B, model="hf:tests/data/hf/Llama-3.1-8B")))
    assert hf.layout == zoo.layout   # before: the default recipe's flags (no recipe was read for hf:...)
    assert "llama3-8b's architecture" in hf.layout_note and "default recipe" not in hf.layout_note


def test_a_typed_fsdp_field_is_read_as_the_notes_are(tmp_path):
    from commbench.planner.calibrate.published import published_runs, unread_fields
    typed, noted = published_runs((dict(LLAMA8B, fsdp=8), dict(LLAMA8B, notes="FSDP=8")))
    assert typed.layout.fsdp and typed.layout == noted.layout and not unread_fields(dict(LLAMA8B, fsdp=8))
    runs = _write(tmp_path, "runs.json", [dict(LLAMA8B, fsdp=8), dict(LLAMA8B, notes="FSDP=8")])
    result = _invoke("--evaluate", runs)
    assert result.exit_code == 2 and "row 1 again" in result.output   # one run, whichever form states it


@pytest.mark.parametrize("value, said", [(3, "field 'fsdp' = 3; allowed: 0 (no Megatron-FSDP) or the DP ranks it "
                                              "shards over, a divisor of dp = num_gpus/(tp*pp*cp) = 8"),
                                         (-1, "field 'fsdp' = -1"), (True, "field 'fsdp' = True"),
                                         ("8", "field 'fsdp' = '8'")])
def test_a_bad_fsdp_field_is_refused_in_one_line(tmp_path, value, said):
    runs = _write(tmp_path, "runs.json", [dict(LLAMA8B, fsdp=value)])
    result = _invoke("--evaluate", runs)
    assert result.exit_code == 2 and said in result.output and len(result.output.strip().splitlines()) == 1, \
        result.output


def test_an_fsdp_field_the_notes_contradict_is_refused(tmp_path):
    runs = _write(tmp_path, "runs.json", [dict(LLAMA8B, fsdp=8, notes="FSDP=4")])
    result = _invoke("--evaluate", runs)
    assert result.exit_code == 2 and "field 'fsdp' = 8 but its notes say FSDP=4" in result.output, result.output


@pytest.mark.parametrize("value", [-0.5, 0.0, 1.5])
def test_a_fraction_term_states_its_whole_range(value):
    from commbench.planner.step.terms import CALIBRATED
    with pytest.raises(ValueError, match=r"hbm_efficiency=.* must be in \(0, 1\]"):
        CALIBRATED.with_values(hbm_efficiency=value)


def test_a_pinned_precision_the_gpu_lacks_names_layout():
    result = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8",
                                      "--layout", "tp=1,pp=1,precision=mxfp8"])
    assert result.exit_code == 2
    assert result.output.startswith("error: --layout precision='mxfp8' is invalid: H100 supports"), result.output


def test_a_one_digit_release_patch_is_refused(tmp_path):
    result = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8",
                                      "--software", "26.02.1"], env={"COLUMNS": "400"})
    assert result.exit_code == 2 and "--software='26.02.1' is invalid" in result.output
    assert "NN two digits" in result.output and len(result.output.strip().splitlines()) == 1
    runs = _write(tmp_path, "runs.json", [dict(LLAMA8B, release="26.02.1")])
    row = _invoke("--evaluate", runs)
    assert row.exit_code == 2 and "field 'release' = '26.02.1'" in row.output and "NN two digits" in row.output
