"""Megatron-FSDP's double buffering (--fsdp-double-buffer, Megatron-Bridge ddp.fsdp_double_buffer): the recipe table
says which release recipes run it (tools/recipes_from_megatron_bridge.py), the plans launch with it, and the memory
model charges the gathered units and the reduce-scatter queue the launch holds (step/fsdp.py)."""

from __future__ import annotations

from commbench.data.reference import recipes_json


def _entry(release, model, gpu, precision, num_gpus):
    return next(e for e in recipes_json()["recipes"] if (e["release"], e["model"], e["gpu"], e["precision"],
                                                          e["num_gpus"]) == (release, model, gpu, precision, num_gpus))


def test_the_recipe_table_says_which_fsdp_recipes_double_buffer():
    # 25.09: run_script.py:161-163 turns it on for Llama 3 / 3.1 70B and 405B only; the Llama 3 8B H100 entry's
    # nccl_ub YAML key is read by no code (utils/helpers.py set_megatron_fsdp_overrides reads use_megatron_fsdp only)
    on = _entry("25.09", "llama3.1-70b", "gb200", "fp8", 64)
    assert on["fsdp"] and on["fsdp_double_buffer"]
    assert on["double_buffer_facts"] == ["scripts/performance/run_script.py:163"]
    off = _entry("25.09", "llama3-8b", "h100", "fp8", 8)
    assert off["fsdp"] and not off["fsdp_double_buffer"]
    # 0.3.1 (26.02.01): the per-GPU function's `if cfg.ddp.use_megatron_fsdp:` branch
    assert _entry("26.02.01", "llama3.1-70b", "gb200", "fp8", 64)["double_buffer_facts"] == \
        ["scripts/performance/configs/llama/llama3_llm_pretrain.py:110"]
    # 26.08 (flat recipes): Nemotron-3-Ultra's HSDP recipes leave it off, Llama 3.1 405B B300 turns it off
    assert not _entry("26.08", "nemotron-3-ultra-550b-a55b", "gb300", "mxfp8", 256)["fsdp_double_buffer"]
    assert not _entry("26.08", "llama3.1-405b", "b300", "bf16", 256)["fsdp_double_buffer"]
    # NCCL user buffers force it (megatron-core param_and_grad_buffer.py): gb300/llama3.py:227 sets nccl_ub
    assert "src/megatron/bridge/perf_recipes/llama/gb300/llama3.py:227" in \
        _entry("26.08", "llama3.1-70b", "gb300", "bf16", 64)["double_buffer_facts"]
    # no Megatron-FSDP, no double buffering
    assert not any(e["fsdp_double_buffer"] for e in recipes_json()["recipes"] if not e["fsdp"])
