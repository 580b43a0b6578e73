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
