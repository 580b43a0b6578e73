"""A TorchTitan 0.2.2 launch runs no CUDA graph and sequence parallel whenever TP is on: its TOML has neither 0.3.0
option (training.disable_cuda_graphs, parallelism.enable_sequence_parallel).

Probe P4 (session 45): `plan --model llama3.1-70b --system b200-hgx --gpus 48 --framework torchtitan --precision bf16
--layout fsdp_replicas=2 --torchtitan-version 0.2` picked cuda_graph=full, charged its memory reserve, and wrote a TOML
identical to cuda_graph=none's; a pin of it was accepted. Now the 0.2 search fixes both fields at what 0.2.2 runs, a
pin of another value is refused in one line naming 0.3.0, and a Megatron plan's 0.2 section says what its launch runs.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.emit.torchtitan import torchtitan_plan
from commbench.planner.layout.spec import Layout
from commbench.planner.models.zoo import load_model

SEVENTY_B = ["--model", "llama3.1-70b", "--system", "b200-hgx", "--gpus", "48", "--framework", "torchtitan",
             "--precision", "bf16", "--torchtitan-version", "0.2"]


def _one_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip() and not line.startswith("note:")]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    return lines[0]


def test_the_0_2_search_picks_no_cuda_graph(tmp_path):
    result = CliRunner().invoke(app, ["plan", *SEVENTY_B, "--layout", "fsdp_replicas=2", "-O", str(tmp_path)])
    assert result.exit_code == 0, result.output
    layout = json.loads((tmp_path / "plan.json").read_text())["layout"]
    assert layout["cuda_graph"] == "none" and layout["sequence_parallel"] is True


def test_a_pin_of_a_0_3_only_option_is_refused_naming_0_3_0():
    line = _one_line(CliRunner().invoke(app, ["plan", *SEVENTY_B, "--layout", "fsdp_replicas=2,cuda_graph=full"]))
    assert line.startswith("error: cuda_graph=full is invalid with --torchtitan-version 0.2") and "0.3.0" in line
    line = _one_line(CliRunner().invoke(app, ["plan", *SEVENTY_B, "--layout", "tp=4,sequence_parallel=false"]))
    assert line.startswith("error: sequence_parallel=false is invalid with --torchtitan-version 0.2"), line


def test_a_megatron_layouts_0_2_section_says_what_its_launch_runs():
    model = load_model("llama3.1-70b")
    layout = Layout(tp=4, pp=1, dp=16, mbs=1, gbs=64, precision="bf16", cuda_graph="full", sequence_parallel=False,
                    fsdp=True)
    notes = " ".join(torchtitan_plan(layout, model, version="0.2")["notes"])
    assert "the launch runs cuda_graph=none; the prediction assumed cuda_graph=full" in notes
    assert "the launch runs sequence_parallel=true; the prediction assumed sequence_parallel=false" in notes
