"""predict with neither or both of --fabric/--system printed `--fabric/--system=None is invalid` or one of the two
values at random (probe BS F6): the line says which is missing, or names both values."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from commbench.cli.app import app


def _line(*args: str) -> str:
    result = CliRunner().invoke(app, ["predict", "-c", "all_reduce", "-g", "8", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    return result.output.strip()


def test_neither_says_give_one(tmp_path):
    line = _line()
    assert line == "error: --fabric/--system is missing: give one of --fabric FILE or --system PRESET", line


def test_both_names_both(tmp_path):
    fab = tmp_path / "fab.json"
    fab.write_text("{}")
    line = _line("--fabric", str(fab), "--system", "h100-hgx")
    assert f"--fabric={str(fab)!r} and --system='h100-hgx' conflict" in line and "None" not in line, line
