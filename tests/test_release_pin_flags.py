"""A --layout pin whose Megatron-LM flags the release's own parse_args refuses is refused in one line (exit 2), as a
pin outside the release's recipes is: the plan said launch true beside release.refused_flags naming the flag.

Probe EJ: `plan --model llama3-8b --system h100-hgx --gpus 8 --software 25.09 --layout pp=1,cpu_offload_layers=4`
wrote --cpu-offloading-num-layers 4, an option 25.09 (core_v0.14.0) and 25.11 (0d8e0714) have not; `--model kimi-k2
--system gb300-nvl72 --gpus 256 --software 25.09 --layout recompute=mla_up_proj,cuda_graph=layer` wrote
--cuda-graph-scope attn moe_router moe_preprocess, which 25.09 takes as one value (core_v0.14.0 arguments.py:1296):
'unrecognized arguments'. The search already leaves such features out for a launch (release_spelled_features)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

LLAMA = ("--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8", "--precision", "bf16")
KIMI = ("--model", "kimi-k2", "--system", "gb300-nvl72", "--gpus", "256")


def _run(*args: str):
    return CliRunner().invoke(app, ["plan", *args], env={"COLUMNS": "2000"})


@pytest.mark.parametrize("release", ["25.09", "25.11"])
def test_an_offload_pin_where_the_release_has_no_offload_flag_is_one_line(release):
    res = _run(*LLAMA, "--software", release, "--layout", "pp=1,cpu_offload_layers=4")
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert "--layout cpu_offload_layers=4" in res.output and f"release {release}" in res.output
    assert "--cpu-offloading-num-layers 4 (no such option)" in res.output and "26.02" in res.output


def test_the_same_pin_at_a_release_with_the_flag_launches():
    res = _run(*LLAMA, "--software", "26.02", "--layout", "pp=1,cpu_offload_layers=4", "--json")
    assert res.exit_code == 0, res.output
    meg = json.loads(res.stdout)["megatron"]
    assert meg["launch"] and meg["release"]["refused_flags"] == []
    assert "--cpu-offloading-num-layers" in meg["args"]


def test_a_graph_pin_over_a_scope_25_09_cannot_parse_is_one_line():
    res = _run(*KIMI, "--software", "25.09", "--layout", "recompute=mla_up_proj,cuda_graph=layer")
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert "--layout cuda_graph=layer (scope attn+moe_router+moe_preprocess" in res.output
    assert "--cuda-graph-scope attn moe_router moe_preprocess (takes one value" in res.output


def test_a_graph_pin_over_a_scope_25_09_parses_launches():
    res = _run(*KIMI, "--software", "25.09", "--layout", "recompute=mla_up_proj,cuda_graph=layer,cuda_graph_scope=attn",
               "--json")
    assert res.exit_code == 0, res.output
    meg = json.loads(res.stdout)["megatron"]
    assert meg["launch"] and meg["release"]["refused_flags"] == []


def test_tune_refuses_the_pin_before_its_sweep(tmp_path):
    res = CliRunner().invoke(app, ["tune", *LLAMA, "--software", "25.09", "--layout", "pp=1,cpu_offload_layers=4",
                                   "--out", str(tmp_path / "t")], env={"COLUMNS": "2000"})
    assert res.exit_code == 2 and "--cpu-offloading-num-layers 4 (no such option)" in res.output, res.output
    assert not (tmp_path / "t").exists()
