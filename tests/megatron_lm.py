"""Megatron-LM's own configuration code (megatron/training/arguments.py: parse_args, validate_args,
core_transformer_config_from_args) from a checkout named by MEGATRON_LM_ROOT.

Megatron-LM's training package is not on PyPI (megatron-core is); the tests that need it skip with a
reason unless MEGATRON_LM_ROOT points at a Megatron-LM checkout whose release matches the installed
megatron-core (core_v0.16.1 for 0.16.1: `git clone -b core_v0.16.1 https://github.com/NVIDIA/Megatron-LM`).
Only arguments.py and the modules it imports are loaded (megatron/training/__init__.py would pull in
the whole training loop and Triton). The GPU is the plan's: torch.cuda's capability queries answer
with its compute capability, and Transformer Engine (GPU-only) is answered as 2.10 with its fused
RoPE and MoE permute kernels present, as on the machine the plan is for.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

RELEASE = "core_v0.16.1"


@lru_cache(maxsize=1)
def arguments_module():
    """megatron.training.arguments from $MEGATRON_LM_ROOT, or None when unset or absent."""
    root = os.environ.get("MEGATRON_LM_ROOT")
    if not root or not (Path(root) / "megatron" / "training" / "arguments.py").is_file():
        return None
    if root not in sys.path:
        sys.path.append(root)
    training = Path(root) / "megatron" / "training"
    pkg = types.ModuleType("megatron.training")
    pkg.__path__ = [str(training)]
    sys.modules.setdefault("megatron.training", pkg)

    def load(name: str):
        spec = importlib.util.spec_from_file_location(f"megatron.training.{name}", training / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        return mod

    global_vars = load("global_vars")
    for name in ("get_args", "get_timers", "get_adlr_autoresume"):
        setattr(pkg, name, getattr(global_vars, name))
    return load("arguments")


@contextmanager
def target_gpu(monkeypatch, capability: tuple[int, int]):
    """torch.cuda answers as the plan's GPU; Transformer Engine 2.10 answers present."""
    import torch
    import megatron.core.utils as mcore_utils
    import megatron.core.models.common.embeddings.rope_utils as rope_utils
    import megatron.core.transformer.moe.moe_utils as moe_utils
    from packaging.version import Version
    props = types.SimpleNamespace(major=capability[0], minor=capability[1], name="target", total_memory=1 << 40,
                                  multi_processor_count=132)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, **k: capability)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *a, **k: props)
    monkeypatch.setattr(mcore_utils, "get_te_version", lambda: Version("2.10.0"))
    for module, names in ((rope_utils, ("fused_apply_rotary_pos_emb", "fused_apply_rotary_pos_emb_thd")),
                          (moe_utils, ("fused_permute", "fused_permute_with_probs", "fused_sort_chunks_by_index",
                                       "fused_sort_chunks_by_index_with_probs", "fused_unpermute"))):
        for name in names:
            if getattr(module, name, None) is None:
                monkeypatch.setattr(module, name, object(), raising=False)
    yield


def megatron_config(args_mod, argv: list[str], world: int, env: dict[str, str], monkeypatch):
    """parse_args -> validate_args -> core_transformer_config_from_args, as pretrain_gpt.py runs them
    (with the mock-data tokenizer a launch without a tokenizer file uses)."""
    import megatron.training.global_vars as global_vars  # noqa: F401 - loaded by arguments_module
    monkeypatch.setattr(sys, "argv", ["pretrain_gpt.py", *argv, "--tokenizer-type", "NullTokenizer", "--mock-data"])
    for key, value in {"WORLD_SIZE": str(world), "RANK": "0", "LOCAL_RANK": "0", **env}.items():
        monkeypatch.setenv(key, value)
    args = args_mod.parse_args()
    args_mod.validate_args(args, {})
    return args, args_mod.core_transformer_config_from_args(args)
