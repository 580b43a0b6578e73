"""A default `commbench tune` cut short (Ctrl-C) has no sweep file to resume: `tune --results`, `report` and `fit` told
the user '`commbench sweep ... --resume` into the same file measures them', but the built-in sweep is no file
(`commbench sweep tune-builtin` is refused: 'sweep file ... does not exist'). They now say how to measure it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commbench.results.records import read_records
from commbench.results.resumed import sweeps_cut_short

COMPARE = Path(__file__).parent / "data" / "compare"


def _cut(tmp_path: Path, argv: list[str]) -> list:
    records = [json.loads(line) for line in (COMPARE / "gloo_all_reduce_b.jsonl").read_text().splitlines()]
    num_points = sum(1 for r in records if r.get("record_type") != "header")
    for r in records:
        if r.get("record_type") == "header":
            r.update(argv=argv, sweep_identity="0123456789ab", planned_points=num_points + 3)
    path = tmp_path / "tune-sweep.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return read_records([path])


def test_a_default_tune_cut_short_is_not_told_to_resume_a_sweep_file(tmp_path):
    [line] = sweeps_cut_short(_cut(tmp_path, ["/usr/bin/commbench", "tune", "-O", "results/tune"]))
    assert "cut short, 3 not in the file" in line
    assert "commbench sweep ... --resume" not in line and "`commbench tune`" in line and "built-in sweep" in line


@pytest.mark.parametrize("argv", [["/usr/bin/commbench", "tune", "--sweep", "s.toml"],
                                  ["/usr/bin/commbench", "tune", "--sweep=s.toml"],
                                  ["/usr/bin/commbench", "sweep", "s.toml"]])
def test_a_sweep_file_cut_short_is_resumed_with_sweep(tmp_path, argv):
    [line] = sweeps_cut_short(_cut(tmp_path, argv))
    assert "`commbench sweep ... --resume` into the same file measures them" in line
