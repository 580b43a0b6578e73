"""`commbench calibrate` on rows of published tables nobody has shown it yet (newer releases, other spellings):
each row is modelled (saying whose recipe stood in) or listed as not modelled with the field and value that
stop it, or refused in one line; never a traceback, and an unreadable row never changes a fit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.calibrate.published import precision_of, published_runs

ROWS = json.loads((Path(__file__).parents[1] / "benchmarks" / "data" / "newer-release-runs.json").read_text())


def _row(model: str = "DeepSeekV3", gpu: str = "DGX-GB300", release: str = "26.08", **changes) -> dict:
    row = next(r for r in ROWS if r["model"] == model and r["gpu"] == gpu and r["release"] == release)
    return dict(row, **changes)


def _evaluate(tmp_path, rows: list[dict], *args: str):
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(rows))
    return CliRunner().invoke(app, ["calibrate", "--evaluate", str(path), *args], env={"COLUMNS": "400"})


@pytest.mark.parametrize("precision", [8, 8.0, True, ["FP8"], {"format": "fp8"}])
def test_precision_that_is_not_text_is_one_line(tmp_path, precision):
    result = _evaluate(tmp_path, [_row(precision=precision), _row("Qwen3_30B_a3B", "DGX-GB200")])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "field 'precision'" in result.output and len(result.output.strip().splitlines()) == 1, result.output
