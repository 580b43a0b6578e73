"""The plan's headline names the CUDA graph the plan launches (probe P4: 'TP1 ... recompute=none alltoall' while
layout.cuda_graph was 'layer' and megatron_args held --cuda-graph-impl transformer_engine --cuda-graph-scope attn
moe_router moe_preprocess). All figures predicted."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app

PLAN = ["plan", "--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "16", "--gbs", "256",
        "--precision", "bf16", "--software", "25.11"]
LAYOUT = "tp=1,pp=1,ep=8,mbs=1,recompute=none"


def _headline(layout: str) -> tuple[str, list[str]]:
    text = CliRunner().invoke(app, PLAN + ["--layout", layout], env={"COLUMNS": "400"})
    assert text.exit_code == 0, text.output
    doc = CliRunner().invoke(app, PLAN + ["--layout", layout, "--json"])
    assert doc.exit_code == 0, doc.output
    line = next(x for x in text.stdout.splitlines() if x.startswith("Plan (predicted): "))
    return line.split(" at ")[0], json.loads(doc.stdout)["megatron_args"]


def test_the_headline_names_the_graph_and_its_scope_as_launched():
    head, args = _headline(LAYOUT + ",cuda_graph=layer")   # the recipes' scope for an MoE model
    assert head.endswith(" cuda_graph=layer(attn+moe_router+moe_preprocess)"), head
    at = args.index("--cuda-graph-scope")
    assert args[at + 1:at + 4] == ["attn", "moe_router", "moe_preprocess"], args
    head, args = _headline(LAYOUT + ",cuda_graph=layer,cuda_graph_scope=moe_router+moe_preprocess")
    assert head.endswith(" cuda_graph=layer(moe_router+moe_preprocess)"), head
    head, args = _headline(LAYOUT + ",cuda_graph=none")
    assert "cuda_graph" not in head and "--cuda-graph-impl" not in args, (head, args)
