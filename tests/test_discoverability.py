"""Discoverability (issue 29, item 4): --version, bare `commbench` shows help (exit 0, no error line),
`plan --help` lists the zoo, the --layout keys are never cut at common widths."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from commbench import __version__
from commbench.cli.app import app
from commbench.planner.layout.spec import BOOL_FIELDS, CODE_FIELDS, COUNT_FIELDS, INT_FIELDS
from commbench.planner.models.zoo import model_names


def cli(*args: str, columns: int = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS=str(columns))
    return subprocess.run([sys.executable, "-m", "commbench", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_version_and_bare_command():
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith(f"commbench {__version__}")
    bare = cli()
    assert bare.returncode == 0 and "Usage: commbench" in bare.stdout and "error" not in bare.stderr
    assert "plan" in bare.stdout and "--version" in bare.stdout


@pytest.mark.parametrize("columns", [80, 120, 250])
def test_plan_help_lists_the_zoo_and_every_layout_key_uncut(columns):
    result = CliRunner().invoke(app, ["plan", "--help"], env={"COLUMNS": str(columns)}, terminal_width=columns)
    assert result.exit_code == 0
    assert "…" not in result.output
    text = " ".join(result.output.replace("│", " ").split())
    for name in model_names():
        assert name in text
    for key in INT_FIELDS + BOOL_FIELDS + tuple(CODE_FIELDS) + COUNT_FIELDS + ("cuda_graph_scope",):  # parse_pins' keys
        assert key in text, key
    tune = CliRunner().invoke(app, ["tune", "--help"], env={"COLUMNS": str(columns)}, terminal_width=columns)
    assert "…" not in tune.output and "fused_moe" in " ".join(tune.output.replace("│", " ").split())


def test_readme_names_every_shipped_sweep():
    """The README's list of shipped sweeps left out nccl-tuning-node, which `sweep --help` offers."""
    from pathlib import Path

    from commbench.sweep.shipped import shipped_sweeps

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    missing = [name for name in shipped_sweeps() if f"`{name}`" not in text]
    assert not missing, missing


def test_plan_and_tune_describe_the_framework_alike():
    """Probe Q: tune's --framework said TorchTitan runs etp=1, plan's 'etp=tp at ep=1 and 1 with EP' (TorchTitan
    0.3.0 models/common/moe_sharding.py; planner/search/frameworks.py TITAN_ETP): one text now."""
    import typer

    from commbench.planner.search.frameworks import titan_etp
    group = typer.main.get_command(app)
    helps = {name: next(p.help for p in group.commands[name].params if p.name == "framework") for name in ("plan", "tune")}
    assert helps["plan"] == helps["tune"]
    assert "etp=tp at ep=1 and 1 with EP" in helps["tune"]
    assert int(titan_etp(4, 1)) == 4 and int(titan_etp(4, 8)) == 1   # what the text says TorchTitan runs
