"""Precision is a fact of the GPU, and --framework decides what the search proposes (issue 25), as a
user meets them on the command line: one-line refusals with exit 2, the default precision, plan.json's
framework record, TorchTitan's CUDA-graph rule."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

runner = CliRunner()


def plan(*args: str):
    return runner.invoke(app, ["plan", *args])


@pytest.mark.parametrize("argv", [
    ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8", "--precision", "nvfp4"],
    ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8", "--layout", "tp=1,pp=1,vp=1,ep=1,mbs=1,precision=mxfp8"],
    ["tune", "--model", "qwen3-235b-a22b", "--system", "h100-hgx", "--gpus", "64", "--precision", "mxfp8"],
])
def test_unsupported_precision_is_one_line_naming_the_gpu(argv, tmp_path):
    res = runner.invoke(app, argv + ["--out", str(tmp_path / "out")])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "H100 supports bf16, fp8" in lines[0] and "Traceback" not in res.output
    assert not (tmp_path / "out" / "tune-sweep.jsonl").exists()  # tune refuses before sweeping


def test_default_precision_is_the_gpus_best_recipe_precision(tmp_path):
    for system, gpus, expected in (("h100-hgx", "8", "fp8"), ("gb200-nvl72", "8", "mxfp8")):
        res = plan("--model", "llama3-8b", "--system", system, "--gpus", gpus, "--gbs", "64", "--out", str(tmp_path / system))
        assert res.exit_code == 0, res.output
        assert json.loads((tmp_path / system / "plan.json").read_text())["inputs"]["precision"] == expected
    assert "mxfp8 on Blackwell" in plan("--help").output.replace("\n", " ")


def test_torchtitan_framework_plans_what_torchtitan_runs(tmp_path):
    res = plan("--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "16", "--gbs", "256",
               "--layout", "pp=2,vp=2", "--framework", "torchtitan", "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert doc["framework"] == {"name": "torchtitan", "version": "torchtitan 0.3.0"}
    lay = doc["layout"]
    assert (lay["pp"], lay["cuda_graph"], lay["etp"], lay["recompute"]) == (2, "none", 1, "full")
    assert "--training.disable_cuda_graphs" in (tmp_path / "torchtitan_args.txt").read_text()
    meg = plan("--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "16", "--gbs", "256", "--json")
    assert json.loads(meg.output)["framework"]["name"] == "megatron"


@pytest.mark.parametrize("args,needle", [
    (["--model", "gpt-oss-120b", "--system", "gb200-nvl72", "--gpus", "64", "--software", "25.09"],
     "(release 25.09's, megatron-core 0.14) cannot build gpt-oss-120b"),   # nor its Megatron-Bridge: no GPT-OSS model
    (["--model", "mixtral-8x7b", "--system", "h100-hgx", "--gpus", "64", "--framework", "torchtitan"], "TorchTitan 0.3.0 has no mixtral-8x7b"),
    (["--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8", "--framework", "jax"], "--framework='jax' is invalid"),
    (["--model", "qwen3-30b-a3b", "--system", "gb200-nvl72", "--gpus", "8", "--framework", "torchtitan",
      "--precision", "nvfp4"], "no NVFP4 grouped-experts converter"),
])
def test_framework_refusals_are_one_line(args, needle):
    res = plan(*args)
    assert res.exit_code == 2 and needle in res.output and "Traceback" not in res.output, res.output
    assert len([ln for ln in res.output.splitlines() if ln.strip()]) == 1


def test_a_run_in_a_precision_its_gpu_lacks_is_refused_in_one_line(tmp_path):
    """calibrate --evaluate predicts each run: an H100 run 'in MXFP8' is a typo, refused by name."""
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps([{"model": "llama3-8b", "gpu": "h100", "num_gpus": 8, "precision": "MXFP8",
                                 "seq_len": 8192, "gbs": 128, "mbs": 1, "tp": 1, "pp": 1, "cp": 1,
                                 "tokens_per_s_per_gpu": 10000.0}]))
    res = runner.invoke(app, ["calibrate", "--evaluate", str(runs)])
    assert res.exit_code == 2 and "H100 supports bf16, fp8" in res.output and "Traceback" not in res.output, res.output
