"""JSON runs files: a row the step model cannot price as it ran is refused in one line (its precision on its GPU,
its sizes against its GPU count), not priced as another."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

ROW = dict(source="a", model="qwen3-30b-a3b", gpu="h100-hgx", num_gpus=16, seq_len=4096, gbs=1024, mbs=2, tp=1,
           pp=1, cp=1, vp=1, ep=16, etp=1, tokens_per_s_per_gpu=10486, precision="FP8")


def _calibrate(tmp_path, *rows: dict, extra: tuple[str, ...] = ("--evaluate",)):
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(list(rows)))
    return CliRunner().invoke(app, ["calibrate", str(path), *extra])


@pytest.mark.parametrize("precision", ["NVFP4", "MXFP8"])
def test_a_precision_the_gpu_does_not_run_is_refused_on_a_system_preset(tmp_path, precision):
    # gpu 'h100-hgx' (a preset, not a GPU name) skipped the check: NVFP4 was predicted 0 tok/s and fitted,
    # MXFP8 priced as FP8
    result = _calibrate(tmp_path, dict(ROW, precision=precision), dict(ROW, source="b"),
                        extra=("-O", str(tmp_path / "cal.json")))
    assert result.exit_code != 0
    assert f"field 'precision' = '{precision}'; H100 supports bf16, fp8" in result.output
    assert not (tmp_path / "cal.json").exists()


def test_the_layout_column_shows_fsdp(tmp_path):
    result = _calibrate(tmp_path, dict(ROW, notes="FSDP=16"), dict(ROW, source="b"))
    assert result.exit_code == 0, result.output
    assert "gbs1024 fsdp16" in result.output   # the DDP row of the same sizes stays without it
    assert result.output.count("fsdp16") == 1


@pytest.mark.parametrize("change, reason", [
    (dict(tp=3, notes="FSDP=16"), "breaks the world rule: num_gpus must be a multiple of tp*pp*cp"),
    (dict(num_gpus=12, notes="FSDP=16"), "breaks the expert_fold rule: etp*ep must divide tp*cp*dp")])
def test_a_row_whose_sizes_do_not_divide_its_gpus_is_named_by_them(tmp_path, change, reason):
    # was blamed on FSDP: "Megatron-FSDP over 16 of 5 DP ranks (not a divisor ...)"
    result = _calibrate(tmp_path, dict(ROW, **change), dict(ROW, source="b"))
    assert reason in " ".join(result.output.split())
    assert "Megatron-FSDP over" not in result.output


def test_a_calibration_records_its_runs_framework_and_a_torchtitan_plan_notes_it(tmp_path):
    from pathlib import Path

    from commbench.planner.calibrate.fit import framework_note
    out = tmp_path / "cal.json"
    log = Path(__file__).parent / "data" / "megatron_deepseek_v3_gb300.log"
    result = CliRunner().invoke(app, ["calibrate", str(log), "--model", "deepseek-v3", "--system", "gb300-nvl72",
                                      "-O", str(out), "--no-loo"])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["frameworks"] == ["megatron"]
    assert "fitted on runs of Megatron-LM" in framework_note(str(out), "torchtitan")
    assert framework_note(str(out), "megatron") == ""
    older = json.loads(out.read_text())
    del older["frameworks"]
    out.write_text(json.dumps(older))
    assert "records no framework" in framework_note(str(out), "torchtitan")
    assert framework_note(str(out), "megatron") == ""
