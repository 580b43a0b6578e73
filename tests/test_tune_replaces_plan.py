"""A plan folder holds one plan's files: re-running `tune`/`plan -O` into it never leaves an earlier
plan's megatron_args.txt or TorchTitan file beside the new plan.json, and a tune stopped during its
sweep leaves no plan or fabric made from the measurements it has just discarded."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

PLAN_DSV3 = ["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256", "--gbs", "4096",
             "--precision", "mxfp8", "--top", "1"]
# release 26.02.01's Megatron-LM (megatron-core 0.16.1) cannot build gpt-oss's YaRN RoPE: this plan has no
# megatron_args.txt or launch.env
GPT_OSS = ["--model", "gpt-oss-120b", "--framework", "torchtitan", "--precision", "fp8", "--system", "gb200-nvl72", "--gpus", "64",
           "--top", "1", "--software", "26.02.01"]


def test_plan_out_removes_the_earlier_plans_files(tmp_path):
    first = CliRunner().invoke(app, [*PLAN_DSV3, "-O", str(tmp_path)])
    assert first.exit_code == 0, first.output
    assert (tmp_path / "megatron_args.txt").exists() and (tmp_path / "launch.env").exists()
    (tmp_path / "notes.txt").write_text("mine\n")
    second = CliRunner().invoke(app, ["plan", *GPT_OSS, "-O", str(tmp_path)])
    assert second.exit_code == 0, second.output
    assert json.loads((tmp_path / "plan.json").read_text())["inputs"]["model"] == "gpt-oss-120b"
    # the DeepSeek-V3 arguments for 256 GPUs were left beside the gpt-oss plan
    assert not (tmp_path / "megatron_args.txt").exists() and not (tmp_path / "launch.env").exists()
    assert (tmp_path / "torchtitan_args.txt").exists() and (tmp_path / "notes.txt").read_text() == "mine\n"


def test_remove_plan_files_keeps_files_commbench_did_not_write(tmp_path):
    from commbench.planner.emit.plan_files import remove_plan_files

    (tmp_path / "megatron_args.txt").write_text("my own args\n")
    (tmp_path / "launch.env").write_text("# commbench plan: launch environment\n")
    assert remove_plan_files(tmp_path) == ["launch.env"]
    assert (tmp_path / "megatron_args.txt").read_text() == "my own args\n"


@pytest.mark.timeout(180)
def test_tune_rerun_and_interrupted_sweep_leave_no_stale_plan(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["commbench", "tune"])  # the header tune checks before replacing its sweep
    out = tmp_path / "tune"
    first = CliRunner().invoke(app, ["tune", "-O", str(out), "--top", "1"])
    assert first.exit_code == 0, first.output
    sweep = tmp_path / "sweep.jsonl"
    sweep.write_bytes((out / "tune-sweep.jsonl").read_bytes())
    # OUT's own tune-sweep.jsonl is not what this plan is fitted from: refused, deleted with --force (probe AW F7)
    refused = CliRunner().invoke(app, ["tune", "-O", str(out), "--results", str(sweep), *GPT_OSS])
    assert refused.exit_code == 2 and "pass --force to delete them" in " ".join(refused.output.split())
    second = CliRunner().invoke(app, ["tune", "-O", str(out), "--results", str(sweep), "--force", *GPT_OSS])
    assert second.exit_code == 0, second.output
    assert not (out / "tune-sweep.jsonl").exists()
    assert json.loads((out / "plan.json").read_text())["inputs"]["model"] == "gpt-oss-120b"
    assert not (out / "megatron_args.txt").exists() and not (out / "launch.env").exists()

    import commbench.cli.tune as tune_cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tune_cli, "_run_sweep", interrupted)
    third = CliRunner().invoke(app, ["tune", "-O", str(out), "--top", "1"])
    assert third.exit_code != 0 and "already holds" not in third.output, third.output
    # the sweep file is emptied when the sweep starts: the plan and fabric made from the old one went with it
    # (the empty tune-sweep.jsonl it claimed is removed with its lock where this run made it)
    assert [p.name for p in out.iterdir() if p.name != "tune-sweep.jsonl"] == []
