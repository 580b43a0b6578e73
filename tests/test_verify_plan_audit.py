"""`commbench verify-plan` as a user acting on it: the plan's folder is taken; its sizes, groups and predictions are
the plan's own (EP bytes as the step model counts them, 8-bit TP gathers and dispatches, expert DP); a scaled-down run
is predicted for what it measured; a mismatch is flagged where the comparison means something; an emulated fabric
is said; a hand-edited plan is refused in one line."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import collective_time_s, load_preset
from commbench.planner.emit.plan import load_plan
from commbench.planner.step.moe_comm import FP8_DISPATCH_BYTES
from commbench.planner.step.tp_comm import GATHER_BYTES
from commbench.workflows.verify import mismatch_flags, plan_context, plan_items, predicted_s


def _plan(folder, *args: str):
    # some of these layouts are predicted not to fit: written anyway, as a user checking their collectives would
    result = CliRunner().invoke(app, ["plan", *args, "-O", str(folder), "--emit", "json", "--allow-unfit"])
    assert result.exit_code == 0, result.output
    return folder / "plan.json"


@pytest.fixture(scope="module")
def mxfp8_flex_plan(tmp_path_factory):
    """4 B200s, qwen3-30b-a3b in MXFP8 with the flex dispatcher: the dispatch is quantised, the TP gathers too."""
    return _plan(tmp_path_factory.mktemp("mx"), "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "4",
                 "--gbs", "64", "--layout", "tp=2,pp=1,vp=1,ep=2,etp=1,cp=1,mbs=1,dispatcher=flex,precision=mxfp8")


def test_plan_folder_is_taken_and_a_folder_without_plan_json_is_one_line(mxfp8_flex_plan, tmp_path):
    """`plan -O DIR` writes a folder; `verify-plan DIR` said "cannot be read: Is a directory"."""
    result = CliRunner().invoke(app, ["verify-plan", str(mxfp8_flex_plan.parent), "--max-bytes", "64K",
                                      "--iters", "1", "--nproc", "2", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["points"]
    # the routing the workload measured is said (the flag promised it; it read a metric the workload never writes)
    assert any("measured routing imbalance" in f for f in doc["unmet_assumptions"])
    empty = CliRunner().invoke(app, ["verify-plan", str(tmp_path)])
    assert empty.exit_code == 2 and "plan.json" in empty.output and "Traceback" not in empty.output
    assert len(empty.output.strip().splitlines()) == 1


@pytest.mark.parametrize("edit,match", [
    (lambda d: d["layout"].update(tp=4), "inputs.gpus"),            # layout of 8 ranks in a 4-GPU plan
    (lambda d: d["inputs"].update(seq_len="abc"), "inputs.seq_len"),
    (lambda d: d["inputs"].update(seq_len=None), "inputs.seq_len"),
    (lambda d: d["inputs"].update(seq_len=0), "inputs.seq_len"),
])
def test_hand_edited_plan_is_refused_in_one_line(mxfp8_flex_plan, tmp_path, edit, match):
    doc = json.loads(mxfp8_flex_plan.read_text())
    edit(doc)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    result = CliRunner().invoke(app, ["verify-plan", str(path), "--max-bytes", "64K", "--iters", "1"])
    assert result.exit_code == 2, result.output
    assert match in result.output and "Traceback" not in result.output, result.output


def test_an_older_plan_without_seq_len_reads_the_models(mxfp8_flex_plan):
    doc = json.loads(mxfp8_flex_plan.read_text())
    del doc["inputs"]["seq_len"]
    ctx = plan_context(doc)
    assert ctx.seq_len == doc["inputs"]["model_spec"]["seq_len"]


def test_sizes_are_the_plans_bytes(mxfp8_flex_plan):
    """EP: tokens x distinct destination ranks (flex dedup) x expert width x the 8-bit dispatch's bytes; TP: the
    all-gather of an MXFP8 recipe moves 1 + 1/32 B per element; MoE: the expert gradients' bucket on the EDP group."""
    doc = load_plan(mxfp8_flex_plan)
    items, _ = plan_items(doc, 4, 1 << 40)
    by_label = {i.label: i for i in items}
    tokens_rank = 4096 // 2                      # mbs x seq / (tp x cp)
    # EP2, 128 experts top-8 (distinct: torch.topk): expected destination ranks, hypergeometric
    distinct = 2 * (1 - math.comb(64, 8) / math.comb(128, 8))
    ep = next(i for i in items if i.kind == "ep")
    assert ep.plan_size_bytes == pytest.approx(tokens_rank * distinct * 2048 * FP8_DISPATCH_BYTES, rel=1e-6)
    assert ep.params["dispatch_dtype"] == "fp8" and ep.params["dispatch_mode"] == "per-rank"
    assert ep.params["hidden"] == 2048
    gather = by_label["TP all_gather"]
    assert gather.plan_size_bytes == pytest.approx(4096 * 2048 * GATHER_BYTES["mxfp8"], rel=1e-6)
    assert by_label["TP reduce_scatter"].plan_size_bytes == 4096 * 2048 * 2
    expert = next(i for i in items if i.kind == "edp")
    assert expert.groups == tuple(tuple(g) for g in doc["placement"]["groups"]["edp"])


def test_latent_moe_moves_the_latent_width(tmp_path):
    """Nemotron-3 Super's experts see a 1024-wide latent, not the 4096 hidden: the plan's dispatch moves that."""
    path = _plan(tmp_path, "--model", "nemotron-3-super-120b-a12b", "--system", "b200-hgx", "--gpus", "16",
                 "--gbs", "64", "--layout", "tp=1,pp=1,vp=1,ep=8,etp=1,cp=1,mbs=1,dispatcher=alltoall,precision=bf16")
    items, _ = plan_items(load_plan(path), 4, 1 << 40)
    ep = next(i for i in items if i.kind == "ep")
    assert ep.params["hidden"] == 1024 and ep.params["dispatch_dtype"] == "bf16"
    assert ep.plan_size_bytes == 8192 * 22 * 1024 * 2        # alltoall: top-k copies


@pytest.mark.parametrize("dispatcher", ["alltoall", "flex"])
def test_ep_plan_prediction_is_the_step_models(tmp_path, dispatcher):
    """The plan's EP all-to-all per MoE layer and micro-batch, forward (dispatch + combine), is what the step model
    charges: its ep_total_s over micro-batches, MoE layers and the backward's equal pair (bf16, pp=1)."""
    path = _plan(tmp_path, "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "8", "--gbs", "64",
                 "--layout", f"tp=1,pp=1,vp=1,ep=8,etp=1,cp=1,mbs=1,dispatcher={dispatcher},precision=bf16")
    doc = load_plan(path)
    fabric = load_preset("b200-hgx", num_gpus=8)
    ctx = plan_context(doc)
    (ep,) = [i for i in plan_items(doc, 8, 1 << 40)[0] if i.kind == "ep"]
    plan_s = predicted_s(fabric, ep, ctx, size_bytes=ep.plan_size_bytes, tokens=ep.plan_tokens_per_rank,
                         group=ep.plan_group_size, domains=ep.plan_domains)
    n_mb = 64 // 8
    charged = doc["predicted"]["ep_total_s"] / (n_mb * 48 * 2)
    assert plan_s == pytest.approx(charged, rel=1e-9)


def test_dp_group_across_racks_is_predicted_across_racks(tmp_path):
    """TP8 DP32 on 256 GB300s (4 racks of 64): each DP group strides over all 4 racks; it was predicted as if its
    32 ranks sat in one rack (NVLink, a flat ring). Now it is priced as the step model prices the plan's gradient
    reduce-scatter (its dp_dense_rs_total_s, at the whole local gradient)."""
    from commbench.planner.models.counts import param_counts, step_vocab

    path = _plan(tmp_path, "--model", "llama3-8b", "--system", "gb300-nvl72", "--gpus", "256", "--gbs", "256",
                 "--layout", "tp=8,pp=1,vp=1,ep=1,cp=1,mbs=1")
    doc = load_plan(path)
    (dp,) = [i for i in plan_items(doc, 4, 16 << 20)[0] if i.kind == "dp_cp"]
    assert dp.plan_group_size == 32 and dp.plan_domains == 4
    fabric = load_preset("gb300-nvl72", num_gpus=256)
    ctx = plan_context(doc)
    # the local gradient, bf16, with the embedding/output rows Megatron builds (128,256 kept at TP8: the plan passes
    # --make-vocab-size-divisible-by 16, models/counts.megatron_vocab_divisor)
    assert step_vocab(ctx.model, 8, ctx.framework) == 128256
    whole = param_counts(ctx.model, vocab=128256).non_expert / 8 * 2
    plan_s = predicted_s(fabric, dp, ctx, size_bytes=whole, tokens=0, group=32, domains=dp.plan_domains)
    assert plan_s == pytest.approx(doc["predicted"]["dp_dense_rs_total_s"], rel=1e-9)
    in_rack = float(collective_time_s(fabric, "reduce_scatter", np.array([whole]), np.array([32]), np.array([1]))[0])
    assert plan_s != pytest.approx(in_rack, rel=1e-3)   # the old price: one rack, flat


@pytest.mark.timeout(120)
def test_scaled_run_is_predicted_for_what_it_measured(tmp_path):
    """A 256-GPU plan on 2 ranks: 'predicted' beside 'measured' is the plan's fabric at the measured size and group
    (2 ranks, one host); the plan's own figure (its group, its racks, its size) is given apart."""
    path = _plan(tmp_path, "--model", "llama3-8b", "--system", "gb300-nvl72", "--gpus", "256", "--gbs", "256",
                 "--layout", "tp=8,pp=1,vp=1,ep=1,cp=1,mbs=1")
    result = CliRunner().invoke(app, ["verify-plan", str(path), "--nproc", "2", "--max-bytes", "64K", "--iters", "1",
                                      "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    fabric = load_preset("gb300-nvl72", num_gpus=256)
    dp = next(p for p in doc["points"] if p["collective"].startswith("DP"))
    assert (dp["group_size"], dp["num_domains"], dp["plan_group_size"], dp["plan_num_domains"]) == (2, 1, 32, 4)
    here = float(collective_time_s(fabric, "reduce_scatter", np.array([float(dp["size_bytes"])]), np.array([2]),
                                   np.array([1]))[0]) * 1e6
    assert dp["predicted_time_us"] == pytest.approx(here, rel=1e-9)
    assert dp["plan_predicted_time_us"] > dp["predicted_time_us"]
    assert any("'predicted' is for the group measured" in f for f in doc["unmet_assumptions"])


def test_mismatch_flags_only_where_the_fabric_describes_this_backend():
    points = [{"collective": "TP all_reduce", "measured_over_predicted": 3.0},
              {"collective": "DP grad bucket reduce-scatter", "measured_over_predicted": 1.2},
              {"collective": "EP all-to-all", "measured_over_predicted": 0.3}]
    flags = mismatch_flags(points, comparable=True)
    assert len(flags) == 2 and flags[0].startswith("MISMATCH: TP all_reduce measured 3.0x")
    assert "EP all-to-all" in flags[1] and "0.3x" in flags[1]
    assert mismatch_flags(points, comparable=False) == []


@pytest.mark.timeout(120)
def test_plan_on_a_gloo_fitted_profile_is_compared_on_gloo(tmp_path):
    """A profile fitted from gloo runs describes gloo: verifying its plan on gloo was said to check 'not its
    bandwidth'; now the comparison stands (comparable: true) and a mismatch would be flagged."""
    from tests.test_verify import plan_on_a_gloo_fitted_profile

    fabric, folder = plan_on_a_gloo_fitted_profile(tmp_path)
    result = CliRunner().invoke(app, ["verify-plan", str(folder), "--max-bytes", "64K", "--iters", "1", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["comparable"] is True
    assert not any("not its bandwidth" in f for f in doc["unmet_assumptions"])


@pytest.mark.timeout(120)
def test_emulated_fabric_is_said(mxfp8_flex_plan, monkeypatch):
    """verify-plan under `commbench emulate` printed 'measured here' with no word of the emulated fabric."""
    emulated = {"emulated": True, "tool": "commbench emulate", "num_racks": 2, "ranks_per_rack": 1,
                "scale_out_rate_bits_per_s": 1e9}
    monkeypatch.setenv("COMMBENCH_EMULATED", json.dumps(emulated))
    result = CliRunner().invoke(app, ["verify-plan", str(mxfp8_flex_plan), "--nproc", "2", "--max-bytes", "64K",
                                      "--iters", "1", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["emulated"] == emulated
    assert any(f.startswith("EMULATED fabric") for f in doc["unmet_assumptions"])
    table = CliRunner().invoke(app, ["verify-plan", str(mxfp8_flex_plan), "--nproc", "2", "--max-bytes", "64K",
                                     "--iters", "1"], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "EMULATED" in table.output.splitlines()[0]


def test_a_collective_no_group_fits_is_said_not_dropped(tmp_path):
    """8-GPU plan (TP2, EP4 of 128 experts) on 3 ranks: no TP group of 2 and no EP group dividing 128 experts fits;
    both were left out without a word, the table holding DP alone."""
    path = _plan(tmp_path, "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "8", "--gbs", "64",
                 "--layout", "tp=2,pp=1,vp=1,ep=4,etp=1,cp=1,mbs=1")
    items, flags = plan_items(load_plan(path), 3, 1 << 20)
    assert [i.kind for i in items] == ["dp_cp"]
    for label in ("TP reduce_scatter", "TP all_gather", "EP all-to-all"):
        assert any(f.startswith(label) and "not measured" in f for f in flags), (label, flags)


@pytest.mark.parametrize("size,nproc,per_rack,plan_domains,expect_m,expect_span", [
    (8, 16, 8, 8, 8, 2), (32, 16, 8, 4, 16, 2), (4, 16, 4, 4, 4, 4), (8, 32, 8, 2, 8, 2), (6, 12, 4, 3, 6, 3),
    (8, 16, None, 8, 8, 1), (8, 16, 8, 1, 8, 1), (8, 8, 4, 1, 4, 1), (2, 16, 8, 8, 2, 2), (16, 24, 8, 3, 12, 3),
])
def test_scaled_groups_span_the_racks_the_plan_spans(size, nproc, per_rack, plan_domains, expect_m, expect_span):
    """On fewer ranks than the plan, groups were consecutive: a plan's expert-DP group of 8 strided over 8 racks,
    verified on 16 ranks of 2 racks, was measured inside one rack (NVLink), never over the network the plan prices;
    and a one-rack TP group of 8 on racks of 4 was measured across two. Now each group spans as many of the run's
    racks as the plan's does where the run has them, and never more (a smaller group rather than another tier);
    the groups partition the run's ranks, take an equal share of each rack they span, and stay consecutive on one
    host."""
    from commbench.workflows.verify import _scaled_groups

    groups = _scaled_groups(size, nproc, ranks_per_rack=per_rack, plan_domains=plan_domains)
    assert sorted(r for g in groups for r in g) == list(range(nproc))
    assert {len(g) for g in groups} == {expect_m}
    rack = per_rack or nproc
    assert {len({r // rack for r in g}) for g in groups} == {expect_span}
    assert expect_span <= plan_domains
    for g in groups:
        counts = {}
        for r in g:
            counts[r // rack] = counts.get(r // rack, 0) + 1
        assert set(counts.values()) == {expect_m // expect_span}
    if expect_span == 1:
        assert groups == tuple(tuple(range(s, s + expect_m)) for s in range(0, nproc, expect_m))


def test_scaled_run_over_racks_measures_the_plan_groups_over_racks(tmp_path):
    """A 256-GPU GB300 plan whose DP group of 32 spans 4 racks, verified on 8 ranks of 2 racks (4 each): its DP
    groups span both racks and the flag says how groups were cut; on one host they stay consecutive."""
    from commbench.comm.topology import from_ranks_per_rack

    path = _plan(tmp_path, "--model", "llama3-8b", "--system", "gb300-nvl72", "--gpus", "256", "--gbs", "256",
                 "--layout", "tp=8,pp=1,vp=1,ep=1,cp=1,mbs=1")
    doc = load_plan(path)
    (dp,), flags = ([i for i in plan_items(doc, 8, 16 << 20, topology=from_ranks_per_rack(8, 4))[0] if i.kind == "dp_cp"],
                    plan_items(doc, 8, 16 << 20, topology=from_ranks_per_rack(8, 4))[1])
    assert dp.plan_domains == 4 and all(len({r // 4 for r in g}) == 2 for g in dp.groups)
    assert any("spanning as many of this run's 2 racks" in f for f in flags)
    tp = [i for i in plan_items(doc, 8, 16 << 20, topology=from_ranks_per_rack(8, 4))[0] if i.kind == "tp"]
    assert tp and all(len(g) == 4 and len({r // 4 for r in g}) == 1 for i in tp for g in i.groups)  # one rack's
    (dp1,), flags1 = ([i for i in plan_items(doc, 8, 16 << 20)[0] if i.kind == "dp_cp"], plan_items(doc, 8, 16 << 20)[1])
    assert dp1.groups == (tuple(range(8)),) and any("consecutive ranks" in f for f in flags1)


@pytest.mark.timeout(120)
def test_verify_plan_on_two_racks_measures_dp_over_both(tmp_path, monkeypatch):
    """The whole command on 4 gloo ranks in 2 racks of 2 (COMMBENCH_RANKS_PER_RACK, as `commbench emulate` sets it):
    the plan's TP group (one rack) is measured inside a rack, its DP group (4 racks) over both racks."""
    from commbench.comm.topology import RANKS_PER_RACK_ENV

    path = _plan(tmp_path, "--model", "llama3-8b", "--system", "gb300-nvl72", "--gpus", "256", "--gbs", "256",
                 "--layout", "tp=8,pp=1,vp=1,ep=1,cp=1,mbs=1")
    monkeypatch.setenv(RANKS_PER_RACK_ENV, "2")
    result = CliRunner().invoke(app, ["verify-plan", str(path), "--nproc", "4", "--max-bytes", "64K", "--iters", "1",
                                      "--json"])
    assert result.exit_code == 0, result.output
    flags = json.loads(result.stdout)["unmet_assumptions"]
    assert any(f.startswith("DP grad bucket") and "(4 ranks, 2 scale-up domain(s))" in f for f in flags), flags
    assert any(f.startswith("TP reduce_scatter") and "(2 ranks, 1 scale-up domain(s))" in f for f in flags), flags


def test_cupy_nccl_is_nccl_for_the_fabric_a_plan_predicts_with():
    """`_describes` compared backend names as strings: a plan on a preset (NCCL curves) verified with
    --backend cupy-nccl was flagged 'measured times here check the plan's sizes and groups, not its bandwidth' and
    comparable: false, so no MISMATCH could show; and a profile fitted on cupy-nccl runs did not describe torch's
    nccl. Both are NCCL (profile.NCCL_BACKENDS); gloo stays apart."""
    from types import SimpleNamespace

    from commbench.cli.verify_plan import _describes
    from commbench.costmodel import load_preset

    preset = load_preset("h100-hgx", num_gpus=16).backends()
    tp = SimpleNamespace(kind="tp", collective="all_reduce")
    ep = SimpleNamespace(kind="ep", collective="moe_all_to_all")
    for item in (tp, ep):
        assert _describes(preset, item, "cupy-nccl") and _describes(preset, item, "nccl")
        assert not _describes(preset, item, "gloo")
    fitted = {"all_reduce": {"cupy-nccl"}}
    assert _describes(fitted, tp, "nccl") and _describes(fitted, tp, "cupy-nccl") and not _describes(fitted, tp, "gloo")
    assert _describes({"all_reduce": {"gloo"}}, tp, "gloo") and not _describes({"all_reduce": {"gloo"}}, tp, "cupy-nccl")


def test_dp_bucket_grows_with_dp_cp(tmp_path):
    """Megatron-LM's gradient bucket is max(40M, 1M x DP*CP) parameters (training.py core_v0.16.1), the expert
    buffers' too: llama3-8b TP1 CP2 DP64 on 128 GB300s buckets 128M parameters (256 MB), not 40M."""
    path = _plan(tmp_path, "--model", "llama3-8b", "--system", "gb300-nvl72", "--gpus", "128", "--gbs", "128",
                 "--layout", "tp=1,pp=1,vp=1,ep=1,cp=2,mbs=1")
    (dp,) = [i for i in plan_items(load_plan(path), 4, 1 << 40)[0] if i.kind == "dp_cp"]
    assert dp.plan_group_size == 128
    assert dp.plan_size_bytes == 128_000_000 * 2
    path = _plan(tmp_path / "small", "--model", "llama3-8b", "--system", "gb300-nvl72", "--gpus", "16", "--gbs", "64",
                 "--layout", "tp=2,pp=1,vp=1,ep=1,cp=1,mbs=1")
    (dp,) = [i for i in plan_items(load_plan(path), 4, 1 << 40)[0] if i.kind == "dp_cp"]
    assert dp.plan_size_bytes == 40_000_000 * 2     # DP8: the 40M floor


@pytest.mark.parametrize("dispatcher", ["flex", "alltoall"])
def test_etp_collectives_are_what_megatron_runs_and_the_step_model_charges(tmp_path, dispatcher):
    """megatron-core 0.16.1 token_dispatcher.py with ETP 2: flex runs ONE all-to-all over the ETP x EP group (8
    ranks), each token copied to both ETP ranks of its EP ranks, and no ETP gather/scatter; alltoall runs the EP
    all-to-all (4 ranks) and an ETP all-gather + reduce-scatter. verify-plan measures those, at the step model's
    price: the plan's EP term per MoE layer and micro-batch (forward pair + equal backward, bf16) and its ETP term
    (AG + RS forward, the mirror backward)."""
    path = _plan(tmp_path, "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "8", "--gbs", "64",
                 "--layout", f"tp=2,pp=1,vp=1,ep=4,etp=2,cp=1,mbs=1,dispatcher={dispatcher},precision=bf16")
    doc = load_plan(path)
    fabric = load_preset("b200-hgx", num_gpus=8)
    ctx = plan_context(doc)
    items = plan_items(doc, 8, 1 << 40)[0]
    (ep,) = [i for i in items if i.kind == "ep"]
    etp_items = [i for i in items if i.kind == "etp"]
    n_mb, layers = 64 // 4, 48
    plan_s = predicted_s(fabric, ep, ctx, size_bytes=ep.plan_size_bytes, tokens=ep.plan_tokens_per_rank,
                         group=ep.plan_group_size, domains=ep.plan_domains)
    assert plan_s == pytest.approx(doc["predicted"]["ep_total_s"] / (n_mb * layers * 2), rel=1e-9)
    tokens_rank = 4096 / 2
    if dispatcher == "flex":
        assert ep.plan_group_size == 8 and ep.groups == (tuple(range(8)),) and ep.params["expert_tp"] == 2
        distinct = 4 * (1 - math.comb(96, 8) / math.comb(128, 8))   # EP4, 128 experts top-8, hypergeometric
        assert ep.plan_size_bytes == round(tokens_rank * 2 * distinct * 2048 * 2)
        assert etp_items == [] and doc["predicted"]["etp_total_s"] == 0.0
    else:
        assert ep.plan_group_size == 4 and "expert_tp" not in ep.params
        gather, scatter = etp_items
        assert (gather.collective, scatter.collective) == ("all_gather", "reduce_scatter")
        elements = 2 * tokens_rank * 8 * 2048               # etp x tokens x top-k x expert width
        # the gather in bf16; the scatter in the routing probabilities' fp32 (--moe-router-dtype fp32 emitted)
        assert (gather.plan_size_bytes, scatter.plan_size_bytes) == (elements * 2, elements * 4)
        assert gather.plan_group_size == scatter.plan_group_size == 2
        forward = sum(predicted_s(fabric, i, ctx, size_bytes=i.plan_size_bytes, tokens=0, group=2, domains=1)
                      for i in etp_items)
        backward = sum(float(collective_time_s(fabric, name, np.array([float(size)]), np.array([2]),
                                               np.array([1]))[0])
                       for name, size in (("reduce_scatter", elements * 2), ("all_gather", elements * 4)))
        assert forward + backward == pytest.approx(doc["predicted"]["etp_total_s"] / (n_mb * layers), rel=1e-9)


def test_flex_etp_on_fewer_ranks_keeps_whole_etp_groups(tmp_path):
    """Scaled to 4 ranks, the flex ETP2 x EP4 exchange is measured on 4 ranks = ETP2 x EP2, not on ranks that split
    an ETP pair."""
    path = _plan(tmp_path, "--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "16",
                 "--layout", "tp=2,pp=2,ep=4,etp=2,cp=1,mbs=1,vp=1,dispatcher=flex")
    (ep,) = [i for i in plan_items(load_plan(path), 4, 1 << 20)[0] if i.kind == "ep"]
    assert len(ep.groups[0]) == 4 and ep.plan_group_size == 8 and ep.params["expert_tp"] == 2
