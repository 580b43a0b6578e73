"""A plan whose release runs another megatron-core than the one its Megatron-LM arguments are checked against
(core_v0.16.1) says so, and names each emitted flag that release's own parse_args refuses (release_flags, from
commbench/data/megatron-release-flags.json): 25.09's core 0.14 has no --cuda-graph-impl and takes one
--cuda-graph-scope value, so a line for 0.16.1 pasted into that container fails in its parse_args (probe BP F2).
The default release says so too, on the terminal as well as in plan.json, and calls itself the default (F4)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.layout.release_flags import refused_flags, release_core
from commbench.planner.layout.recipes import newest_release, releases


def _run(*args: str):
    res = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "8", *args],
                             env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    return res


def _plan(*args: str) -> dict:
    return json.loads(_run("--json", *args).stdout)


def _core_notes(notes: list[str]) -> list[str]:
    return [n for n in notes if "Megatron-LM arguments are core_v0.16.1's" in n]


@pytest.mark.parametrize("release", releases())
def test_every_release_whose_core_is_not_0_16_1_is_named_with_its_core(release):
    doc = _plan("--software", release)
    notes = _core_notes(doc["assumptions"])
    assert _core_notes(doc["megatron"]["notes"]) == notes   # one note, beside the launch and among the assumptions
    if release_core(release)[1] == "0.16.1":
        assert notes == []
    else:
        assert len(notes) == 1 and f"release {release} (--software)" in notes[0] and "megatron-core 0." in notes[0]
    assert doc["megatron"]["release"]["refused_flags"] == refused_flags(doc["megatron_args"], release)


def test_a_25_09_pin_whose_flags_its_core_refuses_is_refused_in_one_line():
    """Probe EJ: a pinned per-layer graph over the recipes' three-module scope wrote --cuda-graph-scope attn moe_router
    moe_preprocess, which 25.09's parse_args takes as one value (core_v0.14.0 arguments.py:1296), and the plan still
    said launch true. The pin is refused (exit 2, one line naming the field, the flag and the release), as a pin
    outside the release's recipes is; --cuda-graph-impl and deepep are written in 25.09's spelling and pass."""
    args = ("--software", "25.09", "--layout", "tp=1,pp=1,ep=8,mbs=1,cuda_graph=layer,dispatcher=flex")
    res = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "b300-hgx", "--gpus", "8",
                                   "--precision", "mxfp8", *args], env={"COLUMNS": "2000"})
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert "--layout cuda_graph=layer" in res.output and "release 25.09" in res.output
    assert "--cuda-graph-scope attn moe_router moe_preprocess (takes one value" in res.output
    doc = json.loads(CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "b300-hgx", "--gpus",
                                              "8", "--precision", "mxfp8", "--json", "--software", "25.09", "--layout",
                                              "tp=1,pp=1,ep=8,mbs=1,cuda_graph=layer,cuda_graph_scope=attn,"
                                              "dispatcher=flex"]).stdout)
    assert doc["megatron"]["launch"] and doc["megatron"]["release"]["refused_flags"] == []
    assert "--external-cuda-graph" in doc["megatron_args"] and "--moe-enable-deepep" in doc["megatron_args"]


def test_the_note_names_each_flag_a_release_refuses():
    """What a line that will not parse is called, should one reach the note (release_core_note)."""
    from commbench.planner.emit.plan import release_core_note
    args = ["--external-cuda-graph", "--cuda-graph-scope", "attn", "moe_router"]
    note, = release_core_note("25.09", args)
    assert "will not parse" in note and all(f in note for f in refused_flags(args, "25.09"))


def test_the_default_release_is_named_as_the_default_on_the_terminal_too():
    notes = _core_notes(_plan()["assumptions"])
    assert len(notes) == 1 and f"release {newest_release()} (the default release" in notes[0]
    assert "(--software)" not in notes[0]
    res = _run()
    assert "Megatron-LM arguments are core_v0.16.1's" in res.output and "the default release" in res.output


def test_a_pinned_plan_says_it_too():
    notes = _core_notes(_plan("--software", "25.09", "--layout",
                              "tp=1,pp=1,ep=8,mbs=4,cuda_graph=layer,cuda_graph_scope=attn")["assumptions"])
    assert len(notes) == 1 and "megatron-core 0.14" in notes[0] and "--cuda-graph-impl transformer_engine" in notes[0]


def test_the_rule_reads_the_values_too():
    assert refused_flags(["--cuda-graph-scope", "attn"], "25.09") == []
    assert refused_flags(["--cuda-graph-scope", "attn", "moe_router"], "25.09") != []
    assert refused_flags(["--cuda-graph-scope", "moe_router"], "25.09") != []
    assert refused_flags(["--cuda-graph-impl", "local"], "26.08") == []


def test_the_flags_file_and_the_recipe_table_name_one_megatron_core_per_release():
    """tools/megatron_release_flags.py records each release's megatron-core beside its flags; release_core reads the
    version from the recipe table: a regenerated file that disagrees would mean one of them read another tree."""
    from commbench.data.reference import megatron_release_flags_json
    from commbench.planner.layout.recipes import recipes_json_releases
    flags = megatron_release_flags_json()["releases"]
    table = recipes_json_releases()
    assert set(flags) == set(table)
    assert {r: d["megatron_core"] for r, d in flags.items()} == {r: d["megatron_core"]["version"] for r, d in table.items()}
