"""The README's fit -> plan workflow on a fabric fitted without --system (no GPU): --gpu or one line."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app

runner = CliRunner()


def test_bench_fit_plan_without_a_gpu_names_it_or_refuses(tmp_path):
    results, fabric = tmp_path / "base.jsonl", tmp_path / "fabric.json"
    for collective in ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "sendrecv"):
        # up to 32 MiB, one warm-up: gloo's times must grow with size on a loaded host too (a curve whose times do
        # not is kept from prediction, bandwidth undetermined, and the plan below would have no all_reduce to
        # price). CI at a55c80b: 1 KiB..4 MiB with no warm-up measured 1 KiB (first call, scheduler noise of a few
        # ms) no faster than 4 MiB (~3.5 ms); 32 MiB takes tens of ms
        bench = runner.invoke(app, ["bench", collective, "--nproc", "2", "-b", "1K", "-e", "32M", "-f", "8",
                                    "-n", "2", "-w", "1", "-J", str(results)])
        assert bench.exit_code == 0, bench.output
    fit = runner.invoke(app, ["fit", str(results), "-O", str(fabric)])
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


def test_a_plan_on_a_fitted_fabric_says_what_was_measured_borrowed_and_extrapolated(tmp_path):
    """A plan on a fitted profile printed nothing about it: not which curves were measured (and with what), which
    came from the preset, nor that group and message sizes beyond the measured ones are extrapolated."""
    from tests.test_costmodel_cli import _write_sweep

    results, fabric = tmp_path / "ar.jsonl", tmp_path / "h100.json"
    _write_sweep(results, "all_reduce", 8, 30e-6, 300e9, backend="nccl", device="NVIDIA H100 80GB HBM3")
    assert runner.invoke(app, ["fit", str(results), "--system", "h100-hgx", "-O", str(fabric)]).exit_code == 0
    plan = ["plan", "--model", "llama3-8b", "--system", str(fabric), "--gpus", "16",
            "--layout", "tp=8,pp=1,vp=1,ep=1,mbs=1"]
    shown = runner.invoke(app, plan)
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    assert "measured all_reduce/scale_up with nccl at group size(s) 8, messages up to 16 MiB" in text
    assert "from the preset: " in text and "all_gather/scale_up" in text.split("from the preset: ")[1]
    assert "beyond group size(s) 8 and messages of 16 MiB the measured curves are extrapolated" in text
    assumptions = json.loads(runner.invoke(app, [*plan, "--json"]).output)["assumptions"]
    assert any(a.startswith("network: ") and "extrapolated" in a for a in assumptions)
    searched = runner.invoke(app, [*plan[:-2], "--top", "1"])
    assert searched.exit_code == 0 and "measured all_reduce/scale_up" in " ".join(searched.output.split())
    preset = runner.invoke(app, ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "16",
                                 "--layout", "tp=8,pp=1,vp=1,ep=1,mbs=1"])
    assert preset.exit_code == 0 and "network: " not in preset.output


def test_tune_says_which_collectives_the_measured_curves_replace(tmp_path):
    """tune's planning line said the measured curves "replace preset h100-hgx on scale_up" after a sweep of
    all_reduce alone: every other collective (all_gather, the EP all-to-all, p2p...) was still the preset's."""
    from commbench.workflows.tune import planning_fabric
    from tests.test_costmodel_cli import _write_sweep

    results = tmp_path / "ar.jsonl"
    _write_sweep(results, "all_reduce", 8, 30e-6, 300e9, backend="nccl", device="NVIDIA H100 80GB HBM3")
    _, lines, _ = planning_fabric([str(results)], "h100-hgx", 8)
    line = next(x for x in lines if x.startswith("network: measured curves"))
    assert "replace preset h100-hgx for all_reduce on scale_up" in line, line
    kept = line.split("; ")[-1]
    assert kept.endswith("stay the preset's") and "all_gather" in kept and "moe_all_to_all" in kept
    assert "all_reduce" not in kept


def _write_nccl_run(path, hostnames: list[str]) -> None:
    """A 4-rank NCCL sweep on H100s of all_reduce and sendrecv, its ranks on `hostnames` (no topology recorded: a host
    is a domain, fit_records.host_racks)."""
    from commbench.results.records import JsonlWriter, Measurement, RunHeader

    world = len(hostnames)
    with JsonlWriter(path) as writer:
        writer.write(RunHeader(run_id="hosts", started_at="t", argv=[], commbench_version="0", python_version="3",
                               torch_version=None, nccl_version="2.27.7", cuda_version=None, cupy_version=None,
                               backend="nccl", world_size=world, hostnames=hostnames,
                               devices=["NVIDIA H100 80GB HBM3"] * world, nccl_env={}, launcher="torchrun"))
        for collective, factor in (("all_reduce", 2 * (world - 1) / world), ("sendrecv", 1.0)):
            for p in range(16, 25):
                size = 1 << p
                time_s = 20e-6 + factor * size / 40e9 * (1 + 0.01 * (p % 3))
                writer.write(Measurement(run_id="hosts", collective=collective, backend="nccl", size_bytes=size,
                                         count=size // 4, dtype="float32", op="sum", in_place=False,
                                         world_size=world, group_size=world, iters=10, warmup_iters=2,
                                         time_us_median=time_s * 1e6))


def test_tune_lines_say_the_tiers_its_fabric_replaced(tmp_path):
    """A 4-rank H100 sweep on hosts n1,n1,n2,n2 (2 domains): tune's fabric held its fitted scale-out curves, while its
    lines said they replaced "nothing" and that the preset's scale-out numbers were used "because the sweep ran on 4
    GPUs, inside one 8-GPU domain" (coverage counted scale-out only when the world exceeded the target's domain; the
    fit places a curve by the domains its group spans in the results' own headers). Every line now says the tiers
    and collectives the planned fabric (fabric.json) holds, across hosts and inside one."""
    from commbench.workflows.tune import planning_fabric

    for hosts, measured_tier, preset_tier in ((["n1", "n1", "n2", "n2"], "scale_out", "scale_up"),
                                              (["n1"] * 4, "scale_up", "scale_out")):
        results = tmp_path / f"{measured_tier}.jsonl"
        _write_nccl_run(results, hosts)
        fabric, lines, _ = planning_fabric([str(results)], "h100-hgx", 16)
        fitted = {(c.collective, c.tier) for c in fabric.curves if c.source.startswith("fitted")}
        assert fitted == {("all_reduce", measured_tier), ("sendrecv", measured_tier)}, fitted
        replaced = next(x for x in lines if x.startswith("network: measured curves"))
        assert f"replace preset h100-hgx for all_reduce, sendrecv on {measured_tier}; " in replaced, replaced
        assert preset_tier not in replaced, replaced
        kept = replaced.split("; ", 1)[1]
        assert kept.startswith(f"on {measured_tier} ") and kept.endswith("stay the preset's")
        held = {c.collective for c in fabric.curves if c.tier == measured_tier} - {"all_reduce", "sendrecv"}
        assert set(kept[len(f"on {measured_tier} "):-len(" stay the preset's")].split(", ")) == held
        preset = next(x for x in lines if x.startswith("network: preset"))
        assert f"used for {preset_tier} (" in preset and measured_tier not in preset.split(" because ")[0], preset
        assert "inside one 8-GPU domain" not in preset
        assert ("spanning several scale-up domains" in preset) == (measured_tier == "scale_out"), preset
