"""`commbench tune` on defaults on a machine with one CUDA GPU (a workstation): the built-in sweep's 2 ranks resolved
to NCCL, one rank per GPU, and the README's set-up command ended in 'error: --nproc=2 is invalid: allowed 1..1 on
nccl (one rank per visible GPU)', naming an option the user never gave. With fewer GPUs than the built-in sweep's
ranks it now runs on gloo and says so (the plan then uses the preset's numbers, as on a CPU machine)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import commbench.comm.backends as backends
from commbench.cli.app import app


@pytest.mark.timeout(180)
def test_defaults_on_one_gpu_sweep_on_gloo_and_say_so(tmp_path, monkeypatch):
    monkeypatch.setattr(backends, "backend_status", lambda name: (name in ("nccl", "gloo"), "test"))
    monkeypatch.setattr(backends, "cuda_device_count", lambda: 1)
    result = CliRunner().invoke(app, ["tune", "--top", "1", "-O", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "measured with backend gloo" in text and "--nproc=2 is invalid" not in text
    assert "1 CUDA GPU visible" in text


def test_an_explicit_nccl_sweep_on_one_gpu_is_still_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(backends, "backend_status", lambda name: (name in ("nccl", "gloo"), "test"))
    monkeypatch.setattr(backends, "cuda_device_count", lambda: 1)
    result = CliRunner().invoke(app, ["tune", "--nproc", "2", "-O", str(tmp_path / "t")], env={"COLUMNS": "200"})
    assert result.exit_code == 2 and "--nproc=2 is invalid" in result.output


def test_help_says_which_backend_the_built_in_sweep_runs_on():
    # it said 'a small built-in gloo sweep on 2 local ranks' while a machine with 2 GPUs runs it on NCCL
    result = CliRunner().invoke(app, ["tune", "--help"], env={"COLUMNS": "400"})
    text = " ".join(result.output.split())
    assert "built-in gloo sweep" not in text and "NCCL where 2 CUDA GPUs are visible, else gloo" in text
