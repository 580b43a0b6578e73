"""torchtitan 0.3.0 logs: the multi-line JSON config of --debug.print_config, `model_spec`, the converters' log
lines, the activation-checkpoint config by its fields, the `Building device mesh with parallelism:` line."""

from __future__ import annotations

import json
import re

import pytest

from commbench.errors import CommbenchError
from commbench.planner.calibrate.runlogs import parse_torchtitan_log

PREFIX = "[rank0]:[titan] 2026-01-10 10:00:00,001 - root - INFO - "
BASE_AC = {"preserve_rng_state": True, "determinism_check": "default", "debug": False}


def _config(ac: object = BASE_AC, **parallel: object) -> dict:
    par = {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": -1, "tensor_parallel_degree": 1,
           "pipeline_parallel_degree": 1, "pipeline_parallel_microbatch_size": 1, "context_parallel_degree": 1,
           "expert_parallel_degree": 8}
    par.update(parallel)
    return {"model_spec": {"name": "qwen3", "flavor": "30B-A3B", "model": {"dim": 2048, "note": "a {brace} in a str"}},
            "training": {"local_batch_size": 2, "global_batch_size": -1, "seq_len": 4096,
                         "disable_cuda_graphs": True, "mixed_precision_param": "bfloat16"},
            "parallelism": par, "activation_checkpoint": ac, "compile": {"enable": True}}


def _log(config: dict, extra: str = "", mesh: str = "pp=1, dp_replicate=1, dp_shard=16, cp=1, tp=1, ep=8") -> str:
    """The config as trainer.py maybe_log writes it (json.dumps indent=2 after 'Running with configs: ') under the
    launcher's rank label, the mesh line and four metrics lines."""
    body = json.dumps(config, indent=2).splitlines()
    lines = [extra] if extra else []
    lines += [PREFIX + "Running with configs: " + body[0]] + [f"[rank0]:{line}" for line in body[1:]]
    lines.append(PREFIX + f"Building device mesh with parallelism: {mesh}")
    lines += [PREFIX + f"step: {s}  loss:  8.12345  grad_norm:  1.2345  memory: 70.12GiB(88.58%)  tps: "
              f"{9000 if s == 1 else 10400:,}  tflops: 250.34  mfu: N/A" for s in (1, 10, 20, 30)]
    return "\n".join(lines) + "\n"


def _row(text: str, num_gpus: int | None = None) -> dict:
    return parse_torchtitan_log(text, source="t.log", model="qwen3-30b-a3b", gpu="h100-hgx", num_gpus=num_gpus)


def test_a_torchtitan_0_3_0_log_is_read():
    row = _row(_log(_config()))
    assert (row["num_gpus"], row["mbs"], row["gbs"], row["ep"]) == (16, 2, 32, 8)   # GPUs from the mesh line
    assert row["tokens_per_s_per_gpu"] == pytest.approx(10_400)
    assert row["recipe"]["recompute"] == "full"   # FullAC.Config: the base fields only
    assert row["precision"] == "BF16"
    assert "BF16: no quantization converter's log line" in row["notes"]   # how it was read, said


@pytest.mark.parametrize("ac, mode", [(None, "none"), (dict(BASE_AC, force_recompute_mm_shapes_by_fqns=[]),
                                                        "selective")])
def test_the_activation_checkpoint_config_is_read_by_its_fields(ac, mode):
    assert _row(_log(_config(ac)))["recipe"]["recompute"] == mode


def test_memory_budget_checkpointing_is_refused():
    with pytest.raises(CommbenchError, match=r"MemoryBudgetAC \(memory_budget=0.5\).*allowed: full, selective"):
        _row(_log(_config(dict(BASE_AC, memory_budget=0.5))))


FLOAT8_EXPERTS = "Converted GroupedExperts to use dynamic float8 rowwise quantization with scaled grouped GEMMs"
MXFP8_EXPERTS = "Converted GroupedExperts to use dynamic mxfp8_rceil quantization with scaled grouped GEMMs"


@pytest.mark.parametrize("lines, precision", [
    (["Float8 training active with recipe rowwise", FLOAT8_EXPERTS], "FP8"),
    (["Converted Linear layers to MXFP8Linear", MXFP8_EXPERTS], "MXFP8")])
def test_the_converters_log_lines_name_the_precision(lines, precision):
    assert _row(_log(_config(), extra="\n".join(PREFIX + line for line in lines)))["precision"] == precision


@pytest.mark.parametrize("lines, named", [
    (["Float8 training active with recipe rowwise", "Swapped to Float8Linear layers"],
     "['Float8LinearConverter'] train the MoE model's Linear layers in FP8 and leave its grouped experts in BF16"),
    (["Float8 training active with recipe tensorwise"], "leave its grouped experts in BF16"),
    (["Converted Linear layers to MXFP8Linear"],
     "['MXFP8LinearConverter'] train the MoE model's Linear layers in MXFP8 and leave its grouped experts in BF16"),
    ([MXFP8_EXPERTS], "train the MoE model's grouped experts in MXFP8 and leave its Linear layers in BF16"),
    (["Converted Linear layers to NVFP4Linear"], "Linear layers in NVFP4 and leave its grouped experts in BF16")])
def test_a_moe_run_whose_experts_stay_bf16_is_refused_not_priced_at_low_precision(lines, named):
    """Float8LinearConverter converts nn.Linear only (components/quantization/float8.py:53); the experts are
    Float8GroupedExpertsConverter's, which logs its own line: without it they train in BF16."""
    with pytest.raises(CommbenchError, match=re.escape(named)):
        _row(_log(_config(), extra="\n".join(PREFIX + line for line in lines)))


def test_the_mesh_line_is_checked_against_gpus():
    with pytest.raises(CommbenchError, match="--gpus 32.*holds 16 GPU"):
        _row(_log(_config()), num_gpus=32)


def test_a_log_without_a_config_names_the_0_3_0_flag():
    text = _log(_config()).replace("Running with configs:", "Something else:")
    with pytest.raises(CommbenchError, match=r"--debug\.print_config \(0\.3\.0\)"):
        _row(text)


@pytest.mark.parametrize("microbatch, mbs", [(1, 1), (4, 4), (16, 16)])
def test_a_pipeline_run_s_micro_batch_is_pipeline_parallel_microbatch_size(microbatch, mbs):
    # trainer.py: local_batch_size // pipeline_parallel_microbatch_size micro-batches a step
    config = _config(pipeline_parallel_degree=2, pipeline_parallel_microbatch_size=microbatch)
    config["training"]["local_batch_size"] = 16
    row = _row(_log(config, mesh="pp=2, dp_replicate=1, dp_shard=8, cp=1, tp=1, ep=8"))
    assert (row["pp"], row["mbs"], row["gbs"]) == (2, mbs, 128)


def test_a_micro_batch_size_that_does_not_divide_or_a_multi_stage_schedule_is_refused():
    config = _config(pipeline_parallel_degree=2, pipeline_parallel_microbatch_size=3)
    with pytest.raises(CommbenchError, match="pipeline_parallel_microbatch_size=3 does not divide"):
        _row(_log(config, mesh="pp=2, dp_replicate=1, dp_shard=8, cp=1, tp=1, ep=8"))
    config = _config(pipeline_parallel_degree=2)
    config["parallelism"]["pipeline_parallel_schedule"] = "Interleaved1F1B"
    with pytest.raises(CommbenchError, match="pipeline_parallel_schedule='Interleaved1F1B'.*allowed: 1F1B, GPipe"):
        _row(_log(config, mesh="pp=2, dp_replicate=1, dp_shard=8, cp=1, tp=1, ep=8"))


def test_fsdp_without_resharding_after_forward_is_refused():
    # reshard_after_forward=False gathers the parameters once a step; the step model's FSDP gathers them twice
    with pytest.raises(CommbenchError, match="fsdp_reshard_after_forward='never', which the step model does not "
                                             "price.*allowed: default, always"):
        _row(_log(_config(fsdp_reshard_after_forward="never")))
    assert _row(_log(_config(fsdp_reshard_after_forward="always")))["num_gpus"] == 16


def test_a_torchtitan_0_2_expert_tensor_parallel_degree_is_read():
    config = _config(tensor_parallel_degree=2, expert_tensor_parallel_degree=2)
    assert _row(_log(config, mesh="pp=1, dp_replicate=1, dp_shard=8, cp=1, tp=2, ep=8"))["etp"] == 2


def _block(heads: int = 32, kv: int | None = 4, experts: int | None = 128, top_k: int = 8) -> dict:
    """One transformer block as 0.3.0's model.to_dict() prints it (the fields the check reads)."""
    moe = {"num_experts": experts, "router": {"num_experts": experts, "top_k": top_k}} if experts else None
    return {"attention": {"n_heads": heads, "n_kv_heads": kv, "dim": 2048}, "feed_forward": None, "moe": moe}


@pytest.mark.parametrize("printed, named", [
    ({"dim": 4096, "vocab_size": 151936, "layers": [_block()] * 48}, r"model_spec.model.dim=4096.*has 2048"),
    ({"dim": 2048, "vocab_size": 151936, "layers": [_block()] * 24}, r"layers \(count\)=24.*has 48"),
    ({"dim": 2048, "vocab_size": 151936, "layers": [_block(kv=8)] * 48}, r"attention.n_kv_heads=8.*has 4"),
    ({"dim": 2048, "vocab_size": 151936, "layers": [_block(experts=64)] * 48}, r"moe.num_experts=64.*has 128"),
    ({"dim": 2048, "vocab_size": 151936, "layers": [_block(top_k=4)] * 48}, r"moe.router.top_k=4.*has 8"),
    ({"dim": 2048, "vocab_size": 128256, "layers": [_block()] * 48}, r"vocab_size=128256.*has 151936"),
    ({"dim": 2048, "vocab_size": 151936, "layers": [_block(experts=None)] * 48}, r"moe.num_experts=0.*has 128"),
])
def test_a_0_3_0_model_config_of_other_sizes_than_model_is_refused(printed, named):
    """trainer.py to_dict prints model_spec.model (the model config's to_dict): a flavor name the zoo does not
    know (a user's own) is checked by the sizes it prints, as a Megatron-LM log's arguments are."""
    config = _config()
    config["model_spec"] = {"name": "qwen3", "flavor": "my_flavor", "model": printed}
    with pytest.raises(CommbenchError, match=named):
        _row(_log(config))
    config["model_spec"]["model"] = {"dim": 2048, "vocab_size": 151936, "layers": [_block()] * 48}
    assert _row(_log(config))["num_gpus"] == 16   # the sizes of qwen3-30b-a3b: read


def test_a_0_3_0_model_spec_of_another_shipped_flavor_is_refused():
    config = _config(expert_parallel_degree=1)
    config["model_spec"] = {"name": "llama3", "flavor": "70B", "model": {"dim": 8192}}
    text = _log(config, mesh="pp=1, dp_replicate=1, dp_shard=16, cp=1, tp=1, ep=1")
    with pytest.raises(CommbenchError, match="name='llama3' flavor='70B', TorchTitan's llama3.1-70b, but --model is "
                                             "qwen3-next-80b-a3b"):
        parse_torchtitan_log(text, source="t.log", model="qwen3-next-80b-a3b", gpu="h100-hgx", num_gpus=None)


@pytest.mark.parametrize("disable, graph", [(True, "none"), (False, "full")])
def test_disable_cuda_graphs_is_read_as_the_row_s_cuda_graph(disable, graph):
    """0.3.0 graphs the whole forward-backward unless training.disable_cuda_graphs (config/configs.py, default False;
    trainer.py wrap_with_cuda_graph), as emit/torchtitan.py maps cuda_graph=full; it was read as no graphs."""
    config = _config(expert_parallel_degree=1)
    config["training"]["disable_cuda_graphs"] = disable
    row = _row(_log(config, mesh="pp=1, dp_replicate=1, dp_shard=16, cp=1, tp=1, ep=1"))
    assert row["recipe"]["cuda_graph"] == graph


def test_a_non_bool_disable_cuda_graphs_is_one_line():
    config = _config()
    config["training"]["disable_cuda_graphs"] = "no"
    with pytest.raises(CommbenchError, match=r"training.disable_cuda_graphs='no'; allowed: true or false"):
        _row(_log(config))


def test_a_model_spec_that_is_not_a_dict_is_one_line():
    config = _config()
    config["model_spec"] = "qwen3"
    with pytest.raises(CommbenchError, match="model_spec = 'qwen3'; allowed: a dict"):
        _row(_log(config))
