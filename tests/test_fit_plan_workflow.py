"""The README's fit -> plan workflow on a fabric fitted without --system (no GPU): --gpu or one line."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app

runner = CliRunner()


def test_bench_fit_plan_without_a_gpu_names_it_or_refuses(tmp_path):
    results, fabric = tmp_path / "base.jsonl", tmp_path / "fabric.json"
    for collective in ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "sendrecv"):
        bench = runner.invoke(app, ["bench", collective, "--nproc", "2", "-b", "1K", "-e", "1M", "-f", "8",
                                    "-n", "2", "-w", "0", "-J", str(results)])
        assert bench.exit_code == 0, bench.output
    fit = runner.invoke(app, ["fit", str(results), "-o", str(fabric)])
    assert fit.exit_code == 0, fit.output
    assert json.loads(fabric.read_text())["gpu"] is None
    # one machine measured: plan inside one scale-up domain (2 GPUs, TP=2)
    plan = ["plan", "--model", "mixtral-8x22b", "--system", str(fabric), "--gpus", "2",
            "--layout", "tp=2,pp=1,vp=1,ep=1,mbs=1,gbs=64"]
    refused = runner.invoke(app, plan)
    assert refused.exit_code == 2
    assert len(refused.output.strip().splitlines()) == 1 and "names no GPU" in refused.output
    wrong = runner.invoke(app, [*plan, "--gpu", "tpu9"])
    assert wrong.exit_code == 2 and "--gpu='tpu9' is invalid" in wrong.output
    planned = runner.invoke(app, [*plan, "--gpu", "gb300", "--json"])
    assert planned.exit_code == 0, planned.output
    assert json.loads(planned.output)["kind"] == "predicted"
    search = runner.invoke(app, ["plan", "--model", "mixtral-8x22b", "--system", str(fabric), "--gpus", "2",
                                 "--layout", "tp=2"])
    assert search.exit_code == 2 and "names no GPU" in search.output


def test_gpu_option_is_refused_for_a_preset():
    result = runner.invoke(app, ["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256",
                                 "--gpu", "h100", "--layout", "ep=32"])
    assert result.exit_code == 2 and "--gpu='h100' is invalid" in result.output
