"""What Megatron-Bridge's performance scripts set beyond the workload presets reaches the recipe table: the reader
(tools/perf_script_reader.py) runs a release's per-GPU function in order, so the last assignment wins and a GPU's
function overrides its base recipe; and the facts of the table it corrected, each pinned to its source line."""

from __future__ import annotations

import importlib.util
import pathlib

from commbench.planner.layout import recipes
from commbench.data.reference import recipes_json

TOOLS = pathlib.Path(__file__).resolve().parents[1] / "tools"
SCRIPTS = "scripts/performance/"

# A synthetic release in the layout of Megatron-Bridge 0.3.1: a base recipe that turns the flex dispatcher on
# through `**user_kwargs`, per-GPU functions that set the dispatcher after it, and the device check of
# apply_flex_dispatcher_backend (training/flex_dispatcher_backend.py at v0.3.1).
FILES = {
    SCRIPTS + "utils/utils.py": '''
import importlib
from dataclasses import dataclass

@dataclass
class WorkloadBaseConfig:
    expert_model_parallel_size: int = 1
    moe_flex_dispatcher_backend: str | None = None

def get_workload_base_config(model_family_name, model_recipe_name, gpu, compute_dtype, task, config_variant="v1"):
    return getattr(importlib.import_module(f"configs.{model_family_name}"), "NOT_READ")
''',
    SCRIPTS + "utils/overrides.py": '''
def set_workload_base_configs(cfg, settings):
    cfg.model.expert_model_parallel_size = settings.expert_model_parallel_size
    return cfg
''',
    SCRIPTS + "configs/fam/fam_workload_base_configs.py": '''
from dataclasses import replace
from utils.utils import WorkloadBaseConfig

BASE = WorkloadBaseConfig(expert_model_parallel_size=8, moe_flex_dispatcher_backend="deepep")
X_PRETRAIN_CONFIG_H100_BF16_V1 = replace(BASE, expert_model_parallel_size=16)
X_PRETRAIN_CONFIG_GB200_BF16_V1 = replace(BASE, moe_flex_dispatcher_backend=None)
''',
    SCRIPTS + "configs/fam/fam_llm_pretrain.py": '''
from utils.overrides import set_workload_base_configs
from utils.utils import get_workload_base_config
from megatron.bridge.recipes.fam.x import x_pretrain_config
from megatron.bridge.training.flex_dispatcher_backend import apply_flex_dispatcher_backend


def x_pretrain_config_h100(precision="bf16", mock=True, config_variant="v1"):
    base_cfg = get_workload_base_config("fam", "x", "h100", precision.upper(), "pretrain", config_variant)
    cfg = x_pretrain_config(mock=mock)
    cfg.model.moe_flex_dispatcher_backend = base_cfg.moe_flex_dispatcher_backend
    cfg.model.moe_token_dispatcher_type = "alltoall"
    set_workload_base_configs(cfg, base_cfg)
    return cfg


def x_pretrain_config_b200(precision="bf16", mock=True, config_variant="v1"):
    base_cfg = get_workload_base_config("fam", "x", "b200", precision.upper(), "pretrain", config_variant)
    cfg = x_pretrain_config(mock=mock)
    apply_flex_dispatcher_backend(cfg.model, "deepep")
    set_workload_base_configs(cfg, base_cfg)
    return cfg


def x_pretrain_config_gb200(precision="bf16", mock=True, config_variant="v1"):
    base_cfg = get_workload_base_config("fam", "x", "gb200", precision.upper(), "pretrain", config_variant)
    cfg = x_pretrain_config(mock=mock)
    apply_flex_dispatcher_backend(cfg.model, "deepep")
    set_workload_base_configs(cfg, base_cfg)
    return cfg
''',
    "src/megatron/bridge/recipes/fam/x.py": '''
from megatron.bridge.training.flex_dispatcher_backend import apply_flex_dispatcher_backend


def x_pretrain_config(**user_kwargs):
    combined = {**{"hf_path": "org/x", "backend": "hybridep"}, **user_kwargs}
    return _common(**combined)


def _common(hf_path, mock=False, backend=None):
    bridge = AutoBridge.from_hf_pretrained(hf_path)
    model_cfg = bridge.to_megatron_provider(load_weights=False)
    model_cfg.moe_token_dispatcher_type = "alltoall"
    apply_flex_dispatcher_backend(model_cfg, backend)
    return ConfigContainer(model=model_cfg)
''',
    "src/megatron/bridge/training/flex_dispatcher_backend.py": '''
import torch


def apply_flex_dispatcher_backend(model_config, moe_flex_dispatcher_backend=None):
    device_properties = torch.cuda.get_device_properties(0)
    if moe_flex_dispatcher_backend == "deepep":
        if not (device_properties.major in [8, 9] or device_properties.name in ["NVIDIA B200", "NVIDIA B300"]):
            return
    elif moe_flex_dispatcher_backend == "hybridep":
        if not device_properties.major in [8, 9, 10]:
            return
    else:
        return
    model_config.moe_token_dispatcher_type = "flex"
    model_config.moe_flex_dispatcher_backend = moe_flex_dispatcher_backend
''',
}


def _reader():
    spec = importlib.util.spec_from_file_location("recipes_tool", TOOLS / "recipes_from_megatron_bridge.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))   # puts tools/ on sys.path
    import perf_script_reader
    return perf_script_reader


def _dispatcher(gpu: str, preset: str) -> dict:
    reader = _reader()
    function, config = reader.gpu_function_config(
        FILES.get, sorted(FILES), "qwen3-30b-a3b", "x", gpu, "bf16", "v1",
        SCRIPTS + "configs/fam/fam_workload_base_configs.py", preset)
    assert function.startswith(SCRIPTS + "configs/fam/fam_llm_pretrain.py:")
    return {**reader.dispatcher_of(config), "ep": reader.field(config, "model", "expert_model_parallel_size")}


def test_the_last_assignment_of_the_gpus_function_wins_over_its_base_recipe():
    # the base recipe (through **user_kwargs) turned HybridEP on; the H100 function then sets alltoall: alltoall,
    # though its preset names DeepEP (a backend alone does not make the dispatcher flex)
    h100 = _dispatcher("h100", "X_PRETRAIN_CONFIG_H100_BF16_V1")
    assert (h100["dispatcher"], h100["flex_backend"], h100["ep"]) == ("alltoall", None, 16)
    assert h100["script_facts"] == [f"{SCRIPTS}configs/fam/fam_llm_pretrain.py:12"]
    # DeepEP applied on B200 (device name "NVIDIA B200" is in the list); not on GB200, where the base recipe's
    # HybridEP stands
    b200 = _dispatcher("b200", "X_PRETRAIN_CONFIG_H100_BF16_V1")
    gb200 = _dispatcher("gb200", "X_PRETRAIN_CONFIG_GB200_BF16_V1")
    assert (b200["dispatcher"], b200["flex_backend"]) == ("flex", "deepep")
    assert (gb200["dispatcher"], gb200["flex_backend"], gb200["ep"]) == ("flex", "hybridep", 8)
    assert "unresolved" not in h100 and "unresolved" not in gb200


def _entries(release: str, model: str, gpu: str) -> list[dict]:
    return [e for e in recipes_json()["recipes"] if (e["release"], e["model"], e["gpu"]) == (release, model, gpu)]


def test_26_02_01_qwen3_235b_runs_alltoall_off_nvl72():
    """Megatron-Bridge v0.3.1 (9c9dd84) scripts/performance/configs/qwen/qwen3_llm_pretrain.py: the B300, B200 and
    H100 functions of Qwen3-235B-A22B set `cfg.model.moe_token_dispatcher_type = "alltoall"` (lines 133, 159, 185)
    after `cfg.model.moe_flex_dispatcher_backend = base_cfg.moe_flex_dispatcher_backend` (132, 158, 184), and
    nothing after (set_qwen3_common_configs, utils/overrides.py set_workload_base_configs) sets it back: the
    preset's "deepep" is inert. GB300 / GB200 set "flex" (lines 81, 107) with the preset's HybridEP."""
    for gpu, line, count in (("b300", 133, 6), ("b200", 159, 6), ("h100", 185, 4)):
        entries = _entries("26.02.01", "qwen3-235b-a22b", gpu)
        assert len(entries) == count, gpu   # bf16 / fp8 (/ mxfp8 off H100), v1 and v2: 16 entries
        for e in entries:
            assert (e["dispatcher"], e["flex_backend"]) == ("alltoall", None), e["config"]
            assert e["script_facts"] == [f"scripts/performance/configs/qwen/qwen3_llm_pretrain.py:{line}"]
    for gpu in ("gb300", "gb200"):
        assert {(e["dispatcher"], e["flex_backend"]) for e in _entries("26.02.01", "qwen3-235b-a22b", gpu)} == \
            {("flex", "hybridep")}
    sizes = dict(num_gpus=256, tp=2, pp=8, vp=4, ep=32, mbs=1, gbs=2048)
    entry = recipes.recipe_entry("26.02.01", "qwen3-235b-a22b", "h100-hgx", "fp8", sizes)
    assert entry["config"] == "QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V1" and entry["dispatcher"] == "alltoall"


def test_26_02_01_kimi_k2_runs_deepep_on_h100_and_b200_and_26_04_resets_it():
    """Megatron-Bridge v0.3.1: src/megatron/bridge/recipes/kimi/kimi_k2.py:99-100 sets moe_token_dispatcher_type
    "alltoall" and moe_flex_dispatcher_backend "deepep"; every GPU function of
    scripts/performance/configs/kimi/kimi_llm_pretrain.py (H100: line 213) then calls
    `apply_flex_dispatcher_backend(cfg.model, cfg.model.moe_flex_dispatcher_backend)` (the preset names no backend
    on H100 / B200), which sets "flex" where `device_properties.major in [8, 9] or device_properties.name in
    ["NVIDIA B200", "NVIDIA B300"]` (src/megatron/bridge/training/flex_dispatcher_backend.py:67-68 the writes).
    v0.4.0's set_workload_base_configs resets a preset with no backend to "alltoall" (utils/overrides.py:228)."""
    for gpu in ("h100", "b200"):
        entries = _entries("26.02.01", "kimi-k2", gpu)
        assert entries and all((e["dispatcher"], e["flex_backend"]) == ("flex", "deepep") for e in entries), gpu
        assert {(e["dispatcher"], e["flex_backend"]) for e in _entries("26.04", "kimi-k2", gpu)} == \
            {("alltoall", None)}, gpu
    features = recipes.release_features("26.02.01", "h100", "fp8", "kimi-k2", True)
    assert "flex" in features["dispatcher"]


def test_25_09_deepseek_v3_recomputes_mla_up_projections_on_h100_and_gb200():
    """Megatron-Bridge v0.1.0rc3 (bf71eba) scripts/performance/run_script.py, DeepSeek-V3's branch of main():
    line 89 `recipe.model.recompute_modules = ["mla_up_proj", "mlp"]` on H100, line 91 `... = ["mla_up_proj",
    "mlp", "moe_act"]` on GB200; the YAML (deepseek_v3_llm_pretrain.yaml) merged after it sets
    recompute_granularity "selective" and no modules. Each is read as the set it runs, as 25.11's identical H100 list
    is; B200 keeps Megatron-Core's default module alone (core_attn, not the planner's "selective", which adds the
    light modules)."""
    for gpu, line, count, mode in (("h100", 89, 2, "mla_up_proj+mlp"), ("gb200", 91, 3, "mla_up_proj+mlp+moe_act")):
        entries = _entries("25.09", "deepseek-v3", gpu)
        assert len(entries) == count and all(e["recompute"] == mode for e in entries), gpu
        assert all(f"scripts/performance/run_script.py:{line}" in e["script_facts"] for e in entries)
    assert {e["recompute"] for e in _entries("25.09", "deepseek-v3", "b200")} == {"core_attn"}
    # the 25.11 H100 recipe reads the same list the same way (DEEPSEEK_V3_H100_BASE_CONFIG)
    assert {e["recompute"] for e in _entries("25.11", "deepseek-v3", "h100")} == {"mla_up_proj+mlp"}
    # DeepEP and the EP all-to-all overlap on H100 only, now read from the same branch (lines 56-84)
    h100 = _entries("25.09", "deepseek-v3", "h100")
    assert {(e["dispatcher"], e["flex_backend"], e["moe_a2a_overlap"]) for e in h100} == {("flex", "deepep", True)}
    assert {(e["dispatcher"], e["moe_a2a_overlap"]) for e in _entries("25.09", "deepseek-v3", "gb200")} == \
        {("alltoall", False)}


def test_26_02_01_gpt_oss_b300_b200_rows_are_modelled_with_the_commit_that_published_them():
    """The 26.02.01 table runs GPT-OSS-120B on 64 B300 / B200 at EP 8, gbs 1280, mbs 4. Megatron-Bridge v0.3.1's
    GPT_OSS_120B_PRETRAIN_CONFIG_B300/B200_BF16_V2 (gpt_oss_workload_base_configs.py@v0.3.1 lines 102-111) run EP 64
    with alltoall; commit 7260d62 "perf optimizations- GPT-OSS 120B (#2906)" (2026-03-23, three days after the tag,
    not its ancestor) sets expert_model_parallel_size=8 and moe_flex_dispatcher_backend="hybridep" there, which its
    gpt_oss_llm_pretrain.py applies (flex). The rows are modelled with that recipe, cited by its commit; the
    release's features, plans and default layouts never read it."""
    from commbench.planner.calibrate.published import flags_assumed, published_runs
    commit = "7260d6214afff7f00c35c3cc4d47d9c458d9310b"
    table = recipes_json()
    later = table["later_recipes"]
    assert {e["config"] for e in later} == {"GPT_OSS_120B_PRETRAIN_CONFIG_B300_BF16_V2",
                                            "GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_V2"}
    assert commit not in {info["commit"] for info in table["releases"].values()}
    for e in later:
        assert (e["release"], e["commit"], e["after_tag"], e["ep"], e["gbs"], e["mbs"]) == \
            ("26.02.01", commit, "v0.3.1", 8, 1280, 4)
        assert (e["dispatcher"], e["flex_backend"]) == ("flex", "hybridep")
    runs = [r for r in published_runs() if r.layout is not None and r.row["release"] == "26.02.01"
            and r.row["model"] == "gpt-oss-120b" and r.row["gpu"] in ("B300", "B200")]
    assert len(runs) == 2
    for r in runs:
        assert r.layout.dispatcher == "flex" and r.layout.ep == 8
        assert "commit 7260d62's recipe" in r.layout_note and "v0.3.1" in r.layout_note
        assert flags_assumed(r.row, r.preset, r.model.name, r.layout.mbs) == ""
    # the release's own recipe and features stay v0.3.1's
    sizes = dict(num_gpus=64, tp=1, pp=1, vp=1, ep=8, mbs=4, gbs=1280)
    own = recipes.recipe_entry("26.02.01", "gpt-oss-120b", "b300-hgx", "bf16", sizes)
    assert (own["ep"], own["dispatcher"], own["commit"]) == (64, "alltoall", table["releases"]["26.02.01"]["commit"])
    assert "flex" not in recipes.release_features("26.02.01", "b300", "bf16", "gpt-oss-120b", True)["dispatcher"]


def test_25_11_gpt_oss_recompute_modules_are_inert_without_selective_granularity():
    """Megatron-Bridge v0.2.0 (7af9601): GPT-OSS-120B's presets set recompute_modules=["layernorm", "moe_act"]
    (scripts/performance/configs/gpt_oss/workload_base_configs.py lines 46, 54, 61), which utils/helpers.py
    set_recompute_overrides writes alone (line 179 `recipe.model.recompute_modules = recompute_modules`); no code of
    that release sets recompute_granularity for it (Megatron-Core's default None), and Megatron-Core reads the modules
    only under "selective" (megatron/core/transformer/moe/experts.py:136-137 at the pinned 0d8e071): nothing is
    recomputed. v0.3.0's utils/overrides.py:143 sets granularity "selective" with the modules: 26.02 recomputes
    both, layernorm and moe_act."""
    for gpu in ("gb200", "b200", "h100"):
        assert {e["recompute"] for e in _entries("25.11", "gpt-oss-120b", gpu)} == {"none"}, gpu
        assert {e["recompute"] for e in _entries("26.02", "gpt-oss-120b", gpu)} == {"layernorm+moe_act"}, gpu
    # DeepSeek-V3's 25.11 script sets "selective" (set_deepseek_v3_common_configs): its modules count
    assert {e["recompute"] for e in _entries("25.11", "deepseek-v3", "h100")} == {"mla_up_proj+mlp"}
