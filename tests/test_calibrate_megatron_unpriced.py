"""Megatron-LM log settings the step model does not price as they ran are said or refused, never silently priced
as another: selective recompute of another module set than the step model's (noted: megatron-core's default
recompute_modules None is ['core_attn'], transformer_config.py), drop-and-pad or token-dropping MoE
(moe_expert_capacity_factor, moe_pad_expert_input_to_capacity: refused), and distributed-optimizer instances
without Megatron-FSDP (num_distributed_optimizer_instances > 1: refused)."""

from __future__ import annotations

import re

import pytest

from commbench.errors import CommbenchError
from commbench.planner.calibrate.runlogs import parse_megatron_log, read_runs_noted

BASE = {"bf16": "True", "context_parallel_size": "1", "cuda_graph_impl": "none", "expert_model_parallel_size": "8",
        "expert_tensor_parallel_size": "1", "fp4": "None", "fp8": "hybrid", "fp8_recipe": "tensorwise",
        "global_batch_size": "128", "micro_batch_size": "2", "moe_grouped_gemm": "True",
        "moe_token_dispatcher_type": "alltoall", "num_layers": "48", "overlap_grad_reduce": "True",
        "overlap_param_gather": "True", "pipeline_model_parallel_size": "1", "seq_length": "4096",
        "sequence_parallel": "False", "tensor_model_parallel_size": "1", "tp_comm_overlap": "False",
        "use_distributed_optimizer": "True", "log_interval": "10", "virtual_pipeline_model_parallel_size": "None",
        "world_size": "16", "recompute_granularity": "None", "recompute_modules": "None"}


def _log(**args: str) -> str:
    """A core_v0.16.1 arguments block (qwen3-30b-a3b, 16 GPUs, EP8) and five iteration lines."""
    merged = dict(BASE, **args)
    lines = ["------------------------ arguments ------------------------"]
    lines += [f"  {k} {'.' * (48 - len(k))} {v}" for k, v in sorted(merged.items())]
    lines.append("-------------------- end of arguments ---------------------")
    for i in (1, 10, 20, 30, 40):
        lines.append(f" [2026-01-10 10:00:{i:02d}.000000] iteration {i:8d}/     100 | consumed samples: {i * 128:12d} | "
                     f"elapsed time per iteration (ms): {20000.0 if i == 1 else 3562.8} | learning rate: 1.000000E-04 | "
                     "global batch size:   128 | lm loss: 9.500000E+00 | loss scale: 1.0 | grad norm: 1.234 | "
                     "number of skipped iterations:   0 | number of nan iterations:   0 |")
    return "\n".join(lines) + "\n"


def _row(**args: str) -> dict:
    return parse_megatron_log(_log(**args), source="m.log", model="qwen3-30b-a3b", gpu="h100-hgx")


def test_a_selective_module_set_other_than_the_priced_one_is_noted(tmp_path):
    said = "no recompute of core_attn, layernorm alone"
    path = tmp_path / "m.log"
    path.write_text(_log(recompute_granularity="selective", recompute_modules="['core_attn', 'layernorm']"))
    rows, notes = read_runs_noted(str(path), model="qwen3-30b-a3b", gpu="h100-hgx")
    assert rows[0]["recipe"]["recompute"] == "selective"
    assert said in rows[0]["notes"] and "which recomputes core_attn, layernorm, moe_act" in rows[0]["notes"]
    assert any(said in n for n in notes)   # printed by calibrate, not only in --json


@pytest.mark.parametrize("modules", ["['core_attn', 'layernorm', 'moe_act']", "['moe_act', 'layernorm', 'core_attn']",
                                     "['moe_act']"])
def test_the_priced_module_set_has_no_note(modules):
    row = _row(recompute_granularity="selective", recompute_modules=modules)
    assert "priced as" not in row["notes"] and not row.get("priced_as")


@pytest.mark.parametrize("modules, mode", [("None", "core_attn"), ("['core_attn']", "core_attn"),
                                          ("['moe_act', 'layernorm']", "layernorm+moe_act"),
                                          ("['layernorm', 'moe_act', 'layernorm']", "layernorm+moe_act")])
def test_a_module_set_the_recipes_run_is_priced_as_it_ran(modules, mode):
    """Was: megatron-core's default ['core_attn'] priced as the step model's selective (core_attn + layernorm +
    moe_act on this model) with a note, and gpt-oss's recipe set layernorm + moe_act refused: the step model prices
    the recipes' module sets per module (layout/spec.py RECIPE_MODULE_SETS), so a log that ran one is priced so."""
    row = _row(recompute_granularity="selective", recompute_modules=modules)
    assert row["recipe"]["recompute"] == mode
    assert "priced as" not in row["notes"] and not row.get("priced_as")


@pytest.mark.parametrize("args, named", [
    (dict(moe_expert_capacity_factor="2.0", moe_pad_expert_input_to_capacity="True"),
     "moe_pad_expert_input_to_capacity=True (moe_expert_capacity_factor=2.0)"),
    (dict(moe_expert_capacity_factor="1.25"), "moe_expert_capacity_factor=1.25, which the step model does not price"),
    (dict(num_distributed_optimizer_instances="4"),
     "num_distributed_optimizer_instances=4 without Megatron-FSDP")])
def test_settings_the_step_model_does_not_price_are_refused_in_one_line(args, named):
    with pytest.raises(CommbenchError, match=re.escape(named)) as err:
        _row(**args)
    assert "\n" not in str(err.value) and "allowed:" in str(err.value)


@pytest.mark.parametrize("args", [dict(moe_expert_capacity_factor="None", moe_pad_expert_input_to_capacity="False"),
                                  dict(num_distributed_optimizer_instances="1")])
def test_the_priced_settings_are_read(args):
    assert _row(**args)["tokens_per_s_per_gpu"] > 0


@pytest.mark.parametrize("grads, params, overlap", [("True", "True", True), ("False", "False", False)])
def test_dp_overlap_is_both_overlap_flags(grads, params, overlap):
    assert _row(overlap_grad_reduce=grads, overlap_param_gather=params)["recipe"]["dp_overlap"] is overlap


@pytest.mark.parametrize("grads, params", [("True", "False"), ("False", "True")])
def test_overlapping_only_one_of_the_reduce_scatter_and_the_gather_is_refused(grads, params):
    """The step model's dp_overlap hides both (step/dp_sync.py); emit/megatron.py writes both flags. A run with the
    gradient reduce overlapped and the parameter gather exposed was priced with the gather hidden."""
    with pytest.raises(CommbenchError, match=f"overlap_grad_reduce={grads} and overlap_param_gather={params}: .*"
                                             "allowed: both True or both False"):
        _row(overlap_grad_reduce=grads, overlap_param_gather=params)


def test_without_a_parameter_gather_overlap_grad_reduce_alone_says_it():
    # no distributed optimizer: gradients all-reduced, no parameter gather; Megatron-LM refuses overlap_param_gather
    row = _row(overlap_grad_reduce="True", overlap_param_gather="False", use_distributed_optimizer="False")
    assert row["recipe"]["dp_overlap"] is True


def test_a_block_without_overlap_param_gather_is_refused_where_it_matters():
    text = "".join(line + "\n" for line in _log().splitlines() if "overlap_param_gather" not in line)
    with pytest.raises(CommbenchError, match="has no overlap_param_gather .*default False"):
        parse_megatron_log(text, source="m.log", model="qwen3-30b-a3b", gpu="h100-hgx")


@pytest.mark.parametrize("args, named", [
    ({"num_distributed_optimizer_instances": "x"}, "num_distributed_optimizer_instances='x' is invalid: a whole number"),
    ({"num_distributed_optimizer_instances": "[2]"}, r"num_distributed_optimizer_instances=\[2\] is invalid"),
    ({"moe_expert_capacity_factor": "abc"}, "moe_expert_capacity_factor='abc' is invalid: a number"),
    ({"moe_expert_capacity_factor": "[1.0]"}, r"moe_expert_capacity_factor=\[1.0\] is invalid: a number"),
    ({"recompute_granularity": "selective", "recompute_modules": "5"}, "recompute_modules=5 is invalid: a list"),
    ({"expert_model_parallel_size": "0"}, "expert_model_parallel_size=0 is invalid: a whole number from 1"),
    ({"expert_tensor_parallel_size": "0"}, "expert_tensor_parallel_size=0 is invalid: a whole number from 1"),
    ({"context_parallel_size": "0"}, "context_parallel_size=0 is invalid: a whole number from 1"),
    ({"log_interval": "0"}, "log_interval=0 is invalid: a whole number from 1"),
    ({"cuda_graph_impl": "transformer_engine", "cuda_graph_warmup_steps": "-1"},
     "cuda_graph_warmup_steps=-1 is invalid: a whole number from 0"),
])
def test_an_argument_value_no_run_can_have_is_one_line_naming_it(args, named):
    """These raised ValueError / TypeError inside the reader ('holds values no run can have: ValueError: invalid
    literal for int()'), or were read as another value: expert_model_parallel_size 0 as EP 1, log_interval 0 as 1, a
    negative cuda_graph_warmup_steps as Megatron-Core's default."""
    with pytest.raises(CommbenchError, match=named):
        _row(**args)


def test_a_negative_capacity_factor_is_dropless_as_megatron_core_reads_it():
    # core_v0.16.1 transformer_config.py: moe_expert_capacity_factor < 0 -> None (dropless), what the step model prices
    assert _row(moe_expert_capacity_factor="-1.0")["tokens_per_s_per_gpu"] > 0
    with pytest.raises(CommbenchError, match="moe_expert_capacity_factor=1.5, which the step model does not price"):
        _row(moe_expert_capacity_factor="1.5")
