"""NVFP4 plans and the parameter gather: Megatron-Bridge's nvfp4 recipe (bf16_with_nvfp4_mixed, v0.5.0+) sets
fp4_param_gather=True, and Megatron-LM core_v0.16.1 parses --fp4-param-gather, but megatron-core 0.16.1's distributed
optimizer re-quantizes master weights only through Transformer Engine's cast_master_weights_to_fp8 and sizes a
quantized parameter's buffer at a byte per element: no 4-bit gather to emit or charge. The plan said it ran the
recipes' features at NVFP4 with no word of this (found by an outside probe); it now says it gathers bf16."""

from __future__ import annotations

import inspect
import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.emit.megatron import NVFP4_PARAM_GATHER_NOTE


def test_megatron_core_0_16_has_no_nvfp4_parameter_gather():
    pytest.importorskip("megatron.core")
    from megatron.core import fp8_utils
    from megatron.core.distributed import distributed_data_parallel
    from megatron.core.transformer.transformer_config import TransformerConfig
    import dataclasses
    fp4_param = {f.name: f for f in dataclasses.fields(TransformerConfig)}["fp4_param"]
    assert fp4_param.metadata["argparse_meta"]["arg_names"] == ["--fp4-param-gather"]   # the flag parses
    source = inspect.getsource(fp8_utils)
    assert "cast_master_weights_to_fp8" in source and "nvfp4" not in source.lower()
    assert "param_dtype = torch.uint8" in inspect.getsource(distributed_data_parallel)


def test_an_nvfp4_plan_says_it_gathers_bf16(tmp_path):
    out = CliRunner().invoke(app, ["plan", "--model", "llama3.1-70b", "--system", "gb300-nvl72", "--gpus", "64",
                                   "--precision", "nvfp4", "--layout", "tp=1,pp=1,mbs=1,fsdp=true", "-O", str(tmp_path)],
                             env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert NVFP4_PARAM_GATHER_NOTE in doc["megatron"]["notes"]
    assert "--fp4-param-gather" not in (tmp_path / "megatron_args.txt").read_text()
    assert f"note: {NVFP4_PARAM_GATHER_NOTE}" in out.output
