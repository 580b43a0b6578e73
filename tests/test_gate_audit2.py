"""Gate audit 2: inputs a user's CI or tuning acts on, read as what is true (calibrate's training logs, compare's
results files)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.calibrate.runlogs import parse_torchtitan_log

DATA = Path(__file__).parent / "data"
TITAN = DATA / "torchtitan_qwen3_30b_b200.log"


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})


def _titan_steps(*lines: tuple[str, int, int]) -> str:
    """The fixture's config with metrics lines ('step' or 'validate', step, tps) in torchtitan 0.3.0's
    components/metrics.py format (log and log_validation)."""
    text = TITAN.read_text().splitlines(keepends=True)
    head = "".join(line for line in text if "step:" not in line)
    out = []
    for kind, step, tps in lines:
        if kind == "step":
            out.append(f"[rank0]:[titan] 2026-01-10 10:00:01,000 - root - INFO - \x1b[31mstep: {step:2}  \x1b[32mloss: "
                       f" 8.1234  \x1b[33mgrad_norm:  1.2345  \x1b[96mmemory: 120.12GiB(64.58%)  \x1b[34mtps: {tps:,}  "
                       "\x1b[36mtflops: 812.34  \x1b[35mmfu: 16.25%\x1b[39m\n")
        else:
            out.append(f"[rank0]:[titan] 2026-01-10 10:00:01,500 - root - INFO - \x1b[33mvalidate step: {step:2}  "
                       f"\x1b[32mloss:  8.1000  \x1b[96mmemory: 120.12GiB(64.58%)  \x1b[34mtps: {tps:,}\x1b[39m\n")
    return head + "".join(out)


def test_torchtitan_validation_lines_are_not_training_steps():
    # validator.freq 10 (its default) with metrics.log_freq 10: 'validate step: 10' after 'step: 10' was refused as
    # "step numbers go back (step 10, then step 10) ...: two runs in one log"
    aligned = _titan_steps(("step", 1, 9_012), ("validate", 1, 70_000), ("step", 10, 24_300), ("validate", 10, 70_000),
                           ("step", 20, 24_500), ("validate", 20, 70_000))
    row = parse_torchtitan_log(aligned, source="t", model="qwen3-30b-a3b", gpu="b200-hgx", num_gpus=8)
    assert row["tokens_per_s_per_gpu"] == pytest.approx(24_400.0)
    assert "3 validation line(s) left out" in row["notes"] and "validate step:" in row["left_out"]
    # validator.freq 5: the forward-only pass's 70,000 tokens/s was a training step (median 24,475, '7 steps')
    between = _titan_steps(("step", 1, 9_012), ("step", 10, 24_300), ("validate", 15, 70_000), ("step", 20, 24_400),
                           ("step", 30, 24_500), ("validate", 35, 71_000), ("step", 40, 24_450))
    row = parse_torchtitan_log(between, source="t", model="qwen3-30b-a3b", gpu="b200-hgx", num_gpus=8)
    assert row["tokens_per_s_per_gpu"] == pytest.approx(24_425.0)
    assert row["notes"].startswith("TorchTitan log; 5 steps")


def test_the_cli_names_the_validation_lines_left_out(tmp_path):
    log = tmp_path / "titan.log"
    log.write_text(_titan_steps(("step", 1, 9_012), ("step", 10, 24_300), ("validate", 10, 70_000),
                                ("step", 20, 24_500)))
    result = _invoke("calibrate", "--evaluate", str(log), "--model", "qwen3-30b-a3b", "--system", "b200-hgx",
                     "--gpus", "8")
    assert result.exit_code == 0, result.output
    assert f"note: {log}: 1 validation line(s)" in result.output


@pytest.mark.parametrize("label", ["[default0]:", "[rank0]: ", "0: ", "  3: "])
def test_a_megatron_log_under_a_launchers_rank_label_is_read(label):
    # torchrun --tee's '[default0]:' and srun -l's '0: ' before every line: the arguments lines were not read and
    # the log was refused as having "no arguments block ... run with the default argument printing on"
    from commbench.planner.calibrate.runlogs import parse_megatron_log
    text = (DATA / "megatron_deepseek_v3_gb300.log").read_text()
    plain = parse_megatron_log(text, source="m", model="deepseek-v3", gpu="gb300-nvl72")
    labelled = "".join(label + line for line in text.splitlines(keepends=True))
    row = parse_megatron_log(labelled, source="m", model="deepseek-v3", gpu="gb300-nvl72")
    assert row["tokens_per_s_per_gpu"] == pytest.approx(plain["tokens_per_s_per_gpu"])
    assert row["recipe"] == plain["recipe"] and row["left_out"] == plain["left_out"]


@pytest.mark.parametrize("role", ["rank", "default"])
def test_a_torchtitan_log_of_two_ranks_interleaved_is_read_per_rank(role):
    # plain torchrun --tee labels lines '[default0]:', '[default1]:' (its --role; run_train.sh passes --role rank):
    # rank 1's 'step: 1' after rank 0's was refused as "step numbers go back ...: two runs in one log"; with
    # '[rankN]:' the notes said '8 steps' for 4 steps of 2 ranks
    out = []
    for line in TITAN.read_text().splitlines(keepends=True):
        line = line.replace("[rank0]:", f"[{role}0]:")
        out += [line, line.replace(f"[{role}0]:", f"[{role}1]:")] if "step:" in line else [line]
    row = parse_torchtitan_log("".join(out), source="t", model="qwen3-30b-a3b", gpu="b200-hgx", num_gpus=8)
    assert row["tokens_per_s_per_gpu"] == pytest.approx(24_420.0)
    assert row["notes"].startswith("TorchTitan log; 4 steps (logged by 2 ranks)")
