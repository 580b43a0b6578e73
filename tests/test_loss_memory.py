"""The loss stage's memory charges the cross entropy the run runs (step/loss_memory.py): a Megatron-LM plan's launch
runs Transformer Engine's (2 B per logit), as the published runs and Megatron-Bridge's recipes ran it, where the
release's Megatron-LM takes it (before 26.06.01), else megatron-core's native fused cross entropy (4 B per logit: its
fp32 softmax kept for backward). The search's fit, a pinned layout's fit,
plan.json and verify-plan's re-prediction charge the launch's; calibration and the benchmarks the runs'."""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.errors import CommbenchError
from commbench.planner import load_model
from commbench.planner.calibrate.published import _preset, predict_runs, published_runs, run_megatron_core
from commbench.planner.layout.spec import LayoutArrays
from commbench.planner.search.space import SearchRequest, best_for_pins, search
from commbench.planner.step import loss_memory, memory
from commbench.planner.step.evaluate import evaluate_layouts


def _total(model, fabric, lay, loss, seq_len=None, framework="megatron"):
    bd = evaluate_layouts(model, fabric, LayoutArrays.from_layouts([lay]), seq_len=seq_len, framework=framework,
                          loss=loss)
    return float(bd.mem_total_bytes[0]), float(bd.mem_capacity_bytes[0])


def test_the_search_for_a_megatron_lm_plan_excludes_a_layout_that_fits_only_with_te():
    """At a headroom where the te winner fits with TE's 2 B per logit but not with native's 4 B, the Megatron-LM
    plan's search (its default loss: native) picks another layout, which fits with native; the same search charged
    with te (the published rows' loss) still picks it."""
    model, fabric = load_model("llama3-8b"), load_preset("h100-hgx", num_gpus=8)
    req = SearchRequest(model=model, fabric=fabric, num_gpus=8, gbs=64, precision="bf16", keep=20,
                        pins={"pp": 1})   # one pipeline rank: the loss stage is the busiest
    assert req.loss == "native"
    edge = search(dataclasses.replace(req, target="published")).layouts.layout(0)
    te, cap = _total(model, fabric, edge, "te")
    native, _ = _total(model, fabric, edge, "native")
    assert native > te
    headroom = 1.0 - (te + native) / 2.0 / cap          # te fits it, native does not
    with_te = search(dataclasses.replace(req, target="published", headroom_fraction=headroom))
    assert with_te.layouts.layout(0) == edge
    plan = search(dataclasses.replace(req, headroom_fraction=headroom))
    chosen = plan.layouts.layout(0)
    assert chosen != edge
    assert _total(model, fabric, chosen, "native")[0] <= cap * (1.0 - headroom)
    assert float(plan.breakdown.mem_total_bytes[0]) == pytest.approx(_total(model, fabric, chosen, "native")[0])


# qwen3-30b-a3b on 8 H100s at 4096 tokens, this layout: 84.74 GB predicted with te, 89.71 GB with native, 84.94 GB HBM
EDGE_PINS = dict(tp=1, pp=1, vp=1, ep=8, etp=1, cp=1, mbs=4, recompute="full", fsdp=False, cpu_offload_layers=0,
                 dispatcher="alltoall")


HEADROOM = 0.14


def test_a_pinned_layout_that_fits_only_with_te_does_not_fit_a_megatron_lm_plan():
    # 16 GPUs (EDP 2) and 14% headroom: on 8 (EDP 1) the optimizer step's fp32 gradient copy (15 GB) outweighs
    # these activations and neither loss fits (fix-F3); here the activations, and so the logits, set the peak
    model, fabric = load_model("qwen3-30b-a3b"), load_preset("h100-hgx", num_gpus=16)
    req = SearchRequest(model=model, fabric=fabric, num_gpus=16, gbs=128, precision="bf16", seq_len=4096,
                        pins=dict(EDGE_PINS, mbs=8), headroom_fraction=HEADROOM)
    one, bd = best_for_pins(req)
    _, te_bd = best_for_pins(dataclasses.replace(req, target="published"))
    assert one.layout(0).recompute == "full" and one.layout(0).mbs == 8
    assert float(bd.mem_activations_bytes[0]) > float(bd.mem_optimizer_step_bytes[0])
    usable = float(bd.mem_capacity_bytes[0]) * (1.0 - HEADROOM)
    assert float(te_bd.mem_total_bytes[0]) <= usable < float(bd.mem_total_bytes[0])
    gap = float(bd.mem_total_bytes[0] - te_bd.mem_total_bytes[0])
    # 8 x 4096 tokens x 151936 rows (a multiple of 128 already) x (4 - 2) B
    assert gap == pytest.approx(8 * 4096 * 151936 * 2.0)


def test_published_rows_keep_tes_bytes():
    """Calibration's predictions (predict_runs) charge the TE cross entropy the published runs ran."""
    runs = [r for r in published_runs() if r.layout is not None and r.layout.pp == 1][:3]
    assert runs
    p = predict_runs(runs)
    for j, run in enumerate(p.runs):
        bd = evaluate_layouts(run.model, _preset(run.preset, int(run.row["num_gpus"])),
                              LayoutArrays.from_layouts([run.layout]), seq_len=int(run.row["seq_len"]),
                              megatron_core=run_megatron_core(run.row), loss="te")
        assert float(p.mem_total_bytes[j]) == float(bd.mem_total_bytes[0]), run.label


def test_bytes_per_logit_per_implementation_and_which_run_holds_which():
    assert loss_memory.LOSS_LOGIT_BYTES == {"te": 2.0, "native": 4.0, "torchtitan": 8.0}
    assert loss_memory.launch_loss("megatron") == "native" and loss_memory.run_loss("megatron") == "te"
    assert loss_memory.launch_loss("torchtitan") == loss_memory.run_loss("torchtitan") == "torchtitan"
    model = load_model("qwen3-30b-a3b")
    kw = dict(tp=2, cp=1, tokens_mb=4096)
    logits = 4096 * 151936 / 2     # per TP rank: 151936 rows, kept at TP2 (divisor 64, counts.step_vocab)
    assert float(memory.logits_bytes(model, **kw, loss="te")) == logits * 2.0
    assert float(memory.logits_bytes(model, **kw)) == logits * 4.0           # the launch's: native
    with pytest.raises(CommbenchError, match=r"loss='te' is invalid: a cross entropy framework torchtitan runs"):
        memory.logits_bytes(model, **kw, framework="torchtitan", loss="te")


def test_the_bytes_are_what_the_sources_keep():
    """megatron-core 0.16.1's native fused cross entropy casts the logits to fp32 and saves the softmax it makes of
    them for backward; TorchTitan 0.3.0's loss passes a fp32 copy of the logits to the cross entropy."""
    fused = pytest.importorskip("megatron.core.fusions.fused_cross_entropy")
    from megatron.core.tensor_parallel.cross_entropy import VocabParallelCrossEntropy
    assert "ctx.save_for_backward(exp_logits, target_mask, masked_target_1d)" in inspect.getsource(fused)
    assert ".float()" in inspect.getsource(VocabParallelCrossEntropy.calculate_logits_max)
    titan = pytest.importorskip("torchtitan.components.loss")
    assert "pred.flatten(0, 1).float()" in inspect.getsource(titan.cross_entropy_loss)


def test_plan_json_records_the_loss_and_verify_plan_repredicts_with_it(tmp_path):
    """A pinned Megatron-LM plan records inputs.loss native, its memory is native's and its note says it is charged;
    verify-plan's re-prediction agrees (no 'edited or stale'); a plan written before inputs.loss (which charged te)
    is re-predicted with te."""
    from commbench.workflows.verify import plan_context, prediction_flags
    layout = ",".join(f"{k}={str(v).lower()}" for k, v in EDGE_PINS.items()) + ",precision=bf16"
    result = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "8",
                                      "--gbs", "64", "--seq-len", "4096", "--layout", layout, "-O", str(tmp_path),
                                      "--emit", "json", "--allow-unfit"])   # over 84.9 GB: written anyway
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert doc["inputs"]["loss"] == "native"
    model, fabric = load_model("qwen3-30b-a3b"), load_preset("h100-hgx", num_gpus=8)
    assert doc["predicted"]["mem_total_bytes"] > doc["predicted"]["mem_capacity_bytes"]
    (note,) = [n for n in doc["megatron"]["notes"] if n.startswith("loss: --cross-entropy-fusion-impl native")]
    assert "the plan's predicted memory charges it" in note and "WARNING" not in note
    ctx = plan_context(doc)
    assert ctx.loss == "native" and prediction_flags(doc, ctx, fabric) == []
    older = json.loads(json.dumps(doc))
    del older["inputs"]["loss"]
    assert plan_context(older).loss == "te"
    assert any("edited or stale" in f for f in prediction_flags(older, plan_context(older), fabric))
    te_total, _ = _total(model, fabric, plan_context(older).layout, "te", seq_len=4096)
    older["predicted"]["mem_total_bytes"] = te_total
    # ... and its step time: te's kernel, no native traffic priced (step/loss_time.py)
    te_row = evaluate_layouts(model, fabric, LayoutArrays.from_layouts([plan_context(older).layout]), seq_len=4096,
                              loss="te").row(0)
    older["predicted"] |= {k: te_row[k] for k in ("step_s", "tokens_per_s_per_gpu")}
    assert prediction_flags(older, plan_context(older), fabric) == []
    older["inputs"]["loss"] = "fp8"
    with pytest.raises(CommbenchError, match=r"plan field 'inputs.loss' is invalid: loss='fp8' is invalid"):
        plan_context(older)


def test_a_release_whose_megatron_lm_takes_te_launches_te_and_its_memory_charges_te(tmp_path):
    """probe PA: plans at 25.09, 25.11 and 26.04 wrote --cross-entropy-fusion-impl native and charged native's 4 B per
    logit, though those releases' recipes run te (Megatron-Bridge bf71eba llama3_8b_llm_pretrain.yaml:17, 0fbfe7d
    overrides.py:66) and their Megatron-LM takes it (core_v0.14.0 arguments.py:1957): the refusal of te is 26.06.01's
    (Megatron-LM 458c8d0 arguments.py:1529, megatron-core 0.18.2), but native was written for every release."""
    from commbench.planner import Layout
    from commbench.planner.emit.megatron import megatron_args
    from commbench.planner.layout.recipes import releases
    model = load_model("qwen3-30b-a3b")
    layout = Layout.for_world(8, tp=1, pp=1, ep=8, etp=1, mbs=1, gbs=256)
    impl = {}
    for release in releases():
        argv = megatron_args(layout, model, release=release)
        impl[release] = argv[argv.index("--cross-entropy-fusion-impl") + 1]
    assert impl == {r: "native" if r in ("26.06.01", "26.08") else "te" for r in releases()}
    assert [loss_memory.launch_loss("megatron", r) for r in ("25.09", "26.06", "26.06.01")] == ["te", "te", "native"]
    assert loss_memory.launch_loss("megatron") == "native"   # no release named: the one every tree takes
    for release, loss in (("26.04", "te"), ("26.08", "native")):
        result = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "16",
                                          "--precision", "fp8", "--software", release, "--top", "1", "--json"])
        assert result.exit_code == 0, result.output
        doc = json.loads(result.output)
        args = doc["megatron"]["args"]
        assert doc["inputs"]["loss"] == loss and args[args.index("--cross-entropy-fusion-impl") + 1] == loss
        (note,) = [n for n in doc["megatron"]["notes"] if n.startswith(f"loss: --cross-entropy-fusion-impl {loss}")]
        assert "the plan's predicted memory charges it" in note
        assert ("step time prices its kernel" in note) == (loss == "te")
