"""An empty output path is refused in one line by every writer, never replaced by a generated default name
(probe BS F1): `bench -O ''` / `-J ''` and `sweep -O ''` wrote results/<name>-<time>.jsonl, `emulate --counters-out
''` wrote nothing and said nothing, and `sweep --resume` without -O re-measured the whole sweep into a new file (its
default name has a time and a random suffix, so there is never an earlier file to continue). files.py's rule
(refuse_empty_path) is the one of fit, report, plan, tune, import, nccl-tuner and calibrate."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

SWEEP = str(Path(__file__).resolve().parents[1] / "sweeps" / "ci-small.toml")
runner = CliRunner()


def one_line(*args: str) -> str:
    result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize("args", [
    ("bench", "all_reduce", "--nproc", "2", "-e", "64", "-n", "1", "-w", "0", "-O", ""),
    ("bench", "all_reduce", "--nproc", "2", "-e", "64", "-n", "1", "-w", "0", "-J", " "),
    ("sweep", SWEEP, "-O", ""),
    ("sweep", SWEEP, "-O", "", "--resume"),
    ("sweep", SWEEP, "-O", "", "--dry-run"),
    ("emulate", "--counters-out", "", "--", "bench", "all_reduce", "-e", "64", "-n", "1", "-w", "0"),
], ids=["bench-O", "bench-J", "sweep", "sweep-resume", "sweep-dry-run", "emulate-counters"])
def test_an_empty_output_path_is_refused_and_nothing_is_written(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = one_line(*args)
    assert "is empty: give a file path (an unset shell variable?)" in line, line
    assert "--out=" in line or "--counters-out=" in line, line
    assert not list(tmp_path.rglob("*")), list(tmp_path.rglob("*"))


@pytest.mark.parametrize("dry_run", [False, True])
def test_resume_without_out_is_refused(dry_run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = one_line("sweep", SWEEP, "--resume", *(["--dry-run"] if dry_run else []))
    assert "--resume needs -O/--out" in line, line
    assert not list(tmp_path.rglob("*")), list(tmp_path.rglob("*"))
