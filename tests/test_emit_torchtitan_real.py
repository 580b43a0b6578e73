"""Emitted TorchTitan plans through TorchTitan 0.3.0's whole configuration path (PyPI wheel, CPU torch).

Called (tests/torchtitan_train.py): `ConfigManager().parse_args(argv)` exactly as torchtitan/train.py
calls it (the --module/--config function, shipped or the plan's generated commbench_torchtitan.py; tyro's
overrides; every config dataclass's __post_init__ incl. the CUDA-graph and micro-batch validation), then
what Trainer.__init__ runs on the config before building: ParallelDims.from_config + build_mesh on
torch's fake backend, the sequence-length check, update_from_config, apply_overrides and
_validate_cuda_graphs. Then the pipeline split pipeline_llm derives: _get_pipeline_metadata, the schedule
class, the rank-to-stage mapping, and TorchTitan's own module names per stage.
The 0.2 TOML cannot be checked against torchtitan 0.2.2 in the same environment (one version installs);
test_emit_torchtitan.py checks its keys against 0.2.2's JobConfig, reproduced.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import math
from types import SimpleNamespace

import pytest

from tests.framework_plans import INSTALL_HINT, case_ids, plan_cases

torchtitan = pytest.importorskip("torchtitan", reason=f"torchtitan is not installed: {INSTALL_HINT}")
pytest.importorskip("torchao", reason=f"torchao is not installed: {INSTALL_HINT}")

from tests.torchtitan_train import install_stand_ins, titan_config  # noqa: E402

install_stand_ins()

from torch.distributed.pipelining.schedules import PipelineScheduleMulti, get_schedule_class  # noqa: E402
from torchtitan.distributed.pipeline_parallel import (  # noqa: E402
    _generate_llm_fqn_per_model_part, _get_pipeline_metadata, _get_pp_rank_to_stage_indices_mapping)

from commbench.costmodel import load_preset  # noqa: E402
from commbench.planner.emit.logged_mfu import QUANTIZED as LOGGED_NA  # noqa: E402
from commbench.planner.emit.torchtitan import (TITAN_MODELS, router_renormalises, titan_model_of, torchtitan_args,  # noqa: E402
                                              torchtitan_plan)
from commbench.planner.layout.split import best_split  # noqa: E402
from commbench.planner.models.counts import param_counts  # noqa: E402

PIPELINE_BUILD_MAX_PARAMS = 40e9
QUANTIZED = {"bf16": set(), "fp8": {"Float8"}, "mxfp8": {"MXFP8"}, "nvfp4": {"NVFP4"}}


def quantized_kinds(model_config) -> set[str]:
    """Which converters' module configs the built model config holds (Float8*, MXFP8*, NVFP4*)."""
    from torchtitan.config.configurable import Configurable
    names = {type(c).__qualname__ for _, c, _, _ in model_config.traverse(Configurable.Config, recurse=True)}
    return {k for k in ("Float8", "MXFP8", "NVFP4") if any(k in n for n in names)}


def run_titan(doc: dict, gpus: int, system: str, tmp_path, monkeypatch, pipeline: bool = False):
    """The emitted launch through TorchTitan's configuration path; returns (config, parallel dims)."""
    if "config_module" in doc:
        (tmp_path / doc["config_module"]["file"]).write_text(doc["config_module"]["text"], encoding="utf-8")
    gpu = load_preset(system, num_gpus=gpus).gpu
    return titan_config(torchtitan_args(doc), world=gpus, capability=gpu.compute_capability, plan_dir=tmp_path,
                        monkeypatch=monkeypatch, pipeline=pipeline)


def check_titan_plan(doc: dict, lay, model, gpus: int, system: str, tmp_path, monkeypatch, pipeline: bool = False) -> None:
    """Accepted by TorchTitan's configuration path, and the config it builds is the plan's; with
    `pipeline`, TorchTitan's pipeline_llm splits the (meta) model into the plan's stages."""
    config, dims, piped = run_titan(doc, gpus, system, tmp_path, monkeypatch, pipeline)
    par, training = config.parallelism, config.training
    for key, value in doc["sections"]["parallelism"].items():
        assert getattr(par, key) == value, key
    for key, value in doc["sections"]["training"].items():
        assert getattr(training, key) == value, key
    replicas = lay.fsdp_replicas if lay.fsdp else 1  # HSDP: FSDP2 within dp/replicas, replicated across
    assert (dims.tp, dims.pp, dims.cp, dims.dp_shard, dims.dp_replicate) == \
        (lay.tp, lay.pp, lay.cp, lay.dp // replicas, replicas)
    assert dims.ep == (lay.ep if model.is_moe else 1)
    assert training.disable_cuda_graphs == (lay.cuda_graph != "full" or lay.pp > 1 or dims.ep > 1)
    from torchtitan.models.common.config_utils import decoder_vocab_size
    assert (config.model_spec.flavor, decoder_vocab_size(config.model_spec)) == (titan_model_of(model).flavor, model.vocab)
    assert quantized_kinds(config.model_spec.model) == QUANTIZED[lay.precision]
    # what the plan says TorchTitan's log prints for MFU (logged_mfu.py): N/A exactly where it quantizes
    from torchtitan.components.quantization.utils import has_quantization
    assert has_quantization(config.model_spec.model) == (lay.precision in LOGGED_NA)
    if lay.pp == 1:
        assert training.local_batch_size == lay.mbs
        assert training.global_batch_size // (training.local_batch_size * dims.dp_shard * dims.dp_replicate) == \
            lay.num_microbatches
        return
    _get_pipeline_metadata(dims, par, SimpleNamespace(layers=[None] * model.num_layers))
    stages = par.module_fqns_per_model_part
    schedule = get_schedule_class(par.pipeline_parallel_schedule)
    assert issubclass(schedule, PipelineScheduleMulti) == (lay.vp > 1)
    owned = [s for r in range(lay.pp) for s in
             _get_pp_rank_to_stage_indices_mapping(r, lay.pp, par.pipeline_parallel_schedule, len(stages))]
    assert sorted(owned) == list(range(lay.pp * lay.vp))
    # Every module TorchTitan's own generator names, once, in order; split as Megatron's (no MTP).
    assert [m for s in stages for m in s] == _generate_llm_fqn_per_model_part(1, model.num_layers)[0]
    no_mtp = best_split(dataclasses.replace(model, num_mtp_layers=0), lay.pp, lay.vp)
    assert [sum(m.startswith("layers.") for m in s) for s in stages] == no_mtp.decoder_layers()
    assert training.local_batch_size // par.pipeline_parallel_microbatch_size == lay.num_microbatches
    if piped is not None:  # pipeline_llm on rank 0: its model parts hold its stages' layers
        schedule_obj, parts, has_first, has_last = piped
        assert isinstance(schedule_obj, schedule) and (has_first, has_last) == (True, lay.vp > 1 and lay.pp == 1)
        mine = _get_pp_rank_to_stage_indices_mapping(0, lay.pp, par.pipeline_parallel_schedule, len(stages))
        assert [sorted(int(k) for k in getattr(p, "layers", {}).keys()) for p in parts] == \
            [sorted(int(m.split(".")[1]) for m in stages[s] if m.startswith("layers.")) for s in mine]


@pytest.mark.parametrize("index", range(len(case_ids())), ids=case_ids())
def test_torchtitan_accepts_the_emitted_plan(index, tmp_path, monkeypatch):
    case = plan_cases()[index]
    doc = torchtitan_plan(case.layout, case.model)
    assert doc["version"] == importlib.metadata.version("torchtitan")  # the release installed is the one targeted
    if "refused" in doc:  # one line naming the release and why (e.g. no Mixtral model)
        assert "\n" not in doc["refused"] and doc["refused"].startswith(f"TorchTitan {doc['version']} ")
        return
    # pipeline_llm builds the whole model on the meta device first: minutes for the 100B+ models on 2 CPU
    # cores, so it runs for the small ones (Llama 3 8B, Qwen3-30B-A3B), where it takes a second.
    small = param_counts(case.model).total < PIPELINE_BUILD_MAX_PARAMS
    check_titan_plan(doc, case.layout, case.model, case.gpus, case.system, tmp_path, monkeypatch, pipeline=small)


@pytest.mark.parametrize("name", sorted(TITAN_MODELS))
def test_the_recorded_rope_and_norm_of_each_flavor_are_what_torchtitan_builds(name):
    """TitanModel.rope_03 / norm_epsilon_03 (what titan_architecture_notes compares with the model asked for)
    are the installed TorchTitan's: the first layer's attention RoPE and the final RMSNorm."""
    import importlib
    titan = TITAN_MODELS[name]
    model = importlib.import_module(f"torchtitan.models.{titan.module}").model_registry(titan.flavor).model
    rope = model.layers[0].attention.rope
    scaling = {"llama": "llama3"}.get(rope.scaling, rope.scaling)
    factor = {"llama3": rope.scaling_factor, "yarn": getattr(rope, "rope_factor", None), "none": 1.0}[scaling]
    assert (float(rope.theta), scaling, float(factor)) == titan.rope_03
    assert model.norm.eps == titan.norm_epsilon_03
    moe = getattr(model.layers[-1], "moe", None)   # the last layer: DeepSeek-V3's first three are dense
    router = None if moe is None else moe.router
    assert (None if router is None else (router.score_func, router.route_norm, float(router.route_scale))) \
        == titan.router_03


def test_an_hf_model_whose_router_is_not_the_flavor_s_is_said_in_the_plan(tmp_path):
    """An hf: model is launched as the TorchTitan flavor of its sizes: a Qwen3-30B-A3B config with
    norm_topk_prob false (top-k weights not renormalised) launched qwen3 30B-A3B, which renormalises, unsaid."""
    import json
    from pathlib import Path
    from commbench.planner import Layout, load_model
    raw = json.loads((Path(__file__).parent / "data" / "hf" / "Qwen3-30B-A3B" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(raw, norm_topk_prob=False)))
    moe = Layout(tp=1, pp=1, ep=8, etp=1, dp=8, mbs=1, gbs=64)
    notes = torchtitan_plan(moe, load_model(f"hf:{tmp_path}"))["notes"]
    assert any("top-k weights renormalised True (the model: False)" in n for n in notes), notes
    (tmp_path / "config.json").write_text(json.dumps(dict(raw, norm_topk_prob=True)))
    assert not any("top-k" in n for n in torchtitan_plan(moe, load_model(f"hf:{tmp_path}"))["notes"])


def test_a_flavor_that_is_not_the_model_asked_for_is_said_in_the_plan():
    """TorchTitan's llama3 8B is Llama 3.1's (Llama 3.1 RoPE scaling x8) and its Qwen3 235B-A22B the 2507
    release's (rope base 5e6): a launch of llama3-8b / qwen3-235b-a22b trains those, and the plan says so."""
    from commbench.planner import Layout, load_model
    lay = Layout(tp=1, pp=1, dp=8, mbs=1, gbs=64)
    notes = torchtitan_plan(lay, load_model("llama3-8b"))["notes"]
    assert any("RoPE scaling llama3 (the model: none)" in n for n in notes), notes
    moe = Layout(tp=1, pp=1, ep=8, etp=1, dp=8, mbs=1, gbs=64)
    notes = torchtitan_plan(moe, load_model("qwen3-235b-a22b"))["notes"]
    assert any("rotary base 5e+06 (the model: 1e+06)" in n for n in notes), notes
    assert not any("builds" in n for n in torchtitan_plan(lay, load_model("llama3.1-70b"))["notes"])


# Total parameters on the Hugging Face model cards (deepseek-ai/DeepSeek-V2-Lite: 15.7B; moonshotai/Moonlight-16B-A3B: 16B)
MLA_CARD_PARAMS = {"DeepSeek-V2-Lite": 15.7e9, "Moonlight-16B-A3B": 16e9}


def hf_softmax_scale(hf: dict) -> float:
    """HF DeepseekV2Attention / DeepseekV3Attention: (nope + rope)^-0.5, times yarn_get_mscale(factor, mscale_all_dim)^2
    when rope_scaling names a nonzero mscale_all_dim (yarn_get_mscale: 0.1 m ln(factor) + 1 for factor > 1)."""
    scale = (hf["qk_nope_head_dim"] + hf["qk_rope_head_dim"]) ** -0.5
    rope = hf.get("rope_scaling") or {}
    if rope.get("mscale_all_dim") and rope["factor"] > 1:
        scale *= (0.1 * rope["mscale_all_dim"] * math.log(rope["factor"]) + 1.0) ** 2
    return scale


@pytest.mark.parametrize("name,pins", [("DeepSeek-V2-Lite", {}), ("Moonlight-16B-A3B", {}),
                                       ("Moonlight-16B-A3B", {"pp": 2, "vp": 2})])
def test_an_mla_model_with_no_flavor_is_built_by_torchtitan_as_its_hf_config(name, pins, tmp_path, monkeypatch):
    """plan --framework torchtitan for DeepSeek-V2-Lite / Moonlight (MLA without the query low rank) said "TorchTitan
    0.3.0 has no ... model": the searched layout's launch now goes through TorchTitan's whole configuration path, and
    the model TorchTitan builds from it is the HF config's: its card's parameter count (and commbench's, exactly), `wq`
    without a low rank, the attention softmax scale HF computes (YaRN mscale_all_dim), the RoPE, the dense layers,
    the router (score, top-k renormalisation, scale) and the norm epsilons."""
    import json
    from pathlib import Path

    import torch

    from commbench.planner import load_model
    from commbench.planner.search.space import SearchRequest, search
    path = Path(__file__).parent / "data" / "hf" / name
    hf = json.loads((path / "config.json").read_text())
    model = load_model(f"hf:{path}")
    res = search(SearchRequest(model=model, fabric=load_preset("h100-hgx", num_gpus=8), num_gpus=8, gbs=512,
                               precision="bf16", framework="torchtitan", pins=dict(pins), keep=1))
    lay = res.layouts.layout(0)
    assert (lay.pp, lay.vp) == (pins.get("pp", lay.pp), pins.get("vp", lay.vp))
    doc = torchtitan_plan(lay, model)
    assert "refused" not in doc and doc["module"] == "commbench_torchtitan", doc
    check_titan_plan(doc, lay, model, 8, "h100-hgx", tmp_path, monkeypatch, pipeline=lay.pp > 1)
    config, _, _ = run_titan(doc, 8, "h100-hgx", tmp_path, monkeypatch)
    with torch.device("meta"):
        built = config.model_spec.model.build()
    total = sum(p.numel() for p in built.parameters())
    assert total == pytest.approx(MLA_CARD_PARAMS[name], rel=0.01)
    assert total == param_counts(model).total
    layers = list(built.layers.values())
    attention = layers[0].attention
    assert hf["q_lora_rank"] is None and hasattr(attention, "wq") and not hasattr(attention, "wq_a")
    assert attention.softmax_scale == pytest.approx(hf_softmax_scale(hf), rel=1e-12)
    rope, scaling = attention.rope.config, hf.get("rope_scaling")
    assert rope.theta == hf["rope_theta"] and rope.scaling == ("yarn" if scaling else "none")
    if scaling:   # HF yarn_find_correction_range floors / ceils: truncate
        assert (rope.rope_factor, rope.beta_fast, rope.beta_slow, rope.original_seq_len, rope.truncate) == \
            (scaling["factor"], scaling["beta_fast"], scaling["beta_slow"],
             scaling["original_max_position_embeddings"], True)
    assert [layer.moe_enabled for layer in layers] == [i >= hf["first_k_dense_replace"] for i in range(len(layers))]
    router = layers[-1].moe.router
    assert (router.score_func, router.route_norm, router.route_scale, router.top_k) == \
        (hf["scoring_func"], hf["norm_topk_prob"], hf["routed_scaling_factor"], hf["num_experts_per_tok"])
    assert hf["n_group"] == 1 and router.num_expert_groups is None   # one group: no group-limited routing
    assert {built.norm.eps, layers[0].attention_norm.eps, layers[-1].ffn_norm.eps} == {hf["rms_norm_eps"]}
    assert attention.kv_norm.eps == 1e-6   # HF builds kv_a_layernorm with its RMSNorm's default eps


@pytest.mark.parametrize("name", sorted(TITAN_MODELS))
def test_the_recorded_longest_sequence_of_each_flavor_is_torchtitan_s(name):
    """TORCHTITAN_MAX_SEQ_LEN is each flavor's RoPE max_seq_len, the longest training.seq_len TorchTitan takes."""
    import importlib

    from commbench.planner.search.frameworks import TORCHTITAN_MAX_SEQ_LEN
    titan = TITAN_MODELS[name]
    model = importlib.import_module(f"torchtitan.models.{titan.module}").model_registry(titan.flavor).model
    assert model.layers[0].attention.rope.max_seq_len == TORCHTITAN_MAX_SEQ_LEN[name]


def test_a_sequence_longer_than_the_flavor_s_rope_is_refused_in_one_line(tmp_path, monkeypatch):
    """plan --framework torchtitan --seq-len 32768 for DeepSeek-V3 emitted a launch TorchTitan 0.3.0 refuses ("Training
    sequence length 32768 exceeds attention RoPE maximum supported sequence length 16384": the 671B flavor's RoPE is
    precomputed for 16384 tokens). Now the search refuses it in one line naming --seq-len, the value and the limit, and
    a Megatron plan's TorchTitan section says why; at the limit the launch goes through TorchTitan's path."""
    from commbench.errors import CommbenchError
    from commbench.planner import Layout, load_model
    from commbench.planner.search.space import SearchRequest
    model = load_model("deepseek-v3")
    lay = Layout(tp=8, pp=1, ep=64, etp=1, dp=8, mbs=1, gbs=64, recompute="selective")
    doc = torchtitan_plan(lay, model, seq_len=16384)
    assert "refused" not in doc
    check_titan_plan(doc, lay, model, 64, "gb200-nvl72", tmp_path, monkeypatch)
    longer = dict(doc, sections=dict(doc["sections"], training=dict(doc["sections"]["training"], seq_len=32768)))
    with pytest.raises(ValueError, match="exceeds attention RoPE maximum supported sequence length 16384"):
        run_titan(longer, 64, "gb200-nvl72", tmp_path, monkeypatch)   # TorchTitan's own refusal, what a user hit
    refused = torchtitan_plan(lay, model, seq_len=32768)["refused"]
    assert refused.startswith("TorchTitan 0.3.0") and "\n" not in refused and "16384" in refused and "32768" in refused
    with pytest.raises(CommbenchError,
                       match=r"--seq-len=32768 is invalid with --framework torchtitan: .* at most 16384"):
        SearchRequest(model=model, fabric=load_preset("gb200-nvl72", num_gpus=64), num_gpus=64, gbs=64,
                      precision="bf16", seq_len=32768, framework="torchtitan")


def test_a_generated_mla_config_precomputes_rope_for_the_plan_s_sequence(tmp_path, monkeypatch):
    """Moonlight-16B-A3B (max_position_embeddings 8192) planned with --seq-len 32768: the generated config function
    precomputed RoPE for max(8192, the model's default 8192) tokens and TorchTitan refused the launch ("Training sequence
    length 32768 exceeds attention RoPE maximum supported sequence length 8192"); it now covers the plan's sequence, and
    the launch goes through TorchTitan 0.3.0's configuration path."""
    from pathlib import Path

    from commbench.planner import Layout, load_model
    model = load_model(f"hf:{Path(__file__).parent / 'data' / 'hf' / 'Moonlight-16B-A3B'}")
    assert model.architecture.max_position_embeddings == 8192
    lay = Layout(tp=1, pp=1, ep=8, etp=1, dp=8, mbs=1, gbs=64, recompute="selective")
    doc = torchtitan_plan(lay, model, seq_len=32768)
    assert "refused" not in doc and doc["sections"]["training"]["seq_len"] == 32768
    assert "max_seq_len=32768" in doc["config_module"]["text"]
    check_titan_plan(doc, lay, model, 8, "h100-hgx", tmp_path, monkeypatch)


def test_a_recompute_layers_pin_is_refused_with_framework_torchtitan(tmp_path):
    """plan --framework torchtitan --layout recompute=full,recompute_layers=2 (Qwen3-30B-A3B, whose TorchTitan config
    runs full recompute) was searched and predicted with block recompute of 2 layers per chunk, then its TorchTitan
    section refused it: a --framework torchtitan plan TorchTitan cannot launch. The pin is now refused in one line
    before the search, as the other features TorchTitan 0.3.0 does not run."""
    from typer.testing import CliRunner

    from commbench.cli.app import app
    from commbench.errors import CommbenchError
    from commbench.planner import load_model
    from commbench.planner.search.frameworks import framework_pins
    with pytest.raises(CommbenchError, match=r"^recompute_layers=2 is invalid with --framework torchtitan: TorchTitan 0\.3\.0"):
        framework_pins("torchtitan", load_model("qwen3-30b-a3b"), {"recompute": "full", "recompute_layers": 2})
    assert framework_pins("torchtitan", load_model("qwen3-30b-a3b"), {"recompute_layers": 0})["recompute"] == "full"
    result = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "gb200-nvl72", "--gpus", "8",
                                      "--gbs", "64", "--framework", "torchtitan", "--layout",
                                      "recompute=full,recompute_layers=2", "--top", "1", "-O", str(tmp_path)],
                             env={"COLUMNS": "200"})
    assert result.exit_code == 2 and result.output.startswith("error: recompute_layers=2 is invalid") and \
        len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "plan.json").exists()


@pytest.mark.parametrize("pins", [[], ["--layout", "tp=1,pp=2,vp=2,ep=8,mbs=1"]], ids=["searched", "pinned"])
def test_emit_torchtitan_prints_a_launch_only_beside_its_generated_config(pins, tmp_path, monkeypatch):
    """plan --emit torchtitan (no -O) for Qwen3-30B-A3B on GB200 (default precision mxfp8: TorchTitan ships no MXFP8
    Qwen3 config) printed `--module commbench_torchtitan --config qwen3_30b_a3b_mxfp8 ...` and wrote nothing:
    TorchTitan 0.3.0's ConfigManager.parse_args refused that line (ImportError "Cannot import module 'commbench_torchtitan'").
    Without --out it is now refused in one line saying to add -O; with -O the printed line is the file's and goes
    through TorchTitan's whole configuration path with the folder on the path."""
    import json
    import shlex
    import sys

    from typer.testing import CliRunner

    from commbench.cli.app import app
    from commbench.planner import Layout, load_model
    base = ["plan", "--model", "qwen3-30b-a3b", "--system", "gb200-nvl72", "--gpus", "16", "--gbs", "128", "--top", "1",
            "--emit", "torchtitan", *pins]
    bare = CliRunner().invoke(app, base, env={"COLUMNS": "200"})
    assert bare.exit_code == 2 and len(bare.output.strip().splitlines()) == 1, bare.output
    assert bare.output.startswith("error: --emit torchtitan needs --out") and "commbench_torchtitan.py" in bare.output
    monkeypatch.delitem(sys.modules, "commbench_torchtitan", raising=False)   # one an earlier test imported
    with pytest.raises(ImportError, match="Cannot import module .commbench_torchtitan."):   # what the line met
        titan_config(["--module", "commbench_torchtitan", "--config", "qwen3_30b_a3b_mxfp8"], world=16,
                     capability=(10, 0), plan_dir=None, monkeypatch=monkeypatch)
    out = tmp_path / "plan"
    res = CliRunner().invoke(app, base + ["-O", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    argv = shlex.split(res.stdout)   # the plan's notes go to stderr
    assert argv == shlex.split((out / "torchtitan_args.txt").read_text()) and argv[:2] == ["--module", "commbench_torchtitan"]
    doc = json.loads((out / "plan.json").read_text())
    lay, model = Layout(**doc["layout"]), load_model("qwen3-30b-a3b")
    config, dims, _ = titan_config(argv, world=16, capability=(10, 0), plan_dir=out, monkeypatch=monkeypatch)
    assert (dims.tp, dims.pp, dims.ep, dims.dp_shard * dims.dp_replicate) == (lay.tp, lay.pp, lay.ep, lay.dp)
    assert quantized_kinds(config.model_spec.model) == QUANTIZED["mxfp8"] and config.training.global_batch_size == 128
    # a launch from a shipped config needs no file: printed without --out as before (Qwen3's aux loss: the flavor's
    # expert bias stands in, noted)
    shipped = CliRunner().invoke(app, base + ["--precision", "bf16"], env={"COLUMNS": "200"})
    assert shipped.exit_code == 0 and shlex.split(shipped.stdout)[:4] == ["--module", "qwen3", "--config", "qwen3_30b_a3b"]


def titan_dense_sizes(model_config) -> dict:
    """What TorchTitan builds, in commbench's size names, from a dense qwen3 / llama3 model config."""
    attention, ffn = model_config.layers[0].attention, model_config.layers[0].feed_forward
    qkv = attention.qkv_linear
    return {"num_layers": len(model_config.layers), "hidden": model_config.dim, "num_heads": attention.n_heads,
            "num_kv_heads": attention.n_kv_heads, "head_dim": qkv.head_dim or model_config.dim // attention.n_heads,
            "dense_ffn": ffn.w1.out_features, "vocab": model_config.vocab_size,
            "tied_embeddings": model_config.enable_weight_tying, "qk_norm": attention.qk_norm is not None,
            "qkv_bias": qkv.wqkv.bias, "linear_bias": attention.wo.bias or ffn.w1.bias}


@pytest.mark.parametrize("name", sorted(__import__("commbench.planner.search.frameworks",
                                                   fromlist=["x"]).TITAN_DENSE_FLAVORS))
def test_each_recorded_dense_flavor_is_what_torchtitan_builds(name):
    """TITAN_DENSE_FLAVORS (what an hf: model is matched to) holds the sizes, tying and qk-norm TorchTitan 0.3.0's
    model_registry(flavor) builds."""
    import importlib

    from commbench.planner.search.frameworks import TITAN_DENSE_FLAVORS, TITAN_FLAVOR_ARCH
    module, flavor, sizes = TITAN_DENSE_FLAVORS[name]
    assert (TITAN_MODELS[name].module, TITAN_MODELS[name].flavor) == (module, flavor)
    built = titan_dense_sizes(importlib.import_module(f"torchtitan.models.{module}").model_registry(flavor).model)
    assert {k: built[k] for k in sizes} == sizes
    assert built["qk_norm"] == dict(TITAN_FLAVOR_ARCH[module])["architecture.qk_norm"]
    assert not built["qkv_bias"] and not built["linear_bias"]
    assert TITAN_MODELS[name].tied == sizes["tied_embeddings"]


# The hf: fixtures' published totals (tests/data/hf/SOURCES.md): Qwen/Qwen3-8B "8.2B" (model card); meta-llama/
# Llama-3.2-1B-Instruct 1,235,814,400 (its count, the input embedding shared with the output layer; card "1.23B").
# microsoft/phi-4 14,659,507,200 (what transformers' Phi3ForCausalLM builds from the config; card "14B").
DENSE_CARD_PARAMS = {"Qwen3-8B": (8.2e9, 0.01), "Llama-3.2-1B-Instruct": (1.23e9, 0.01), "phi-4": (14_659_507_200, 0)}


@pytest.mark.parametrize("name,flavor,precision,pins", [
    ("Qwen3-8B", "8B", "bf16", {}), ("Qwen3-8B", "8B", "fp8", {"pp": 2}), ("Llama-3.2-1B-Instruct", "1B", "bf16", {}),
    ("phi-4", "hf:phi-4", "bf16", {}), ("phi-4", "hf:phi-4", "bf16", {"pp": 2, "vp": 2})])
def test_an_hf_model_of_a_dense_family_plans_and_torchtitan_builds_it(name, flavor, precision, pins, tmp_path,
                                                                      monkeypatch):
    """plan --model hf:Qwen3-8B --framework torchtitan was refused ("TorchTitan 0.3.0 has no hf:Qwen3-8B model (it ships
    llama3, qwen3, deepseek_v3, gpt_oss)") though TorchTitan 0.3.0's qwen3 model has an 8B flavor of exactly its
    architecture (models/qwen3/__init__.py), and so was Llama-3.2-1B (llama3 1B) and phi-4 (Llama's layers at sizes no
    flavor has: now built by the llama3 builder in a generated config). The searched layout's launch now goes through
    TorchTitan's whole configuration path, and the model it builds is the config.json's: every size, the tying,
    qk-norm, RoPE base, norm eps, and the parameter count (commbench's and the card's)."""
    import json
    from pathlib import Path

    import torch

    from commbench.planner import load_model
    from commbench.planner.search.space import SearchRequest, search
    path = Path(__file__).parent / "data" / "hf" / name
    hf = json.loads((path / "config.json").read_text())
    model = load_model(f"hf:{path}")
    res = search(SearchRequest(model=model, fabric=load_preset("h100-hgx", num_gpus=8), num_gpus=8, gbs=64,
                               precision=precision, framework="torchtitan", pins=dict(pins), keep=1))
    lay = res.layouts.layout(0)
    assert (lay.pp, lay.vp) == (pins.get("pp", lay.pp), pins.get("vp", lay.vp))
    doc = torchtitan_plan(lay, model)
    assert "refused" not in doc, doc
    assert titan_model_of(model).flavor == flavor
    check_titan_plan(doc, lay, model, 8, "h100-hgx", tmp_path, monkeypatch, pipeline=lay.pp > 1)
    config, _, _ = run_titan(doc, 8, "h100-hgx", tmp_path, monkeypatch)
    assert (config.model_spec.name, config.model_spec.flavor) == (titan_model_of(model).module, flavor)
    built = titan_dense_sizes(config.model_spec.model)
    assert built == {"num_layers": hf["num_hidden_layers"], "hidden": hf["hidden_size"],
                     "num_heads": hf["num_attention_heads"], "num_kv_heads": hf["num_key_value_heads"],
                     "head_dim": hf.get("head_dim", hf["hidden_size"] // hf["num_attention_heads"]),
                     "dense_ffn": hf["intermediate_size"], "vocab": hf["vocab_size"],
                     "tied_embeddings": hf.get("tie_word_embeddings", False), "qk_norm": hf["model_type"] == "qwen3",
                     "qkv_bias": hf.get("attention_bias", False), "linear_bias": hf.get("mlp_bias", False)}
    rope = config.model_spec.model.layers[0].attention.rope
    assert rope.theta == hf["rope_theta"] and config.model_spec.model.norm.eps == hf["rms_norm_eps"]
    with torch.device("meta"):
        total = sum(p.numel() for p in config.model_spec.model.build().parameters())
    assert total == param_counts(model).total
    card, rel = DENSE_CARD_PARAMS[name]
    assert total == pytest.approx(card, rel=rel)


def test_a_tied_flavor_is_planned_without_pipeline_parallelism():
    """TorchTitan 0.3.0 refuses weight tying with PP (models/common/decoder.py update_from_config): Llama-3.2-1B (llama3
    1B, enable_weight_tying) is searched at pp=1, a pp pin is refused in one line, and so is a pp=2 launch."""
    from pathlib import Path

    from commbench.errors import CommbenchError
    from commbench.planner import Layout, load_model
    from commbench.planner.search.frameworks import framework_pins
    model = load_model(f"hf:{Path(__file__).parent / 'data' / 'hf' / 'Llama-3.2-1B-Instruct'}")
    assert framework_pins("torchtitan", model, {})["pp"] == 1
    with pytest.raises(CommbenchError, match=r"^pp=2 is invalid with --framework torchtitan for .*ties its embeddings"):
        framework_pins("torchtitan", model, {"pp": 2})
    refused = torchtitan_plan(Layout(tp=1, pp=2, dp=4, mbs=1, gbs=64), model)["refused"]
    assert refused.startswith("TorchTitan 0.3.0's llama3 1B ties its embeddings") and "\n" not in refused
    assert "refused" in torchtitan_plan(Layout(tp=1, pp=1, dp=8, mbs=1, gbs=64, fsdp=True), model, version="0.2")


@pytest.mark.parametrize("name,says", [
    ("Qwen2.5-7B", "has no hf:Qwen2.5-7B model (its modules: llama3, qwen3, qwen3_5, deepseek_v3, gpt_oss, kimi_k2_7"),
    ("Qwen3.5-9B", "ships hf:Qwen3.5-9B's family as its qwen3_5 model (flavor 9B"),
    ("Mistral-Nemo-Base-2407", "cannot build hf:Mistral-Nemo-Base-2407 with its llama3 layers (no flavor has its "
                               "sizes): head_dim=128, its layers build hidden / heads = 160"),
])
def test_a_model_no_flavor_builds_is_refused_in_one_line_naming_what_torchtitan_ships(name, says, tmp_path):
    """The refusal listed 'it ships llama3, qwen3, deepseek_v3, gpt_oss' (0.3.0 also ships qwen3_5, kimi_k2_7,
    muse_glimmer, flux): it now lists every module, names the nearest dense flavor and the fields it differs in (or,
    for a Llama-architecture model, what the llama3 layers cannot build at its sizes: Mistral-Nemo's head_dim), and says where TorchTitan does ship the family (Qwen3.5: qwen3_5) that commbench emits no
    launch for it."""
    from pathlib import Path

    from typer.testing import CliRunner

    from commbench.cli.app import app
    res = CliRunner().invoke(app, ["plan", "--model", f"hf:{Path(__file__).parent / 'data' / 'hf' / name}", "--system",
                                   "h100-hgx", "--gpus", "8", "--gbs", "64", "--framework", "torchtitan", "--top", "1",
                                   "-O", str(tmp_path / "p")], env={"COLUMNS": "400"})
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert res.output.startswith(f"error: TorchTitan 0.3.0 {says}") and "--framework megatron" in res.output


def test_a_qwen3_model_no_flavor_is_is_built_by_torchtitan_s_qwen3_layers(tmp_path, monkeypatch):
    """A Qwen3 config at sizes no flavor has (Qwen3-8B's config.json with 12 layers and rms_norm_eps 1e-5, derived
    here) was refused; the plan now writes a config function building it with TorchTitan's qwen3 layers, which goes
    through the configuration path and builds the model asked for (layers, qk-norm eps, parameter count)."""
    import json
    from pathlib import Path

    import torch

    from commbench.planner import Layout, load_model
    raw = json.loads((Path(__file__).parent / "data" / "hf" / "Qwen3-8B" / "config.json").read_text())
    folder = tmp_path / "Qwen3-12L"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(dict(raw, num_hidden_layers=12, rms_norm_eps=1e-5)))
    model = load_model(f"hf:{folder}")
    lay = Layout(tp=2, pp=2, dp=2, mbs=1, gbs=64)
    doc = torchtitan_plan(lay, model)
    assert "refused" not in doc and "qwen3._build_qwen3_layers(n_layers=12" in doc["config_module"]["text"], doc
    check_titan_plan(doc, lay, model, 8, "h100-hgx", tmp_path, monkeypatch, pipeline=True)
    config, _, _ = run_titan(doc, 8, "h100-hgx", tmp_path, monkeypatch)
    built = config.model_spec.model
    assert len(built.layers) == 12 and {built.norm.eps, built.layers[0].attention.qk_norm.eps} == {1e-5}
    with torch.device("meta"):
        assert sum(p.numel() for p in built.build().parameters()) == param_counts(model).total


def test_a_qwen3_moe_model_no_flavor_is_is_built_by_torchtitan_s_qwen3_moe_layers(tmp_path, monkeypatch):
    """hf:Qwen3-Coder-480B-A35B-Instruct (qwen3_moe: 62 layers of 6144, 160 experts top-8 of 2560, no shared experts)
    was refused ("TorchTitan 0.3.0 has no ... model"); TorchTitan 0.3.0's qwen3 MoE layers build it at its sizes: the
    launch goes through the configuration path and builds its 480,154,875,392 parameters (tests/test_counts_hf_exact.py),
    with its router (softmax, top-k renormalised) and RoPE base; the plan says the balancing differs."""
    import json
    from pathlib import Path

    import torch

    from commbench.planner import Layout, load_model
    path = Path(__file__).parent / "data" / "hf" / "Qwen3-Coder-480B-A35B-Instruct"
    hf = json.loads((path / "config.json").read_text())
    model = load_model(f"hf:{path}")
    lay = Layout(tp=4, pp=4, ep=16, etp=1, dp=16, mbs=1, gbs=256)
    doc = torchtitan_plan(lay, model)
    assert "refused" not in doc and "config = qwen3_30b_a3b()" in doc["config_module"]["text"], doc
    assert any("balances experts only by an expert bias" in n for n in doc["notes"])
    check_titan_plan(doc, lay, model, 256, "gb200-nvl72", tmp_path, monkeypatch)
    config, _, _ = run_titan(doc, 256, "gb200-nvl72", tmp_path, monkeypatch)
    built = config.model_spec.model
    moe = built.layers[-1].moe
    assert (len(built.layers), built.dim, moe.router.top_k, moe.router.score_func, moe.router.route_norm) == \
        (hf["num_hidden_layers"], hf["hidden_size"], hf["num_experts_per_tok"], "softmax", hf["norm_topk_prob"])
    assert built.layers[0].attention.rope.theta == hf["rope_theta"]
    with torch.device("meta"):
        assert sum(p.numel() for p in built.build().parameters()) == param_counts(model).total == 480_154_875_392


FLAVOR_MISFITS = [("llama3-8b", "bf16", "b200-hgx"), ("llama3-8b", "mxfp8", "b200-hgx"),
                  ("qwen3-235b-a22b", "mxfp8", "b200-hgx"), ("deepseek-v3", "fp8", "h100-hgx"),
                  ("deepseek-v3", "bf16", "h100-hgx"), ("norm_topk_prob=false", "bf16", "h100-hgx")]


@pytest.mark.parametrize("name, precision, system", FLAVOR_MISFITS, ids=[f"{n}-{p}" for n, p, _ in FLAVOR_MISFITS])
def test_a_flavor_launch_builds_the_model_asked_for(name, precision, system, tmp_path, monkeypatch):
    """TorchTitan 0.3.0's llama3 8B builds Llama 3.1's RoPE scaling x8, its qwen3 235B-A22B the 2507 release's rope
    base 5e6, its deepseek_v3 671B every RMSNorm with eps 1e-5, its qwen3 30B-A3B a renormalising router: launches of
    llama3-8b (rope scaling none), qwen3-235b-a22b (rope base 1e6), deepseek-v3 (eps 1e-6; latent q/kv norms 1e-6 as
    HF's DeepseekV3RMSNorm default) and an hf: Qwen3-30B-A3B with norm_topk_prob false trained those models, and the
    plan only said so in a note. The launch's config function now sets the model's values on the flavor, and
    TorchTitan's configuration path builds them."""
    import json
    from pathlib import Path

    from commbench.planner import Layout, load_model
    if name.startswith("norm_topk_prob"):
        raw = json.loads((Path(__file__).parent / "data" / "hf" / "Qwen3-30B-A3B" / "config.json").read_text())
        (tmp_path / "hf").mkdir()
        (tmp_path / "hf" / "config.json").write_text(json.dumps(dict(raw, norm_topk_prob=False)))
        model = load_model(f"hf:{tmp_path / 'hf'}")
    else:
        model = load_model(name)
    moe = {"ep": 8, "etp": 1} if model.is_moe else {}
    lay = Layout(tp=1, pp=1, dp=8, mbs=1, gbs=64, precision=precision, **moe)
    doc = torchtitan_plan(lay, model)
    assert "refused" not in doc, doc
    config, _, _ = run_titan(doc, 8, system, tmp_path, monkeypatch)
    built, arch = config.model_spec.model, model.architecture
    assert quantized_kinds(built) == QUANTIZED[precision]
    assert built.norm.eps == arch.norm_epsilon
    for layer in built.layers:
        rope = layer.attention.rope
        scaling = {"llama": "llama3"}.get(rope.scaling, rope.scaling)
        factor = {"llama3": rope.scaling_factor, "yarn": rope.rope_factor, "none": 1.0}[scaling]
        want = float(arch.rope_scaling_factor) if arch.rope_scaling != "none" else 1.0
        assert (float(rope.theta), scaling, float(factor)) == (float(arch.rotary_base), arch.rope_scaling, want)
        assert layer.attention_norm.eps == layer.ffn_norm.eps == arch.norm_epsilon
        for latent in ("q_norm", "kv_norm"):
            if getattr(layer.attention, latent, None) is not None:
                assert getattr(layer.attention, latent).eps == 1e-6
        if getattr(layer.attention, "qk_norm", None) is not None:
            assert layer.attention.qk_norm.eps == arch.norm_epsilon
        if getattr(layer, "moe", None) is not None:
            router = layer.moe.router
            assert (router.score_func, router.route_norm, float(router.route_scale)) == \
                (arch.router_score, router_renormalises(arch, model.top_k), float(arch.router_topk_scaling or 1.0))
    assert not any("trains that" in n for n in doc["notes"]), doc["notes"]


@pytest.mark.parametrize("name, says", [("llama3-8b", "RoPE scaling llama3 (the model: none)"),
                                        ("qwen3-235b-a22b", "rotary base 5e+06 (the model: 1e+06)")])
def test_a_torchtitan_0_2_launch_of_a_flavor_with_another_rope_is_refused(name, says):
    """--torchtitan-version 0.2 wrote a TOML naming the flavor (llama3 8B, qwen3 235B-A22B) that TorchTitan 0.2.2 builds
    with another RoPE than the model (torchtitan v0.2.2 models/llama3/model/model.py precompute_freqs_cis scales by
    RoPEScalingArgs' factor 8 always; models/qwen3/__init__.py 235B-A22B rope_theta 5000000), with a note: a 0.2 TOML
    sets no RoPE, so the launch trained another positional encoding. It is refused in one line, as a flavor size 0.2
    lacks is, naming --torchtitan-version 0.3 (whose config function sets the model's RoPE)."""
    from commbench.planner import Layout, load_model
    model = load_model(name)
    moe = {"ep": 8, "etp": 1} if model.is_moe else {}
    doc = torchtitan_plan(Layout(tp=1, pp=1, dp=8, mbs=1, gbs=64, **moe), model, version="0.2")
    assert doc["refused"].startswith("TorchTitan 0.2.2's ") and says in doc["refused"] and \
        doc["refused"].endswith("plan it with --torchtitan-version 0.3 (its config function sets the model's values)"), doc
    assert "\n" not in doc["refused"] and "sections" not in doc
    assert "refused" not in torchtitan_plan(Layout(tp=1, pp=1, dp=8, mbs=1, gbs=64, **moe), model, version="0.3")


def test_a_torchtitan_0_2_launch_of_a_flavor_with_another_norm_epsilon_is_refused():
    """deepseek_v3 671B's RMSNorms are eps 1e-5 (torchtitan v0.2.2 models/deepseek_v3/model/args.py:62 norm_eps), the
    model's 1e-6: the TOML was written with a note that it trains the flavor's eps, where another RoPE was refused. A 0.2
    TOML sets neither, so both are refused in one line naming --torchtitan-version 0.3 (probe P7, session 44)."""
    from commbench.planner import Layout, load_model
    doc = torchtitan_plan(Layout(tp=1, pp=1, dp=8, mbs=1, gbs=64, ep=8, etp=1), load_model("deepseek-v3"), version="0.2")
    assert "norm epsilon 1e-05 (the model: 1e-06)" in doc["refused"] and "--torchtitan-version 0.3" in doc["refused"]
    assert not any("builds" in n for n in torchtitan_plan(Layout(tp=1, pp=1, dp=8, mbs=1, gbs=64),
                                                          load_model("llama3.1-70b"), version="0.2")["notes"])


def hf_variant(tmp_path, name: str, **changes) -> "ModelSpec":
    """The hf: fixture `name` with `changes` to its config.json, read from tmp_path."""
    import json
    from pathlib import Path

    from commbench.planner import load_model
    raw = json.loads((Path(__file__).parent / "data" / "hf" / name / "config.json").read_text())
    folder = tmp_path / f"{name}-variant"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(dict(raw, **changes)))
    return load_model(f"hf:{folder}")


@pytest.mark.parametrize("renormalised", [False, True])
def test_a_generated_qwen3_moe_model_builds_the_router_the_plan_says(renormalised, tmp_path, monkeypatch):
    """Qwen3-Coder-480B with norm_topk_prob false: the plan said "TorchTitan 0.3.0's qwen3 ... builds top-k weights
    renormalised True (the model: False): the plan's config function sets ...'s values on it", but the generated model
    function (qwen3._build_qwen3_moe_layers, which hard-codes route_norm=True) was written without the router line,
    and TorchTitan's parsed config renormalised. It now sets route_norm on every MoE layer, as the note says."""
    from commbench.planner import Layout
    model = hf_variant(tmp_path, "Qwen3-Coder-480B-A35B-Instruct", norm_topk_prob=renormalised)
    lay = Layout(tp=4, pp=4, ep=16, etp=1, dp=16, mbs=1, gbs=256)
    doc = torchtitan_plan(lay, model)
    assert "refused" not in doc and "_build_qwen3_moe_layers" in doc["config_module"]["text"], doc
    said = [n for n in doc["notes"] if "top-k weights renormalised" in n]
    assert said == ([] if renormalised else [f"TorchTitan 0.3.0's qwen3 {model.name} builds top-k weights renormalised "
                                             f"True (the model: False): the plan's config function "
                                             f"(commbench_torchtitan.py) sets {model.name}'s values on it"])
    config, _, _ = run_titan(doc, 256, "gb200-nvl72", tmp_path, monkeypatch)
    layers = config.model_spec.model.layers
    assert len(layers) == 62 and {layer.moe.router.route_norm for layer in layers} == {renormalised}


BALANCED = ["qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-20b", "deepseek-v3", "hf:Qwen3-30B-A3B", "hf:DeepSeek-V2-Lite",
            "hf:Moonlight-16B-A3B"]


@pytest.mark.parametrize("name", BALANCED)
def test_every_torchtitan_moe_launch_balances_as_the_model_or_says_how_not(name, tmp_path, monkeypatch):
    """plan --framework torchtitan for qwen3-30b-a3b, gpt-oss-20b, deepseek-v3 (and hf: Qwen3 configs) said nothing of
    balancing, though TorchTitan's config put an expert bias (load_balance_coeff 1e-3, make_moe_config's default) on
    every MoE layer of models that have none, and trains no auxiliary loss; only a generated model got a note. Every
    MoE launch now sets load_balance_coeff to the model's (None without an expert bias: TorchTitan's router then picks
    on its scores, and register_moe_load_balancing_hook registers no bias update), and the one note names the
    balancing loss the launch trains without."""
    from pathlib import Path

    import torch
    from torchtitan.components.optimizer import register_moe_load_balancing_hook

    from commbench.planner import Layout, load_model
    from commbench.planner.emit.torchtitan import model_balance_coeff
    model = load_model(f"hf:{Path(__file__).parent / 'data' / 'hf' / name[3:]}" if name.startswith("hf:") else name)
    arch = model.architecture
    lay = Layout(tp=1, pp=1, ep=8, etp=1, dp=8, mbs=1, gbs=64)
    doc = torchtitan_plan(lay, model)
    assert "refused" not in doc, doc
    config, dims, _ = run_titan(doc, 8, "h100-hgx", tmp_path, monkeypatch)
    want = model_balance_coeff(model)
    aux = bool(arch.aux_loss_coeff) and arch.load_balancing != "none"
    # an aux-loss model keeps TorchTitan's expert bias in the loss's place (no balancing at all can collapse routing)
    assert want == (1e-3 if arch.router_expert_bias or aux else None)
    moes = [layer.moe for layer in config.model_spec.model.layers if getattr(layer, "moe", None) is not None]
    assert moes and {moe.load_balance_coeff for moe in moes} == {want}
    said = [n for n in doc["notes"] if "balances experts" in n]
    assert len(said) == (1 if aux or want is None else 0), doc["notes"]
    assert all(n.startswith("TorchTitan 0.3.0's MoE balances experts only by an expert bias") for n in said)
    assert any(f"without its {arch.load_balancing} (coefficient {arch.aux_loss_coeff:g})" in n for n in said) == aux
    assert any("an expert bias" in n and "does not have" in n for n in said) == (aux and not arch.router_expert_bias)
    if param_counts(model).total < PIPELINE_BUILD_MAX_PARAMS:   # TorchTitan's own hook registration on the model
        with torch.device("meta"):
            built = config.model_spec.model.build()
        hooks = []
        register_moe_load_balancing_hook(SimpleNamespace(register_step_pre_hook=hooks.append), [built], dims)
        assert len(hooks) == (want is not None)
        assert all((m.moe.expert_bias_E is None) == (want is None) for m in built.layers.values() if m.moe_enabled)


def test_each_shipped_flavor_s_recorded_architecture_is_what_torchtitan_builds():
    """TITAN_FLAVOR_ARCH (what an hf: model of a shipped flavor's sizes is compared with) holds what TorchTitan 0.3.0's
    model_registry(flavor) builds: biases, qk-norm, attention window and sinks, swiglu limit, YaRN, expert groups,
    balancing; TITAN_ZOO_FLAVORS names TITAN_MODELS' flavors, and each zoo model is its flavor in every field."""
    import importlib

    from commbench.planner import load_model
    from commbench.planner.search.frameworks import TITAN_FLAVOR_ARCH, TITAN_ZOO_FLAVORS, titan_arch_misfits
    for name, (module, flavor) in TITAN_ZOO_FLAVORS.items():
        assert (TITAN_MODELS[name].module, TITAN_MODELS[name].flavor) == (module, flavor)
        assert titan_arch_misfits(load_model(name), module) == [], name
        recorded = dict(TITAN_FLAVOR_ARCH[module])
        built = importlib.import_module(f"torchtitan.models.{module}").model_registry(flavor).model
        first, second, last = built.layers[0], built.layers[1], built.layers[-1]
        attention, rope = first.attention, first.attention.rope
        if module == "deepseek_v3":
            assert (attention.kv_norm is not None, attention.mscale) == \
                (recorded["architecture.qk_norm"], recorded["architecture.yarn_mscale_all_dim"])
            assert attention.wkv_a.bias is recorded["architecture.linear_bias"] is False
        else:
            qkv = attention.qkv_linear.wqkv
            assert getattr(attention, "qk_norm", None) is not None if recorded["architecture.qk_norm"] else \
                getattr(attention, "qk_norm", None) is None
            assert (attention.wo.bias, qkv.bias and not attention.wo.bias) == \
                (recorded["architecture.linear_bias"], recorded["architecture.qkv_bias"])
            window = getattr(attention, "sliding_window_size", None)
            assert (window or 0, 2 if window and second.attention.sliding_window_size is None else 0) == \
                (recorded["sliding_window"], recorded["architecture.window_skip_freq"] if window else 0)
            assert ("sinks" in (attention.param_init or {})) == (recorded["architecture.softmax_type"] == "learnable")
        if rope.scaling == "yarn":
            assert (rope.beta_fast, rope.beta_slow, rope.original_seq_len) == \
                (recorded["architecture.yarn_beta_fast"], recorded["architecture.yarn_beta_slow"],
                 recorded["architecture.rope_original_max_positions"])
        moe = getattr(last, "moe", None)
        if moe is not None:
            router = moe.router
            assert (router.num_expert_groups or 0, router.num_limited_groups or 0, moe.shared_experts) == \
                (recorded["architecture.router_groups"], recorded.get("architecture.router_group_topk", 0), None) \
                or module == "deepseek_v3"
            assert moe.load_balance_coeff == TITAN_MODELS[name].load_balance_03
            limit = getattr(moe.routed_experts.inner_experts, "swiglu_limit", 0.0)
            assert limit == recorded["architecture.activation_clamp"]


def test_a_model_at_a_flavor_s_sizes_with_other_attention_biases_is_refused_naming_the_field(tmp_path):
    """A Qwen2 config at Llama-3.1-8B's sizes (model_type qwen2: QKV biases) was launched as `--config llama3_8b_bf16`,
    bias-free, with no note, while its Megatron plan had --add-qkv-bias: titan_zoo_name matched sizes only. TorchTitan's
    llama3 layers build no QKV bias, so the TorchTitan launch is refused in one line naming the field, the model's
    value and the flavor's; the Megatron plan is as before."""
    import json

    from typer.testing import CliRunner

    from commbench.cli.app import app
    model = hf_variant(tmp_path, "Llama-3.1-8B", model_type="qwen2", architectures=["Qwen2ForCausalLM"])
    assert model.architecture.qkv_bias
    base = ["plan", "--model", f"hf:{tmp_path / 'Llama-3.1-8B-variant'}", "--system", "h100-hgx", "--gpus", "8", "--gbs", "64", "--top", "1"]
    res = CliRunner().invoke(app, base + ["--framework", "torchtitan", "-O", str(tmp_path / "t")], env={"COLUMNS": "400"})
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert res.output.startswith(f"error: TorchTitan 0.3.0 has no {model.name} model") and \
        "its flavor of the same sizes, llama3 8B, builds it otherwise: architecture.qkv_bias True (the flavor: False)" \
        in res.output and "--framework megatron" in res.output
    res = CliRunner().invoke(app, base + ["-O", str(tmp_path / "m")], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    plan = json.loads((tmp_path / "m" / "plan.json").read_text())
    assert "--add-qkv-bias" in plan["megatron_args"] and "qkv_bias True" in plan["torchtitan"]["refused"]


@pytest.mark.parametrize("limit", [10.0, 7.0])
def test_a_gpt_oss_model_s_swiglu_limit_is_built_by_the_launch(limit, tmp_path, monkeypatch):
    """gpt-oss-20b's config with swiglu_limit 10 launched gpt_oss 20b, whose experts clamp at 7.0
    (GptOssGroupedExperts.Config.swiglu_limit's default), with no note. The config function now sets the model's limit
    on every layer's experts, said in one note; TorchTitan's parsed config holds it."""
    from commbench.planner import Layout
    model = hf_variant(tmp_path, "gpt-oss-20b", swiglu_limit=limit)
    assert model.architecture.activation_clamp == limit
    lay = Layout(tp=1, pp=1, ep=8, etp=1, dp=8, mbs=1, gbs=64)
    doc = torchtitan_plan(lay, model)
    assert "refused" not in doc and doc["config"] == "gpt_oss_20b_bf16", doc
    said = [n for n in doc["notes"] if "activation_clamp" in n]
    assert said == ([] if limit == 7.0 else [f"TorchTitan 0.3.0's gpt_oss 20b builds architecture.activation_clamp 7 "
                                             f"(the model: 10): the plan's config function (commbench_torchtitan.py) "
                                             f"sets {model.name}'s values on it"])
    config, _, _ = run_titan(doc, 8, "h100-hgx", tmp_path, monkeypatch)
    assert {layer.moe.routed_experts.inner_experts.swiglu_limit for layer in config.model_spec.model.layers} == {limit}


@pytest.mark.parametrize("precision, quantized", [("bf16", set()), ("mxfp8", {"MXFP8"})])
def test_a_405b_launch_in_another_precision_trains_the_405b_recipe(precision, quantized, tmp_path, monkeypatch):
    """The bf16 / mxfp8 Llama 3.1 405B config function started from llama3_70b() and swapped the flavor in, so the
    405B trained with the 70B recipe (lr 1.5e-4, no warmup, no compile; found by an outside probe). It now starts
    from llama3_405b() (lr 8e-5, 600 warmup steps) with its Float8 converter dropped."""
    from commbench.planner import Layout, load_model
    from torchtitan.models.llama3.config_registry import llama3_405b
    model = load_model("llama3.1-405b")
    lay = Layout(tp=8, pp=1, dp=2, mbs=1, gbs=16, precision=precision, fsdp=True, distributed_optimizer=True,
                 recompute="full")
    doc = torchtitan_plan(lay, model)
    assert "refused" not in doc, doc
    config, _, _ = run_titan(doc, 16, "gb200-nvl72", tmp_path, monkeypatch)
    shipped = llama3_405b()
    lr = [g.optimizer_kwargs["lr"] for g in config.optimizer.param_groups]
    assert lr == [g.optimizer_kwargs["lr"] for g in shipped.optimizer.param_groups] == [8e-5]
    assert config.lr_scheduler.warmup_steps == shipped.lr_scheduler.warmup_steps == 600
    assert config.model_spec.flavor == "405B" and quantized_kinds(config.model_spec.model) == quantized
    assert "Float8" in quantized_kinds(shipped.model_spec.model)   # what was dropped



def _titan_case(name: str, precision: str, tp: int, ep: int):
    """A pinned FSDP layout of `name` at `tp` x `ep` (a MoE model on 64 x tp GPUs, a dense one on 8 x tp)."""
    from commbench.planner import Layout, load_model
    model = load_model(name)
    gpus = tp * 8 * (8 if model.is_moe else 1)
    lay = Layout(tp=tp, pp=1, ep=ep, etp=1 if model.is_moe else tp, dp=gpus // tp, mbs=1, gbs=gpus, fsdp=True,
                 precision=precision, recompute="full" if name == "llama3.1-405b" else "selective")
    doc = torchtitan_plan(lay, model)
    assert "refused" not in doc, doc
    return doc, gpus


@pytest.mark.parametrize("name, precision, tp, ep, system", [
    ("deepseek-v3", "fp8", 8, 64, "h100-hgx"), ("llama3.1-405b", "fp8", 8, 1, "h100-hgx"),
    ("llama3-8b", "mxfp8", 2, 1, "b200-hgx"), ("qwen3-30b-a3b", "fp8", 2, 8, "h100-hgx"),
    ("deepseek-v3", "mxfp8", 8, 64, "b200-hgx")])
def test_a_quantized_launch_compiles_its_model(name, precision, tp, ep, system, tmp_path, monkeypatch):
    """deepseek-v3 fp8 (the default precision on Hopper) launched deepseek_v3_671b_float8() as-is, whose compile is
    deepseek_v3_671b's components ["loss"], so its float8 model ran uncompiled (torchtitan 0.3.0
    components/quantization/float8.py: "Compile is required for high performance float8 MoE training") where the
    prediction charges the compiled fp8 rate (found from outside). Every quantized launch now compiles the model."""
    doc, gpus = _titan_case(name, precision, tp, ep)
    config, _, _ = run_titan(doc, gpus, system, tmp_path, monkeypatch)
    assert config.compile.enable and "model" in config.compile.components, config.compile
    assert quantized_kinds(config.model_spec.model) == QUANTIZED[precision]


@pytest.mark.parametrize("name, precision, tp, ep, system", [
    ("llama3.1-405b", "fp8", 8, 1, "h100-hgx"), ("llama3.1-405b", "bf16", 8, 1, "h100-hgx"),
    ("llama3.1-405b", "mxfp8", 8, 1, "b200-hgx"), ("deepseek-v3", "bf16", 8, 64, "h100-hgx"),
    ("llama3-8b", "mxfp8", 2, 1, "b200-hgx")])
def test_a_launch_runs_no_async_tp_as_the_prediction_charges(name, precision, tp, ep, system, tmp_path, monkeypatch):
    """llama3.1-405b under TorchTitan launched llama3_405b()'s compile (CompileConfig enable_async_tensor_parallel=True,
    torchtitan 0.3.0 models/llama3/config_registry.py; distributed/compile.py _maybe_enable_async_tp runs it with
    tp > 1), fp8 as the shipped function and bf16 through a generated one, while the plan charges TP unoverlapped and
    refuses tp_comm_overlap=true (found from outside). Every launch now turns async TP off, and says so where the
    config function would enable it."""
    doc, gpus = _titan_case(name, precision, tp, ep)
    config, _, _ = run_titan(doc, gpus, system, tmp_path, monkeypatch)
    assert config.compile.enable_async_tensor_parallel is False
    said = [n for n in doc["notes"] if "async TP" in n]
    assert len(said) == (1 if name == "llama3.1-405b" else 0) and all("llama3_405b()" in n for n in said), said


@pytest.mark.parametrize("name, precision, tp, ep, system, shipped", [
    ("llama3-8b", "bf16", 1, 1, "h100-hgx", "llama3_8b"), ("llama3.1-70b", "bf16", 4, 1, "h100-hgx", "llama3_70b"),
    ("qwen3-30b-a3b", "bf16", 2, 8, "h100-hgx", "qwen3_30b_a3b"), ("gpt-oss-20b", "bf16", 1, 8, "h100-hgx", "gpt_oss_20b"),
    ("deepseek-v3", "bf16", 8, 64, "h100-hgx", "deepseek_v3_671b"),
    ("llama3.1-405b", "bf16", 8, 1, "h100-hgx", None), ("llama3-8b", "mxfp8", 2, 1, "b200-hgx", "llama3_8b_mxfp8"),
    ("qwen3-30b-a3b", "fp8", 2, 8, "h100-hgx", None)])
def test_every_launch_compiles_model_and_loss(name, precision, tp, ep, system, shipped, tmp_path, monkeypatch):
    """bf16 launches ran TorchTitan's shipped config functions as-is: llama3_8b / llama3_70b / qwen3_* / gpt_oss_*
    leave CompileConfig.enable False (torchtitan 0.3.0 config/configs.py CompileConfig), deepseek_v3_671b compiles
    only the loss, so the model ran eager while quantized launches compiled ["model", "loss"] (found from outside).
    One rule now for every precision: the launch compiles the model and the loss, and the plan says so."""
    doc, gpus = _titan_case(name, precision, tp, ep)
    assert doc["config"] in (shipped, f"{shipped}_{precision}") or shipped is None, doc["config"]
    config, _, _ = run_titan(doc, gpus, system, tmp_path, monkeypatch)
    assert config.compile.enable is True, config.compile
    assert config.compile.components == ["model", "loss"], config.compile
    assert config.compile.enable_async_tensor_parallel is False
    said = [n for n in doc["notes"] if "torch.compile" in n]
    assert len(said) == 1 and "--compile.enable" in said[0], doc["notes"]


@pytest.mark.parametrize("name, recompute", [("llama3-8b", "selective"), ("qwen3-30b-a3b", "selective"),
                                             ("llama3-8b", "full")])
def test_a_selective_launch_says_torchtitans_op_level_ac_is_not_what_is_priced(name, recompute):
    """TorchTitan 0.3.0's op-level selective AC (distributed/activation_checkpoint.py) saves attention and recomputes
    every second bf16 mm, the routed experts' grouped GEMMs and the elementwise ops; the step model prices
    recompute=selective as Megatron's core-attention recompute. The plan said only 'the prediction assumed
    recompute=selective' (found from outside, probe AH): it now says the two differ; full AC has no such note."""
    from commbench.planner import Layout, load_model
    model = load_model(name)
    lay = Layout(tp=1, pp=1, ep=8 if model.is_moe else 1, etp=1, dp=8, mbs=1, gbs=8, fsdp=True, precision="bf16",
                 recompute=recompute)
    doc = torchtitan_plan(lay, model)
    said = [n for n in doc["notes"] if "selective AC" in n]
    assert len(said) == (1 if recompute == "selective" else 0), doc["notes"]
    if said:
        assert "does not price" in said[0] and "core-attention" in said[0]
