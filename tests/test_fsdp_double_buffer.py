"""Megatron-FSDP's double buffering (--fsdp-double-buffer, Megatron-Bridge ddp.fsdp_double_buffer): the recipe table
says which release recipes run it (tools/recipes_from_megatron_bridge.py), the plans launch with it, and the memory
model charges the gathered units and the reduce-scatter queue the launch holds (step/fsdp.py)."""

from __future__ import annotations

import pytest

from commbench.data.reference import recipes_json


def _entry(release, model, gpu, precision, num_gpus):
    return next(e for e in recipes_json()["recipes"] if (e["release"], e["model"], e["gpu"], e["precision"],
                                                          e["num_gpus"]) == (release, model, gpu, precision, num_gpus))


def test_the_recipe_table_says_which_fsdp_recipes_double_buffer():
    # 25.09: run_script.py:161-163 turns it on for Llama 3 / 3.1 70B and 405B only; the Llama 3 8B H100 entry's
    # nccl_ub YAML key is read by no code (utils/helpers.py set_megatron_fsdp_overrides reads use_megatron_fsdp only)
    on = _entry("25.09", "llama3.1-70b", "gb200", "fp8", 64)
    assert on["fsdp"] and on["fsdp_double_buffer"]
    assert on["double_buffer_facts"] == ["scripts/performance/run_script.py:163"]
    off = _entry("25.09", "llama3-8b", "h100", "fp8", 8)
    assert off["fsdp"] and not off["fsdp_double_buffer"]
    # 0.3.1 (26.02.01): the per-GPU function's `if cfg.ddp.use_megatron_fsdp:` branch
    assert _entry("26.02.01", "llama3.1-70b", "gb200", "fp8", 64)["double_buffer_facts"] == \
        ["scripts/performance/configs/llama/llama3_llm_pretrain.py:110"]
    # 26.08 (flat recipes): Nemotron-3-Ultra's HSDP recipes leave it off, Llama 3.1 405B B300 turns it off
    assert not _entry("26.08", "nemotron-3-ultra-550b-a55b", "gb300", "mxfp8", 256)["fsdp_double_buffer"]
    assert not _entry("26.08", "llama3.1-405b", "b300", "bf16", 256)["fsdp_double_buffer"]
    # NCCL user buffers force it (megatron-core param_and_grad_buffer.py): gb300/llama3.py:227 sets nccl_ub
    assert "src/megatron/bridge/perf_recipes/llama/gb300/llama3.py:227" in \
        _entry("26.08", "llama3.1-70b", "gb300", "bf16", 64)["double_buffer_facts"]
    # no Megatron-FSDP, no double buffering
    assert not any(e["fsdp_double_buffer"] for e in recipes_json()["recipes"] if not e["fsdp"])


def _llama70b_fsdp(**kw):
    from commbench.planner import Layout
    return Layout(tp=1, pp=1, dp=64, mbs=2, gbs=256, precision="fp8", fsdp=True, **kw)


def test_fsdp_plans_launch_double_buffered_and_the_launch_reads_back():
    import dataclasses
    from commbench.planner.emit.megatron import megatron_args, parse_megatron_args
    from commbench.planner import load_model
    model = load_model("llama3.1-70b")
    lay = _llama70b_fsdp()
    assert lay.fsdp_double_buffer   # the plans' launch
    args = megatron_args(lay, model)
    assert "--fsdp-double-buffer" in args
    assert parse_megatron_args(args, 64, model).fsdp_double_buffer
    # a launch without it (Megatron-LM's default) is charged as it runs; NCCL user buffers turn it on
    without = [a for a in args if a != "--fsdp-double-buffer"]
    assert not parse_megatron_args(without, 64, model).fsdp_double_buffer
    assert parse_megatron_args(without + ["--use-nccl-ub"], 64, model).fsdp_double_buffer
    plain = dataclasses.replace(lay, fsdp=False)   # nothing to double-buffer without FSDP
    assert "--fsdp-double-buffer" not in megatron_args(plain, model)
    assert parse_megatron_args(megatron_args(plain, model), 64, model) == plain
    # a layout made FSDP from a plain one launches as the plans do
    assert "--fsdp-double-buffer" in megatron_args(dataclasses.replace(plain, fsdp=True), model)
    assert "--fsdp-double-buffer" not in megatron_args(dataclasses.replace(lay, fsdp_double_buffer=False), model)


def test_the_unit_buffers_megatron_fsdp_holds():
    from commbench.planner.step.fsdp import megatron_unit_buffers
    # units of >= 0.5B parameters: the reduce-scatter queue keeps two (capacity 2 units) beside the one just queued
    # and the one accumulating; the prefetch one unit
    u = 8.6e8
    assert megatron_unit_buffers(u, u, False) == (2 * u, 4 * u)
    assert megatron_unit_buffers(u, u, True) == (2 * u, 2 * u)
    # Llama 3 8B's 218M-parameter units: capacity 1e9 elements, 4 queued + 2; prefetch to 5e8: 3 units + running
    u = 2.18e8
    assert megatron_unit_buffers(u, u, False) == (4 * u, 6 * u)
    assert megatron_unit_buffers(u, u, True) == (2 * u, 2 * u)


def test_the_memory_model_charges_the_launchs_gradient_queue():
    import dataclasses
    import numpy as np
    from commbench.costmodel import load_preset
    from commbench.planner.layout.spec import LayoutArrays
    from commbench.planner import load_model
    from commbench.planner.models.counts import param_counts, step_vocab
    from commbench.planner.step.evaluate import evaluate_layouts
    from commbench.planner.step.terms import CALIBRATED
    model = load_model("llama3.1-70b")
    lay = _llama70b_fsdp()
    arr = LayoutArrays.from_layouts([lay, dataclasses.replace(lay, fsdp_double_buffer=False)])
    bd = evaluate_layouts(model, load_preset("gb200-nvl72", num_gpus=64), arr, calibration=CALIBRATED)
    # one TransformerLayer's parameters (the units are equal): its bf16 gradients, two more units without
    vocab = float(step_vocab(model, np.array([1]))[0]) * model.hidden
    unit = (param_counts(model, vocab=vocab / model.hidden).non_expert - 2 * vocab - model.hidden) / model.num_layers
    assert bd.mem_grads_bytes[1] - bd.mem_grads_bytes[0] == pytest.approx(2 * unit * 2, rel=1e-9)
    assert bd.mem_weights_bytes[1] == bd.mem_weights_bytes[0]   # 0.86B-parameter units: one prefetched either way


def test_published_fsdp_rows_take_their_recipes_double_buffering_and_fit():
    from commbench.planner.calibrate.published import predict_runs, published_runs
    from commbench.planner.step.terms import CALIBRATED
    runs = [r for r in published_runs() if r.layout is not None and r.layout.fsdp]
    assert runs
    by_release = {(r.row["release"], r.model.name): r.layout.fsdp_double_buffer for r in runs}
    assert by_release[("26.02.01", "llama3.1-70b")]       # llama3_llm_pretrain.py:110 at 9c9dd84
    assert not by_release[("25.09", "llama3-8b")]         # run_script.py turns it on for 70B / 405B only
    predicted = predict_runs(runs, CALIBRATED)
    assert all(bool(f) for f in predicted.fits)
