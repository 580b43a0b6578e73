"""`commbench emulate` runs as every rank only a command that starts ranks (bench, sweep, tune, verify-plan) or env
(probe BS F3): a nested `emulate -- emulate -- bench` started a fabric per rank (16 gloo ranks on 2 cores, past the
8-rank limit emulate itself refuses, 4 results files each reading like a clean run), and fit/plan/report ran once
per rank. Both are refused in one line naming what emulate runs, before any namespace is made."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app


@pytest.mark.parametrize("command,why", [
    (["emulate", "--", "bench", "all_reduce", "-e", "64", "-n", "1", "-w", "0"], "emulate inside emulate"),
    (["fit", "good.jsonl", "-O", "efit.json"], "it starts no ranks"),
    (["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8"], "it starts no ranks"),
    (["report", "r.jsonl"], "it starts no ranks"),
    (["commbench", "compare", "a.jsonl", "b.jsonl"], "it starts no ranks"),
    (["ls"], "not a commbench command"),
])
def test_a_command_that_starts_no_ranks_is_refused(command, why, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["emulate", "--", *command], env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: command=") and why in lines[0], result.output
    assert "bench, sweep, tune, verify-plan, env" in lines[0] and "emulated fabric" not in result.output
    assert not list(tmp_path.iterdir())
