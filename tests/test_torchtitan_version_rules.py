"""A --torchtitan-version 0.2 plan is judged by TorchTitan 0.2.2's rules and its text names 0.2.2 (probe P4, session
46): `plan --framework torchtitan --torchtitan-version 0.2 --model qwen3-30b-a3b --seq-len 65536` was refused citing
"TorchTitan 0.3.0's qwen3-30b-a3b model precomputes RoPE for at most 40960 tokens", where 0.2.2's
Qwen3ModelArgs.update_from_config (torchtitan v0.2.2 models/qwen3/model/args.py:50-56) only warns and sets
max_seq_len = seq_len (its 30B-A3B flavor's own max_seq_len is 262144, models/qwen3/__init__.py); and a 0.2 plan said
"TorchTitan 0.3.0's count", "torchtitan 0.3.0 cannot run it" and that its log prints no MFU (0.2.2's metrics.py:428
logs one at every precision)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.data.reference import gpu_spec
from commbench.planner.emit.logged_mfu import titan_mfu_logged

runner = CliRunner()
QWEN_65K = ["plan", "--framework", "torchtitan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "120",
            "--seq-len", "65536"]


def test_a_02_plan_takes_a_sequence_longer_than_03s_rope_and_names_02_only(tmp_path):
    result = runner.invoke(app, [*QWEN_65K, "--torchtitan-version", "0.2", "-O", str(tmp_path)],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())   # the terminal's wrapping undone
    assert "0.3.0" not in said, [line for line in result.output.splitlines() if "0.3.0" in line]
    text = (tmp_path / "plan.json").read_text()
    assert "0.3.0" not in text, [line for line in text.splitlines() if "0.3.0" in line]
    doc = json.loads(text)
    assert doc["torchtitan"]["version"] == "0.2.2" and doc["framework"]["version"] == "torchtitan 0.2.2"
    assert "seq_len = 65536" in (tmp_path / "torchtitan.toml").read_text()
    assert any("TorchTitan 0.2.2's count" in line for line in doc["assumptions"])
    assert "TorchTitan 0.2.2's count" in said and "torchtitan 0.2.2 cannot run it" in said


def test_03_still_refuses_it_and_points_at_02():
    result = runner.invoke(app, [*QWEN_65K, "--torchtitan-version", "0.3"], env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    assert "precomputes RoPE for at most 40960 tokens" in result.output
    assert "--torchtitan-version 0.2" in result.output


def test_02_logs_an_mfu_at_every_precision_of_its_own_peak_table():
    """torchtitan v0.2.2 tools/utils.py get_peak_flops: B200 2.25 PFLOP/s (also for 'NVIDIA GB200', which holds
    'B200'); no GB300 entry: the A100 fallback, 312 TFLOP/s."""
    b200 = titan_mfu_logged(gpu_spec("b200"), "mxfp8", version="0.2")
    assert "N/A" not in b200 and "2,250 TFLOP/s" in b200 and "2.000x the plan's MFU" in b200, b200
    assert "2,250 TFLOP/s" in titan_mfu_logged(gpu_spec("gb200"), "bf16", version="0.2")
    assert "312 TFLOP/s" in titan_mfu_logged(gpu_spec("gb300"), "bf16", version="0.2")
    assert "N/A" in titan_mfu_logged(gpu_spec("b200"), "mxfp8")   # 0.3.0 logs none for a quantized model


def test_a_02_plan_takes_a_pinned_recompute_its_toml_sets(tmp_path):
    """framework_pins held a 0.2 plan to 0.3.0's config function's AC (qwen3-30b-a3b: FullAC) and refused
    recompute=selective citing 0.3.0, where the 0.2 TOML sets [activation_checkpoint] mode (0.2.2 job_config.py:652);
    selective is op-level there, as 0.3.0's SelectiveAC (0.2.2's default selective_ac_option '2' checkpoints every
    second layer whole)."""
    args = ["plan", "--framework", "torchtitan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "16",
            "--layout", "recompute=selective"]
    result = runner.invoke(app, [*args, "--torchtitan-version", "0.2", "-O", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    toml = (tmp_path / "torchtitan.toml").read_text()
    assert '[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "op"' in toml, toml
    refused = runner.invoke(app, [*args, "--torchtitan-version", "0.3"], env={"COLUMNS": "300"})
    assert refused.exit_code == 2 and "TorchTitan 0.3.0's config function" in refused.output, refused.output


def test_a_02_plan_s_refusals_name_0_2_2():
    base = ["plan", "--framework", "torchtitan", "--torchtitan-version", "0.2", "--model", "qwen3-30b-a3b",
            "--system", "b200-hgx", "--gpus", "16", "--layout"]
    for pin in ("recompute_layers=2", "fused_mlp_offload_min=1"):
        result = runner.invoke(app, [*base, pin], env={"COLUMNS": "300"})
        assert result.exit_code == 2 and "TorchTitan 0.2.2 " in result.output and "0.3.0" not in result.output, \
            result.output
