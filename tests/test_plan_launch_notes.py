"""A plan's framework notes (what its launch needs, or trains otherwise than the model asked for) reach the terminal:
they were only in plan.json, so `plan --model hf:Llama-3.2-1B` printed '--rope-scaling-factor 32' with nothing saying
Megatron-LM core_v0.16.1's pretrain_gpt.py trains factor 8 (gpt_builder passes GPTModel no factor)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from commbench.cli.app import app

LLAMA_32 = Path(__file__).parent / "data" / "hf" / "Llama-3.2-1B-Instruct"
ARGS = ["plan", "--model", f"hf:{LLAMA_32}", "--system", "h100-hgx", "--gpus", "8"]


def test_table_view_prints_the_megatron_notes_under_its_command():
    result = CliRunner().invoke(app, ARGS, env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Megatron-LM: "))
    assert "--rope-scaling-factor 32" in lines[at]
    assert lines[at + 1].startswith("  note: ") and "rope_scaling_factor 32" in lines[at + 1] \
        and "GPTModel's default 8" in lines[at + 1]


def test_emitted_launch_line_is_alone_on_stdout_and_the_notes_go_to_stderr():
    # stdout: one line to copy, launch.env's variables (none here), the script and its flags (test_launch_connections)
    result = CliRunner().invoke(app, ARGS + ["--emit", "megatron"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "note" not in result.stdout and result.stdout.startswith("pretrain_gpt.py --num-layers 16")
    assert len(result.stdout.strip().splitlines()) == 1
    assert result.stderr.startswith("note: ") and "rope_scaling_factor 32" in result.stderr


def test_a_model_the_framework_builds_as_asked_has_no_note():
    result = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8",
                                      "--emit", "megatron"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    # the notes every Megatron launch has (the loss kernel the prediction charges, the release's core), none of
    # the model's
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert notes and all(line.startswith(("note: loss:", "note: the Megatron-LM arguments are"))
                         for line in notes), result.stderr


def test_table_view_prints_the_torchtitan_notes_too(tmp_path):
    """`tune` (and `plan --out`) write torchtitan_args.txt beside megatron_args.txt, and `--framework torchtitan`
    plans for TorchTitan; its notes (deepseek-v3: 'TorchTitan's deepseek-v3 config trains without the 1 MTP layer(s)
    the prediction includes') were only in plan.json: the terminal printed the Megatron notes alone."""
    result = CliRunner().invoke(app, ["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256",
                                      "--framework", "torchtitan", "--top", "1", "-O", str(tmp_path)],
                                env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("TorchTitan 0.3.0"))
    assert "torchtitan_args.txt" in lines[at]
    assert any(line.startswith("  note: ") and "without the 1 MTP layer(s)" in line for line in lines[at + 1:])
