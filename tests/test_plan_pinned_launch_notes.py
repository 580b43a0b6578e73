"""plan --layout <every structure field> -O DIR (a Megatron plan) wrote torchtitan_args.txt and said none of the
TorchTitan section's notes (what that launch trains otherwise: no CUDA graphs, the alltoall dispatcher, ...): they
were only in plan.json (found by an outside probe). The terminal now lists them, and the Megatron section's notes."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app


def test_a_pinned_plan_written_to_a_folder_lists_both_launches_notes(tmp_path):
    out = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "gb300-nvl72", "--gpus", "32",
                                   "--layout", "tp=1,pp=2,vp=2,ep=8,mbs=1,recompute=selective", "-O", str(tmp_path)],
                             env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    doc = json.loads((tmp_path / "plan.json").read_text())
    titan, meg = doc["torchtitan"]["notes"], doc["megatron"].get("notes", [])
    assert titan and (tmp_path / "torchtitan_args.txt").exists()
    assert "TorchTitan 0.3.0 launch (torchtitan_args.txt" in out.output
    said = " ".join(out.output.split())   # notes are prose, wrapped to the terminal (a long one even at 400 columns)
    for note in titan:
        assert " ".join(f"note: {note}".split()) in said
    for note in meg:
        assert " ".join(f"Megatron-LM note: {note}".split()) in said
