"""The loss stage's cross entropy in time (step/loss_time.py): a Megatron-LM launch at 26.06.01 and later runs
megatron-core's native fused cross entropy (its Megatron-LM refuses te), whose HBM traffic over Transformer Engine's
kernel (the one the fitted terms price: every published run ran it) the step time adds on the loss stage; a launch that
runs te, and the published rows, add nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.planner import Layout, load_model
from commbench.planner.calibrate.published import _preset, published_runs, run_megatron_core
from commbench.planner.layout.spec import LayoutArrays
from commbench.planner.layout.split import loss_stage_share, stage_imbalance
from commbench.planner.step import kernels, loss_time
from commbench.planner.step.evaluate import evaluate_layouts
from commbench.planner.step.loss_memory import run_loss
from commbench.planner.step.terms import CALIBRATED

BASE = ["plan", "--model", "qwen3-30b-a3b", "--system", "gb200-nvl72", "--gpus", "8", "--precision", "bf16",
        "--layout", "tp=1,pp=1,vp=1,ep=8,mbs=1", "--json"]


def _plan(software: str) -> dict:
    done = CliRunner().invoke(app, [*BASE, "--software", software], env={"COLUMNS": "400"})
    assert done.exit_code == 0, done.output
    return json.loads(done.output)


def test_the_bytes_per_logit_counted_from_the_kernels():
    # TE 2.16/2.17 triton: 2 (online softmax read) + 2 + 2 (read, in-place bf16 gradient) + 4 (element_mul in place);
    # native (megatron-core 0.18.2 / 0.19.0, torch.compile'd): 2 + 4 (.float()), 8 (sub, exp in place), 8 (div_ in
    # place), backward 4 + 4 + 2 (the saved fp32 softmax read and written back, the bf16 gradient)
    assert loss_time.LOSS_KERNEL_BYTES_PER_LOGIT == {"te": 10.0, "native": 32.0}


def test_a_native_launch_is_longer_than_the_same_layout_at_26_06_by_the_priced_traffic():
    """26.08 (native) vs 26.06 (te), the same pinned layout on one pipeline rank (the loss stage is the busiest): the
    step is longer by micro-batches x tokens x vocabulary rows x (32 - 10) B at the step model's memory-bound rate,
    and the plan's loss note says native is priced."""
    te_doc, native_doc = _plan("26.06"), _plan("26.08")
    assert (te_doc["inputs"]["loss"], native_doc["inputs"]["loss"]) == ("te", "native")
    gpu = load_preset("gb200-nvl72", num_gpus=8).gpu
    rate = gpu.hbm_tbps * 1e12 * CALIBRATED.hbm_efficiency * kernels.sustained_sm_rate(gpu)
    p = native_doc["predicted"]
    tokens_mb = 1 * native_doc["inputs"]["seq_len"]
    expected = p["num_microbatches"] * tokens_mb * 151936 * (32.0 - 10.0) / rate   # 151936: a multiple of 128 already
    assert expected > 0
    assert p["loss_kernel_extra_s"] == pytest.approx(expected, rel=1e-9)
    assert te_doc["predicted"]["loss_kernel_extra_s"] == 0.0
    assert p["step_s"] - te_doc["predicted"]["step_s"] == pytest.approx(expected, rel=1e-6)
    (note,) = [n for n in native_doc["megatron"]["notes"] if n.startswith("loss: --cross-entropy-fusion-impl native")]
    assert "the plan's step time prices native" in note and "22 B per logit" in note
    assert "TE's faster" not in note


def test_the_loss_rank_pays_it_where_it_is_not_the_busiest():
    """With PP the extra lands on the last rank: the step grows by at most the whole extra, and by what the loss
    rank then exceeds the busiest rank by."""
    model, fabric = load_model("qwen3-30b-a3b"), load_preset("h100-hgx", num_gpus=16)
    lays = [Layout.for_world(16, tp=1, pp=pp, ep=8, etp=1, mbs=1, gbs=128) for pp in (1, 2)]
    arr = LayoutArrays.from_layouts(lays)
    native = evaluate_layouts(model, fabric, arr, seq_len=4096, loss="native")
    te = evaluate_layouts(model, fabric, arr, seq_len=4096, loss="te")
    full = loss_time.loss_extra_bytes_per_microbatch(model, tp=1, cp=1, tokens_mb=4096.0, loss="native") \
        / (fabric.gpu.hbm_tbps * 1e12 * CALIBRATED.hbm_efficiency * kernels.sustained_sm_rate(fabric.gpu))
    assert np.all(te.loss_kernel_extra_s == 0.0)
    assert native.loss_kernel_extra_s[0] == pytest.approx(native.num_microbatches[0] * full)
    assert 0.0 <= native.loss_kernel_extra_s[1] <= native.num_microbatches[1] * full * (1 + 1e-12)
    pp, vp = np.array([1, 2]), np.array([1, 1])
    share, busiest = loss_stage_share(model, pp, vp), stage_imbalance(model, pp, vp)
    assert share[0] == busiest[0] == 1.0 and share[1] <= busiest[1]
    assert np.all(native.step_s >= te.step_s)


def test_published_rows_add_nothing():
    """Calibration rows are predicted with the TE cross entropy they ran: no extra loss time."""
    runs = [r for r in published_runs() if r.layout is not None][:4]
    assert runs
    for run in runs:
        bd = evaluate_layouts(run.model, _preset(run.preset, int(run.row["num_gpus"])),
                              LayoutArrays.from_layouts([run.layout]), seq_len=int(run.row["seq_len"]),
                              megatron_core=run_megatron_core(run.row), loss=run_loss("megatron"))
        assert float(bd.loss_kernel_extra_s[0]) == 0.0
