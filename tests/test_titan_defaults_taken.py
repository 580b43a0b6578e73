"""A pinned plan's "Defaults taken" / defaults_taken describe the launch the plan emits for its framework (probe AI,
session 35): a `--framework torchtitan` plan said `cuda_graph=full (adds --no-check-for-nan-in-loss-and-grad)`,
`fsdp=true (adds --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params --ckpt-format
fsdp_dtensor)` and "Megatron-LM's --expert-tensor-parallel-size default", none of which its TorchTitan launch has.
Every flag an entry says it adds is in that framework's emitted arguments, and a TorchTitan plan's reasons are
TorchTitan 0.3.0's."""

from __future__ import annotations

import json
import shlex

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.emit.torchtitan import torchtitan_args
from commbench.planner.search.pinned_gap import INPUT_FIELDS

PLANS = {
    "llama3-8b": ["plan", "--model", "llama3-8b", "--system", "gb300-nvl72", "--gpus", "8", "--precision", "bf16",
                  "--layout", "tp=1,pp=1,vp=1,ep=1,mbs=1"],
    "qwen3-30b-a3b": ["plan", "--model", "qwen3-30b-a3b", "--system", "gb300-nvl72", "--gpus", "16", "--precision",
                      "bf16", "--layout", "tp=1,pp=1,vp=1,ep=16,mbs=8"],
}


def _plan(name: str, framework: str) -> dict:
    out = CliRunner().invoke(app, PLANS[name] + ["--framework", framework, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def _added(entry: dict) -> list[str]:
    """The flags an entry says the default adds (the text before its parenthesis, as the Defaults line prints it)."""
    return [t for t in shlex.split(entry["implies"].split(" (")[0]) if t.startswith("--")] if "implies" in entry else []


@pytest.mark.parametrize("name", sorted(PLANS))
def test_a_torchtitan_plan_s_defaults_are_what_its_torchtitan_launch_runs(name):
    doc = _plan(name, "torchtitan")
    launch = torchtitan_args(doc["torchtitan"])
    taken = doc["defaults_taken"]
    assert taken
    for entry in taken:   # the layout's fields (the inputs' defaults may come from Megatron-Bridge's recipes)
        assert entry["field"] in INPUT_FIELDS or "Megatron" not in entry["why"] + entry.get("implies", ""), entry
        for flag in _added(entry):
            assert flag in launch, (entry, launch)
    fields = {e["field"]: e for e in taken}
    assert fields["fsdp"]["value"] is True and _added(fields["fsdp"]) == ["--parallelism.fsdp_reshard_after_forward"]
    assert "TorchTitan 0.3.0" in fields["recompute"]["why"]
    if name == "llama3-8b":   # pp = 1, ep = 1: the whole-step graph TorchTitan 0.3.0 runs
        assert fields["cuda_graph"]["value"] == "full" and _added(fields["cuda_graph"]) == \
            ["--training.no_disable_cuda_graphs"]
    else:                     # its MoE experts over EP alone (models/common/moe_sharding.py)
        assert fields["etp"]["value"] == 1 and "moe_sharding.py" in fields["etp"]["why"]
    text = CliRunner().invoke(app, PLANS[name] + ["--framework", "torchtitan"], env={"COLUMNS": "400"})
    assert text.exit_code == 0, text.output
    line = next(x for x in text.stdout.splitlines() if x.startswith("Defaults taken"))
    assert "--no-check-for-nan-in-loss-and-grad" not in line and "--use-megatron-fsdp" not in line, line


def test_a_megatron_plan_s_defaults_still_add_megatron_s_flags():
    doc = _plan("llama3-8b", "megatron")
    added = [flag for entry in doc["defaults_taken"] for flag in _added(entry)]
    assert added == ["--no-check-for-nan-in-loss-and-grad"], doc["defaults_taken"]
    assert all(flag in doc["megatron_args"] for flag in added)
    assert "Megatron-LM's --expert-tensor-parallel-size default" in \
        next(e for e in _plan("qwen3-30b-a3b", "megatron")["defaults_taken"] if e["field"] == "etp")["why"]


def test_a_torchtitan_search_says_the_overlaps_torchtitan_runs():
    out = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "gb300-nvl72", "--gpus", "8",
                                   "--precision", "bf16", "--framework", "torchtitan", "--top", "1", "--json"])
    assert out.exit_code == 0, out.output
    said = [a for a in json.loads(out.stdout)["assumptions"] if a.startswith("overlaps ")]
    assert said == ["overlaps as TorchTitan 0.3.0 runs them: FSDP2's gathers and reduce-scatters overlapped, TP "
                    "(async TP off) and the EP all-to-all not (they never lengthen a step in the model)"]
