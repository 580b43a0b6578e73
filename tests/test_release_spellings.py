"""A plan for a release whose Megatron-LM spells a flag otherwise writes that release's own spelling, and the search
does not pick a feature whose flag the release has no spelling for (probe CH F2): `--software 25.09` picked the flex
dispatcher with DeepEP and emitted `--moe-flex-dispatcher-backend deepep`, which core_v0.14.0's parse_args refuses,
while that release selects DeepEP with `--moe-enable-deepep` (core_v0.14.0 arguments.py:2873-2874); its note only said
to "change those flags by hand". Likewise --cuda-graph-impl transformer_engine / local are --external-cuda-graph /
--enable-cuda-graph there (core_v0.16.1 arguments.py:442-454 reads the old spellings as the new; only the first is
written: 0.14's local graphs refuse recompute), and
--cpu-offloading-num-layers has no spelling in 25.09 or 25.11 (commbench/data/megatron-release-flags.json)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.layout.release_flags import refused_flags, release_args, release_takes

runner = CliRunner()
MIXTRAL = ["--model", "hf:tests/data/hf/Mixtral-8x7B-v0.1", "--system", "h100-hgx", "--gpus", "32"]


def _plan(*args: str) -> dict:
    res = runner.invoke(app, ["plan", *args, "--json"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_a_25_09_moe_plan_on_hopper_writes_deepep_as_that_release_spells_it():
    doc = _plan(*MIXTRAL, "--software", "25.09")
    args = doc["megatron_args"]
    assert doc["layout"]["dispatcher"] == "flex"
    assert "--moe-flex-dispatcher-backend" not in args and "--moe-enable-deepep" in args
    assert args[args.index("--moe-token-dispatcher-type") + 1] == "flex"
    assert doc["megatron"]["release"]["refused_flags"] == []
    note = [n for n in doc["megatron"]["notes"] if "Megatron-LM arguments are core_v0.16.1's" in n]
    assert len(note) == 1 and "--moe-enable-deepep" in note[0] and "arguments.py:2873" in note[0], note
    assert "change those flags by hand" not in note[0]


def test_the_same_plan_for_a_release_with_the_new_flag_keeps_it():
    args = _plan(*MIXTRAL, "--software", "26.02.01", "--layout", "dispatcher=flex,ep=8")["megatron_args"]
    assert "--moe-enable-deepep" not in args


def test_the_translation_rule():
    deepep = ["--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend", "deepep"]
    assert release_args(deepep, "25.09") == ["--moe-token-dispatcher-type", "flex", "--moe-enable-deepep"]
    assert release_args(deepep, "25.11") == deepep and release_args(deepep, "26.08") == deepep
    assert release_args(["--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", "attn"], "25.09") == \
        ["--external-cuda-graph", "--cuda-graph-scope", "attn"]
    # core_v0.14.0's local graphs (--enable-cuda-graph) refuse any recompute (transformer_config.py:1267-1271), which
    # core_v0.16.1's full-iteration graph takes: not respelled, so the search picks no full-iteration graph for 25.09
    full = ["--cuda-graph-impl", "local", "--cuda-graph-scope", "full_iteration"]
    assert release_args(full, "25.09") == full and not release_takes(full, "25.09")
    # HybridEP has no 25.09 spelling: left as it is, and named refused
    hybrid = ["--moe-flex-dispatcher-backend", "hybridep"]
    assert release_args(hybrid, "25.09") == hybrid and refused_flags(hybrid, "25.09")
    assert release_takes(deepep, "25.09") and not release_takes(hybrid, "25.09")
    assert not release_takes(["--cpu-offloading-num-layers", "4"], "25.11")
    assert not release_takes(["--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", "attn", "moe_router"],
                             "25.09")


def test_the_search_picks_no_feature_whose_flag_the_release_cannot_spell():
    """Every searched plan for 25.09 and 25.11 (MoE and dense, Hopper and Blackwell) names no refused flag."""
    for model, system, gpus, extra in (("hf:tests/data/hf/Mixtral-8x7B-v0.1", "h100-hgx", 32, ()),
                                       ("qwen3-30b-a3b", "b200-hgx", 16, ()),   # per-layer graphs over the router
                                       ("llama3-8b", "b200-hgx", 16, ()),       # over attn + mlp
                                       ("qwen3-30b-a3b", "gb200-nvl72", 72, ()),
                                       # the FSDP recipes offload activations (--cpu-offloading-num-layers)
                                       ("llama3.1-70b", "gb200-nvl72", 64, ("--layout", "fsdp=true,tp=1,pp=1",
                                                                            "--precision", "fp8"))):
        for release in ("25.09", "25.11"):
            doc = _plan("--model", model, "--system", system, "--gpus", str(gpus), "--software", release, *extra)
            assert doc["megatron"]["release"]["refused_flags"] == [], (model, system, release, doc["megatron_args"])


def test_verify_plan_reads_the_release_spelling_back():
    from commbench.planner.emit.plan import load_plan  # noqa: F401  (the plan reads back as its layout)
    from commbench.workflows.verify import plan_context
    doc = _plan(*MIXTRAL, "--software", "25.09")
    assert not [f for f in plan_context(doc).flags if "edited" in f], plan_context(doc).flags
