"""A --torchtitan-version 0.2 plan's pins are judged and worded by TorchTitan 0.2.2 (session 46, F13; fix-F8 made the
rules per version, tests/test_torchtitan_version_rules.py): its refusals of fixed values, tied embeddings with PP,
etp, graphs and fsdp=false without PP cited TorchTitan 0.3.0; 0.2.2 runs etp = tp with ep > 1
(config/job_config.py:464-472), which was refused; gpt-oss in mxfp8 was refused by torchao 0.18's CuTeDSL K % 128
rule, which the torchao of 0.2.2's day (0.16.0; the kernel came 2026-03-25) has not; and `tune` had no
--torchtitan-version."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.planner import load_model
from commbench.planner.search.frameworks import _TITAN_FIXED, framework_pins

runner = CliRunner()
HF = Path(__file__).parent / "data" / "hf"


def _other(value: object) -> object:
    """A value other than a _TITAN_FIXED one, of its kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 2
    return {"alltoall": "flex"}[value]


def _refusal(model, pins: dict) -> str:
    with pytest.raises(CommbenchError) as caught:
        framework_pins("torchtitan", model, pins, torchtitan_version="0.2")
    return str(caught.value)


def test_no_02_pin_refusal_names_0_3_0():
    """Every pin framework_pins refuses for a 0.2 plan (each fixed value, tied embeddings with PP, etp, graphs, CP of
    gpt-oss, fsdp against PP, recompute) is worded for 0.2.2, none for 0.3.0."""
    moe, dense = load_model("qwen3-30b-a3b"), load_model("llama3-8b")
    cases = [(moe, {key: _other(value)}) for key, value in _TITAN_FIXED.items()]
    cases += [(dense, {key: _other(value)}) for key, value in _TITAN_FIXED.items()
              if key not in ("dispatcher", "moe_a2a_overlap", "fused_moe")]
    cases += [(moe, {"tp": 2, "ep": 4, "etp": 3}), (moe, {"tp": 4, "ep": 1, "etp": 1}), (moe, {"recompute": "moe_act"}),
              (dense, {"cuda_graph": "layer"}), (dense, {"cuda_graph": "full", "pp": 2}),
              (dense, {"fsdp": True, "pp": 2}), (dense, {"fsdp": False, "pp": 1}),
              (load_model("gpt-oss-20b"), {"cp": 2}),
              (load_model(f"hf:{HF / 'Llama-3.2-1B-Instruct'}"), {"pp": 2})]
    for model, pins in cases:
        said = _refusal(model, pins)
        assert "0.3.0" not in said and "0.2.2" in said and "\n" not in said, (model.name, pins, said)
        assert "--torchtitan-version 0.2" in said or "--torchtitan-version 0.3" in said, (pins, said)


def test_02_runs_fsdp_false_without_pp_as_ddp_only_on_a_1d_mesh():
    """0.2.2 runs data_parallel_shard_degree 1 as DDP, only where DP is the whole mesh (parallelize.py:148-151), with a
    per-micro-batch all-reduce and a whole optimizer per rank, which commbench does not price: refused citing it."""
    args = ["plan", "--framework", "torchtitan", "--model", "llama3.1-70b", "--system", "b200-hgx", "--gpus", "8",
            "--layout", "fsdp=false,pp=1"]
    result = runner.invoke(app, [*args, "--torchtitan-version", "0.2"], env={"COLUMNS": "400"})
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "0.3.0" not in said, said
    assert "DDP has not supported > 1D parallelism" in said and "parallelize.py:148-151" in said, said
    result = runner.invoke(app, args, env={"COLUMNS": "400"})
    assert result.exit_code == 2 and "TorchTitan 0.3.0 runs FSDP2 at every layout" in result.output


def test_02_takes_etp_equal_tp_with_ep_and_emits_it(tmp_path):
    """expert_tensor_parallel_degree = tp with ep > 1 is 0.2.2's (config/job_config.py:464-472: 'etp = tp' or 1); 0.3.0
    shards the experts over EP alone there (etp = 1)."""
    moe = load_model("qwen3-30b-a3b")
    assert framework_pins("torchtitan", moe, {"tp": 2, "ep": 4, "etp": 2}, torchtitan_version="0.2")["etp"] == 2
    with pytest.raises(CommbenchError, match="TorchTitan 0.3.0 runs etp=1"):
        framework_pins("torchtitan", moe, {"tp": 2, "ep": 4, "etp": 2})
    args = ["plan", "--framework", "torchtitan", "--torchtitan-version", "0.2", "--model", "qwen3-30b-a3b",
            "--system", "b200-hgx", "--gpus", "16", "--precision", "bf16", "--layout", "tp=2,ep=4,etp=2",
            "-O", str(tmp_path)]
    result = runner.invoke(app, args, env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "expert_tensor_parallel_degree = 2" in (tmp_path / "torchtitan.toml").read_text()


def test_02_trains_gpt_oss_experts_in_mxfp8(tmp_path):
    """torchao 0.16.0's MXFP8 casts need K a multiple of 32 (csrc/cuda/mx_kernels/mxfp8_extension.cpp:174-175), which
    gpt-oss's 2880 is; 0.3.0's torchao 0.18 CuTeDSL kernel needs 128 and stays refused."""
    from commbench.planner.layout.precision import mxfp8_experts_refusal
    gpt = load_model("gpt-oss-20b")
    assert mxfp8_experts_refusal(gpt, "0.2") is None and "0.3.0" in mxfp8_experts_refusal(gpt)
    args = ["plan", "--framework", "torchtitan", "--model", "gpt-oss-20b", "--system", "b200-hgx", "--gpus", "8",
            "--precision", "mxfp8"]
    result = runner.invoke(app, [*args, "--torchtitan-version", "0.2", "-O", str(tmp_path)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert '"quantize.grouped_mm.mx"' in (tmp_path / "torchtitan.toml").read_text()
    assert runner.invoke(app, args, env={"COLUMNS": "300"}).exit_code == 2


def test_tune_takes_torchtitan_version_as_plan_does(tmp_path):
    """tune's --torchtitan-version is plan's option (same help) and reaches the pins' rules before the sweep."""
    from typing import get_type_hints

    from commbench.cli.plan import plan
    from commbench.cli.tune import tune
    tune_opt = get_type_hints(tune, include_extras=True)["torchtitan_version"].__metadata__[0]
    plan_opt = get_type_hints(plan, include_extras=True)["torchtitan_version"].__metadata__[0]
    assert tune_opt.help == plan_opt.help and tune_opt.help
    args = ["tune", "--framework", "torchtitan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "16",
            "--precision", "bf16", "--layout", "tp=2,ep=4,etp=3", "-O", str(tmp_path)]
    said = " ".join(runner.invoke(app, [*args, "--torchtitan-version", "0.2"], env={"COLUMNS": "400"}).output.split())
    assert "TorchTitan 0.2.2 runs etp=1 or etp=2" in said, said
