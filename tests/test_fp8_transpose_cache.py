"""Megatron-FSDP's fp8 transpose cache on Hopper (--keep-fp8-transpose-cache, Megatron-Bridge
ddp.keep_fp8_transpose_cache): the recipe table says which release recipes keep it (tools/recipes_from_megatron_bridge.py),
the plans launch with the choice the prediction charges, and the step and memory models charge what the launch does
(step/fsdp.py "Hopper per-tensor fp8 weights")."""

from __future__ import annotations

from commbench.data.reference import recipes_json


def _entry(release, model, gpu, precision, num_gpus):
    return next(e for e in recipes_json()["recipes"] if (e["release"], e["model"], e["gpu"], e["precision"],
                                                          e["num_gpus"]) == (release, model, gpu, precision, num_gpus))


def test_the_recipe_table_says_which_fsdp_recipes_keep_the_fp8_transposes():
    # Megatron-Bridge's own Megatron-FSDP override sets it False: 25.11 helpers.py:120, 26.02.01 overrides.py:82
    assert _entry("25.11", "llama3.1-70b", "gb200", "fp8", 64)["transpose_cache_facts"] == \
        ["scripts/performance/utils/helpers.py:120"]
    e = _entry("26.02.01", "llama3.1-70b", "gb200", "fp8", 64)
    assert e["fsdp"] and not e["keep_fp8_transpose_cache"]
    assert e["transpose_cache_facts"] == ["scripts/performance/utils/overrides.py:82"]
    # 26.08's flat recipes set it False themselves
    assert _entry("26.08", "llama3.1-70b", "gb200", "fp8", 64)["transpose_cache_facts"] == \
        ["src/megatron/bridge/perf_recipes/llama/gb200/llama3.py:269"]
    # the Llama 3 8B H100 functions' keep-True branch (llama3_llm_pretrain.py:268 at v0.2.0) sits under
    # `if cfg.ddp.use_megatron_fsdp:`, which their base configs never reach: the table's recipes run no FSDP there
    for release in ("25.11", "26.02.01"):
        assert not _entry(release, "llama3-8b", "h100", "fp8", 8)["fsdp"]
    # 25.09: the YAML's keep_fp8_transpose_cache_when_using_custom_fsdp is read by no code (megatron-core's default)
    e = _entry("25.09", "llama3-8b", "h100", "fp8", 8)
    assert e["fsdp"] and not e["keep_fp8_transpose_cache"] and e["transpose_cache_facts"] == []
    # no Megatron-FSDP, no transpose cache to keep; and no table recipe keeps one
    recipes = recipes_json()["recipes"]
    assert all(not e["keep_fp8_transpose_cache"] and e["transpose_cache_facts"] == [] for e in recipes if not e["fsdp"])
    assert not any(e["keep_fp8_transpose_cache"] for e in recipes)


def _qwen3_fsdp(**kw):
    from commbench.planner import Layout
    return Layout(tp=1, pp=1, vp=1, ep=1, etp=1, cp=1, dp=256, mbs=8, gbs=8192, recompute="full", precision="fp8",
                  fsdp=True, fsdp_double_buffer=True, **kw)


def test_hopper_fp8_fsdp_plans_launch_as_charged_and_the_launch_reads_back():
    import dataclasses
    from commbench.planner import load_model
    from commbench.planner.emit.megatron import megatron_args, parse_megatron_args
    model = load_model("qwen3-235b-a22b")
    lay = _qwen3_fsdp()
    assert not lay.keep_fp8_transpose_cache          # the plans' launch: Megatron-LM's default
    args = megatron_args(lay, model)
    assert "--keep-fp8-transpose-cache" not in args
    assert not parse_megatron_args(args, 256, model).keep_fp8_transpose_cache
    kept = dataclasses.replace(lay, keep_fp8_transpose_cache=True)
    args = megatron_args(kept, model)
    assert args.count("--keep-fp8-transpose-cache") == 1
    assert parse_megatron_args(args, 256, model).keep_fp8_transpose_cache
    # read with FSDP only: no flag without it
    plain = dataclasses.replace(kept, fsdp=False)
    assert "--keep-fp8-transpose-cache" not in megatron_args(plain, model)


def test_megatron_fsdp_on_hopper_charges_the_fp8_transposes_the_launch_makes_and_holds(monkeypatch):
    """step/fsdp.py "Hopper per-tensor fp8 weights": a transpose pass over every unit parameter (read 1 B, write 1 B)
    per micro-batch, or once a step where the cache is kept and the megatron-core makes transposes only on use (before
    0.16); in memory the running unit's transposes, or every unit's where kept; nothing on Blackwell."""
    import dataclasses
    from commbench.costmodel import load_preset
    from commbench.planner import LayoutArrays, evaluate_layouts, load_model
    from commbench.planner.models.counts import param_counts, step_vocab
    from commbench.planner.step import fsdp, kernels, memory
    from commbench.planner.step.terms import CALIBRATED
    import pytest

    model = load_model("qwen3-235b-a22b")
    fabric = load_preset("h100-hgx", num_gpus=256)
    lay = _qwen3_fsdp()
    kept = dataclasses.replace(lay, keep_fp8_transpose_cache=True)

    def run(*lays, **kw):
        return evaluate_layouts(model, fabric, LayoutArrays.from_layouts(list(lays)), seq_len=4096, **kw)

    charged = run(lay, kept)
    monkeypatch.setattr(memory, "fp8_transpose_needed", lambda gpu: False)
    without = run(lay, kept)
    monkeypatch.undo()
    pc = param_counts(model, vocab=step_vocab(model, 1))
    units = pc.non_expert - pc.embeddings - model.hidden + pc.expert   # all but the vocabulary and the final norm
    n_mb = int(charged.num_microbatches[0])
    gpu = fabric.gpu
    rate = gpu.hbm_tbps * 1e12 * CALIBRATED.hbm_efficiency * kernels.sustained_sm_rate(gpu)
    per_pass = 2.0 * units / rate   # the breakdown's times are a step's
    assert n_mb > 1
    # the plans' megatron-core (0.16.1) makes every unit's transposes at each backward gather, kept or not
    for i in (0, 1):
        assert charged.memory_bound_s[i] - without.memory_bound_s[i] == pytest.approx(n_mb * per_pass, rel=1e-6)
        assert charged.recompute_s[i] == pytest.approx(without.recompute_s[i])   # not recomputed
    assert charged.tokens_per_s_per_gpu[0] < without.tokens_per_s_per_gpu[0]
    # memory: the running unit's (a TransformerLayer: all 94 alike), or every unit's where kept
    assert charged.mem_weights_bytes[0] - without.mem_weights_bytes[0] == pytest.approx(units / model.num_layers,
                                                                                          rel=1e-3)
    assert charged.mem_weights_bytes[1] - without.mem_weights_bytes[1] == pytest.approx(units, rel=1e-3)
    assert charged.tokens_per_s_per_gpu[1] == pytest.approx(charged.tokens_per_s_per_gpu[0])
    # megatron-core 0.14 (25.09): transposes made on use, so the kept cache is made once a step
    old = run(lay, kept, megatron_core=(0, 14))
    assert old.memory_bound_s[0] - old.memory_bound_s[1] == pytest.approx(per_pass * (n_mb - 1), rel=1e-6)
    assert old.tokens_per_s_per_gpu[1] > old.tokens_per_s_per_gpu[0]
    assert fsdp.fp8_transpose_passes_per_step([False, True], 8, (0, 14)).tolist() == [8.0, 1.0]
    assert fsdp.fp8_transpose_passes_per_step([False, True], 8).tolist() == [8.0, 8.0]
    # Blackwell's fp8 GEMMs take the weight as it is; MXFP8 and bf16 gathers, and TorchTitan, have no such pass
    assert fsdp.fp8_transpose_bytes_per_param(True, 1.0, False) == 0.0
    assert fsdp.fp8_transpose_bytes_per_param(False, 1.0, True) == 0.0
    assert fsdp.fp8_transpose_bytes_per_param(True, 2.0, True) == 0.0
    assert fsdp.fp8_transpose_bytes_per_param(True, 1.0, True, "torchtitan") == 0.0
    assert fsdp.fp8_transpose_bytes_per_param(True, 1.0, True) == 1.0


def test_the_search_launches_without_the_cache_unless_pinned():
    from commbench.costmodel import load_preset
    from commbench.planner import load_model
    from commbench.planner.search.candidates import candidates
    from commbench.planner.search.space import SearchRequest

    def req(**pins):
        return SearchRequest(model=load_model("llama3-8b"), fabric=load_preset("h100-hgx", num_gpus=8), num_gpus=8,
                             gbs=128, precision="fp8", pins=pins)
    free, _, _ = candidates(req())
    assert free.fsdp.any() and not free.keep_fp8_transpose_cache.any()
    pinned, _, _ = candidates(req(fsdp=True, keep_fp8_transpose_cache=True))
    assert pinned.fsdp.all() and pinned.keep_fp8_transpose_cache.all()


def test_published_hopper_fsdp_rows_run_without_the_cache_and_pay_the_pass():
    from commbench.planner.calibrate.published import published_runs
    runs = [r for r in published_runs() if r.layout is not None and r.layout.fsdp]
    llama8b_h100 = [r for r in runs if r.model.name == "llama3-8b" and r.row["gpu"] == "H100"]
    assert sorted(r.row["release"] for r in llama8b_h100) == ["25.09", "25.11"]
    assert not any(r.layout.keep_fp8_transpose_cache for r in runs)


def test_the_fp8_transpose_pass_covers_the_unit_parameters_the_memory_charges():
    """One formula for Megatron-FSDP's unit parameters (memory.fsdp_units_per_gpu): the per-micro-batch transpose
    pass reads and writes (2 B each at 1 B per fp8 parameter) exactly the unit parameters whose transposes a kept
    cache holds, on a hybrid with MTP layers (non-unit Mamba layers before megatron-core 0.19, units after) at TP 2."""
    import dataclasses
    from commbench.costmodel import load_preset
    from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
    from commbench.planner.models.counts import step_vocab
    from commbench.planner.step import fsdp, kernels, memory
    from commbench.planner.step.stage_memory import candidate_arrays
    from commbench.planner.step.terms import CALIBRATED
    import pytest

    model = load_model("nemotron-3-super-120b-a12b")
    fabric = load_preset("h100-hgx", num_gpus=64)
    lay = Layout(tp=2, pp=1, vp=1, ep=8, etp=1, cp=1, dp=32, mbs=1, gbs=256, recompute="full", precision="fp8",
                 fsdp=True, fsdp_double_buffer=True)
    kept = dataclasses.replace(lay, keep_fp8_transpose_cache=True)
    gpu = fabric.gpu
    rate = gpu.hbm_tbps * 1e12 * CALIBRATED.hbm_efficiency * kernels.sustained_sm_rate(gpu)
    vocab_params = float(step_vocab(model, 2)) * model.hidden
    load = candidate_arrays(model, 1, 1, 2)[0]
    _, dense_local, expert_local = memory.rank_params_per_gpu(load, vocab_params=vocab_params, dense_share=0.5,
                                                              expert_share=1.0 / 8)
    for core in ((0, 16), (0, 19)):
        units = memory.fsdp_units_per_gpu(model, load, dense_local, expert_local, vocab_params=vocab_params,
                                          dense_share=0.5, mamba_units=fsdp.mamba_units("megatron", core))[2]
        charged = evaluate_layouts(model, fabric, LayoutArrays.from_layouts([lay, kept]), seq_len=4096,
                                   megatron_core=core)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(memory, "fp8_transpose_needed", lambda gpu: False)
            without = evaluate_layouts(model, fabric, LayoutArrays.from_layouts([lay, kept]), seq_len=4096,
                                       megatron_core=core)
        n_mb = int(charged.num_microbatches[0])
        passed = (charged.memory_bound_s[0] - without.memory_bound_s[0]) * rate / (2.0 * n_mb)
        held = charged.mem_weights_bytes[1] - without.mem_weights_bytes[1]
        assert passed == pytest.approx(float(units), rel=1e-9)
        assert held == pytest.approx(float(units), rel=1e-3)
