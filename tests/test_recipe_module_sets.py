"""A recipe's recompute is the SET of modules it runs (issue 24 fidelity): Megatron-Bridge recipes set recompute_modules
lists (gpt-oss-120b from 26.02: ["layernorm", "moe_act"]; DeepSeek-V3 H100 from 25.09: ["mla_up_proj", "mlp"]), which
commbench/data/recipes.json recorded as one module (moe_act, mla_up_proj), so a published run was priced with one
module where it recomputed two and a plan "as the recipe" launched --recompute-modules with one. The set is now the
recipe's recompute mode (layout/spec.py RECIPE_MODULE_SETS), priced per module (layout/recompute.py, step/evaluate.py)
and emitted whole (emit/megatron.py); the search's own modes are unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commbench.costmodel import load_preset
from commbench.planner import Layout, LayoutArrays, load_model
from commbench.planner.emit.megatron import megatron_args, parse_megatron_args
from commbench.planner.layout import recompute as rc
from commbench.planner.layout.recipes import recipe_for, release_features
from commbench.planner.layout.spec import RECOMPUTE
from commbench.planner.step.evaluate import evaluate_layouts
from tests.megatron_releases import SKIP_REASON, git_dir, release_ref, release_tree, run_cases


def _modules(args: list[str]) -> list[str]:
    i = args.index("--recompute-modules")
    assert args[i - 2:i] == ["--recompute-granularity", "selective"]
    out = []
    for arg in args[i + 1:]:
        if arg.startswith("--"):
            break
        out.append(arg)
    return out


def _evaluate(model, system: str, gpus: int, modes: tuple[str, ...], **sizes):
    lays = [Layout.for_world(gpus, recompute=mode, **sizes) for mode in modes]
    return lays, evaluate_layouts(model, load_preset(system, num_gpus=gpus), LayoutArrays.from_layouts(lays))


def test_gpt_oss_recipe_recomputes_layernorm_and_moe_act_priced_and_emitted_with_both():
    """Megatron-Bridge v0.3.0 gpt_oss workload presets recompute_modules=["layernorm", "moe_act"] under selective
    granularity (utils/overrides.py:143): recipes.json says both, the step model frees the MoE block's pre-MLP norm
    beside the experts' activation and pays its re-run, and the launch names both."""
    flags = recipe_for("26.02", "gpt-oss-120b", "gb200", "bf16")
    assert flags["recompute"] == "layernorm+moe_act"
    model = load_model("gpt-oss-120b")
    assert rc.mode_modules(model, flags["recompute"]) == ["layernorm", "moe_act"]
    assert rc.mode_frees(model, "layernorm+moe_act") == {rc.MOE_NORM, rc.EXPERT_ACT}
    lays, bd = _evaluate(model, "gb200-nvl72", 64, ("moe_act", "layernorm+moe_act"), tp=1, pp=1, ep=64, etp=1,
                         mbs=1, gbs=512)
    assert bd.mem_activations_bytes[1] < bd.mem_activations_bytes[0]      # the norm output freed too
    assert bd.tokens_per_s_per_gpu[1] < bd.tokens_per_s_per_gpu[0]        # and recomputed
    args = megatron_args(lays[1], model, release="26.08")
    assert _modules(args) == ["layernorm", "moe_act"]
    assert parse_megatron_args(args, 64, model).recompute == "layernorm+moe_act"


def test_deepseek_v3_h100_recipe_recomputes_mla_up_proj_and_the_dense_mlps():
    """25.11 DEEPSEEK_V3_H100_BASE_CONFIG recompute_modules=["mla_up_proj", "mlp"]: mlp checkpoints the dense MLP blocks
    (DeepSeek-V3's first 3 layers; transformer_layer.py recompute_mlp only off MoE layers), freeing their normalized
    input, FC1 output and activation output and re-running their forward."""
    assert recipe_for("25.11", "deepseek-v3", "h100", "bf16")["recompute"] == "mla_up_proj+mlp"
    model = load_model("deepseek-v3")
    assert rc.mode_frees(model, "mla_up_proj+mlp") == {rc.MLA_UP, rc.MLP_NORM, rc.MLP_FC1, rc.MLP_ACT}
    lays, bd = _evaluate(model, "gb200-nvl72", 256, ("mla_up_proj", "mla_up_proj+mlp"), tp=1, pp=1, ep=64, etp=1,
                         mbs=1, gbs=2048)
    assert bd.mem_activations_bytes[1] < bd.mem_activations_bytes[0]
    assert bd.tokens_per_s_per_gpu[1] < bd.tokens_per_s_per_gpu[0]
    args = megatron_args(lays[1], model)
    assert _modules(args) == ["mla_up_proj", "mlp"]
    assert parse_megatron_args(args, 256, model).recompute == "mla_up_proj+mlp"


def test_megatron_default_module_alone_is_not_the_planners_selective():
    """25.09's DeepSeek-V3 B200 recipe sets selective granularity and no modules: Megatron-Core runs core_attn alone
    (transformer_config.py: None -> ["core_attn"]); the planner's "selective" adds layernorm, moe_act and mla_up_proj
    where they free something, so the recipe is "core_attn", launched and priced as that."""
    assert recipe_for("25.09", "deepseek-v3", "b200", "bf16")["recompute"] == "core_attn"
    model = load_model("deepseek-v3")
    lays, bd = _evaluate(model, "b200-hgx", 256, ("core_attn", "selective"), tp=1, pp=16, ep=8, etp=1, mbs=1,
                         gbs=2048)
    assert _modules(megatron_args(lays[0], model)) == ["core_attn"]
    assert len(_modules(megatron_args(lays[1], model))) == 4
    assert bd.mem_activations_bytes[0] > bd.mem_activations_bytes[1]


def test_every_recipe_set_is_a_layout_mode_and_the_search_keeps_its_own():
    """Each recipes.json recompute is a layout mode of modules Megatron-Core takes (transformer_config.py
    allowed_modules, core_v0.14.0 to core_v0.19.0: core_attn, moe_act, layernorm, mla_up_proj, mlp, moe,
    shared_experts); a release's features stand each set in for the search's own mode it holds (search_mode), so the
    search still enumerates mla_up_proj for DeepSeek-V3 and a pin may name the set."""
    table = json.loads((Path(__file__).resolve().parents[1] / "commbench" / "data" / "recipes.json").read_text())
    allowed = {"core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"}
    for entry in table["recipes"] + table["later_recipes"]:
        assert entry["recompute"] in RECOMPUTE, entry["config"]
        assert set(entry["recompute"].split("+")) <= allowed | {"none", "full"}, entry["config"]
    features = release_features("26.04", "h100", "bf16", "deepseek-v3", True)["recompute"]
    assert {"mla_up_proj", "mla_up_proj+mlp"} <= features
    assert {"moe_act", "layernorm+moe_act"} <= release_features("26.02", "gb200", "bf16", "gpt-oss-120b",
                                                                True)["recompute"]
    assert rc.search_mode("layernorm+mla_up_proj+moe_act") == "mla_up_proj"
    assert rc.search_mode("core_attn") == "selective"
    with pytest.raises(ValueError, match="moe is not priced"):
        rc.module_set_mode(["moe"])


@pytest.mark.skipif(git_dir() is None, reason=SKIP_REASON)
def test_the_deepseek_v3_mla_up_proj_mlp_launch_validates_in_26_04s_tree(tmp_path_factory):
    """The 26.04 DeepSeek-V3 H100 recipe's set, as the plan launches it, passes that release's parse_args ->
    validate_args -> core_transformer_config_from_args (TransformerConfig checks each module name)."""
    from commbench.planner.emit.megatron import launch_env
    from commbench.planner.layout.release_flags import release_args
    model = load_model("deepseek-v3")
    layout = Layout.for_world(1024, tp=2, pp=8, vp=4, ep=64, etp=1, mbs=1, gbs=8192, recompute="mla_up_proj+mlp")
    argv = release_args(megatron_args(layout, model, release="26.04"), "26.04")
    assert _modules(argv) == ["mla_up_proj", "mlp"]
    gpu = load_preset("h100-hgx", num_gpus=1024).gpu
    case = {"argv": argv, "world": 1024, "env": launch_env(layout, gpu.name),
            "capability": list(gpu.compute_capability)}
    tree = release_tree(release_ref("26.04"), str(tmp_path_factory.getbasetemp().parent / "megatron-releases"))
    (outcome,) = run_cases(tree, [case])
    assert outcome.get("ok"), outcome
