"""A pinned layout one rule refuses is refused naming that rule (exit 2, one line), not the rule most rows break.

Probe P4 (session 45), llama3-8b on 64 H100s: `--layout fsdp=true,pp=2` said "no layout ... fits in memory ... up to
65536" (with and without --framework torchtitan) where rule fsdp needs pp=1; under --framework torchtitan
`ep=8,cuda_graph=full` (qwen3-30b-a3b on B200) said "most often broken: expert_fold", `pp=2,cuda_graph=full` "world"
and on H100 both "not in the Megatron-Bridge recipes of release 26.08", where TorchTitan 0.3.0 refuses its graph with
PP > 1 or EP > 1 (trainer.py:179-207); `recompute=none` said "TorchTitan 0.3.0 runs recompute='selective'", though
TorchTitan takes other modes: the launch keeps its config function's (config_registry.py: SelectiveAC).
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app


def _refusal(*args: str) -> str:
    result = CliRunner().invoke(app, ["plan", *args])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    return " ".join(lines[0].split())


EIGHT_B = ("--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "64")


@pytest.mark.parametrize("framework", ["megatron", "torchtitan"])
def test_fsdp_with_pp_names_rule_fsdp(framework):
    line = _refusal(*EIGHT_B, "--framework", framework, "--layout", "fsdp=true,pp=2")
    assert line.startswith("error: fsdp=true with pp=2 is invalid") and "fits in memory" not in line, line
    if framework == "torchtitan":   # what fsdp means there: FSDP2 both ways, how it syncs
        assert "fsdp=false is FSDP2 under PP" in line and "data_parallel_shard_degree" in line
    else:
        assert "layout rule fsdp" in line


@pytest.mark.parametrize("system", ["b200-hgx", "h100-hgx"])
@pytest.mark.parametrize("pin", ["ep=8", "pp=2"])
def test_a_torchtitan_graph_with_ep_or_pp_names_torchtitans_check(system, pin):
    line = _refusal("--model", "qwen3-30b-a3b", "--system", system, "--gpus", "64", "--framework", "torchtitan",
                    "--layout", f"{pin},cuda_graph=full")
    assert line.startswith(f"error: cuda_graph=full with {pin} is invalid with --framework torchtitan"), line
    assert "_validate_cuda_graphs" in line and "Megatron-Bridge" not in line and "most often broken" not in line


def test_a_torchtitan_graph_on_h100_is_torchtitans_to_refuse_not_megatron_bridges(tmp_path):
    """Session 45: `--framework torchtitan --layout cuda_graph=full` on H100 (pp=1, ep=1) was refused as "not in the
    Megatron-Bridge recipes of release 26.08 on H100": NVIDIA's recipes for another framework. TorchTitan 0.3.0
    graphs the whole step by default on any GPU (config/configs.py:66 disable_cuda_graphs=False; trainer.py:179-207
    refuses it only with PP > 1 or EP > 1): the pin is planned and launched with the graph. Megatron keeps the
    recipes' bound."""
    args = ("--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8", "--top", "1", "--layout", "cuda_graph=full")
    result = CliRunner().invoke(app, ["plan", *args, "--framework", "torchtitan", "-O", str(tmp_path)])
    assert result.exit_code == 0 and "Megatron-Bridge recipes of" not in result.output, result.output
    import json
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert doc["layout"]["cuda_graph"] == "full" and doc["layout"]["pp"] == doc["layout"]["ep"] == 1
    assert doc["torchtitan"]["sections"]["training"]["disable_cuda_graphs"] is False
    line = _refusal(*args, "--framework", "megatron")
    assert "not in the Megatron-Bridge recipes of release" in line and "on H100" in line, line
    line = _refusal(*args[:-1], "cuda_graph=full,pp=2", "--framework", "torchtitan")   # TorchTitan's own refusal
    assert "_validate_cuda_graphs" in line and "Megatron-Bridge" not in line, line


def test_a_torchtitan_recompute_pin_says_the_launch_keeps_the_config_functions():
    line = _refusal(*EIGHT_B, "--framework", "torchtitan", "--layout", "recompute=none")
    assert "TorchTitan 0.3.0 runs recompute" not in line
    assert "config function for llama3-8b sets (SelectiveAC" in line and "pin recompute='selective'" in line, line


def test_a_torchtitan_pp_plan_says_its_fsdp_false_is_fsdp2(tmp_path):
    result = CliRunner().invoke(app, ["plan", *EIGHT_B, "--framework", "torchtitan", "--layout", "fsdp=false,pp=2",
                                      "-O", str(tmp_path)])
    assert result.exit_code == 0, result.output
    import json
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert doc["layout"]["fsdp"] is False
    assert doc["torchtitan"]["sections"]["parallelism"]["data_parallel_shard_degree"] > 1
    assert any(n.startswith("FSDP2 under PP (what fsdp=false means with --framework torchtitan)")
               for n in doc["torchtitan"]["notes"]), doc["torchtitan"]["notes"]
