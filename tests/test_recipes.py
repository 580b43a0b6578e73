"""The software release as an input: the sourced recipe table, its use for published rows, and
`plan --software` searching only what that release has."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.data.reference import recipes_json
from commbench.planner.calibrate.published import published_runs, recipe_flags
from commbench.planner.layout import recipes
from commbench.planner.layout.spec import CODE_FIELDS
from commbench.planner.models.zoo import load_model
from commbench.planner.search.space import SearchRequest, search


def test_every_recipe_cites_a_file_at_a_release_commit():
    table = recipes_json()
    commits = {info["commit"] for info in table["releases"].values()}
    assert recipes.releases()[0] == "25.09" and len(recipes.releases()) >= 5
    for entry in table["recipes"]:
        assert re.fullmatch(r"[0-9a-f]{40}", entry["commit"]) and entry["commit"] in commits
        flat = entry["release"] == "26.08"   # Megatron-Bridge 0.6.0 moved them to one function per recipe
        folder = "src/megatron/bridge/perf_recipes/" if flat else "scripts/performance/configs/"
        assert entry["file"].startswith(folder) and entry["config"]
        for key in recipes.RECIPE_KEYS:
            allowed = CODE_FIELDS.get(key, (True, False))
            assert entry[key] in allowed, (entry["config"], key)


def test_the_variant_whose_sizes_match_the_run_is_chosen():
    # DeepSeek-V3 GB200 MXFP8 in 26.02 has V1 (gbs 2048) and V2 (gbs 4096) variants
    sizes = dict(num_gpus=256, tp=1, pp=4, vp=4, ep=64, mbs=1)
    v1 = recipes.recipe_entry("26.02", "deepseek-v3", "GB200", "mxfp8", dict(sizes, gbs=2048))
    v2 = recipes.recipe_entry("26.02", "deepseek-v3", "GB200", "mxfp8", dict(sizes, gbs=4096))
    assert (v1["variant"], v2["variant"]) == ("v1", "v2")
    # 26.02.01 is Megatron-Bridge r0.3.1 with recipes of its own: the same V2 sizes at its own commit
    patch = recipes.recipe_entry("26.02.01", "deepseek-v3", "gb200-nvl72", "mxfp8", dict(sizes, gbs=4096))
    assert patch["variant"] == "v2" and patch["commit"] == recipes._table()["releases"]["26.02.01"]["commit"]
    assert {k: patch[k] for k in (*sizes, "gbs")} == {k: v2[k] for k in (*sizes, "gbs")}


def test_a_published_row_is_modelled_with_its_releases_recipe():
    row = dict(model="Qwen3-30B-A3B", gpu="GB200", num_gpus=8, precision="MXFP8", seq_len=4096, gbs=512, mbs=4,
               tp=1, pp=1, ep=8, tokens_per_s_per_gpu=1.0)
    old = recipe_flags(dict(row, release="25.09"), "gb200-nvl72", "qwen3-30b-a3b")
    new = recipe_flags(dict(row, release="26.06"), "gb200-nvl72", "qwen3-30b-a3b")
    assert old["recompute"] == new["recompute"] == "none"          # Qwen3's scripts: no recompute
    assert (old["cuda_graph"], old["fused_moe"]) == ("layer", False)
    assert (new["cuda_graph"], new["fused_moe"], new["moe_a2a_overlap"]) == ("full", True, True)
    # a user's own recipe field wins over the release's
    assert recipe_flags(dict(row, release="26.06", recipe={"fused_moe": False}), "gb200-nvl72",
                        "qwen3-30b-a3b")["fused_moe"] is False
    # an unknown release keeps the stated defaults
    assert recipe_flags(dict(row, release="24.07"), "gb200-nvl72", "qwen3-30b-a3b")["recompute"] == "selective"


def test_shipped_rows_carry_a_release_and_no_post_release_recipe():
    runs = published_runs()
    assert all(r.row.get("release") for r in runs)
    assert not any("recipe" in r.row for r in runs)  # recipes come from the release table, cited per entry


def test_search_uses_only_the_features_of_the_chosen_release():
    model, fabric = load_model("qwen3-30b-a3b"), load_preset("gb200-nvl72", num_gpus=8)
    full = CODE_FIELDS["cuda_graph"].index("full")
    old = search(SearchRequest(model=model, fabric=fabric, num_gpus=8, gbs=512, precision="mxfp8", software="25.09"))
    new = search(SearchRequest(model=model, fabric=fabric, num_gpus=8, gbs=512, precision="mxfp8"))
    assert new.request.software == recipes.newest_release()
    assert not np.any(old.layouts.cuda_graph == full) and not np.any(old.layouts.fused_moe)
    # the newest release fuses MXFP8 MoE kernels on Blackwell, which Megatron-LM core_v0.16.1 cannot run
    assert not np.any(new.layouts.fused_moe)
    from commbench.planner.search.explain import caveats
    assert any("cannot run it" in line and "grouped MLP" in line for line in caveats(new))  # said, not hidden
    assert new.breakdown.tokens_per_s_per_gpu[0] > old.breakdown.tokens_per_s_per_gpu[0]
    pinned = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "gb200-nvl72", "--gpus", "8",
                                      "--precision", "mxfp8", "--layout", "fused_moe=true"])
    assert pinned.exit_code == 2 and "fused_moe=true is invalid with --framework megatron" in pinned.output


def test_software_option_refuses_unknown_release_and_features_it_lacks():
    base = ["plan", "--model", "qwen3-30b-a3b", "--system", "gb200-nvl72", "--gpus", "8", "--precision", "mxfp8"]
    bad = CliRunner().invoke(app, base + ["--software", "24.07"])
    assert bad.exit_code == 2 and "--software" in bad.output and "25.09" in bad.output
    assert "Traceback" not in bad.output
    lacking = CliRunner().invoke(app, base + ["--software", "25.11", "--layout", "fused_moe=true"])
    assert lacking.exit_code == 2 and "fused_moe" in lacking.output and "25.11" in lacking.output
    ok = CliRunner().invoke(app, base + ["--software", "25.11", "--top", "2"], env={"COLUMNS": "200"})
    assert ok.exit_code == 0, ok.output
    # the features are the model's own recipes' there: 25.11 runs full-iteration graphs on GB200 at MXFP8
    # for other models, not for Qwen3-30B-A3B
    assert "release 25.11's performance recipes for qwen3-30b-a3b on GB200" in " ".join(ok.output.split())
    assert "without full-iteration" in ok.output
    doc = CliRunner().invoke(app, base + ["--software", "25.09", "--top", "2", "--json"])
    assert doc.exit_code == 0, doc.output
    import json
    assert json.loads(doc.output)["inputs"]["software"] == "25.09"


def test_the_extractor_reads_workload_presets_as_literals():
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[1] / "tools" / "recipes_from_megatron_bridge.py"
    spec = importlib.util.spec_from_file_location("recipes_tool", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    text = """
BASE = WorkloadBaseConfig(expert_tensor_parallel_size=1)
X_GB200_V1 = replace(BASE, num_gpus=256, pipeline_model_parallel_size=4, expert_model_parallel_size=64,
                     moe_flex_dispatcher_backend="hybridep", cuda_graph_impl="transformer_engine",
                     cuda_graph_scope=["attn", "moe_router"], recompute_modules=["mla_up_proj"])
X_GB200_MXFP8_V1 = replace(X_GB200_V1, cuda_graph_scope=["full_iteration"], cutedsl_fused_grouped_mlp=True)
X_GB200_BF16_V1 = X_GB200_V1
"""
    env = tool.parse_workload_file(text)
    bf16, mx = tool.entry(env["X_GB200_BF16_V1"], "deepseek-v3"), tool.entry(env["X_GB200_MXFP8_V1"], "deepseek-v3")
    assert (bf16["pp"], bf16["ep"], bf16["etp"], bf16["num_gpus"]) == (4, 64, 1, 256)
    assert (bf16["recompute"], bf16["cuda_graph"], bf16["dispatcher"], bf16["fused_moe"]) == \
        ("mla_up_proj", "layer", "flex", False)
    assert (mx["cuda_graph"], mx["fused_moe"]) == ("full", True)
    assert (bf16["cuda_graph_scope"], mx["cuda_graph_scope"]) == (["attn", "moe_router"], [])
    # no recompute modules: the model's script decides (DeepSeek-V3 selective granularity with Megatron-Core's
    # default module, core_attn alone; the others none)
    assert tool.recompute_of(tool.DEFAULTS, "deepseek-v3") == "core_attn"
    assert tool.recompute_of(tool.DEFAULTS, "qwen3-30b-a3b") == "none"
    assert tool.recompute_of(dict(tool.DEFAULTS, recompute_num_layers=4), "llama3-8b") == "full"
    # a module list is the SET the recipe runs (layout/recompute.py module_set_mode), not one module of it: "mlp"
    # recomputes the dense layers' MLPs (DeepSeek-V3's 3), layernorm the norms beside moe_act
    assert tool.recompute_of(dict(tool.DEFAULTS, recompute_modules=["mlp"]), "deepseek-v3") == "mlp"
    assert tool.recompute_of(dict(tool.DEFAULTS, recompute_modules=["moe_act", "layernorm"]), "gpt-oss-120b") \
        == "layernorm+moe_act"
    assert tool.recompute_of(dict(tool.DEFAULTS, recompute_modules=["mla_up_proj", "mlp", "moe_act"]),
                             "deepseek-v3") == "mla_up_proj+mlp+moe_act"
    # a module the step model cannot price (whole MoE blocks) is refused, naming it
    with pytest.raises(ValueError, match="moe is not priced"):
        tool.recompute_of(dict(tool.DEFAULTS, recompute_modules=["moe", "layernorm"]), "qwen3-30b-a3b")
    from commbench.planner.layout.recipes import recipe_entry
    gb200 = recipe_entry("26.04", "deepseek-v3", "gb200-nvl72", "mxfp8",
                         dict(num_gpus=256, tp=1, pp=4, vp=4, ep=64, mbs=1, gbs=2048))
    # its preset's recompute_modules=["mlp"] (deepseek_workload_base_configs.py:81 at v0.4.0, GB200_V1, which
    # FP8_MX_V1 is, line 90): the dense layers' MLPs, no longer read as none
    assert gb200["config"] == "DEEPSEEK_V3_PRETRAIN_CONFIG_GB200_FP8_MX_V1" and gb200["recompute"] == "mlp"
    # an explicit empty list turns recompute off (Megatron-Core fills in core_attn only for None)
    assert tool.recompute_of(dict(tool.DEFAULTS, recompute_modules=[]), "deepseek-v3") == "none"
    # as 26.06's DeepSeek-V3 GB300 MXFP8 recipe does (deepseek_workload_base_configs.py@fcbb603: recompute_modules=[])
    from commbench.planner.layout.recipes import recipe_entry
    sizes = dict(num_gpus=256, tp=1, pp=2, vp=8, ep=32, mbs=1, gbs=2048)
    entry = recipe_entry("26.06", "deepseek-v3", "gb300-nvl72", "mxfp8", sizes)
    assert entry["config"] == "DEEPSEEK_V3_PRETRAIN_CONFIG_GB300_FP8_MX_V1" and entry["recompute"] == "none"


def test_release_features_are_per_gpu_where_the_recipes_cover_it():
    """A feature NVIDIA's tuned recipes never turn on for a GPU is not searched there: no release runs H100
    under a full-iteration CUDA graph; GB200 gets it from 25.11; a GPU no recipe covers gets the union."""
    from commbench.planner.layout.recipes import release_features
    assert "full" not in release_features("26.02", "h100")["cuda_graph"]
    assert "full" in release_features("26.02", "gb200-nvl72")["cuda_graph"]
    assert release_features("26.02", "h800") == release_features("26.02")   # no recipe: any GPU's features
    assert True not in release_features("26.02", "gb200")["moe_a2a_overlap"]
    assert True in release_features("26.06", "gb200")["moe_a2a_overlap"]


def test_release_features_are_per_precision_where_the_recipes_on_that_gpu_cover_it():
    """No H100 FP8 recipe of any release turns CUDA graphs on, while H100 BF16 recipes run per-layer graphs; a
    precision no recipe on the GPU runs gets the GPU's features; a GPU no recipe covers, any GPU's."""
    from commbench.planner.layout.recipes import release_features
    assert release_features("26.08", "h100", "fp8")["cuda_graph"] == {"none"}
    assert "layer" in release_features("26.08", "h100-hgx", "bf16")["cuda_graph"]
    assert release_features("26.08", "h100", "nvfp4") == release_features("26.08", "h100")   # no H100 NVFP4 recipe
    assert release_features("26.08", "h800", "fp8") == release_features("26.08")
    assert release_features("26.08", "b200", "nvfp4")["cuda_graph"] == {"none"}
    assert "full" in release_features("26.08", "b200", "mxfp8")["cuda_graph"]


def test_the_search_credits_no_feature_the_recipes_never_run_at_that_precision():
    from commbench.costmodel import load_preset
    from commbench.planner import load_model
    from commbench.planner.search.space import SearchRequest, search
    # Llama 3 8B's own H100 BF16 recipes run eager; a model no recipe covers takes any model's there (another
    # vocabulary: a renamed llama3-8b has its architecture and reads its recipes, layout/recipe_model.py)
    kw = dict(model=dataclasses.replace(load_model("llama3-8b"), name="my-llama", vocab=128000),
              fabric=load_preset("h100-hgx", num_gpus=8), num_gpus=8, gbs=128, software="26.08")
    fp8 = search(SearchRequest(precision="fp8", **kw))
    assert set(fp8.layouts.cuda_graph.tolist()) == {0}                 # eager everywhere at FP8
    bf16 = search(SearchRequest(precision="bf16", **kw))
    assert 1 in set(bf16.layouts.cuda_graph.tolist())                  # per-layer graphs searched at BF16


def test_a_pin_the_release_never_runs_at_that_precision_is_one_line():
    from commbench.errors import CommbenchError
    from commbench.planner.layout.recipes import check_pins_in_release
    check_pins_in_release({"cuda_graph": "layer"}, "26.08", "h100-hgx", "bf16")
    with pytest.raises(CommbenchError, match=r"cuda_graph=layer: .*release 26.08 on H100 at FP8 .*\{none\} on H100 at FP8"):
        check_pins_in_release({"cuda_graph": "layer"}, "26.08", "h100-hgx", "fp8")


def test_a_pin_the_release_never_runs_on_that_gpu_is_one_line():
    from commbench.errors import CommbenchError
    from commbench.planner.layout.recipes import check_pins_in_release
    check_pins_in_release({"cuda_graph": "full"}, "26.02", "gb200-nvl72")
    with pytest.raises(CommbenchError, match=r"cuda_graph=full: .*release 26.02 on H100 .*\{layer, none\} on H100"):
        check_pins_in_release({"cuda_graph": "full"}, "26.02", "h100-hgx")


def test_a_release_the_table_lacks_reads_the_newest_one_before_it_and_says_so():
    newest = recipes.newest_release()
    assert recipes.resolve_release(newest) == (newest, "")
    stand, note = recipes.resolve_release("26.10")
    assert stand == newest and note == f"26.10 is not in the recipe table (newest {newest}): its recipes are {newest}'s"
    stand, note = recipes.resolve_release("26.04.02")   # a patch container the table lacks reads the one before it
    assert stand == "26.04.01" and "26.04.02 is not in the recipe table" in note and "26.04.01's" in note
    assert recipes.resolve_release("26.03")[0] == "26.02.01"   # the newest table release not newer than it
    assert recipes.resolve_release("24.07")[0] is None and "older than" in recipes.resolve_release("24.07")[1]
    assert recipes.resolve_release("main")[0] is None
    row = dict(model="Qwen3-30B-A3B", gpu="GB200", num_gpus=8, precision="MXFP8", seq_len=4096, gbs=512, mbs=4,
               tp=1, pp=1, ep=8, tokens_per_s_per_gpu=1.0)
    from commbench.planner.calibrate.published import release_recipe
    patch = release_recipe(dict(row, release="26.04.02"), "gb200-nvl72", "qwen3-30b-a3b")
    base = release_recipe(dict(row, release="26.04.01"), "gb200-nvl72", "qwen3-30b-a3b")
    assert {k: patch[k] for k in recipes.RECIPE_KEYS} == {k: base[k] for k in recipes.RECIPE_KEYS}
    assert base["release_note"] == "" and "its recipes are 26.04.01's" in patch["release_note"]
    assert recipe_flags(dict(row, release="26.10"), "gb200-nvl72", "qwen3-30b-a3b")["fused_moe"] is True
    runs = published_runs((dict(row, release="26.10"),))
    assert "26.10 is not in the recipe table" in runs[0].layout_note


def test_patch_containers_read_their_own_megatron_bridge_version():
    """26.02.01 is Megatron-Bridge 0.3.1, 26.04.01 0.4.2 and 26.06.01 0.5.1 (docs/versions1.json at v0.6.0), each
    with recipes of its own: 0.4.2 moved Qwen3-235B-A22B on B300 from the alltoall to the flex (HybridEP) dispatcher."""
    table = recipes._table()["releases"]
    assert {r: table[r]["megatron_bridge"] for r in ("26.02.01", "26.04.01", "26.06.01")} == {
        "26.02.01": "v0.3.1", "26.04.01": "v0.4.2", "26.06.01": "v0.5.1"}
    # r0.3.1 runs Qwen3-30B-A3B on 8 B200 at mbs 4 on HybridEP (0.3.0: mbs 1, alltoall), as the 26.02.01
    # table publishes it (mbs 4)
    b200 = dict(num_gpus=8, tp=1, pp=1, vp=1, ep=8, gbs=512)
    old = recipes.recipe_entry("26.02", "qwen3-30b-a3b", "b200-hgx", "mxfp8", dict(b200, mbs=1))
    new = recipes.recipe_entry("26.02.01", "qwen3-30b-a3b", "b200-hgx", "mxfp8", dict(b200, mbs=4))
    assert (old["mbs"], old["dispatcher"], new["mbs"], new["dispatcher"]) == (1, "alltoall", 4, "flex")
    sizes = dict(num_gpus=256, tp=1, pp=8, vp=1, ep=8, mbs=1, gbs=8192)
    before = recipes.recipe_entry("26.04", "qwen3-235b-a22b", "b300-hgx", "mxfp8", sizes)
    after = recipes.recipe_entry("26.04.01", "qwen3-235b-a22b", "b300-hgx", "mxfp8", sizes)
    assert (before["dispatcher"], after["dispatcher"]) == ("alltoall", "flex")
    assert after["commit"] == table["26.04.01"]["commit"] != before["commit"]


def test_plan_accepts_a_newer_release_with_the_note_shown():
    base = ["plan", "--model", "qwen3-30b-a3b", "--system", "gb200-nvl72", "--gpus", "8", "--precision", "mxfp8",
            "--top", "2"]
    newest = recipes.newest_release()
    text = CliRunner().invoke(app, base + ["--software", "26.10"], env={"COLUMNS": "400"})
    assert text.exit_code == 0, text.output
    assert f"release {newest}" in text.output and "26.10 is not in the recipe table" in " ".join(text.output.split())
    import json
    doc = CliRunner().invoke(app, base + ["--software", "26.10", "--json"])
    inputs = json.loads(doc.output)["inputs"]
    assert inputs["software"] == newest and "26.10" in inputs["software_note"]
    bad = CliRunner().invoke(app, base + ["--software", "latest"])
    assert bad.exit_code == 2 and "--software" in bad.output and "Traceback" not in bad.output


def test_the_recipes_cuda_graph_scope_reaches_the_layout_and_the_physics():
    """recipes.json records each per-layer recipe's cuda_graph_scope; a published row of that release is
    modelled with it: Qwen3-30B-A3B on B200 (26.02) graphs only the router, so attention launches stay
    eager and the same layout under the attention-inclusive scope is predicted faster."""
    from commbench.planner.calibrate.published import predict_runs
    entry = recipes.recipe_entry("26.02", "qwen3-30b-a3b", "b200", "mxfp8")
    assert entry["cuda_graph"] == "layer" and entry["cuda_graph_scope"] == ["moe_router", "moe_preprocess"]
    for e in recipes_json()["recipes"]:
        assert isinstance(e["cuda_graph_scope"], list) and (e["cuda_graph"] == "layer" or not e["cuda_graph_scope"])
    row = dict(model="Qwen3-30B-A3B", gpu="B200", num_gpus=8, precision="MXFP8", seq_len=4096, gbs=512, mbs=1,
               tp=1, pp=1, ep=8, tokens_per_s_per_gpu=1.0, release="26.02")
    flags = recipe_flags(row, "b200-hgx", "qwen3-30b-a3b")
    assert flags["cuda_graph_scope"] == "moe_router+moe_preprocess"
    own = dict(row, recipe={"cuda_graph_scope": ["attn", "moe_router", "moe_preprocess"]})   # Megatron's spelling
    runs = published_runs((row, own))
    assert runs[0].layout.cuda_graph_scope == "moe_router+moe_preprocess"
    assert runs[1].layout.cuda_graph_scope == "attn+moe_router+moe_preprocess"
    pred = predict_runs(runs).predicted_tokens
    assert pred[1] > pred[0]
    # 25.09's `cuda_graphs: true` is Megatron-Core 0.14's whole-layer scope
    old = recipes.recipe_for("25.09", "qwen3-30b-a3b", "gb200", "mxfp8")
    assert (old["cuda_graph"], old["cuda_graph_scope"]) == ("layer", "layer")


def test_a_cuda_graph_scope_the_layout_cannot_hold_is_one_line():
    from commbench.errors import CommbenchError
    from commbench.planner.layout.spec import Layout
    with pytest.raises(CommbenchError, match=r"cuda_graph_scope.*attn\+expert.*attn, mlp, moe, moe_router"):
        Layout(cuda_graph="layer", cuda_graph_scope="attn+expert")
    assert Layout(cuda_graph_scope="moe_router+attn").cuda_graph_scope == "attn+moe_router"


def test_kimi_k2_recipes_are_read_from_26_04_without_a_variant_suffix():
    entry = recipes.recipe_entry("26.04", "kimi-k2", "gb300", "mxfp8")
    assert entry is not None and entry["config"] == "KIMI_K2_PRETRAIN_CONFIG_GB300_FP8_MX" and entry["variant"] == "v1"
    assert recipes.recipe_entry("26.02", "kimi-k2", "gb300", "mxfp8") is None   # not in v0.3.0
    # Nano and Super are not read (see the tool's note); Ultra is, from 26.08 (its first release)
    assert {e["model"] for e in recipes_json()["recipes"] if e["model"].startswith("nemotron-3")} == \
        {"nemotron-3-ultra-550b-a55b"}


def test_plan_takes_a_cuda_graph_scope_pin_and_emits_it():
    base = ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "8", "--precision", "mxfp8",
            "--top", "1", "--json"]
    import json
    own = CliRunner().invoke(app, base + ["--layout", "cuda_graph=layer,cuda_graph_scope=moe_router+moe_preprocess"])
    assert own.exit_code == 0, own.output
    doc = json.loads(own.output)
    assert doc["layout"]["cuda_graph_scope"] == "moe_router+moe_preprocess"
    args = doc["megatron_args"]
    i = args.index("--cuda-graph-scope")
    assert args[i + 1:i + 3] == ["moe_router", "moe_preprocess"] and args[i + 3].startswith("--")
    recipe = json.loads(CliRunner().invoke(app, base + ["--layout", "cuda_graph=layer"]).output)
    assert recipe["layout"]["cuda_graph_scope"] == ""   # the recipes' scope for a MoE model: attention graphed too
    assert recipe["predicted"]["overhead_s"] < doc["predicted"]["overhead_s"]
    bad = CliRunner().invoke(app, base + ["--layout", "cuda_graph_scope=attn+experts"])
    assert bad.exit_code == 2 and "cuda_graph_scope" in bad.output and "Traceback" not in bad.output


def _tool():
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[1] / "tools" / "recipes_from_megatron_bridge.py"
    spec = importlib.util.spec_from_file_location("recipes_tool", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_overlap_facts_are_found_in_the_function_of_that_gpu_and_model():
    tool = _tool()
    text = '''def qwen3_235b_a22b_pretrain_config_b200(precision):
    cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=True)
def qwen3_30b_a3b_pretrain_config_h100(precision):
    cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=False)
def qwen3_235b_a22b_pretrain_config_h100(precision):
    # tp_comm_overlap=False in a comment is not a fact
    cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=False)
def llama3_8b_pretrain_config_gb200(precision):
    cfg.comm_overlap.tp_comm_overlap = False if precision == "nvfp4" else cfg.comm_overlap.tp_comm_overlap
'''
    assert tool.fact_line(text, "tp_comm_overlap=False", "h100", "qwen3-235b-a22b") == 7
    assert tool.fact_line(text, "tp_comm_overlap=False", "b200", "qwen3-235b-a22b") is None
    nvfp4 = 'tp_comm_overlap = False if precision == "nvfp4"'
    assert tool.fact_line(text, nvfp4, "gb200", "llama3-8b") == 9
    assert tool.fact_line(text, nvfp4, "b200", "llama3-8b") is None   # b200 is not gb200


def test_recipe_overlap_flags_reach_the_rows_of_that_release():
    """Megatron-Bridge turns TP-communication overlap off for DeepSeek-V3 (every release), Qwen3-235B on
    H100 (25.11 on) and Llama NVFP4, and the DP grad-reduce overlap off for DeepSeek-V3 on H100; each
    entry that says so cites where."""
    table = recipes_json()
    for entry in table["recipes"]:
        assert isinstance(entry["tp_comm_overlap"], bool) and isinstance(entry["dp_overlap"], bool)
        off = (not entry["tp_comm_overlap"]) + (not entry["dp_overlap"])
        assert len(entry["overlap_facts"]) == off, entry["config"]
        assert all(re.fullmatch(r"[\w/.]+\.py:\d+", f) for f in entry["overlap_facts"])
    h100 = dict(model="DeepSeek-V3", gpu="H100", num_gpus=1024, precision="FP8", seq_len=4096, gbs=8192, mbs=1,
                tp=2, pp=8, vp=4, ep=64, tokens_per_s_per_gpu=1.0)
    for release in ("25.09", "25.11", "26.02", "26.04", "26.06"):
        flags = recipe_flags(dict(h100, release=release), "h100-hgx", "deepseek-v3")
        assert (flags["tp_comm_overlap"], flags["dp_overlap"]) == (False, False), release
    qwen = dict(model="Qwen3-235B-A22B", gpu="H100", num_gpus=256, precision="BF16", seq_len=4096, gbs=2048, mbs=1,
                tp=2, pp=8, vp=4, ep=32, tokens_per_s_per_gpu=1.0)
    assert recipe_flags(dict(qwen, release="25.09"), "h100-hgx", "qwen3-235b-a22b")["tp_comm_overlap"] is True
    assert recipe_flags(dict(qwen, release="26.06"), "h100-hgx", "qwen3-235b-a22b")["tp_comm_overlap"] is False
    llama = dict(model="Llama3.1-405B", gpu="GB200", num_gpus=256, seq_len=8192, gbs=1536, mbs=1,
                 tp=4, pp=8, vp=8, tokens_per_s_per_gpu=1.0)
    assert recipe_flags(dict(llama, precision="NVFP4", release="26.04"), "gb200-nvl72",
                        "llama3.1-405b")["tp_comm_overlap"] is False
    assert recipe_flags(dict(llama, precision="FP8", release="26.04"), "gb200-nvl72",
                        "llama3.1-405b")["tp_comm_overlap"] is True
    # a row's own recipe field still wins
    assert recipe_flags(dict(h100, release="26.06", recipe={"tp_comm_overlap": True}), "h100-hgx",
                        "deepseek-v3")["tp_comm_overlap"] is True


def test_the_search_credits_the_features_the_release_runs_for_that_model():
    """In 26.02 no Qwen3-235B-A22B recipe on B200 at MXFP8 runs CUDA graphs or the flex dispatcher (26.02.01's
    r0.3.1 recipes run flex, 26.06.01's CUDA graphs), while other models' recipes there do: the search proposes
    neither for it, but does for a model no recipe covers; a pin may still ask for them (they run on that GPU at
    that precision)."""
    from commbench.costmodel import load_preset
    from commbench.planner import load_model
    from commbench.planner.layout.recipes import check_pins_in_release, release_features, release_features_scope
    from commbench.planner.layout.spec import CODE_FIELDS
    from commbench.planner.search.space import SearchRequest, search
    assert release_features("26.02", "b200", "mxfp8", "qwen3-235b-a22b")["cuda_graph"] == {"none"}
    assert release_features_scope("26.02", "b200", "mxfp8", "qwen3-235b-a22b") == "model"
    assert "full" in release_features("26.06.01", "b200", "mxfp8", "qwen3-235b-a22b")["cuda_graph"]
    assert release_features_scope("26.02", "b200", "mxfp8", "my-moe") == "precision"
    # the newest release with recipes for the model there decides: 25.11's Llama 3.1 70B NVFP4 recipe on
    # GB200 ran a full-iteration graph, 26.02's run eager
    assert "full" in release_features("25.11", "gb200", "nvfp4", "llama3.1-70b")["cuda_graph"]
    assert release_features("26.02", "gb200", "nvfp4", "llama3.1-70b")["cuda_graph"] == {"none"}
    assert "full" in release_features("26.02", "gb200", "nvfp4")["cuda_graph"]
    model = load_model("qwen3-235b-a22b")
    kw = dict(fabric=load_preset("b200-hgx", num_gpus=64), num_gpus=64, gbs=1024, precision="mxfp8",
              software="26.02", keep=200)
    own = search(SearchRequest(model=model, **kw))
    assert set(own.layouts.cuda_graph.tolist()) == {0}
    assert CODE_FIELDS["dispatcher"].index("flex") not in set(own.layouts.dispatcher.tolist())
    # another model (its vocabulary): a renamed qwen3-235b-a22b would read its recipes (layout/recipe_model.py)
    other = search(SearchRequest(model=dataclasses.replace(model, name="my-moe", vocab=152064), **kw))
    assert set(other.layouts.cuda_graph.tolist()) - {0}
    from commbench.planner.search.explain import caveats
    assert any("No recipe of the release covers my-moe" in line for line in caveats(other))
    assert not any("No recipe of the release covers" in line for line in caveats(own))
    check_pins_in_release({"cuda_graph": "layer", "dispatcher": "flex"}, "26.02", "b200-hgx", "mxfp8")


def test_the_flex_backend_is_one_the_release_container_runs_on_that_gpu():
    """DeepEP runs on Hopper/B200/B300 only (HybridEP on NVL72 racks), and the NeMo 26.02 container has no
    DeepEP (Megatron-Bridge known issues): there the plan names HybridEP and says why."""
    from commbench.planner.layout.recipes import flex_backend
    assert flex_backend(72) == flex_backend(72, "26.08") == "hybridep"
    assert flex_backend(8) == flex_backend(8, "26.08") == flex_backend(8, "26.02.01") == "deepep"
    assert flex_backend(8, "26.02") == flex_backend(8, "nemo:26.02") == "hybridep"
    base = ["plan", "--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "16", "--precision", "fp8",
            "--top", "1"]
    old = CliRunner().invoke(app, base + ["--software", "26.02"], env={"COLUMNS": "250"})
    assert old.exit_code == 0, old.output
    text = " ".join(old.output.split())
    assert "--moe-token-dispatcher-type flex" in text          # Qwen3-30B-A3B's 26.02 H100 recipe runs flex
    assert "--moe-flex-dispatcher-backend hybridep" in text and "container has no DeepEP" in text
    new = CliRunner().invoke(app, base + ["--software", "26.02.01"], env={"COLUMNS": "250"})
    assert new.exit_code == 0, new.output
    assert "--moe-flex-dispatcher-backend hybridep" not in " ".join(new.output.split())


def test_a_plan_says_when_the_release_runs_ep_overlap_beside_full_graphs_its_target_refuses():
    """26.06 on, DeepSeek-V3's GB300 recipes run the EP all-to-all overlap beside a full-iteration graph, which
    megatron-core 0.16.1 (the plans' target) refuses: the search leaves the pair out, and the plan says why its
    best can be slower than the recipe's layout; 26.02's recipes do not pair them, and no such line is printed."""
    assert recipes.runs_ep_overlap_with_full_graph("26.08", "gb300", "mxfp8", "deepseek-v3")
    assert not recipes.runs_ep_overlap_with_full_graph("26.02", "gb300", "mxfp8", "deepseek-v3")
    base = ["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256", "--precision", "mxfp8",
            "--json", "--top", "1"]
    for software, said in (("26.08", True), ("26.02", False)):
        doc = json.loads(CliRunner().invoke(app, [*base, "--software", software]).output)
        line = [x for x in doc["explanation"] if "beside a full-iteration CUDA graph" in x]
        assert bool(line) is said and (not said or "megatron-core 0.16.1" in line[0]), doc["explanation"]
        lay = doc["layout"]
        assert not (lay["cuda_graph"] == "full" and lay["moe_a2a_overlap"])


def test_a_moe_model_no_recipe_covers_takes_full_graphs_only_where_moe_recipes_run_them():
    """Nemotron-3-Nano has no recipe in the table: its features came from any model's on the GPU at the precision,
    so on GB200 MXFP8 in 26.02.01 the search ran it under a full-iteration CUDA graph that only Llama's recipes
    run there (no MoE recipe does before 26.06: dropless MoE copies its token counts to the host). MoE models now
    take MoE recipes' features where the scope has any; a dense model still takes every model's."""
    from commbench.planner import load_model
    from commbench.planner.layout.recipes import release_features
    from commbench.planner.search.space import SearchRequest, search

    assert "full" in release_features("26.02.01", "gb200", "mxfp8", "nemotron-3-nano-30b-a3b")["cuda_graph"]
    assert "full" not in release_features("26.02.01", "gb200", "mxfp8", "nemotron-3-nano-30b-a3b", True)["cuda_graph"]
    assert "layer" in release_features("26.02.01", "gb200", "mxfp8", "nemotron-3-nano-30b-a3b", True)["cuda_graph"]
    assert "full" in release_features("26.08", "gb200", "mxfp8", "nemotron-3-nano-30b-a3b", True)["cuda_graph"]
    assert "full" in release_features("26.02.01", "gb200", "mxfp8", "my-dense", False)["cuda_graph"]
    kw = dict(model=load_model("nemotron-3-nano-30b-a3b"), fabric=load_preset("gb200-nvl72", num_gpus=8), num_gpus=8,
              gbs=512, precision="mxfp8")
    old = search(SearchRequest(software="26.02.01", **kw))
    assert 2 not in set(old.layouts.cuda_graph.tolist())
    # 26.08's MoE recipes run it (padded with Megatron-Core's paged stashing); megatron-core 0.16.1 cannot capture
    # dropless MoE, so a Megatron plan takes none and says why (test_megatron_lm_real.py)
    new = search(SearchRequest(software="26.08", **kw))
    assert 2 not in set(new.layouts.cuda_graph.tolist())
    from commbench.planner.search.explain import caveats
    assert any("cannot capture dropless MoE" in line for line in caveats(new))
