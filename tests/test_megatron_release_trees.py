"""The emitted Megatron-LM arguments through each recipe-table release's own Megatron-LM (parse_args ->
validate_args -> core_transformer_config_from_args at the commit that release's container runs, read offline:
tests/megatron_releases.py; skipped without MEGATRON_LM_GIT).

Found from outside (probe BP): every plan emitted `--cross-entropy-loss-fusion --cross-entropy-fusion-impl te`, which
Megatron-LM refuses in validate_args from core_v0.18.2 on (168cb15d70, "Disable TE cross entropy loss fusion
(#5115)"), so no plan for 26.06.01 or 26.08, the default release, got past validate_args there."""

from __future__ import annotations

import pytest

from tests.framework_plans import INSTALL_HINT, PINNED
from tests.megatron_releases import SKIP_REASON, git_dir, release_ref, release_tree, run_cases

pytest.importorskip("megatron.core", reason=f"megatron-core is not installed: {INSTALL_HINT}")

from commbench.costmodel import load_preset  # noqa: E402
from commbench.planner import Layout, check_layout, load_model  # noqa: E402
from commbench.planner.emit.megatron import launch_env, megatron_args  # noqa: E402
from commbench.planner.layout.recipes import releases  # noqa: E402

# beside the framework matrix's pinned plans: the probe's Qwen3-30B-A3B plans on one HGX node (per-layer graphs over
# the router; B300's flex dispatcher)
EXTRA = [("qwen3-30b-a3b", "b200-hgx", 8, dict(tp=1, pp=1, ep=8, etp=1, mbs=1, gbs=256, precision="mxfp8",
                                              cuda_graph="layer", fused_moe=True)),
         ("qwen3-30b-a3b", "b300-hgx", 8, dict(tp=1, pp=1, ep=8, etp=1, mbs=1, gbs=256, precision="nvfp4",
                                              cuda_graph="layer", dispatcher="flex")),
         ("qwen3-30b-a3b", "h100-hgx", 8, dict(tp=1, pp=1, ep=8, etp=1, mbs=1, gbs=256, precision="fp8")),
         # probe CH: a hybrid Mamba-MoE model ('E' layers: refused for 25.09 and 25.11, whose trees cannot build it),
         # the flex dispatcher with DeepEP on Hopper (25.09 spells it --moe-enable-deepep) and a per-layer graph over
         # attention alone (25.09: --external-cuda-graph --cuda-graph-scope attn)
         ("nemotron-3-nano-30b-a3b", "b200-hgx", 32, dict(tp=1, pp=1, ep=8, etp=1, mbs=1, gbs=256)),
         ("mixtral-8x7b", "h100-hgx", 32, dict(tp=1, pp=1, ep=8, etp=1, mbs=1, gbs=512, precision="fp8",
                                              dispatcher="flex")),
         ("qwen3-30b-a3b", "b200-hgx", 8, dict(tp=1, pp=1, ep=8, etp=1, mbs=1, gbs=256, cuda_graph="layer",
                                              cuda_graph_scope="attn")),
         # Gated DeltaNet (Qwen3-Next): 25.11 (0d8e0714) spells the layer type --linear-attention-type, core_v0.16.1
         # --experimental-attention-variant; 25.09 (core_v0.14.0) has no GDN (refused)
         ("qwen3-next-80b-a3b", "gb200-nvl72", 64, dict(tp=1, pp=2, vp=2, ep=8, etp=1, mbs=1, gbs=512))]


def release_cases(release: str | None = None) -> list[tuple[str, dict]]:
    """Each case's arguments as the plan for `release` writes them (release_flags.release_args: its own spelling),
    "builds": False where the plan is refused for that release (release_flags.release_cannot_build; a CUDA graph the
    release refuses beside the layout's recompute or delayed wgrad, graph_recompute.release_graph_pin_refusal: then
    the arguments are the target's, which the emitter refuses to write for the release). Transformer Engine answers as
    the release's container's (recipes.json releases transformer_engine; probe EJ: answered as 2.10, every tree from
    26.04 on refused the plans' per-layer graphs with delayed wgrad, "requires TE version >= 2.12.0")."""
    from commbench.planner.layout.release_flags import release_args, release_cannot_build
    from commbench.planner.search.graph_recompute import release_graph_pin_refusal
    from commbench.planner.search.wgrad_graph import container_te
    te = {"te_version": container_te(release)[0]} if release is not None else {}
    out = []
    for name, system, gpus, fields in PINNED + EXTRA:
        model, layout = load_model(name), Layout.for_world(gpus, **fields)
        check_layout(model, layout, gpus)
        gpu = load_preset(system, num_gpus=gpus).gpu
        graphs = release_graph_pin_refusal(model, release, {f: getattr(layout, f) for f in GRAPH_FIELDS})
        argv = release_args(megatron_args(layout, model, release=None if graphs else release), release)
        builds = release is None or (release_cannot_build(model, release) is None and graphs is None)
        out.append((f"{name}-{system}-{gpus}", {"argv": argv, "world": gpus, "env": launch_env(layout, gpu.name),
                                                 "capability": list(gpu.compute_capability), "builds": builds, **te}))
    return out


GRAPH_FIELDS = ("moe_a2a_overlap", "cuda_graph", "cuda_graph_scope", "ep", "dp_overlap", "recompute")


# validate_args refusals of these trees the plans do not yet answer (left open, named here so a new one fails): none.
# The trees from 26.04 on ask TE >= 2.12 for per-layer graphs with delayed wgrad: answered, each tree runs with its
# container's TE (release_cases), which the plan names and checks (search/wgrad_graph.py); the attention-bias refusal
# in the same block is answered (the gpt-oss test here). 25.11's refusals of a recomputed module inside a CUDA graph are
# answered (search/graph_recompute.py: release_cases marks those plans refused, and the tree must refuse them).
KNOWN: dict[str, str] = {}


@pytest.mark.skipif(git_dir() is None, reason=SKIP_REASON)
@pytest.mark.parametrize("release", releases())
def test_each_release_validates_every_plan_its_parse_args_takes(release, tmp_path_factory):
    """Where a release's parse_args takes the emitted flags, its validate_args and TransformerConfig take them too; a
    plan refused for the release (a model its Megatron-LM cannot build) is one its tree refuses."""
    cases = release_cases(release)
    tree = release_tree(release_ref(release), str(tmp_path_factory.getbasetemp().parent / "megatron-releases"))
    results = run_cases(tree, [c for _, c in cases])
    refused = [f"{name}: {r['error']}" for (name, c), r in zip(cases, results) if c["builds"]
               and r.get("stage") == "validate" and not any(k in r["error"] for k in KNOWN)]
    assert refused == [], f"release {release} ({release_ref(release)}): " + "\n".join(refused)
    built = [name for (name, c), r in zip(cases, results) if not c["builds"] and r.get("ok")]
    assert built == [], f"release {release}: refused, but its tree builds them: {built}"


@pytest.mark.skipif(git_dir() is None, reason=SKIP_REASON)
@pytest.mark.parametrize("release", releases())
def test_each_release_parses_exactly_the_plans_whose_flags_the_data_says_it_takes(release, tmp_path_factory):
    """commbench/data/megatron-release-flags.json (release_flags.refused_flags) against the release's own parse_args:
    a plan parses there exactly where no flag is named refused, and a parse error names only flags named refused
    (probe BP F2: 25.09's core 0.14 has no --cuda-graph-impl / --moe-flex-dispatcher-backend and takes one
    --cuda-graph-scope value; the plan only said arguments.py 'adds, drops and changes flags')."""
    import re

    from commbench.planner.layout.release_flags import refused_flags
    cases = release_cases(release)
    tree = release_tree(release_ref(release), str(tmp_path_factory.getbasetemp().parent / "megatron-releases"))
    results = run_cases(tree, [c for _, c in cases])
    wrong = []
    for (name, case), r in zip(cases, results):
        named = {f.split()[0] for f in refused_flags(case["argv"], release)}
        parse_failed = r.get("stage") == "parse"
        in_error = set(re.findall(r"--[a-z0-9-]+", r.get("error", ""))) if parse_failed else set()
        if parse_failed != bool(named) or not in_error <= named:
            wrong.append(f"{name}: named {sorted(named)}, parse_args: {r}")
    assert wrong == [], f"release {release}: " + "\n".join(wrong)


def test_the_launch_runs_native_cross_entropy_and_the_plan_says_its_memory_charges_it():
    """Runs without the trees: the emitted loss is impl native (the one every table release's validate_args takes)
    and the plan's Megatron notes say the fp32 softmax native keeps is what the plan's memory charges (one note, no
    warning: step/loss_memory.py), or what it charges instead where the plan is another framework's."""
    from commbench.planner.emit.plan import megatron_section
    model = load_model("qwen3-30b-a3b")
    layout = Layout.for_world(8, tp=1, pp=1, ep=8, etp=1, mbs=1, gbs=256)
    argv = megatron_args(layout, model)
    assert argv[argv.index("--cross-entropy-fusion-impl") + 1] == "native"

    def loss_note(**kw):
        notes = megatron_section(layout, model, gpu_name="B200", fabric_name="b200-hgx", **kw)["notes"]
        (loss,) = [n for n in notes if n.startswith("loss: --cross-entropy-fusion-impl native")]
        return loss

    # 4096 tokens x 151936 rows x 4 B
    assert "predicted about 2.5 GB on the loss stage" in loss_note()
    assert "the plan's predicted memory charges it" in loss_note() and "WARNING" not in loss_note()
    assert "charges TorchTitan's cross entropy" in loss_note(loss="torchtitan")


@pytest.mark.skipif(git_dir() is None, reason=SKIP_REASON)
def test_qwen3_next_at_25_11_parses_and_validates_in_its_own_tree(tmp_path_factory):
    """25.11's Megatron-LM (0d8e0714) had no --experimental-attention-variant: the plan's line stopped at parse_args
    ('unrecognized arguments'). Written in 25.11's spelling (--linear-attention-type gated_delta_net) it gets through
    parse_args, validate_args and TransformerConfig there."""
    (name, case), = [(n, c) for n, c in release_cases("25.11") if n.startswith("qwen3-next")]
    assert case["argv"][case["argv"].index("--linear-attention-type") + 1] == "gated_delta_net"
    tree = release_tree(release_ref("25.11"), str(tmp_path_factory.getbasetemp().parent / "megatron-releases"))
    (result,) = run_cases(tree, [case])
    assert result.get("ok") or any(k in result.get("error", "") for k in KNOWN), result


@pytest.mark.skipif(git_dir() is None, reason=SKIP_REASON)
@pytest.mark.parametrize("te_version", ["2.10.0", "2.12.0"])
def test_the_default_gpt_oss_gb300_plan_validates_in_26_08s_tree(te_version, tmp_path, tmp_path_factory):
    """Probe DE F1: the 26.08 gpt-oss plan (no pins) wrote --delay-wgrad-compute with a per-layer graph over its biased
    attention, which 26.08's validate_args refuses (with TE >= 2.12: "doesn't support attn bias for now"; below it:
    "requires TE version >= 2.12.0"). Its arguments pass validate_args and TransformerConfig there at either TE."""
    import json

    from typer.testing import CliRunner

    from commbench.cli.app import app
    result = CliRunner().invoke(app, ["plan", "--model", "gpt-oss-120b", "--system", "gb300-nvl72", "--gpus", "64",
                                      "--precision", "mxfp8", "--software", "26.08", "-O", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    section = json.loads((tmp_path / "p" / "plan.json").read_text())["megatron"]
    case = {"argv": section["args"], "world": 64, "env": section["launch_env"], "te_version": te_version,
            "capability": list(load_preset("gb300-nvl72", num_gpus=64).gpu.compute_capability)}
    tree = release_tree(release_ref("26.08"), str(tmp_path_factory.getbasetemp().parent / "megatron-releases"))
    (outcome,) = run_cases(tree, [case])
    assert outcome.get("ok"), outcome


@pytest.mark.skipif(git_dir() is None, reason=SKIP_REASON)
def test_the_25_11_qwen3_next_plan_validates_in_25_11s_tree(tmp_path, tmp_path_factory):
    """Probe EA: the searched 25.11 Qwen3-Next plan wrote --recompute-modules core_attn ... with a per-layer graph over
    attn, which 25.11's TransformerConfig refuses ("attn cuda graph is not supported with core_attn recompute.",
    0d8e0714 transformer_config.py:1592-1596; search/graph_recompute.py). Its arguments pass 25.11's tree."""
    import json

    from typer.testing import CliRunner

    from commbench.cli.app import app
    result = CliRunner().invoke(app, ["plan", "--model", "qwen3-next-80b-a3b", "--system", "b200-hgx", "--gpus", "32",
                                      "--software", "25.11", "--precision", "mxfp8", "-O", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    section = json.loads((tmp_path / "p" / "plan.json").read_text())["megatron"]
    case = {"argv": section["args"], "world": 32, "env": section["launch_env"],
            "capability": list(load_preset("b200-hgx", num_gpus=32).gpu.compute_capability)}
    tree = release_tree(release_ref("25.11"), str(tmp_path_factory.getbasetemp().parent / "megatron-releases"))
    (outcome,) = run_cases(tree, [case])
    assert outcome.get("ok"), outcome


@pytest.mark.skipif(git_dir() is None, reason=SKIP_REASON)
@pytest.mark.parametrize("model, release, depths, repeated", [("nemotron-3-super-120b-a12b", "26.08", 1, False),
                                                              ("nemotron-3.5-lightning-30b-a3b", "26.04", 2, True)])
def test_a_hybrid_mtp_plan_validates_in_its_releases_tree(model, release, depths, repeated, tmp_path,
                                                          tmp_path_factory):
    """Probe EJ: the Nemotron-3 hybrid plans with MTP were refused at every release ("core_v0.16.1 ... its MambaModel
    builds no MTP layers"), though from 26.04 Megatron-LM builds MTP in the hybrid model. The plan's arguments (the MTP
    block's --mtp-hybrid-override-pattern, --mtp-num-layers, and --mtp-use-repeated-layer for shared depths) pass the
    release's parse_args, validate_args and TransformerConfig with the model's MTP depths."""
    import json

    from typer.testing import CliRunner

    from commbench.cli.app import app
    result = CliRunner().invoke(app, ["plan", "--model", model, "--system", "gb200-nvl72", "--gpus", "64",
                                      "--software", release, "-O", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    section = json.loads((tmp_path / "p" / "plan.json").read_text())["megatron"]
    assert section["launch"], section.get("refused")
    case = {"argv": section["args"], "world": 64, "env": section["launch_env"],
            "capability": list(load_preset("gb200-nvl72", num_gpus=64).gpu.compute_capability),
            "fields": ["mtp_num_layers", "mtp_use_repeated_layer"]}
    tree = release_tree(release_ref(release), str(tmp_path_factory.getbasetemp().parent / "megatron-releases"))
    (outcome,) = run_cases(tree, [case])
    assert outcome.get("ok"), outcome
    assert outcome["config"] == {"mtp_num_layers": depths, "mtp_use_repeated_layer": repeated}


@pytest.mark.skipif(git_dir() is None, reason=SKIP_REASON)
@pytest.mark.parametrize("model", ["kimi-k2", "deepseek-v3"])
def test_the_25_11_mla_plans_on_512_gb200_validate_in_25_11s_tree(model, tmp_path, tmp_path_factory):
    """Probe EJ: the searched 25.11 Kimi-K2 / DeepSeek-V3 plans on 512 GB200 wrote --recompute-modules mla_up_proj with
    --cuda-graph-scope attn moe_router moe_preprocess (the recipes' scope), which 25.11's TransformerConfig refuses
    ("attn cuda graph is not supported with mla_up_proj recompute.", 0d8e0714 transformer_config.py:1593-1596). Their
    arguments pass 25.11's tree (tests/test_graph_recompute_emitted.py checks the written flags without it)."""
    import json

    from typer.testing import CliRunner

    from commbench.cli.app import app
    result = CliRunner().invoke(app, ["plan", "--model", model, "--system", "gb200-nvl72", "--gpus", "512",
                                      "--software", "25.11", "-O", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    section = json.loads((tmp_path / "p" / "plan.json").read_text())["megatron"]
    assert section["launch"] and section["release"]["refused_flags"] == []
    case = {"argv": section["args"], "world": 512, "env": section["launch_env"],
            "capability": list(load_preset("gb200-nvl72", num_gpus=512).gpu.compute_capability)}
    tree = release_tree(release_ref("25.11"), str(tmp_path_factory.getbasetemp().parent / "megatron-releases"))
    (outcome,) = run_cases(tree, [case])
    assert outcome.get("ok"), outcome


@pytest.mark.skipif(git_dir() is None, reason=SKIP_REASON)
@pytest.mark.parametrize("release", ["26.04", "26.08"])
def test_a_hybrid_plan_with_virtual_stages_validates_in_its_releases_tree(release, tmp_path, tmp_path_factory):
    """Outside probe P1: the hybrid's vp=2 was refused at every release. From 26.04 the plan's '|'-segmented pattern
    passes the release's parse_args, validate_args (which derives VP 2 from the 4 segments over pp=2) and
    TransformerConfig, every layer of the model built."""
    import json

    from typer.testing import CliRunner

    from commbench.cli.app import app
    result = CliRunner().invoke(app, ["plan", "--model", "nemotron-3-nano-30b-a3b", "--system", "b200-hgx", "--gpus",
                                      "32", "--layout", "tp=1,pp=2,vp=2,ep=8,etp=1,mbs=1", "--software", release,
                                      "-O", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    section = json.loads((tmp_path / "p" / "plan.json").read_text())["megatron"]
    assert section["launch"], section.get("refused")
    pattern = section["args"][section["args"].index("--hybrid-override-pattern") + 1]
    assert section["layer_split"]["megatron_args"] == ["--hybrid-override-pattern", pattern] and pattern.count("|") == 3
    case = {"argv": section["args"], "world": 32, "env": section["launch_env"],
            "capability": list(load_preset("b200-hgx", num_gpus=32).gpu.compute_capability),
            "fields": ["num_layers", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size"]}
    tree = release_tree(release_ref(release), str(tmp_path_factory.getbasetemp().parent / "megatron-releases"))
    (outcome,) = run_cases(tree, [case])
    assert outcome.get("ok"), outcome
    assert outcome["config"] == {"num_layers": 52, "pipeline_model_parallel_size": 2,
                                 "virtual_pipeline_model_parallel_size": 2}
