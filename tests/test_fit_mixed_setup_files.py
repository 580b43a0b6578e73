"""fit's refusal of runs of different setups named run ids only, and a user who typed files could not tell which file
held which run (session 45). The one line now names each run's file beside its id."""

from __future__ import annotations

import dataclasses

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.records import JsonlWriter
from tests.test_fit import SIZES, _header, _record


def _run(path, run_id: str, nccl_version: str) -> str:
    with JsonlWriter(path) as writer:
        writer.write(dataclasses.replace(_header(run_id, world_size=4), nccl_version=nccl_version))
        for size in SIZES[8::2]:
            writer.write(_record("all_reduce", size, 20.0 + size / 1e4, 4, world=4, run_id=run_id))
    return str(path)


def test_fit_refusing_mixed_setups_names_each_file_and_run(tmp_path):
    old, new = _run(tmp_path / "old.jsonl", "run_a", "2.21.5"), _run(tmp_path / "new.jsonl", "run_b", "2.27.3")
    out = CliRunner().invoke(app, ["fit", old, new, "-O", str(tmp_path / "fabric.json")], env={"COLUMNS": "400"})
    assert out.exit_code == 2, out.output
    errors = [line for line in out.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "the results mix NCCL versions" in errors[0], out.output
    assert f"{old} run run_a" in errors[0] and f"{new} run run_b" in errors[0], errors[0]
    assert "Traceback" not in out.output
