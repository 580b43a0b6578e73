"""Non-finite, huge and silently replaced values: one line naming the option (or file field), exit 2, before launch."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


def sweep_with(tmp_path: Path, run_lines: str) -> str:
    path = tmp_path / "s.toml"
    path.write_text(f'[sweep]\nname = "x"\n[[run]]\ncollective = "all_reduce"\n{run_lines}\n')
    return str(path)


@pytest.mark.parametrize("args,must", [
    (["bench", "all_reduce", "--timeout", "nan"], "--timeout=nan is invalid"),
    (["bench", "all_reduce", "--timeout", "inf"], "--timeout=inf is invalid"),
    (["bench", "all_reduce", "--timeout", "1e20"], "--timeout=1e+20 is invalid"),
    (["bench", "all_reduce", "-f", "nan"], "--step-factor=nan is invalid"),
    (["bench", "all_reduce", "-b", "8", "-e", "1T", "-i", "1"], "at most 10,000 per range"),
    (["bench", "all_reduce", "-b", "64T", "-e", "64T"], "the largest size, 64 TiB, is too large here"),
    # '1MB' was read as 1 MiB (commbench prints 10^6 B as '1 MB'), '1Mb' (megabits) too, '1.3K' as 1331 B
    (["bench", "all_reduce", "-b", "1MB"], "--min-bytes='1MB' is invalid: MB is ambiguous"),
    (["bench", "all_reduce", "-e", "1Mb"], "--max-bytes='1Mb' is invalid: a lower-case b means bits"),
    (["predict", "-c", "all_reduce", "-g", "8", "--system", "h100-hgx", "-b", "1.3K"],
     "--min-bytes='1.3K' is invalid: not a whole number of bytes (1331.2 B)"),
    (["predict", "-c", "all_reduce", "-g", "8", "--system", "h100-hgx", "-f", "1.0000001", "-e", "1T"], "at most 10,000"),
    (["predict", "-c", "moe_all_to_all", "-g", "8", "--system", "h100-hgx", "--imbalance", "nan"], "--imbalance=nan"),
    (["nccl-tuner", "--system", "nope"], "--system='nope' is invalid: one of gb300-nvl72"),  # not "--gpus is missing"
    # nNodes -1 in a rule matches every node count (scales never predicted), 0 none; at most one node per rank
    (["nccl-tuner", "--system", "h100-hgx", "--gpus", "16", "--nodes", "-1"], "--nodes=-1 is invalid: from 1 to --gpus"),
    (["nccl-tuner", "--system", "h100-hgx", "--gpus", "16", "--nodes", "0"], "--nodes=0 is invalid"),
    (["nccl-tuner", "--system", "h100-hgx", "--gpus", "16", "--nodes", "17"], "--nodes=17 is invalid"),
    (["nccl-tuner", "--system", "h100-hgx", "--gpus", "99999999"], "--gpus=99999999 is invalid"),
    (["nccl-tuner", "--system", "h100-hgx", "--gpus", "16", "--channels", "65"], "--channels=65 is invalid: from 0 to 64"),
    (["nccl-tuner", "--system", "h100-hgx", "--gpus", "16", "--min-gain", "nan"], "--min-gain=nan is invalid"),
    # the busiest of 8 ranks receives at most 8x the mean: 100 is no traffic pattern
    (["predict", "-c", "moe_all_to_all", "-g", "8", "--system", "h100-hgx", "--imbalance", "100"],
     "--imbalance=100.0 is invalid: a number from 1 to the group size, 8"),
    (["bench", "grad_reduce_scatter", "--rs-impl", "foo"], "--rs-impl='foo' is invalid: allowed: auto, native, pairwise, duplex"),
    (["bench", "all_reduce", "--rs-impl", "native"], "all_reduce has no reduce-scatter implementation"),
    (["emulate", "--racks", "3", "--ranks-per-rack", "100", "--", "bench", "all_reduce"], "is too many"),
    (["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256", "--gbs", "0"], "--gbs=0"),
    (["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256", "--seq-len", "0"], "--seq-len=0"),
    # --layout gbs= is bounded; --gbs 99999999999 was planned (and written as --global-batch-size)
    (["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8", "--gbs", "99999999999"],
     "--gbs=99999999999 is invalid: a positive global batch size (sequences) up to 16,777,216"),
    # NaN passed the >= 1 check and was planned (inf divided inf by inf in the kernel model)
    (["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "16", "--moe-capacity-factor", "nan"],
     "--moe-capacity-factor=nan is invalid: a number from 1 to 4,096"),
    (["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "16", "--moe-capacity-factor", "inf"],
     "--moe-capacity-factor=inf is invalid"),
    (["fit", "x.jsonl", "--racks", "2"], "--racks=2 needs --system"),
    (["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256",
      "--layout", "tp=99999999999999999999"], "up to 16,777,216"),
    (["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256",
      "--layout", "tp=1,pp=2,vp=8,ep=99999999999999999999,mbs=1,gbs=4096"], "up to 16,777,216"),
    (["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "99999999999999999999"], "--gpus="),
    (["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256", "--precision", "fp4",
      "--layout", "ep=32"], "--precision='fp4' is invalid"),
    (["import", "nccl-tests", "x.log", "-O", "o.jsonl", "--collective", "foo"], "--collective='foo' is invalid"),
])
def test_bad_option_values_are_one_line(args, must):
    started = time.monotonic()
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1, result.output
    assert must in result.output and time.monotonic() - started < 10


@pytest.mark.parametrize("run_lines,must", [
    ("sizes = [8]\ntimeout_s = nan", "timeout_s=nan is invalid"),
    ("sizes = [8]\ntimeout_s = inf", "timeout_s=inf is invalid"),
    ('sizes = { min = "8", max = "1K", factor = nan }', "sizes.factor=nan is invalid"),
    ('sizes = { min = "8", max = "1T", step = "1" }', "at most 10,000 per range"),
])
def test_bad_sweep_values_name_the_file_field(tmp_path, run_lines, must):
    result = runner.invoke(app, ["sweep", sweep_with(tmp_path, run_lines), "--dry-run"])
    assert result.exit_code == 2 and must in result.output, result.output
    assert "continue with" not in result.output.lower()


def test_nproc_and_world_size_zero_are_refused(tmp_path):
    sweep = sweep_with(tmp_path, "sizes = [8]")
    for args in (["sweep", sweep, "--nproc", "0", "-O", str(tmp_path / "o.jsonl")], ["sweep", sweep, "--dry-run", "--world-size", "0"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and "=0 is invalid" in result.output, result.output
    assert not (tmp_path / "o.jsonl").exists()


def test_usage_errors_are_one_line_with_the_value_typed():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "commbench", "bench", "all_reduce", "--nproc", "lots"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "'--nproc'" in proc.stderr and "(got 'lots')" in proc.stderr


def test_rank_outside_world_is_refused(monkeypatch):
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "2")
    result = runner.invoke(app, ["bench", "all_reduce"])
    assert result.exit_code == 2 and "RANK=5 with WORLD_SIZE=2 is invalid" in result.output


def test_moe_tokens_text_is_shown_whole(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('[sweep]\nname = "m"\n[[run]]\ncollective = "moe_all_to_all"\ntokens_per_rank = "lots"\n')
    result = runner.invoke(app, ["sweep", str(path), "--dry-run"])
    assert result.exit_code == 2 and "tokens_per_rank='lots' is invalid" in result.output
