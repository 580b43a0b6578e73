"""calibrate prices a run with its framework's charges, as `plan --framework` does for the same layout (README:
plan --layout and calibrate --evaluate give the same number for the same layout): a TorchTitan log is priced as
`plan --framework torchtitan` prices its layout (FSDP2's fp32 gradients reduce-scattered every micro-batch without
PP, frameworks.TITAN_DP_WITHOUT_PP), not as Megatron-LM would run it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

P = "[rank0]:[titan] 2026-01-10 10:00:0"


def _titan_log(flavor: str, module: str, *, tp: int, pp: int, ep: int, shard: int, mbs: int, gbs: int, ac: str,
               tps: float) -> str:
    """A TorchTitan 0.1/0.2 log ('Running with args') of 16 GPUs at `tps` tokens/s/GPU."""
    cfg = {"job": {"description": "q"}, "model": {"name": module, "flavor": flavor, "converters": []},
           "training": {"local_batch_size": mbs if pp == 1 else gbs // shard, "global_batch_size": gbs, "seq_len": 4096, "steps": 100,
                        "mixed_precision_param": "bfloat16"},
           "parallelism": {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": shard,
                           "tensor_parallel_degree": tp, "pipeline_parallel_degree": pp,
                           "context_parallel_degree": 1, "expert_parallel_degree": ep,
                           "pipeline_parallel_microbatch_size": mbs,
                           "fsdp_reshard_after_forward": "default"},
           # 0.1/0.2 print selective_ac_option; "op" is what emit/torchtitan.py writes for selective
           "activation_checkpoint": {"mode": ac, **({"selective_ac_option": "op"} if ac == "selective" else {})}}
    lines = [f"{P}0,000 - root - INFO - Running with args: {cfg!r}",
             f"{P}0,500 - root - INFO - CUDA capacity: NVIDIA H100 80GB HBM3 with 79.11GiB memory"]
    lines += [f"{P}{s},000 - root - INFO - step:  {s}  loss:  8.1234  grad_norm:  1.2345  memory: 60.12GiB(75.00%)  "
              f"tps: {900 if s == 1 else round(tps):,}  tflops: 100.00  mfu: 10.00%" for s in (1, 2, 3, 4)]
    return "\n".join(lines) + "\n"


CASES = [  # (zoo model, TorchTitan module and flavor, layout, recompute TorchTitan's config function sets)
    # FSDP over all 16 (the log's dp_shard) pinned: with fix-G11's memory the search would take HSDP over 2 replicas
    ("qwen3-30b-a3b", "qwen3", "30B-A3B", dict(tp=1, pp=1, ep=8, mbs=2, gbs=128, fsdp_replicas=1), "full"),
    ("llama3-8b", "llama3", "8B", dict(tp=2, pp=2, ep=1, mbs=1, gbs=64), "selective"),
]


@pytest.mark.parametrize("model, module, flavor, lay, ac", CASES)
def test_a_torchtitan_log_is_priced_as_plan_framework_torchtitan_prices_its_layout(tmp_path, model, module, flavor,
                                                                                      lay, ac):
    runner = CliRunner()
    # the log's recompute pinned too: since STEP_MODEL 2026-12-06.20 (fix-G11: full recompute's re-run layer and the
    # logits are charged as the larger, not both) the search has other choices that fit
    layout = ",".join(f"{k}={v}" for k, v in dict(lay, vp=1, precision="bf16", recompute=ac).items())
    plan = runner.invoke(app, ["plan", "--framework", "torchtitan", "--model", model, "--system", "h100-hgx",
                               "--gpus", "16", "--seq-len", "4096", "--layout", layout, "--json"])
    assert plan.exit_code == 0, plan.output
    planned = json.loads(plan.output)["predicted"]["tokens_per_s_per_gpu"]
    log = tmp_path / "tt.log"
    shard = 16 // (lay["tp"] * lay["pp"])
    log.write_text(_titan_log(flavor, module, tp=lay["tp"], pp=lay["pp"], ep=lay["ep"], shard=shard,
                              mbs=lay["mbs"], gbs=lay["gbs"], ac=ac, tps=planned))
    ev = runner.invoke(app, ["calibrate", "--evaluate", str(log), "--model", model, "--system", "h100-hgx",
                             "--json"])
    assert ev.exit_code == 0, ev.output
    row = json.loads(ev.output)["rows"][0]
    assert row["predicted_tokens_per_s_per_gpu"] == pytest.approx(planned, rel=1e-9)
    assert abs(row["error_pct"]) < 0.01   # the log's tps is the plan's figure rounded to a whole token


def test_a_json_row_that_says_torchtitan_is_priced_as_torchtitan_and_megatron_otherwise():
    from commbench.planner.calibrate.published import predict_runs, published_runs
    row = dict(model="qwen3-30b-a3b", gpu="h100-hgx", num_gpus=16, seq_len=4096, gbs=128, mbs=2, tp=1, pp=1, ep=8,
               precision="BF16", tokens_per_s_per_gpu=6000.0, notes="FSDP=16", release="user",
               recipe=dict(recompute="full"))
    meg, titan = predict_runs(published_runs((row, dict(row, framework="torchtitan")))).predicted_tokens
    assert titan < meg   # TorchTitan reduce-scatters fp32 gradients every micro-batch without PP


def test_a_json_row_s_framework_is_read_and_checked(tmp_path):
    row = dict(model="qwen3-30b-a3b", gpu="h100-hgx", num_gpus=16, seq_len=4096, gbs=128, mbs=2, tp=1, pp=1, ep=8,
               precision="BF16", tokens_per_s_per_gpu=6000.0, notes="FSDP=16", release="user",
               recipe=dict(recompute="full"), framework="torchtitan")
    path = tmp_path / "runs.json"
    path.write_text(json.dumps([row]))
    ok = CliRunner().invoke(app, ["calibrate", "--evaluate", str(path)])
    assert ok.exit_code == 0 and "not read" not in ok.output, ok.output
    path.write_text(json.dumps([dict(row, framework="nemo")]))
    bad = CliRunner().invoke(app, ["calibrate", "--evaluate", str(path)])
    assert bad.exit_code == 2 and "field 'framework' = 'nemo'; allowed: megatron, torchtitan" in bad.output, bad.output
