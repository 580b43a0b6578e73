"""Megatron-Bridge v0.6.0's flat performance recipes (NeMo 26.08) in the recipe table: the ast reader
(tools/perf_recipe_reader.py) on a synthetic perf_recipes package, and facts of 26.08's table."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

from commbench.planner.layout import recipes

TOOLS = pathlib.Path(__file__).resolve().parents[1] / "tools"
PKG = "src/megatron/bridge/perf_recipes/fam"
COMMON = '''
from megatron.bridge.perf_recipes._common import _benchmark_common
from megatron.bridge.training.comm_overlap import CommOverlapConfig


def x_pretrain_config():
    cfg = ConfigContainer()
    cfg.model.tensor_model_parallel_size = 2
    cfg.model.virtual_pipeline_model_parallel_size = None
    cfg.model.context_parallel_size = 1
    cfg.train.micro_batch_size = 1
    cfg.mixed_precision = MixedPrecisionConfig(bf16=True, fp8_dot_product_attention=False)
    cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=False)
    cfg.ddp.overlap_grad_reduce = True
    cfg.ddp.use_megatron_fsdp = False
    return cfg


def _enable_graphs(cfg, precision):
    if precision == "fp8_mx":
        cfg.model.cuda_graph_impl = "full_iteration"
        cfg.env_vars = {"NVTE_CUTEDSL_FUSED_GROUPED_MLP": 1}
    else:
        cfg.model.cuda_graph_impl = "transformer_engine"
        cfg.model.cuda_graph_scope = ["attn", "moe_router"]
    _benchmark_common(cfg)
'''
SHARED = '''
def _benchmark_common(cfg):
    if getattr(cfg.model, "cuda_graph_impl", None) == "none":
        cfg.model.cuda_graph_scope = []
'''
OVERLAP = '''
@dataclass
class CommOverlapConfig:
    tp_comm_overlap: bool
    overlap_grad_reduce: Optional[bool] = None
    overlap_moe_expert_parallel_comm: Optional[bool] = None
'''
RECIPES = '''
raise RuntimeError("recipe code was run")
import torch
from megatron.bridge.perf_recipes.fam.common import _enable_graphs, x_pretrain_config


def deepseek_v3_pretrain_64gpu_gb200_bf16_config():
    cfg = x_pretrain_config()
    cfg.model.pipeline_model_parallel_size = 4
    cfg.model.recompute_granularity = "selective"
    cfg.model.recompute_modules = ["mla_up_proj"]
    cfg.train.global_batch_size = 1024
    _enable_graphs(cfg, "bf16")
    if torch.cuda.device_count() > 4:
        cfg.model.expert_model_parallel_size = 8
    return cfg


def deepseek_v3_pretrain_64gpu_gb200_fp8mx_config():
    cfg = deepseek_v3_pretrain_64gpu_gb200_bf16_config()
    _enable_graphs(cfg, "fp8_mx")
    cfg.model.expert_model_parallel_size = 16
    cfg.comm_overlap.overlap_moe_expert_parallel_comm = True
    return cfg
'''


def _line(text: str, statement: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if statement in line)


def _modules():
    spec = importlib.util.spec_from_file_location("recipes_tool", TOOLS / "recipes_from_megatron_bridge.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))   # puts tools/ on sys.path
    import flat_recipes
    import perf_recipe_reader
    return flat_recipes, perf_recipe_reader


def _read(name: str) -> dict:
    flat, reader_module = _modules()
    files = {f"{PKG}/common.py": COMMON, f"{PKG}/gb200/x.py": RECIPES,
             "src/megatron/bridge/perf_recipes/_common.py": SHARED,
             "src/megatron/bridge/training/comm_overlap.py": OVERLAP}
    reader = reader_module.Reader(files.get, flat.runtime_facts("deepseek-v3", "gb200"))
    values, where = flat.perf_fields(reader.call_function("megatron.bridge.perf_recipes.fam.gb200.x", name))
    return flat.perf_entry(values, where, "deepseek-v3")


def test_the_reader_follows_helpers_and_decides_an_if_on_the_precision_without_running_the_recipe():
    bf16 = _read("deepseek_v3_pretrain_64gpu_gb200_bf16_config")
    mx = _read("deepseek_v3_pretrain_64gpu_gb200_fp8mx_config")
    # the helper's `if precision == "fp8_mx"` decided from each call's literal argument
    assert (bf16["cuda_graph"], bf16["cuda_graph_scope"], bf16["fused_moe"]) == ("layer", ["attn", "moe_router"], False)
    assert (mx["cuda_graph"], mx["fused_moe"]) == ("full", True)
    # the base recipe's tp, the recipe's own pp / gbs, a recipe calling another recipe
    assert (bf16["tp"], bf16["pp"], bf16["gbs"], mx["pp"], mx["gbs"]) == (2, 4, 1024, 4, 1024)
    assert (bf16["recompute"], mx["moe_a2a_overlap"], bf16["moe_a2a_overlap"]) == ("mla_up_proj", True, False)
    # TP overlap off by the base recipe's CommOverlapConfig, cited; DP overlap on
    assert (bf16["tp_comm_overlap"], bf16["dp_overlap"]) == (False, True)
    assert bf16["overlap_facts"] == [f"{PKG}/common.py:{_line(COMMON, 'CommOverlapConfig(tp_comm_overlap=False)')}"]
    # EP set under an if on the machine found at run time: said, not guessed; a later literal resolves it
    assert bf16["unresolved"] == ["model.expert_model_parallel_size: written under a condition not resolved "
                                  f"statically at {PKG}/gb200/x.py:{_line(RECIPES, 'torch.cuda.device_count()')}"]
    assert bf16["ep"] is None and mx["ep"] == 16 and "unresolved" not in mx


def test_recipe_names_give_gpus_variants_and_only_planner_precisions():
    flat, _ = _modules()
    match = flat.PERF_NAME.match("deepseek_v3_pretrain_256gpu_b300_fp8mx_large_scale_config")
    assert (match["model"], match["num"], match["gpu"], match["prec"], match["variant"]) == \
        ("deepseek_v3", "256", "b300", "fp8mx", "large_scale")
    assert flat.PERF_NAME.match("llama3_8b_pretrain_8gpu_gb200_bf16_config")["variant"] is None
    for skipped in ("llama3_8b_sft_8gpu_gb200_bf16_config", "llama3_8b_pretrain_8gpu_vr200_bf16_config",
                    "deepseek_v3_pretrain_1024gpu_h100_fp8sc_config"):
        assert flat.PERF_NAME.match(skipped) is None, skipped


def test_26_08_reads_megatron_bridge_0_6_0s_flat_recipes():
    """26.08 is Megatron-Bridge 0.6.0 (docs/versions1.json at v0.6.0). Its Qwen3-30B-A3B 16-GPU H100 BF16 recipe
    turns the EP all-to-all overlap on (src/megatron/bridge/perf_recipes/qwen/h100/qwen3_moe.py line 40 at
    51885cf: cfg.comm_overlap.overlap_moe_expert_parallel_comm = True); 26.06.01's (0.5.1) had it off."""
    table = recipes._table()
    assert {k: table["releases"]["26.08"][k] for k in ("megatron_bridge", "commit")} == {
        "megatron_bridge": "v0.6.0", "commit": "51885cf132b2814188b6855c25a8588254274c2a"}
    assert recipes.resolve_release("26.08") == ("26.08", "")
    sizes = dict(num_gpus=16, tp=1, pp=1, vp=1, ep=16, mbs=1, gbs=1024)
    new = recipes.recipe_entry("26.08", "qwen3-30b-a3b", "h100-hgx", "bf16", sizes)
    old = recipes.recipe_entry("26.06.01", "qwen3-30b-a3b", "h100-hgx", "bf16", sizes)
    assert (old["moe_a2a_overlap"], new["moe_a2a_overlap"]) == (False, True)
    assert new["config"] == "qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config"
    assert new["file"] == "src/megatron/bridge/perf_recipes/qwen/h100/qwen3_moe.py"
    assert all("unresolved" not in e for e in table["recipes"] if e["release"] == "26.08")


def test_a_tie_between_26_08_variants_goes_to_the_default_recipe():
    """DeepSeek-V3 B300 MXFP8 at 26.08: the default recipe (GBS 4096) and the large-scale proxy (GBS 256,
    config variant large_scale) share every other size; a run that names no GBS reads the default."""
    sizes = dict(num_gpus=256, tp=1, pp=8, vp=2, ep=8, mbs=1)
    entry = recipes.recipe_entry("26.08", "deepseek-v3", "b300-hgx", "mxfp8", sizes)
    assert (entry["config_variant"], entry["gbs"]) == (None, 4096)
    proxy = recipes.recipe_entry("26.08", "deepseek-v3", "b300-hgx", "mxfp8", dict(sizes, gbs=256))
    assert (proxy["config_variant"], proxy["variant"]) == ("large_scale", "256gpu_large_scale")


def test_older_releases_keep_their_recipes():
    """Reading 0.6.0 added entries; every older release's still come from its own tag's files."""
    table = recipes._table()
    assert all(e["commit"] == table["releases"][e["release"]]["commit"] for e in table["recipes"])
    assert {e["file"].split("/")[0] for e in table["recipes"] if e["release"] != "26.08"} == {"scripts"}
    _modules()   # loading the tool puts tools/ on sys.path (as an earlier test in this worker may have, or not)
    assert "tools" in str(TOOLS) and str(TOOLS) in sys.path


def test_an_entry_with_unresolved_fields_is_not_used(monkeypatch):
    table = recipes._table()
    good = next(e for e in table["recipes"] if e["release"] == "26.08" and e["model"] == "qwen3-30b-a3b"
                and e["gpu"] == "h100" and e["precision"] == "bf16" and e["num_gpus"] == 16)
    unread = dict(good, variant="16gpu_x", config_variant="x", moe_a2a_overlap=False, mbs=None,
                  unresolved=["train.micro_batch_size: written under a condition not resolved statically"])
    fake = dict(table, recipes=[good, unread])
    monkeypatch.setattr(recipes, "_table", lambda: fake)
    recipes._index.cache_clear()
    try:
        sizes = dict(num_gpus=16, tp=1, pp=1, vp=1, ep=16, gbs=1024)
        assert recipes.recipe_entry("26.08", "qwen3-30b-a3b", "h100-hgx", "bf16", sizes)["variant"] == "16gpu"
        monkeypatch.setattr(recipes, "_table", lambda: dict(table, recipes=[unread]))
        recipes._index.cache_clear()
        assert recipes.recipe_entry("26.08", "qwen3-30b-a3b", "h100-hgx", "bf16", sizes) is None
    finally:
        recipes._index.cache_clear()


GRAPH_UTILS = '''
from typing import Any

try:
    from megatron.core.transformer.enums import CudaGraphModule
except ImportError:
    CudaGraphModule = None


def _supports_cuda_graph_modules(config: Any) -> bool:
    return CudaGraphModule is not None and hasattr(config, "cuda_graph_modules")


def set_full_iteration_cuda_graph(config: Any) -> None:
    if _supports_cuda_graph_modules(config):
        config.cuda_graph_impl = "full_iteration"
        config.cuda_graph_modules = []
    else:
        config.cuda_graph_impl = "local"
        config.cuda_graph_scope = ["full_iteration"]
'''
GRAPHED = '''
from megatron.bridge.perf_recipes.fam.common import x_pretrain_config
from megatron.bridge.utils.cuda_graph import set_full_iteration_cuda_graph


def deepseek_v3_pretrain_64gpu_gb200_fp8mx_config():
    cfg = x_pretrain_config()
    cfg.model.pipeline_model_parallel_size = 1
    cfg.model.expert_model_parallel_size = 8
    cfg.train.global_batch_size = 256
    cfg.model.recompute_granularity = None
    cfg.model.cuda_graph_scope = []
    set_full_iteration_cuda_graph(cfg.model)
    return cfg
'''


def test_a_fact_of_the_installed_megatron_core_decides_a_helper_the_reader_cannot():
    """utils/cuda_graph.py asks the installed Megatron-Core whether it has per-layer graph modules; every release's
    pinned Megatron-LM does (flat_recipes.CUDA_GRAPH_MODULES), so the full-iteration graph is read, not left
    unresolved. Without the fact the fields stay unresolved, never guessed."""
    flat, reader_module = _modules()
    files = {f"{PKG}/common.py": COMMON, f"{PKG}/gb200/g.py": GRAPHED, "src/megatron/bridge/utils/cuda_graph.py": GRAPH_UTILS,
             "src/megatron/bridge/perf_recipes/_common.py": SHARED, "src/megatron/bridge/training/comm_overlap.py": OVERLAP}
    name = "deepseek_v3_pretrain_64gpu_gb200_fp8mx_config"
    entries = []
    for facts in (flat.runtime_facts("deepseek-v3", "gb200"),
                  {k: v for k, v in flat.runtime_facts("deepseek-v3", "gb200").items() if k not in flat.CUDA_GRAPH_MODULES}):
        reader = reader_module.Reader(files.get, facts)
        values, where = flat.perf_fields(reader.call_function("megatron.bridge.perf_recipes.fam.gb200.g", name))
        entries.append(flat.perf_entry(values, where, "deepseek-v3"))
    known, unknown = entries
    assert known["cuda_graph"] == "full" and "unresolved" not in known
    assert any("cuda_graph_impl" in why for why in unknown["unresolved"])


def test_deepseek_v4_flash_reads_its_26_08_recipes():
    """perf_recipes/deepseek/gb200/deepseek_v4.py at 51885cf: 128 GPUs, EP64, mla_up_proj, the full-iteration graph,
    HybridEP, the fused grouped MLP (NVTE_CUTEDSL_FUSED_GROUPED_MLP=1), no EP overlap."""
    sizes = dict(num_gpus=128, tp=1, pp=1, vp=1, ep=64, mbs=1, gbs=2048)
    for system in ("gb200-nvl72", "gb300-nvl72"):
        e = recipes.recipe_entry("26.08", "deepseek-v4-flash", system, "mxfp8", sizes)
        assert (e["recompute"], e["cuda_graph"], e["dispatcher"], e["fused_moe"], e["moe_a2a_overlap"]) == \
            ("mla_up_proj", "full", "flex", True, False), e


HSDP = '''
from megatron.bridge.perf_recipes.fam.common import x_pretrain_config

_DOMAIN_GPUS = 64


def _hsdp(cfg, num_gpus):
    cfg.ddp.use_megatron_fsdp = True
    instances = max(1, num_gpus // _DOMAIN_GPUS)
    cfg.ddp.num_distributed_optimizer_instances = instances
    cfg.ddp.outer_dp_sharding_strategy = "optim" if instances > 1 else "no_shard"


def deepseek_v3_pretrain_256gpu_gb200_fp8mx_config():
    cfg = x_pretrain_config()
    cfg.model.pipeline_model_parallel_size = 1
    cfg.model.expert_model_parallel_size = 64
    cfg.train.global_batch_size = 256
    cfg.model.cuda_graph_impl = "none"
    cfg.model.cuda_graph_scope = []
    cfg.model.fine_grained_activation_offloading = True
    cfg.model.offload_modules = ["fused_group_mlp"]
    cfg.model.min_offloaded_tensor_size = 350_000_000
    _hsdp(cfg, num_gpus=256)
    return cfg


def deepseek_v3_pretrain_64gpu_gb200_fp8mx_config():
    cfg = deepseek_v3_pretrain_256gpu_gb200_fp8mx_config()
    _hsdp(cfg, num_gpus=64)
    cfg.model.fine_grained_activation_offloading = False
    return cfg
'''


def test_the_reader_sizes_hsdp_from_the_gpu_count_and_reads_the_module_offload():
    """Nemotron-3-Ultra's recipes size HSDP from the GPU count (perf_recipes/nemotronh/common.py at v0.6.0:
    num_optim_instances = max(1, num_gpus // _GB300_NVLINK_DOMAIN_GPUS), outer "optim" where > 1) and offload the
    fused grouped MLP's large saved tensors: integer arithmetic and max() on known values are read, and the entry
    carries fsdp_replicas, fsdp_outer, offload_modules and min_offloaded_tensor_size (0 / [] with the offload off)."""
    flat, reader_module = _modules()
    files = {f"{PKG}/common.py": COMMON, f"{PKG}/gb200/h.py": HSDP,
             "src/megatron/bridge/perf_recipes/_common.py": SHARED,
             "src/megatron/bridge/training/comm_overlap.py": OVERLAP}
    out = {}
    for name in ("deepseek_v3_pretrain_256gpu_gb200_fp8mx_config", "deepseek_v3_pretrain_64gpu_gb200_fp8mx_config"):
        reader = reader_module.Reader(files.get, flat.runtime_facts("deepseek-v3", "gb200"))
        values, where = flat.perf_fields(reader.call_function("megatron.bridge.perf_recipes.fam.gb200.h", name))
        out[name] = flat.perf_entry(values, where, "deepseek-v3")
    big, small = out.values()
    assert "unresolved" not in big and "unresolved" not in small, (big.get("unresolved"), small.get("unresolved"))
    assert (big["fsdp"], big["fsdp_replicas"], big["fsdp_outer"]) == (True, 4, "optim")
    assert (big["offload_modules"], big["min_offloaded_tensor_size"]) == (["fused_group_mlp"], 350_000_000)
    assert (small["fsdp_replicas"], small["fsdp_outer"], small["offload_modules"], small["min_offloaded_tensor_size"]) \
        == (1, "no_shard", [], 0)


def test_nemotron_3_ultra_reads_its_26_08_recipes():
    """perf_recipes/nemotronh/{gb300,gb200}/nemotronh.py at 51885cf (v0.6.0): 256 GPUs, EP64, TP1 (GB300) / TP2 with
    SP (GB200), moe_act recompute, no CUDA graph, HybridEP, the fused grouped MLP, no TP overlap, Megatron-FSDP HSDP
    over 64-GPU domains (4 instances, outer "optim"), the fused grouped MLP offloaded above 500M / 350M elements."""
    sizes = dict(num_gpus=256, pp=1, vp=1, ep=64, mbs=1, gbs=256)
    for system, tp, threshold in (("gb300-nvl72", 1, 500_000_000), ("gb200-nvl72", 2, 350_000_000)):
        e = recipes.recipe_entry("26.08", "nemotron-3-ultra-550b-a55b", system, "mxfp8", dict(sizes, tp=tp))
        assert e is not None and "unresolved" not in e
        assert (e["tp"], e["recompute"], e["cuda_graph"], e["dispatcher"], e["flex_backend"], e["fused_moe"],
                e["tp_comm_overlap"]) == (tp, "moe_act", "none", "flex", "hybridep", True, False), e
        assert (e["fsdp"], e["fsdp_replicas"], e["fsdp_outer"]) == (True, 4, "optim")
        assert (e["offload_modules"], e["min_offloaded_tensor_size"]) == (["fused_group_mlp"], threshold)
    assert recipes.recipe_entry("26.06.01", "nemotron-3-ultra-550b-a55b", "gb300-nvl72", "mxfp8") is None


def test_megatron_fsdp_flags_read_both_ddp_switches_one_way():
    """fsdp_double_buffer and keep_fp8_transpose_cache read their DDP fields through one reader (megatron_fsdp_flags):
    off without Megatron-FSDP, an unresolved value listed and read as off, where the config set it cited."""
    from perf_recipe_reader import Unknown
    flat, _ = _modules()
    values = {"fsdp_double_buffer": False, "nccl_ub": True, "keep_fp8_transpose_cache": Unknown("under an if")}
    where = {"nccl_ub": "a.py:3", "fsdp_double_buffer": "a.py:2"}
    unresolved: list[str] = []
    assert flat.megatron_fsdp_flags(False, ("nccl_ub",), values, where, unresolved) == [(False, "")]
    assert flat.fsdp_double_buffer(True, values, where, unresolved) == {"fsdp_double_buffer": True,
                                                                        "double_buffer_facts": ["a.py:3"]}
    assert flat.keep_fp8_transpose_cache(True, values, where, unresolved) == {"keep_fp8_transpose_cache": False,
                                                                              "transpose_cache_facts": []}
    assert unresolved == ["ddp.keep_fp8_transpose_cache: under an if"]
    off = dict(values, keep_fp8_transpose_cache=False)   # set off by the recipe: cited as well
    assert flat.keep_fp8_transpose_cache(True, off, {"keep_fp8_transpose_cache": "b.py:9"}, []) == {
        "keep_fp8_transpose_cache": False, "transpose_cache_facts": ["b.py:9"]}
