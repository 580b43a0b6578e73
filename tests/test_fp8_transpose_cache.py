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
