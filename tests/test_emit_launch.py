"""What a launch needs beyond the arguments: launch.env, per-emitter target versions in plan.json, the
TorchTitan 0.2 TOML (keys checked against torchtitan 0.2.2's JobConfig, reproduced), refusals, CLI."""

from __future__ import annotations

import dataclasses
import json
import shlex

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.planner import Layout, load_model
from commbench.planner.emit.plan import megatron_section, megatron_text, torchtitan_text
from commbench.planner.emit.megatron import launch_env, launch_env_text, megatron_args, precision_notes
from commbench.planner.emit.torchtitan import torchtitan_plan, torchtitan_toml

# torchtitan 0.2.2 torchtitan/config/job_config.py: the fields of the sections the emitter writes (reproduced).
JOB_CONFIG_022 = {
    "model": {"name", "flavor", "hf_assets_path", "tokenizer_path", "converters", "print_after_conversion"},
    "training": {"dataset", "dataset_path", "local_batch_size", "global_batch_size", "seq_len", "max_norm", "steps",
                 "enable_cpu_offload", "dtype", "mixed_precision_param", "mixed_precision_reduce", "gc_freq",
                 "gc_debug", "dataloader"},
    "parallelism": {"data_parallel_replicate_degree", "data_parallel_shard_degree", "fsdp_reshard_after_forward",
                    "tensor_parallel_degree", "disable_loss_parallel", "enable_async_tensor_parallel",
                    "pipeline_parallel_degree", "module_fqns_per_model_part",
                    "pipeline_parallel_first_stage_less_layers", "pipeline_parallel_last_stage_less_layers",
                    "pipeline_parallel_layers_per_stage", "pipeline_parallel_schedule", "pipeline_parallel_schedule_csv",
                    "pipeline_parallel_microbatch_size", "pipeline_parallel_expert_parallel_overlap",
                    "context_parallel_degree", "context_parallel_load_balancer", "context_parallel_rotate_method",
                    "expert_parallel_degree", "expert_tensor_parallel_degree", "expert_parallel_comm_backend"},
    "activation_checkpoint": {"mode", "selective_ac_option", "per_op_sac_force_recompute_mm_shapes_by_fqns",
                              "early_stop", "memory_budget", "visualize_memory_budget_pareto", "preserve_rng_state",
                              "determinism_check", "debug"},
}
CONVERTERS_022 = {"quantize.linear.float8", "quantize.grouped_mm.float8", "quantize.linear.mx", "quantize.grouped_mm.mx"}
DSV3 = load_model("deepseek-v3")
# torchtitan 0.2.2's deepseek_v3 671B as it builds (RMSNorm eps 1e-5, models/deepseek_v3/model/args.py:62): DeepSeek-V3's
# 1e-6 is refused at 0.2, whose TOML cannot set it
DSV3_02 = dataclasses.replace(DSV3, architecture=dataclasses.replace(DSV3.architecture, norm_epsilon=1e-5))


def test_hopper_with_tp_needs_one_cuda_connection_blackwell_does_not():
    lay = Layout(tp=2, pp=1, dp=4, gbs=64)
    assert launch_env(lay, "h100") == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    # Blackwell has no requirement of 1 (arguments.py:929): Megatron-Bridge's 32 (tests/test_launch_connections.py)
    assert launch_env(lay, "gb300") == {"CUDA_DEVICE_MAX_CONNECTIONS": "32"}
    assert launch_env(Layout(tp=1, cp=2, dp=4, gbs=64), "h200") == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    text = launch_env_text(launch_env(lay, "h100"), gpu_name="h100", fabric_name="h100-hgx")
    lines = [x for x in text.splitlines() if x and not x.startswith("#")]
    assert lines == ["CUDA_DEVICE_MAX_CONNECTIONS=1"] and "NCCL_" in text


def test_mxfp8_gathers_params_in_mxfp8_or_says_megatron_warns():
    lay = Layout(tp=1, pp=2, vp=8, ep=32, etp=1, dp=128, gbs=4096, precision="mxfp8")
    args = megatron_args(lay, DSV3)
    assert args[args.index("--fp8-recipe") + 1] == "mxfp8" and "--reuse-grad-buf-for-mxfp8-param-ag" in args
    plain = Layout(tp=1, pp=2, vp=8, ep=32, etp=1, dp=128, gbs=4096, precision="mxfp8", distributed_optimizer=False,
                   dp_overlap=False)
    assert "--fp8-param-gather" not in megatron_args(plain, DSV3)
    assert "additional GPU memory" in precision_notes(plain)[0]


def test_ep_overlap_megatron_refuses_is_refused_in_one_line():
    lay = Layout(tp=1, pp=4, vp=1, ep=32, etp=1, dp=64, gbs=4096, moe_a2a_overlap=True)
    with pytest.raises(CommbenchError, match="vp > 1 when pp > 1"):
        megatron_args(lay, DSV3)
    graphs = Layout(tp=1, pp=4, vp=4, ep=32, etp=1, dp=64, gbs=4096, moe_a2a_overlap=True, cuda_graph="full")
    section = megatron_section(graphs, DSV3, gpu_name="gb300", fabric_name="gb300-nvl72", domain_size=72)
    assert "full-iteration graph" in section["refused"] and "args" not in section   # the plan says why
    with pytest.raises(CommbenchError, match="full-iteration"):
        megatron_text(section)


def test_torchtitan_02_toml_uses_only_job_config_fields_and_the_quantization_converters():
    # mxfp8: 0.2.2's fp8 experts converter refuses pipeline parallelism (tests/test_torchtitan_02_refusals.py)
    lay = Layout(tp=1, pp=2, vp=8, ep=32, etp=1, dp=128, mbs=1, gbs=4096, precision="mxfp8", recompute="selective")
    doc = torchtitan_plan(lay, DSV3_02, version="0.2")
    assert doc["version"] == "0.2.2"
    parsed = tomllib.loads(torchtitan_toml(doc))
    for section, fields in JOB_CONFIG_022.items():
        assert set(parsed.get(section, {})) <= fields, section
    assert parsed["model"] == {"name": "deepseek_v3", "flavor": "671B",
                               "converters": ["quantize.linear.mx", "quantize.grouped_mm.mx"]}
    assert set(parsed["model"]["converters"]) <= CONVERTERS_022
    assert parsed["quantize"]["grouped_mm"]["mx"]["fqns"] == ["experts"]
    stages = parsed["parallelism"]["module_fqns_per_model_part"]
    assert len(stages) == 16 and stages[0][0] == "tok_embeddings" and stages[-1][-2:] == ["norm", "output"]
    assert parsed["training"]["local_batch_size"] // parsed["parallelism"]["pipeline_parallel_microbatch_size"] == \
        lay.num_microbatches


def test_torchtitan_refuses_what_it_cannot_run_in_one_line():
    piped = Layout(tp=1, pp=4, vp=12, ep=16, etp=1, dp=64, gbs=2048)
    # qwen3: no pipelining_fn in 0.2 (qwen3-30b-a3b: its flavor's RoPE is the model's; 235B-A22B's is refused for that)
    assert "cannot pipeline" in torchtitan_plan(piped, load_model("qwen3-30b-a3b"), version="0.2")["refused"]
    mixtral = torchtitan_plan(Layout(tp=2, ep=8, etp=1, dp=32, gbs=512), load_model("mixtral-8x7b"))
    # its MoE layers are qwen3's but for the q/k norm (what the nearest family builds otherwise is named: probe J6)
    assert mixtral["refused"] == ("TorchTitan 0.3.0 has no mixtral-8x7b model; its qwen3 MoE layers (models/qwen3/"
                                  "__init__.py _build_qwen3_moe_layers: every layer MoE, no shared expert) build it "
                                  "otherwise: architecture.qk_norm False (the flavor: True)")
    with pytest.raises(CommbenchError, match="mixtral"):
        torchtitan_text(mixtral)
    etp = torchtitan_plan(Layout(tp=2, ep=8, etp=2, dp=32, gbs=512), load_model("qwen3-30b-a3b"))
    assert "etp = 1" in etp["refused"]


def test_cli_writes_launch_files_and_refuses_bad_torchtitan_input(tmp_path):
    runner = CliRunner()
    base = ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8", "--gbs", "64",
            "--layout", "tp=2,pp=1,mbs=1"]
    res = runner.invoke(app, base + ["--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["emitters"]["torchtitan"] == "0.3.0" and plan["torchtitan"]["version"] == "0.3.0"
    assert "CUDA_DEVICE_MAX_CONNECTIONS=1" in (tmp_path / "launch.env").read_text().splitlines()
    assert any("launch.env" in a and "CUDA_DEVICE_MAX_CONNECTIONS=1" in a for a in plan["assumptions"])
    argv = shlex.split((tmp_path / "torchtitan_args.txt").read_text())
    # H100's default precision is fp8; TorchTitan ships no fp8 Llama 3 8B config: the plan writes one
    assert plan["inputs"]["precision"] == "fp8"
    assert argv[:4] == ["--module", "commbench_torchtitan", "--config", "llama3_8b_fp8"]
    assert "Float8LinearConverter" in (tmp_path / "commbench_torchtitan.py").read_text()
    # torchtitan 0.2.2's llama3 8B is Llama 3.1's (x8 RoPE scaling) and its TOML sets no RoPE: refused, not launched
    toml = runner.invoke(app, base + ["--emit", "torchtitan", "--torchtitan-version", "0.2"])
    assert toml.exit_code == 2 and len(toml.output.strip().splitlines()) == 1, toml.output
    assert "RoPE scaling llama3 (the model: none)" in toml.output and "--torchtitan-version 0.3" in toml.output
    toml = runner.invoke(app, ["plan", "--model", "llama3.1-70b", "--system", "h100-hgx", "--gpus", "32", "--gbs", "64",
                               "--layout", "tp=8,pp=1,mbs=1", "--emit", "torchtitan", "--torchtitan-version", "0.2"])
    assert toml.exit_code == 0 and 'flavor = "70B"' in toml.output, toml.output
    bad = runner.invoke(app, base + ["--torchtitan-version", "0.4"])
    assert bad.exit_code == 2 and "--torchtitan-version" in bad.output and "Traceback" not in bad.output
    refused = runner.invoke(app, ["plan", "--model", "mixtral-8x7b", "--system", "h100-hgx", "--gpus", "64",
                                  "--gbs", "512", "--emit", "torchtitan"])
    assert refused.exit_code == 2 and "no mixtral-8x7b model" in refused.output


@pytest.mark.parametrize("recompute", ["none", "selective", "full", "mla_up_proj", "moe_act"])
def test_torchtitan_02_activation_checkpoint_mode_is_one_torchtitan_reads(recompute):
    """plan --emit torchtitan --torchtitan-version 0.2 (the README's example) wrote mode = "mla_up_proj" for the
    default DeepSeek-V3 plan; torchtitan 0.2.2's ActivationCheckpoint.mode is Literal["selective", "full",
    "memory_budget", "none"], so TorchTitan refused the file. A Megatron light-module recompute now gets op-level
    selective AC, with a note saying what the prediction assumed."""
    lay = Layout(tp=1, pp=2, vp=8, ep=32, etp=1, dp=128, mbs=1, gbs=4096, precision="mxfp8", recompute=recompute)
    doc = torchtitan_plan(lay, DSV3_02, version="0.2")
    ac = tomllib.loads(torchtitan_toml(doc))["activation_checkpoint"]
    assert ac["mode"] in {"selective", "full", "memory_budget", "none"} and set(ac) <= JOB_CONFIG_022["activation_checkpoint"]
    stood_in = [n for n in doc["notes"] if "activation checkpointing" in n and f"recompute={recompute}" in n]
    if recompute in ("mla_up_proj", "moe_act"):
        assert ac == {"mode": "selective", "selective_ac_option": "op"} and len(stood_in) == 1, doc["notes"]
    else:   # selective is op-level, as 0.3.0's SelectiveAC (0.2.2's default option "2": every second layer whole)
        assert ac == {"mode": recompute} | ({"selective_ac_option": "op"} if recompute == "selective" else {}) \
            and not stood_in


@pytest.mark.parametrize("pins, fsdp", [("tp=1,pp=1,mbs=1", True), ("tp=1,pp=2,vp=1,fsdp=false,mbs=1", False)])
def test_a_torchtitan_plan_states_the_dp_charge_of_its_own_layout(pins, fsdp, tmp_path):
    """Every TorchTitan plan said "FSDP's per-micro-batch parameter re-gathers ... are not charged", while an FSDP row
    charges them every micro-batch (step/evaluate.py -> step/fsdp.py fsdp_sync_s: 2 gathers a micro-batch); found
    from outside. The assumption now states the charge of the plan's own layout."""
    result = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8",
                                      "--framework", "torchtitan", "--layout", pins, "-O", str(tmp_path)],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["layout"]["fsdp"] is fsdp
    said = [a for a in plan["assumptions"] if "DP communication" in a]
    assert len(said) == 1 and "not charged" not in said[0], said
    assert ("every micro-batch" in said[0]) is fsdp and ("once per step" in said[0]) is not fsdp, said


def test_plan_says_launch_env_only_where_it_writes_one(tmp_path):
    """The README's `plan --model gpt-oss-120b ... --framework torchtitan -O plan/` printed 'launch.env: (nothing
    needed)' while Megatron refuses the model and no launch.env is written (at 26.02.01, whose Megatron-LM cannot build
    gpt-oss, so it predicts it with no launch; 26.08's builds it)."""
    result = CliRunner().invoke(app, ["plan", "--model", "gpt-oss-120b", "--system", "gb200-nvl72", "--gpus", "64", "--precision", "fp8",
                                      "--framework", "torchtitan", "--software", "26.02.01", "-O", str(tmp_path)],
                                env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "launch.env").exists() and "megatron-core 0.16.1) cannot launch gpt-oss-120b" in result.output
    assert "launch.env" not in result.output, result.output
    result = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8",
                                      "-O", str(tmp_path / "dense")], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and (tmp_path / "dense" / "launch.env").exists()
    assert any(line.startswith("launch.env: ") for line in result.output.splitlines()), result.output
