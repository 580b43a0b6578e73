"""Appending only ever extends a commbench results file: anything else (a text file, reached directly or
through a symlink, a device) is refused in one line and left byte for byte as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

DATA = Path(__file__).resolve().parent / "data"
VICTIM = b"line one\nlast line without a newline"


def commands(target: str) -> list[list[str]]:
    return [
        ["bench", "all_reduce", "-b", "8", "-e", "8", "--backend", "gloo", "-J", target],
        ["sweep", "ci-small", "-O", target, "--resume"],
        ["import", "nccl-tests", str(DATA / "nccl-tests" / "all_reduce_perf-2018.log"), "-O", target],
    ]


@pytest.mark.parametrize("index", [0, 1, 2])
@pytest.mark.parametrize("via_symlink", [False, True])
def test_appending_to_a_file_that_is_not_results_is_refused_and_it_stays_intact(tmp_path, index, via_symlink):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)
    target = victim
    if via_symlink:
        target = tmp_path / "link.jsonl"
        target.symlink_to(victim)
    result = CliRunner().invoke(app, commands(str(target))[index])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "is not a commbench results file" in errors[0], result.output
    assert victim.read_bytes() == VICTIM


@pytest.mark.parametrize("index", [0, 1, 2])
def test_a_device_is_refused_before_any_rank_starts(index):
    result = CliRunner().invoke(app, commands("/dev/full")[index])
    assert result.exit_code == 2, result.output
    assert "'/dev/full' is not a regular file" in result.output


def test_import_appends_to_its_own_results_after_a_torn_line(tmp_path):
    out = tmp_path / "r.jsonl"
    log = str(DATA / "nccl-tests" / "all_reduce_perf-2018.log")
    first = CliRunner().invoke(app, ["import", "nccl-tests", log, "-O", str(out)])
    assert first.exit_code == 0, first.output
    whole = out.read_bytes()
    out.write_bytes(whole + b'{"record_type":"measu')  # a kill mid-line
    again = CliRunner().invoke(app, ["import", "nccl-tests", log, "-O", str(out)])
    assert again.exit_code == 0, again.output
    import json

    lines = out.read_bytes().splitlines()
    assert out.read_bytes().startswith(whole) and len(lines) == 2 * len(whole.splitlines())
    assert all(json.loads(line)["record_type"] in ("header", "measurement") for line in lines)
