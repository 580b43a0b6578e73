"""Emitted Megatron-LM plans through Megatron-LM's own configuration code (tests/megatron_lm.py):
parse_args -> validate_args -> core_transformer_config_from_args with the model's full architecture
flags (checked field by field against the zoo's Architecture) -> process groups on torch's fake backend
-> the layer split Megatron builds. Needs a Megatron-LM checkout at the release matching the installed
megatron-core in MEGATRON_LM_ROOT (its training package is not on PyPI); skipped with that reason
otherwise (test_emit_megatron_real.py then checks the reproduced flag set and validate_args rules)."""

from __future__ import annotations

import pytest

from tests.framework_plans import INSTALL_HINT, case_ids, plan_cases

pytest.importorskip("megatron.core", reason=f"megatron-core is not installed: {INSTALL_HINT}")

from commbench.costmodel import load_preset  # noqa: E402
from commbench.planner.emit.megatron import launch_env, megatron_args  # noqa: E402
from tests.megatron_lm import RELEASE, arguments_module, megatron_whole_path  # noqa: E402

needs_megatron_lm = pytest.mark.skipif(arguments_module() is None, reason=(
    f"MEGATRON_LM_ROOT does not name a Megatron-LM checkout (git clone -b {RELEASE} "
    "https://github.com/NVIDIA/Megatron-LM; its training package is not on PyPI)"))


@needs_megatron_lm
@pytest.mark.parametrize("index", range(len(case_ids())), ids=case_ids())
def test_megatron_lm_accepts_the_emitted_plan(index, monkeypatch):
    case = plan_cases()[index]
    gpu = load_preset(case.system, num_gpus=case.gpus).gpu
    argv = megatron_args(case.layout, case.model)
    megatron_whole_path(arguments_module(), argv, layout=case.layout, model=case.model, gpus=case.gpus, gpu=gpu,
                        env=launch_env(case.layout, gpu.name), monkeypatch=monkeypatch)
