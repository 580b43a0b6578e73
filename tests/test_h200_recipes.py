"""probe M finding 3: `plan --system h200-hgx` read every GPU's recipes (recipes.json has no H200 recipe), so H200 plans
took Blackwell features no Hopper recipe runs (per-layer CUDA graphs at FP8, the flex dispatcher, CPU offloading) while
the plan said "release 26.08's performance recipes on H200". H200 now reads the H100 recipes' features (same Hopper
software, compute capability 9.0) and the plan says so; a GPU with neither recipes nor a stand-in (H800) says it read
every GPU's recipes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.data.reference import recipes_json
from commbench.planner.layout.recipes import release_features


def _plan(*args: str) -> dict:
    result = CliRunner().invoke(app, ["plan", *args, "--top", "1", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_h200_reads_the_h100_recipes_features():
    assert "h200" not in {r["gpu"] for r in recipes_json()["recipes"]}
    for precision in ("fp8", "bf16"):
        assert release_features("26.08", "h200", precision) == release_features("26.08", "h100", precision)
    assert release_features("26.08", "h200", "fp8")["cuda_graph"] == {"none"}     # no H100 FP8 recipe runs graphs
    assert release_features("26.08", "h200", "fp8")["cpu_offload"] == {False}     # only Blackwell recipes offload
    assert release_features("26.08", "h200") != release_features("26.08")         # not every GPU's


def test_an_h200_plan_takes_what_the_h100_plan_takes_and_says_whose_recipes():
    common = ["--model", "qwen3-235b-a22b", "--gpus", "256", "--precision", "fp8", "--layout", "pp=8,vp=3"]
    h200, h100 = _plan("--system", "h200-hgx", *common), _plan("--system", "h100-hgx", *common)
    for doc in (h200, h100):
        args = doc["megatron"]["args"]
        assert "--cuda-graph-impl" not in args
        assert args[args.index("--moe-token-dispatcher-type") + 1] == "alltoall"
    software = next(line for line in h200["explanation"] if line.startswith("Software:"))
    assert "on H100, standing in for H200" in software
    assert "No Megatron-Bridge performance recipe runs on H200" in software


def test_an_h200_fsdp_plan_does_not_offload_like_blackwell_recipes():
    doc = _plan("--model", "llama3.1-70b", "--system", "h200-hgx", "--gpus", "64", "--precision", "fp8",
                "--layout", "fsdp=true,cp=2,tp=1")
    assert "--cpu-offloading-num-layers" not in doc["megatron"]["args"]


def test_an_h200_pin_is_checked_against_the_h100_recipes():
    from commbench.errors import CommbenchError
    from commbench.planner.layout.recipes import check_pins_in_release
    with pytest.raises(CommbenchError, match=r"cuda_graph=layer: .*release 26.08 on H200 at FP8.*H100's stand in"):
        check_pins_in_release({"cuda_graph": "layer"}, "26.08", "h200-hgx", "fp8")


def test_a_gpu_without_recipes_or_stand_in_says_it_read_every_gpus():
    doc = _plan("--model", "qwen3-235b-a22b", "--system", "h800-hgx", "--gpus", "256", "--precision", "fp8")
    software = next(line for line in doc["explanation"] if line.startswith("Software:"))
    assert "runs on H800 and none stands in for it: the features searched are every GPU's recipes'" in software
