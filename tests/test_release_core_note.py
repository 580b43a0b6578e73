"""A plan whose --software release runs another megatron-core than the one its Megatron-LM arguments are checked
against (core_v0.16.1) says so: 25.09's core 0.14 has no --cuda-graph-impl and takes one --cuda-graph-scope value,
so a line for 0.16.1 pasted into that container fails in its parse_args."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.layout.recipes import core_version, releases


def _plan(*args: str) -> dict:
    res = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "8", "--json",
                                   *args], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def _assumptions(*args: str) -> list[str]:
    return _plan(*args)["assumptions"]


def _core_notes(notes: list[str]) -> list[str]:
    return [n for n in notes if "Megatron-LM arguments are core_v0.16.1's" in n]


@pytest.mark.parametrize("release", releases())
def test_every_release_whose_core_is_not_0_16_is_named_with_its_core(release):
    notes = _core_notes(_assumptions("--software", release))
    if core_version(release) == (0, 16):
        assert notes == []
    else:
        assert len(notes) == 1 and f"release {release}" in notes[0] and "megatron-core 0." in notes[0]


def test_a_pinned_plan_says_it_too():
    notes = _core_notes(_assumptions("--software", "25.09", "--layout", "tp=1,pp=1,ep=8,mbs=4,cuda_graph=layer"))
    assert len(notes) == 1 and "megatron-core 0.14" in notes[0]


def test_a_release_asked_for_says_it_beside_the_launch_and_the_default_among_the_assumptions():
    asked = _plan("--software", "25.09")
    assert len(_core_notes(asked["megatron"]["notes"])) == 1
    default = _plan()
    assert _core_notes(default["megatron"]["notes"]) == []
    assert len(_core_notes(default["assumptions"])) == (core_version(releases()[-1]) != (0, 16))
