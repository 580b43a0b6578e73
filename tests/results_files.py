"""Results files and CLI calls as the gate/staleness tests write and make them (one copy, not one per test file)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from commbench.cli.app import app

COMPARE = Path(__file__).parent / "data" / "compare"   # stored gloo runs of the compare/staleness tests


def invoke(*args: str):
    """`commbench ARGS` in-process, wide enough that no message wraps."""
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)
