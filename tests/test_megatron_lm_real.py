"""Emitted Megatron-LM plans through Megatron-LM's own configuration code (tests/megatron_lm.py):
parse_args -> validate_args -> core_transformer_config_from_args with the model's full architecture
flags (checked field by field against the zoo's Architecture) -> process groups on torch's fake backend
-> the layer split Megatron builds. Needs a Megatron-LM checkout at the release matching the installed
megatron-core in MEGATRON_LM_ROOT (its training package is not on PyPI); skipped with that reason
otherwise (test_emit_megatron_real.py then checks the reproduced flag set and validate_args rules)."""

from __future__ import annotations

import pytest

from tests.framework_plans import INSTALL_HINT, case_ids, plan_cases

pytest.importorskip("megatron.core", reason=f"megatron-core is not installed: {INSTALL_HINT}")

from commbench.costmodel import load_preset  # noqa: E402
from commbench.planner.emit.megatron import launch_env, megatron_args  # noqa: E402
from tests.megatron_lm import RELEASE, arguments_module, megatron_whole_path  # noqa: E402

needs_megatron_lm = pytest.mark.skipif(arguments_module() is None, reason=(
    f"MEGATRON_LM_ROOT does not name a Megatron-LM checkout (git clone -b {RELEASE} "
    "https://github.com/NVIDIA/Megatron-LM; its training package is not on PyPI)"))


@needs_megatron_lm
@pytest.mark.parametrize("index", range(len(case_ids())), ids=case_ids())
def test_megatron_lm_accepts_the_emitted_plan(index, monkeypatch):
    case = plan_cases()[index]
    gpu = load_preset(case.system, num_gpus=case.gpus).gpu
    argv = megatron_args(case.layout, case.model)
    megatron_whole_path(arguments_module(), argv, layout=case.layout, model=case.model, gpus=case.gpus, gpu=gpu,
                        env=launch_env(case.layout, gpu.name), monkeypatch=monkeypatch)


def _fp8_attention_layout():
    from commbench.planner import Layout
    return Layout.for_world(16, tp=1, pp=1, mbs=1, gbs=128, precision="mxfp8", fp8_attention=True)


@needs_megatron_lm
def test_megatron_lm_has_no_fp8_attention_flag(monkeypatch):
    """Megatron-LM core_v0.16.1's parse_args rejects --fp8-dot-product-attention (arguments.py lists
    TransformerConfig.fp8_dot_product_attention among the fields with no CLI argument): the flag a plan pinned with
    fp8_attention=true wrote, so pretrain_gpt.py exited 2 on it. Without the flag the same plan parses."""
    import dataclasses

    from commbench.planner import load_model
    from tests.megatron_lm import megatron_config, target_gpu
    model, lay = load_model("llama3-8b"), _fp8_attention_layout()
    argv = megatron_args(dataclasses.replace(lay, fp8_attention=False), model)
    with target_gpu(monkeypatch, (10, 0)):
        megatron_config(arguments_module(), argv, 16, {}, monkeypatch)
        with pytest.raises(SystemExit):
            megatron_config(arguments_module(), argv + ["--fp8-dot-product-attention"], 16, {}, monkeypatch)


def test_a_plan_pinned_with_fp8_attention_says_megatron_lm_cannot_launch_it(tmp_path):
    """plan --layout fp8_attention=true (GB200, mxfp8) wrote megatron_args.txt with --fp8-dot-product-attention, which
    Megatron-LM core_v0.16.1 refuses; the Megatron section is now refused in one line naming the flag and what to do,
    and no megatron_args.txt is written (the prediction stays, as for other combinations Megatron refuses)."""
    import json

    from typer.testing import CliRunner

    from commbench.cli.app import app
    from commbench.errors import CommbenchError
    from commbench.planner import load_model
    with pytest.raises(CommbenchError, match="has no --fp8-dot-product-attention"):
        megatron_args(_fp8_attention_layout(), load_model("llama3-8b"))
    result = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "gb200-nvl72", "--gpus", "16",
                                      "--precision", "mxfp8", "--gbs", "128", "--layout", "fp8_attention=true",
                                      "--top", "1", "-O", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    refused = json.loads((tmp_path / "plan.json").read_text())["megatron"]["refused"]
    assert "\n" not in refused and refused.startswith("fp8_attention=true: Megatron-LM core_v0.16.1") and \
        "fp8_attention=false" in refused
    assert not (tmp_path / "megatron_args.txt").exists() and f"Megatron-LM: {refused}" in result.output


LIGHT_RECOMPUTE_MISFITS = [("qwen3-30b-a3b", "mla_up_proj", "only supported with multi_latent_attention"),
                           ("llama3-8b", "moe_act", "only supported with moe_grouped_gemm"),
                           ("llama3-8b", "mla_up_proj", "only supported with multi_latent_attention")]


@pytest.mark.parametrize("name, recompute, why", LIGHT_RECOMPUTE_MISFITS)
def test_a_light_recompute_pin_the_model_has_no_module_for_is_refused_in_one_line(name, recompute, why):
    """Pinned, that recompute was planned and its megatron_args.txt failed in TransformerConfig; the search (plan and
    plan --layout) now refuses the pin in one line naming the field, the value and what the model takes. The models
    with the module keep it (DeepSeek-V3 mla_up_proj, Qwen3-30B-A3B moe_act)."""
    from commbench.errors import CommbenchError
    from commbench.planner import load_model
    from commbench.planner.search.frameworks import framework_pins

    with pytest.raises(CommbenchError, match=rf"^recompute='{recompute}' is invalid for {name}: .*; one of none, "
                                             r"selective, full"):
        framework_pins("megatron", load_model(name), {"recompute": recompute})
    assert framework_pins("megatron", load_model("deepseek-v3"), {"recompute": "mla_up_proj"})["recompute"] == \
        "mla_up_proj"
    assert framework_pins("megatron", load_model("qwen3-30b-a3b"), {"recompute": "moe_act"})["recompute"] == "moe_act"


# A pinned per-layer CUDA-graph scope megatron-core 0.16.1's TransformerConfig refuses for the model (model, scope, why)
GRAPH_SCOPE_MISFITS = [("llama3-8b", "attn+moe_router+moe_preprocess", "moe cuda graph is only supported for MoE"),
                       ("qwen3-30b-a3b", "attn+mlp", "mlp cuda graph is only supported for dense layers"),
                       ("qwen3-30b-a3b", "moe", "moe cuda graph is only supported with drop-padding MoE")]


# Both lists as the flags the plan emitted: (model, layout field, value, its flag, what TransformerConfig raises, why)
MODULE_MISFITS = ([(n, "recompute", v, "--recompute-modules", ValueError, w) for n, v, w in LIGHT_RECOMPUTE_MISFITS]
                  + [(n, "cuda_graph_scope", v, "--cuda-graph-scope", AssertionError, w) for n, v, w in GRAPH_SCOPE_MISFITS])


@needs_megatron_lm
@pytest.mark.parametrize("name, field, value, flag, error, why", MODULE_MISFITS)
def test_megatron_refuses_a_module_pin_the_model_has_no_module_for(name, field, value, flag, error, why, monkeypatch):
    """What plan --layout recompute=mla_up_proj (a model without MLA) or moe_act (a dense model), or cuda_graph=layer
    with a cuda_graph_scope the model has no module for, emitted (--recompute-modules / --cuda-graph-scope <it>),
    through Megatron-LM core_v0.16.1's parse_args -> validate_args -> core_transformer_config_from_args: megatron-core's
    TransformerConfig refuses it (the graph scopes with an AssertionError, a traceback at launch). The emitter now
    refuses such a scope itself (frameworks.megatron_graph_scope_refusal): the flags are built past that check."""
    import dataclasses

    from commbench.errors import CommbenchError
    from commbench.planner import Layout, load_model
    from commbench.planner.emit import megatron as emit_megatron
    from tests.megatron_lm import megatron_config, target_gpu
    model = load_model(name)
    graph = {"cuda_graph": "layer"} if field == "cuda_graph_scope" else {}
    lay = dataclasses.replace(Layout.for_world(8, tp=1, pp=1, ep=8 if model.is_moe else 1, etp=1, mbs=1, gbs=64,
                                               **graph), **{field: value})
    if field == "cuda_graph_scope":
        with pytest.raises(CommbenchError, match=r"^cuda_graph_scope="):
            megatron_args(lay, model)
        monkeypatch.setattr(emit_megatron, "megatron_graph_scope_refusal", lambda *a, **k: None)
    argv = megatron_args(lay, model)
    i = argv.index(flag)
    assert argv[i + 1:i + 1 + len(value.split("+"))] == value.split("+")
    with target_gpu(monkeypatch, (10, 0)), pytest.raises(error, match=why):
        megatron_config(arguments_module(), argv, 8, {}, monkeypatch)


@pytest.mark.parametrize("name, scope, why", GRAPH_SCOPE_MISFITS)
def test_a_graph_scope_pin_the_model_cannot_take_is_refused_in_one_line(name, scope, why, tmp_path):
    """Pinned, those scopes were planned and megatron_args.txt failed in TransformerConfig's __post_init__ (an
    AssertionError traceback); plan now refuses the pin in one line naming the field, the value, the model and the
    modules it takes. Scopes the model takes keep planning (DeepSeek-V3 has dense layers for mlp; a MoE model's router)."""
    from typer.testing import CliRunner

    from commbench.cli.app import app
    from commbench.errors import CommbenchError
    from commbench.planner import load_model
    from commbench.planner.search.frameworks import framework_pins
    import re
    with pytest.raises(CommbenchError, match=rf"^cuda_graph_scope='{re.escape(scope)}' is invalid for {name}: .*megatron-core 0\.16\.1"):
        framework_pins("megatron", load_model(name), {"cuda_graph": "layer", "cuda_graph_scope": scope})
    assert framework_pins("megatron", load_model("deepseek-v3"), {"cuda_graph_scope": "attn+mlp"})
    assert framework_pins("megatron", load_model("qwen3-30b-a3b"), {"cuda_graph_scope": "attn+moe_router"})
    result = CliRunner().invoke(app, ["plan", "--model", name, "--system", "gb200-nvl72", "--gpus", "8", "--gbs", "64",
                                      "--layout", f"cuda_graph=layer,cuda_graph_scope={scope}", "--top", "1",
                                      "-O", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 2 and result.output.startswith("error: cuda_graph_scope=") and \
        len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "megatron_args.txt").exists()


def test_a_pinned_per_layer_graph_is_never_planned_with_full_recompute(monkeypatch):
    """plan --layout cuda_graph=layer for DeepSeek-V3 on 64 GB200 picked recompute=full (the only recompute that
    fits there), which megatron-core refuses under per-layer graphs ("full recompute is only supported with full
    iteration CUDA graph"): the plan's Megatron section was refused. The search now keeps per-layer graphs off
    full-recompute rows, and pinning both is refused in one line; the planned layout launches. On 64 GPUs no
    per-layer-graph row fits (Megatron-FSDP rows run no CUDA graph: frameworks.MEGATRON_FSDP_NO_GRAPHS); on 128 it
    plans per-layer graphs without full recompute."""
    from commbench.errors import CommbenchError
    from commbench.planner import load_model
    from commbench.planner.search.space import SearchRequest, search
    model = load_model("deepseek-v3")
    # on 64 GPUs the selective-recompute rows at the memory edge fitted until the optimizer step's fp32 gradient
    # copy was charged (STEP_MODEL .26); none fits now, and the full-recompute rows that would are not offered
    with pytest.raises(CommbenchError, match=r"^no layout of deepseek-v3 with cuda_graph=layer fits in memory on 64 GPUs"):
        search(SearchRequest(model=model, fabric=load_preset("gb200-nvl72", num_gpus=64), num_gpus=64, gbs=256,
                             precision="mxfp8", pins={"cuda_graph": "layer"}, keep=5))
    gpus = 128
    fabric = load_preset("gb200-nvl72", num_gpus=gpus)
    res = search(SearchRequest(model=model, fabric=fabric, num_gpus=gpus, gbs=256, precision="mxfp8",
                               pins={"cuda_graph": "layer"}, keep=5))
    assert len(res.layouts) and (res.layouts.cuda_graph == 1).all() and (res.layouts.recompute != 2).all()
    lay = res.layouts.layout(0)
    argv = megatron_args(lay, model)   # the emitter's own refusal used to fire here
    if arguments_module() is not None:
        gpu = fabric.gpu
        megatron_whole_path(arguments_module(), argv, layout=lay, model=model, gpus=gpus, gpu=gpu,
                            env=launch_env(lay, gpu.name), monkeypatch=monkeypatch)
    with pytest.raises(CommbenchError, match=r"^cuda_graph='layer' is invalid with recompute='full': megatron-core"):
        SearchRequest(model=model, fabric=fabric, num_gpus=gpus, gbs=256, precision="mxfp8",
                      pins={"cuda_graph": "layer", "recompute": "full"})


def _with_capacity_factor(name: str, factor: float):
    import dataclasses

    from commbench.planner import load_model
    model = load_model(name)
    return dataclasses.replace(model, architecture=dataclasses.replace(model.architecture, capacity_factor=factor))


def test_a_capacity_factor_model_is_never_planned_with_a_synced_preprocess_graph(monkeypatch):
    """A MoE model with a capacity factor (a --model-file's capacity_factor, emitted as --moe-expert-capacity-factor)
    planned with per-layer graphs and the alltoall dispatcher got the recipes' scope attn+moe_router+moe_preprocess,
    which megatron-core's TransformerConfig refuses there ("moe_preprocess cuda graph is not supported when there are
    DtoH copies and synchronizations in the preprocess step"): an AssertionError traceback at launch. Those rows now
    run eager (cuda_graph searched) or are dropped (cuda_graph pinned), and a pin leaving none is refused in one line;
    a scope without moe_preprocess launches."""
    from commbench.errors import CommbenchError
    from commbench.planner.search.space import SearchRequest, search
    model, gpus = _with_capacity_factor("qwen3-30b-a3b", 1.25), 16
    fabric = load_preset("gb200-nvl72", num_gpus=gpus)

    def req(**pins):
        return SearchRequest(model=model, fabric=fabric, num_gpus=gpus, gbs=128, precision="mxfp8",
                             pins=dict(dispatcher="alltoall", mbs=1, **pins), keep=5)
    searched = search(req()).layouts
    assert (searched.cuda_graph != 1).all()   # eager or the full-iteration graph, never per-layer over moe_preprocess
    with pytest.raises(CommbenchError, match=r"^cuda_graph_scope='attn\+moe_router\+moe_preprocess' is invalid for "
                                             r"qwen3-30b-a3b with the alltoall dispatcher: .*capacity factor 1\.25"):
        search(req(cuda_graph="layer"))
    lay = search(req(cuda_graph="layer", cuda_graph_scope="attn+moe_router")).layouts.layout(0)
    argv = megatron_args(lay, model)
    assert "--moe-expert-capacity-factor" in argv and "moe_preprocess" not in argv
    if arguments_module() is not None:
        megatron_whole_path(arguments_module(), argv, layout=lay, model=model, gpus=gpus, gpu=fabric.gpu,
                            env=launch_env(lay, fabric.gpu.name), monkeypatch=monkeypatch)


@needs_megatron_lm
def test_megatron_refuses_a_preprocess_graph_with_a_capacity_factor_and_alltoall(monkeypatch):
    """The launch those plans emitted, through Megatron-LM core_v0.16.1's configuration path."""
    from commbench.planner import Layout
    from tests.megatron_lm import megatron_config, target_gpu
    model = _with_capacity_factor("qwen3-30b-a3b", 1.25)
    lay = Layout.for_world(8, tp=1, pp=1, ep=8, etp=1, mbs=1, gbs=64, cuda_graph="layer", dispatcher="alltoall")
    argv = megatron_args(lay, model)
    with target_gpu(monkeypatch, (10, 0)), pytest.raises(AssertionError, match="moe_preprocess cuda graph is not supported"):
        megatron_config(arguments_module(), argv, 8, {}, monkeypatch)


def test_a_moe_plan_never_takes_a_full_iteration_graph_megatron_core_cannot_capture(monkeypatch):
    """plan --model mixtral-8x7b --system b200-hgx --gpus 16 --precision mxfp8 picked a full-iteration CUDA graph
    ('--cuda-graph-impl local --cuda-graph-scope full_iteration' with dropless MoE and the DeepEP flex dispatcher).
    megatron-core 0.16.1 cannot capture dropless MoE (per-expert token counts change every step and are read on the
    host; Megatron-Bridge pads them with Megatron-Core's paged stashing, which 0.16.1 lacks, and 0.16.1's only padding,
    --moe-pad-expert-input-to-capacity, drops tokens and is refused with DeepEP). The search keeps MoE layouts off the
    full-iteration graph under --framework megatron, the pin is refused in one line, and the plan says why."""
    import dataclasses

    from typer.testing import CliRunner

    from commbench.cli.app import app
    from commbench.errors import CommbenchError
    from commbench.planner import Layout, load_model
    from megatron.core.transformer.transformer_config import TransformerConfig
    from tests.megatron_lm import best_plan_through_megatron
    fields = {f.name for f in dataclasses.fields(TransformerConfig)}
    assert "moe_paged_stash" not in fields and "moe_expert_rank_capacity_factor" not in fields
    with pytest.raises(ValueError, match="does not support moe_pad_expert_input_to_capacity"):
        TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, num_moe_experts=8, moe_router_topk=2,
                          moe_token_dispatcher_type="flex", moe_flex_dispatcher_backend="deepep",
                          moe_expert_capacity_factor=1.0, moe_pad_expert_input_to_capacity=True)
    model = load_model("mixtral-8x7b")
    args, _ = best_plan_through_megatron(model, monkeypatch, preset="b200-hgx", gpus=16, gbs=256, precision="mxfp8")
    assert "full_iteration" not in args and "--num-experts" in args
    base = ["plan", "--model", "mixtral-8x7b", "--system", "b200-hgx", "--gpus", "16", "--gbs", "256", "--precision",
            "mxfp8", "--top", "1"]
    out = CliRunner().invoke(app, base, env={"COLUMNS": "200"})
    assert out.exit_code == 0 and "cannot capture dropless MoE" in out.output, out.output
    pinned = CliRunner().invoke(app, base + ["--layout", "cuda_graph=full"], env={"COLUMNS": "200"})
    assert pinned.exit_code == 2 and len(pinned.output.strip().splitlines()) == 1, pinned.output
    assert pinned.output.startswith("error: cuda_graph='full' is invalid for mixtral-8x7b with --framework megatron")
    with pytest.raises(CommbenchError, match="cannot capture dropless MoE"):
        megatron_args(Layout.for_world(16, tp=1, pp=1, ep=8, etp=1, mbs=1, gbs=256, cuda_graph="full"), model)
    # a dense model keeps it (llama3-8b on B200: the searched plan's full-iteration graph goes through Megatron-LM)
    dense, _ = best_plan_through_megatron(load_model("llama3-8b"), monkeypatch, preset="b200-hgx", gpus=8, gbs=256)
    assert "full_iteration" in dense


def test_launch_env_names_the_script_a_hybrid_model_s_flags_are_for(tmp_path, monkeypatch):
    """plan -O for Nemotron-3-Nano wrote megatron_args.txt (--is-hybrid-model --hybrid-override-pattern ...) and a
    launch.env that named no script: Megatron-LM core_v0.16.1's pretrain_gpt.py parses those flags and builds a
    GPTModel without the Mamba layers (gpt_builders.py reads neither); only pretrain_mamba.py builds the model. launch.env
    now names the script; the files go through Megatron-LM's whole configuration path as written."""
    import json
    import shlex

    from typer.testing import CliRunner

    from commbench.cli.app import app
    from commbench.planner import Layout, load_model
    for name, script in (("nemotron-3-nano-30b-a3b", "pretrain_mamba.py"), ("qwen3-30b-a3b", "pretrain_gpt.py")):
        out = tmp_path / name
        res = CliRunner().invoke(app, ["plan", "--model", name, "--system", "gb200-nvl72", "--gpus", "16", "--gbs", "256",
                                       "--top", "1", "-O", str(out)], env={"COLUMNS": "200"})
        assert res.exit_code == 0, res.output
        doc = json.loads((out / "plan.json").read_text())
        env_text = (out / "launch.env").read_text()
        assert doc["megatron"]["script"] == script and f"# Megatron-LM script: {script} " in env_text
        assert ("without the hybrid pattern's Mamba layers" in env_text) == (script == "pretrain_mamba.py")
        if arguments_module() is None:
            continue
        env = dict(line.split("=", 1) for line in env_text.splitlines() if line and not line.startswith("#"))
        model, lay = load_model(name), Layout(**doc["layout"])
        megatron_whole_path(arguments_module(), shlex.split((out / "megatron_args.txt").read_text()), layout=lay,
                            model=model, gpus=16, gpu=load_preset("gb200-nvl72", num_gpus=16).gpu, env=env,
                            monkeypatch=monkeypatch)


def test_a_pinned_capture_scope_plans_the_per_layer_graph_it_is_for(tmp_path, monkeypatch):
    """plan --layout cuda_graph_scope=attn (Llama 3 8B, 8 GB200) planned cuda_graph=full: plan.json said
    cuda_graph 'full' with cuda_graph_scope 'attn' and megatron_args.txt captured the full iteration
    (--cuda-graph-scope full_iteration), the pinned scope dropped without a word. A scope now pins cuda_graph=layer
    (the graph it belongs to), and beside cuda_graph=full or none it is refused in one line."""
    import json
    import shlex

    from typer.testing import CliRunner

    from commbench.cli.app import app
    from commbench.planner import Layout, load_model
    base = ["plan", "--model", "llama3-8b", "--system", "gb200-nvl72", "--gpus", "8", "--gbs", "128", "--top", "1"]
    res = CliRunner().invoke(app, base + ["--layout", "cuda_graph_scope=attn", "-O", str(tmp_path)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert (doc["layout"]["cuda_graph"], doc["layout"]["cuda_graph_scope"]) == ("layer", "attn")
    argv = shlex.split((tmp_path / "megatron_args.txt").read_text())
    i = argv.index("--cuda-graph-impl")
    assert argv[i:i + 4] == ["--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", "attn"]
    if arguments_module() is not None:
        _, cfg = megatron_whole_path(arguments_module(), argv, layout=Layout(**doc["layout"]), model=load_model("llama3-8b"),
                                     gpus=8, gpu=load_preset("gb200-nvl72", num_gpus=8).gpu, env={}, monkeypatch=monkeypatch)
        assert [s.name for s in cfg.cuda_graph_scope] == ["attn"] and cfg.cuda_graph_impl == "transformer_engine"
    for graph in ("full", "none"):
        bad = CliRunner().invoke(app, base + ["--layout", f"cuda_graph_scope=attn,cuda_graph={graph}"], env={"COLUMNS": "200"})
        assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1, bad.output
        assert bad.output.startswith(f"error: --layout cuda_graph_scope='attn' is invalid: no scope with "
                                     f"cuda_graph={graph}")


def test_a_llama_rope_scaling_factor_pretrain_gpt_does_not_build_is_said_in_the_plan():
    """Megatron-LM core_v0.16.1's pretrain_gpt.py builds GPTModel with gpt_builders.gpt_builder, which passes
    rope_scaling=args.use_rope_scaling and no rope_scaling_factor, so GPTModel keeps its default 8.0 (megatron-core
    0.16.1 models/gpt/gpt_model.py); --rope-scaling-factor is parsed and used nowhere else in that release.
    hf:Llama-3.2-1B-Instruct (rope_scaling factor 32) was emitted with '--use-rope-scaling --rope-scaling-factor 32'
    and trained factor 8, the plan saying nothing; its Megatron notes now say so. Llama 3.1 (factor 8) gets no note."""
    import inspect
    from pathlib import Path

    from megatron.core.models.gpt.gpt_model import GPTModel

    from commbench.planner import Layout, load_model
    from commbench.planner.emit.megatron_arch import architecture_notes
    assert inspect.signature(GPTModel.__init__).parameters["rope_scaling_factor"].default == 8.0
    hf = Path(__file__).parent / "data" / "hf"
    model = load_model(f"hf:{hf / 'Llama-3.2-1B-Instruct'}")
    assert "--rope-scaling-factor" in megatron_args(Layout.for_world(8, tp=1, pp=1, mbs=1, gbs=64), model)
    said = [n for n in architecture_notes(model) if "rope_scaling_factor" in n]
    assert len(said) == 1 and "32" in said[0] and "8" in said[0] and "gpt_builder" in said[0], architecture_notes(model)
    assert not architecture_notes(load_model("llama3.1-70b"))
    assert not architecture_notes(load_model(f"hf:{hf / 'Llama-3.1-8B'}"))
