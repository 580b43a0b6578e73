"""25.11's TransformerConfig refusal of a CUDA graph over a recomputed module, read off the flags a plan WRITES (no
Megatron-LM tree needed; tests/test_megatron_release_trees.py runs the same plans through 25.11's tree).

Probe EJ ran `plan --model kimi-k2 (deepseek-v3 likewise) --system gb200-nvl72 --gpus 512 --software 25.11`, whose
megatron_args.txt held --recompute-modules mla_up_proj with --cuda-graph-scope attn moe_router moe_preprocess (the
layout's scope '' : the recipes' scope, as the emitter writes it) and launch true; 25.11's Megatron-LM 0d8e0714
raises "attn cuda graph is not supported with mla_up_proj recompute." (transformer_config.py:1593-1596). The rule
here is written against the argv itself, not the layout fields the planner reasons with."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.layout.release_flags import argv_values
from commbench.planner.search.graph_recompute import SCOPED_PAIRS


def written_conflicts(argv: list[str]) -> list[tuple[str, str]]:
    """(graphed, recomputed) pairs of 0d8e0714's block (graph_recompute.SCOPED_PAIRS) that the written flags hold:
    --cuda-graph-scope as written (a per-layer TE graph with no scope flag captures the whole layer), the modules of
    --recompute-modules."""
    flags = dict(argv_values(argv))
    graphed = "--cuda-graph-impl" in flags and flags["--cuda-graph-impl"] == ["transformer_engine"] \
        or "--external-cuda-graph" in flags
    if not graphed or "--recompute-modules" not in flags:
        return []
    scope = flags.get("--cuda-graph-scope")
    recomputed = set(flags["--recompute-modules"])
    if not scope:   # the whole layer: 25.11 refuses any recompute under it
        return [("the whole layer", " ".join(sorted(recomputed)))]
    return [(g, r) for g, r in SCOPED_PAIRS if g in scope and r in recomputed]


def test_the_rule_reads_the_written_scope():
    written = ["--recompute-modules", "mla_up_proj", "--cuda-graph-impl", "transformer_engine",
               "--cuda-graph-scope", "attn", "moe_router", "moe_preprocess"]
    assert written_conflicts(written) == [("attn", "mla_up_proj")]
    assert written_conflicts(["--recompute-modules", "mla_up_proj", "--cuda-graph-impl", "transformer_engine",
                              "--cuda-graph-scope", "moe_router", "moe_preprocess"]) == []


@pytest.mark.parametrize("model,system,gpus", [("kimi-k2", "gb200-nvl72", 512), ("deepseek-v3", "gb200-nvl72", 512),
                                               ("deepseek-v3", "gb200-nvl72", 128)])
def test_a_25_11_plan_writes_no_graph_over_a_module_it_recomputes(model, system, gpus, tmp_path):
    out = tmp_path / "p"
    res = CliRunner().invoke(app, ["plan", "--model", model, "--system", system, "--gpus", str(gpus),
                                   "--software", "25.11", "-O", str(out)])
    assert res.exit_code == 0, res.output
    section = json.loads((out / "plan.json").read_text())["megatron"]
    written = (out / "megatron_args.txt").read_text().split()
    assert section["launch"] and written_conflicts(written) == [] and written_conflicts(section["args"]) == [], \
        " ".join(written)
