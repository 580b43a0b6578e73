"""Hybrid (Mamba-2 / attention / MoE) plans: the step model's hybrid terms, the pipeline split MambaStack
builds, and the emitted Megatron-LM arguments against Megatron's own code.

Called (megatron-core 0.16.1 from PyPI): the hybrid layer allocation (`allocate_layers`, which
validates the pattern against --num-layers), TransformerConfig construction with the Mamba fields, and
MambaStack's own per-rank layer selection (`_select_layers_for_pipeline_parallel`).
Called when Megatron-LM's source is at $MEGATRON_LM_ROOT (a checkout or `git archive core_v0.16.1
megatron pretrain_mamba.py` of NVIDIA/Megatron-LM; megatron/training is not on PyPI): its own
`parse_args` + `validate_args` on the emitted arguments (skipped otherwise), with the GPU's compute
capability answered as the plan's GB200 (10.0) since torch here is a CPU build, and Transformer Engine
(GPU-only) taken to be 2.10 as tests/test_emit_megatron_real.py takes it.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from commbench.costmodel import load_preset
from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.emit.megatron import megatron_args
from commbench.planner.layout.split import choose_split, split_options, stage_imbalance
from commbench.planner.step.mamba import block_counts
from tests.megatron_lm import tokens

NANO = "nemotron-3-nano-30b-a3b"
HF = Path(__file__).parent / "data" / "hf"

LAYOUTS = [  # (gpus, layout): the published recipe, and TP / PP / CP / ETP variants
    (8, dict(tp=1, pp=1, ep=8, etp=1, mbs=2, gbs=512)),
    (16, dict(tp=2, pp=2, ep=8, etp=1, mbs=1, gbs=512, sequence_parallel=True)),
    (32, dict(tp=1, pp=4, ep=8, etp=1, mbs=1, gbs=512)),
    # 52 layers over pp=8 (probe M finding 4: refused before; MambaStack builds first/last counts far from the middle's)
    (64, dict(tp=1, pp=8, ep=8, etp=1, mbs=1, gbs=512)),
    (16, dict(tp=2, pp=1, cp=2, ep=8, etp=2, mbs=1, gbs=256, sequence_parallel=True)),
    # what the search picks on 8 GB200 (flex dispatcher, per-layer CUDA graphs; no EP overlap, which MambaModel
    # cannot run: test_hybrid_megatron_limits.py)
    (8, dict(tp=1, pp=1, ep=8, etp=1, mbs=2, gbs=512, dispatcher="flex", moe_a2a_overlap=False, cuda_graph="layer",
             recompute="none")),
]


def _layout(gpus: int, kw: dict) -> Layout:
    tp, pp, cp = kw.get("tp", 1), kw.get("pp", 1), kw.get("cp", 1)
    return Layout(**{"vp": 1, "cp": 1, **kw, "dp": gpus // (tp * pp * cp)})


def test_block_counts_by_kind():
    c = block_counts(load_model(NANO))
    assert (c.attention, c.mamba, c.dense, c.moe, c.layers) == (6, 23, 0, 23, 52)
    dsv3 = block_counts(load_model("deepseek-v3"))
    assert (dsv3.attention, dsv3.mamba, dsv3.dense, dsv3.moe, dsv3.layers) == (62, 0, 3, 59, 62)


def test_hybrid_split_is_what_mamba_stack_builds():
    m = load_model(NANO)
    assert split_options(m, 2, 2) == []                      # MambaStack: no interleaving in 0.16
    assert {s.method for s in split_options(m, 4, 1)} <= {"even", "uneven"}
    split = choose_split(m, 4, 1)
    assert sum(split.decoder_layers()) == 52
    # layers differ in cost (an MoE layer ~5x an attention one at seq 8192), so the busiest rank is
    # the one with the heaviest slice of the pattern, not just the most layers
    imb = float(stage_imbalance(m, np.array([4]), np.array([1]))[0])
    assert imb > 1.0


def test_mamba_terms_enter_the_step_model():
    m = load_model(NANO)
    fabric = load_preset("gb200-nvl72", num_gpus=16)
    tp1 = _layout(16, dict(tp=1, pp=1, ep=8, etp=1, mbs=1, gbs=256))
    cp2 = _layout(16, dict(tp=1, pp=1, cp=2, ep=8, etp=1, mbs=1, gbs=256))
    bd = evaluate_layouts(m, fabric, LayoutArrays.from_layouts([tp1, cp2]))
    assert bd.valid.all()
    assert bd.cp_total_s[0] == 0 and bd.cp_exposed_s[1] > 0     # Mamba's CP all-to-alls are charged, exposed
    no_mamba = evaluate_layouts(
        load_model(NANO).__class__(**{**{f: getattr(m, f) for f in m.__dataclass_fields__},
                                      "layer_pattern": m.layer_pattern.replace("M", "*")}),
        fabric, LayoutArrays.from_layouts([tp1]))
    # 23 attention layers instead of 23 Mamba ones: different memory and time (the terms are not the same)
    assert no_mamba.mem_activations_bytes[0] != bd.mem_activations_bytes[0]


def test_mamba_heads_and_groups_must_divide_over_tp():
    m = load_model(NANO)   # 64 Mamba heads, 8 groups, 32 attention heads, 2 KV heads
    from commbench.planner.layout.spec import RULE_BITS, layout_violations
    arr = LayoutArrays.from_layouts([_layout(16, dict(tp=2, pp=1, ep=8, etp=1, mbs=1, gbs=256)),
                                     _layout(64, dict(tp=16, pp=1, ep=4, etp=1, mbs=1, gbs=256))])
    bits = layout_violations(m, arr, np.array([16, 64]))
    assert not bits[0] & RULE_BITS["heads"] and bits[1] & RULE_BITS["heads"]


def test_super_latent_moe_emits_and_mtp_is_refused_for_megatron_0_16():
    import dataclasses
    m = load_model("nemotron-3-super-120b-a12b")
    lay = _layout(64, dict(tp=1, pp=1, ep=64, etp=1, mbs=1, gbs=512))
    with pytest.raises(Exception, match="MambaModel builds no MTP layers"):
        megatron_args(lay, m)
    ns = tokens(megatron_args(lay, dataclasses.replace(m, num_mtp_layers=0)))
    assert ns["moe_latent_size"] == 1024 and ns["num_experts"] == 512 and ns["num_layers"] == 88
    # the dispatcher moves latent-wide tokens: a quarter of the bytes of a hidden-wide model
    fabric = load_preset("gb200-nvl72", num_gpus=64)
    wide = dataclasses.replace(m, moe_latent_size=0)
    a, b = (evaluate_layouts(x, fabric, LayoutArrays.from_layouts([lay])) for x in (m, wide))
    assert a.ep_total_s[0] < 0.5 * b.ep_total_s[0]


@pytest.mark.parametrize("gpus, kw", LAYOUTS)
def test_emitted_hybrid_flags_build_in_megatron_core(gpus, kw):
    pytest.importorskip("megatron.core")
    from megatron.core.ssm.mamba_block import MambaStack
    from megatron.core.ssm.mamba_hybrid_layer_allocation import allocate_layers
    from megatron.core.transformer.transformer_config import TransformerConfig
    from megatron.core.activations import squared_relu
    import torch

    m = load_model(NANO)
    lay = _layout(gpus, kw)
    args = megatron_args(lay, m)
    ns = tokens(args)
    assert ns["hybrid_override_pattern"] == m.layer_pattern and ns["is_hybrid_model"] and ns["squared_relu"]
    assert ns["num_layers"] == len(m.layer_pattern) and ns["position_embedding_type"] == "none"
    assert "moe_layer_freq" not in ns and "swiglu" not in ns
    assert allocate_layers(ns["num_layers"], 0.0, 0.0, ns["hybrid_override_pattern"]) == list(m.layer_pattern)
    cfg = TransformerConfig(
        num_layers=ns["num_layers"], hidden_size=ns["hidden_size"], num_attention_heads=ns["num_attention_heads"],
        num_query_groups=ns["num_query_groups"], kv_channels=ns["kv_channels"], is_hybrid_model=True,
        mamba_num_heads=ns["mamba_num_heads"], mamba_head_dim=ns["mamba_head_dim"],
        mamba_state_dim=ns["mamba_state_dim"], mamba_num_groups=ns["mamba_num_groups"],
        activation_func=squared_relu, num_moe_experts=ns["num_experts"], moe_ffn_hidden_size=ns["moe_ffn_hidden_size"],
        moe_router_topk=ns["moe_router_topk"], moe_shared_expert_intermediate_size=ns["moe_shared_expert_intermediate_size"],
        moe_grouped_gemm=True, add_bias_linear=False, tensor_model_parallel_size=lay.tp,
        pipeline_model_parallel_size=lay.pp, context_parallel_size=lay.cp, expert_model_parallel_size=lay.ep,
        expert_tensor_parallel_size=lay.etp, sequence_parallel=bool(ns.get("sequence_parallel")),
        num_layers_in_first_pipeline_stage=ns.get("decoder_first_pipeline_num_layers"),
        num_layers_in_last_pipeline_stage=ns.get("decoder_last_pipeline_num_layers"),
        params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16, bf16=True)
    # MambaStack's own slicing of the pattern per pipeline rank equals the split the step model charged
    from commbench.planner.layout.split import split_vocab
    split = choose_split(m, lay.pp, lay.vp, split_vocab(m, lay.tp))   # the rows the step model charged
    built = []
    for rank in range(lay.pp):
        fake = types.SimpleNamespace(config=cfg, pp_group=types.SimpleNamespace(rank=lambda r=rank: r,
                                                                                size=lambda: lay.pp))
        _, layers = _select(MambaStack, fake, list(m.layer_pattern), rank, lay.pp)
        built.append(len(layers))
        assert "".join(layers) == m.layer_pattern[sum(built[:-1]):sum(built)]
    assert built == split.decoder_layers()


def _select(cls, fake, pattern, rank, size):
    """MambaStack._select_layers_for_pipeline_parallel as pipeline rank `rank` of `size` runs it."""
    return cls._select_layers_for_pipeline_parallel(fake, pattern)


MEGATRON_LM_ROOT = os.environ.get("MEGATRON_LM_ROOT")


@pytest.mark.skipif(not MEGATRON_LM_ROOT, reason="set MEGATRON_LM_ROOT to a Megatron-LM core_v0.16.1 source tree")
@pytest.mark.parametrize("name, gpus, kw", [(NANO, g, k) for g, k in LAYOUTS] + [
    ("nemotron-3-super-120b-a12b", 64, dict(tp=1, pp=1, ep=64, etp=1, mbs=1, gbs=512)),
    ("nemotron-3-super-120b-a12b", 128, dict(tp=2, pp=4, ep=32, etp=1, mbs=1, gbs=512, sequence_parallel=True)),
    # Nemotron-3 Ultra: the published GB200 row's TP2 EP64 on 256 GPUs, and a pipelined MambaStack split
    ("nemotron-3-ultra-550b-a55b", 256, dict(tp=2, pp=1, ep=64, etp=1, mbs=1, gbs=256, sequence_parallel=True)),
    ("nemotron-3-ultra-550b-a55b", 256, dict(tp=2, pp=4, ep=32, etp=1, mbs=1, gbs=512, sequence_parallel=True))])
def test_megatron_lm_parse_and_validate_args_accept_the_hybrid_plan(name, gpus, kw, monkeypatch):
    """Megatron-LM's own parse_args + validate_args (pretrain_mamba.py's path) on the emitted flags."""
    pytest.importorskip("megatron.core")
    monkeypatch.syspath_prepend(MEGATRON_LM_ROOT)
    # megatron/training imports a Triton batch-invariance module at import time; Triton is GPU-only
    stub = types.ModuleType("batch_invariant_kernels")
    stub.enable_batch_invariant_mode = lambda *a, **k: None
    stub.is_batch_invariant_mode_enabled = lambda *a, **k: False
    monkeypatch.setitem(sys.modules, "megatron.core.transformer.custom_layers.batch_invariant_kernels", stub)
    from megatron.training import arguments
    import torch
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (10, 0))  # the plan's GB200 (CPU here)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *a: types.SimpleNamespace(major=10, minor=0))
    import megatron.core.utils as mcore_utils
    from packaging.version import Version
    monkeypatch.setattr(mcore_utils, "get_te_version", lambda: Version("2.10.0"))  # GPU-only package (as
    # tests/test_emit_megatron_real.py takes it)

    import dataclasses
    m = dataclasses.replace(load_model(name), num_mtp_layers=0)  # Megatron-LM 0.16 builds no hybrid MTP
    lay = _layout(gpus, kw)
    argv = megatron_args(lay, m) \
        + ["--tokenizer-type", "NullTokenizer", "--vocab-size", str(m.vocab)]
    monkeypatch.setattr(sys, "argv", ["pretrain_mamba.py", *argv])
    for key, value in dict(WORLD_SIZE=str(gpus), RANK="0", LOCAL_RANK="0").items():
        monkeypatch.setenv(key, value)
    args = arguments.parse_args()
    arguments.validate_args(args, {})
    assert args.hybrid_override_pattern == m.layer_pattern and args.num_layers == len(m.layer_pattern)
    assert args.is_hybrid_model and args.mamba_num_heads == m.mamba_num_heads
    assert shlex.join(argv)


@pytest.mark.parametrize("model, script", [(f"hf:{HF / 'Nemotron-H-8B-Base-8K'}", "pretrain_mamba.py"),
                                           (NANO, "pretrain_mamba.py"), ("llama3-8b", "pretrain_gpt.py")])
def test_the_plan_names_the_script_that_builds_the_model(model, script, tmp_path):
    """A hybrid plan's Megatron-LM flags are pretrain_mamba.py's: pretrain_gpt.py builds a GPTModel (gpt_builders.py)
    and ignores --hybrid-override-pattern. plan.json said "pretrain_gpt.py flags" for Nemotron-H, so a user launching
    what it named trained a model without its Mamba layers; the plan (target, script, the printed line) names it now."""
    import json

    from typer.testing import CliRunner

    from commbench.cli.app import app
    result = CliRunner().invoke(app, ["plan", "--model", model, "--system", "h100-hgx", "--gpus", "8", "--gbs", "64",
                                      "--top", "1", "-O", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "plan.json").read_text())
    other = ({"pretrain_gpt.py", "pretrain_mamba.py"} - {script}).pop()
    assert doc["megatron"]["script"] == script
    for target in (doc["megatron"]["target"], doc["emitters"]["megatron"]):
        assert f"({script} flags" in target and other not in target
    assert f"Megatron-LM: {script} --num-layers " in result.output
    assert ("--is-hybrid-model" in (tmp_path / "megatron_args.txt").read_text()) == (script == "pretrain_mamba.py")


@pytest.mark.parametrize("model", [f"hf:{HF / 'Nemotron-H-8B-Base-8K'}", NANO])
def test_a_hybrid_plan_names_the_layer_spec_pretrain_mamba_builds_with(model):
    """Megatron-LM core_v0.16.1's pretrain_mamba.py builds the model with mamba_builders.mamba_builder, which raises
    ValueError('You must provide a valid Mamba layer spec via --spec') unless --spec names one (transformer_impl is
    transformer_engine by default; arguments.py's --spec defaults to None). Every hybrid plan (Nemotron-H,
    nemotron-3-nano) wrote no --spec, so its launch stopped at the model build; it now writes the spec
    examples/mamba/train.sh passes, megatron-core 0.16.1's mamba_layer_specs.mamba_stack_spec (spec_utils.import_module
    reads it as [module, name])."""
    import importlib.util
    import re

    from tests.megatron_lm import argv_values
    m = load_model(model)
    lay = Layout.for_world(8, tp=1, pp=1, mbs=1, gbs=64, **({"ep": 8, "etp": 1} if m.is_moe else {}))
    spec = argv_values(megatron_args(lay, m)).get("--spec")
    assert spec == ["megatron.core.models.mamba.mamba_layer_specs", "mamba_stack_spec"], spec
    # the module is megatron-core 0.16.1's and defines that ModuleSpec (importing it needs GPU-only Triton)
    source = Path(importlib.util.find_spec("megatron.core.models.mamba").submodule_search_locations[0],
                  "mamba_layer_specs.py").read_text()
    assert re.search(r"^mamba_stack_spec = ModuleSpec\(", source, re.M)
    assert "--spec" not in megatron_args(Layout.for_world(8, tp=1, pp=1, mbs=1, gbs=64), load_model("llama3-8b"))


@pytest.mark.parametrize("release, commit", [("26.02", "b0cc2706ddc6"), ("26.02.01", "55ac7082517c")])
def test_hybrid_mtp_is_refused_naming_the_release_asked_and_its_megatron_lm(release, commit):
    """Probe EJ: every release's refusal named core_v0.16.1, whichever was asked. 26.02 and 26.02.01's Megatron-LM
    (megatron-core 0.16.x) build no MTP in MambaModel: the refusal names that release and its commit."""
    m = load_model("nemotron-3-super-120b-a12b")
    lay = _layout(64, dict(tp=1, pp=1, ep=64, etp=1, mbs=1, gbs=512))
    with pytest.raises(Exception, match=rf"^Megatron-LM {commit} \(release {release}'s, megatron-core 0\.16\.\d\) "
                                        "cannot build nemotron-3-super-120b-a12b: its MambaModel builds no MTP layers"):
        megatron_args(lay, m, release=release)


@pytest.mark.parametrize("release", ["26.04", "26.04.01", "26.06", "26.06.01", "26.08"])
@pytest.mark.parametrize("name, depths, repeated", [("nemotron-3-super-120b-a12b", 1, False),
                                                    ("nemotron-3.5-lightning-30b-a3b", 2, True),
                                                    ("nemotron-3-ultra-550b-a55b", 2, True)])
def test_hybrid_mtp_is_emitted_where_the_release_builds_it(release, name, depths, repeated):
    """Probe EJ: from 26.04 (megatron-core 0.17) Megatron-LM builds MTP in the hybrid model, yet every plan was refused.
    The plan writes the model's MTP depths and the MTP block's pattern ("*E", its config's mtp_hybrid_override_pattern),
    and one repeated layer where the depths share one layer's weights (Ultra's and Lightning's recipes)."""
    m = load_model(name)
    lay = _layout(64, dict(tp=1, pp=1, ep=64, etp=1, mbs=1, gbs=512))
    argv = megatron_args(lay, m, release=release)
    assert argv[argv.index("--mtp-num-layers") + 1] == str(depths)
    assert argv[argv.index("--mtp-hybrid-override-pattern") + 1] == "*E"
    assert ("--mtp-use-repeated-layer" in argv) == repeated
    assert argv[argv.index("--hybrid-override-pattern") + 1] == m.layer_pattern


@pytest.mark.parametrize("release", ["26.04", "26.06.01", "26.08"])
@pytest.mark.parametrize("pp, vp", [(2, 2), (4, 2), (2, 1)])
def test_a_hybrid_split_from_26_04_is_emitted_as_pipe_segments_with_virtual_stages(release, pp, vp):
    """Outside probe P1: `--layout pp=2,vp=2 --software 26.08` was refused ("no virtual pipeline stages"), though from
    26.04 on Megatron-LM builds a hybrid pattern cut by '|' into pp x vp segments, segment s on virtual stage s
    (select_pipeline_segment; validate_args derives VP from the count and refuses the split flags beside pipes). The
    plan cuts the pattern as its priced split (each virtual stage's layers) and writes no split flag."""
    from commbench.planner.layout.release_flags import release_model
    from commbench.planner.layout.split import split_vocab
    m = release_model(load_model(NANO), release)
    argv = megatron_args(_layout(pp * 8, dict(tp=1, pp=pp, vp=vp, ep=8, etp=1, mbs=1, gbs=512)), m, release=release)
    segments = argv[argv.index("--hybrid-override-pattern") + 1].split("|")
    split = choose_split(m, pp, vp, split_vocab(m, 1))
    assert [len(x) for x in segments] == split.decoder_layers() and len(segments) == pp * vp
    assert "".join(segments) == m.layer_pattern and all(segments)
    assert not {"--num-virtual-stages-per-pipeline-rank", "--num-layers-per-virtual-pipeline-stage",
                "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
                "--pipeline-model-parallel-layout"} & set(argv)


def test_a_hybrid_split_before_26_04_has_no_virtual_stages():
    """26.02.01's Megatron-LM (megatron-core 0.16.1) has no '|' segments and its MambaStack asserts no virtual
    pipeline: no vp > 1 split, and vp = 1 keeps the unsegmented pattern (with first/last counts where uneven)."""
    from commbench.planner.layout.release_flags import release_model
    m = release_model(load_model(NANO), "26.02.01")
    assert split_options(m, 2, 2) == [] and not m.hybrid_pipe_segments
    argv = megatron_args(_layout(64, dict(tp=1, pp=8, ep=8, etp=1, mbs=1, gbs=512)), m, release="26.02.01")
    assert argv[argv.index("--hybrid-override-pattern") + 1] == m.layer_pattern
    assert "--decoder-first-pipeline-num-layers" in argv


def test_the_search_offers_a_hybrid_virtual_stages_from_26_04():
    from commbench.planner.layout.release_flags import release_model
    from commbench.planner.layout.split import buildable
    pp, vp = np.array([2, 2, 4]), np.array([2, 4, 2])
    assert buildable(release_model(load_model(NANO), "26.08"), pp, vp).all()
    assert not buildable(release_model(load_model(NANO), "26.02.01"), pp, vp).any()


def test_a_hybrid_mtp_plan_at_26_02_says_on_the_terminal_it_is_not_launchable_and_the_way_out(tmp_path):
    """Probe PB: `plan --software 26.02` for Nemotron-3 Super wrote plan.json with megatron.refused and no
    megatron_args.txt, exit 0, and the terminal line named neither that nothing launchable was written nor the way
    out without a newer release (a model without its MTP layers, which 26.02 does build)."""
    from typer.testing import CliRunner
    from commbench.cli.app import app
    out = tmp_path / "p"
    result = CliRunner().invoke(app, ["plan", "--model", "nemotron-3-super-120b-a12b", "--system", "h100-hgx",
                                      "--gpus", "64", "--software", "26.02", "-O", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "plan.json").exists() and not (out / "megatron_args.txt").exists()
    text = " ".join(result.output.split())
    assert re.search(r"Megatron-LM: Megatron-LM b0cc2706ddc6 \(release 26\.02's.*cannot build "
                     r"nemotron-3-super-120b-a12b: its MambaModel builds no MTP layers \(the model has 1\), so the "
                     r"plan is not launchable there and writes no Megatron-LM launch \(no megatron_args\.txt.*"
                     r"--software 26\.04 or newer.*mtp_layers = 0", text), text[-1500:]
