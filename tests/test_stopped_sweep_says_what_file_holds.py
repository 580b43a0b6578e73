"""A sweep stopped after its last point was recorded said 'continue with: ... --resume' for a file holding every
planned point (the suggested --resume answers 'nothing to do'), and a launcher signalled after an error line said
'its output is complete' of a file holding 3 of 26 points (probe BQ F3): the closing line says what the file holds,
complete only when every planned point is there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import Interrupted
from commbench.sweep.resume import holds_every_planned_point

REPO = Path(__file__).resolve().parent.parent
SWEEP = """[sweep]
name = "allin"
backend = "gloo"
[defaults]
iters = 2
warmup_iters = 0
[[run]]
collective = "all_reduce"
sizes = [8, 16]
"""


def _interrupted_after(after_points: bool):
    """run_job that stops (as the launcher does on SIGTERM) after every point was recorded, or before any."""
    from commbench.comm import job

    real = job.run_job

    def run_job(*args, **kwargs):
        if after_points:
            real(*args, **kwargs)
        raise Interrupted(f"interrupted (SIGTERM): 0 point(s) kept in {kwargs['output_path']}", signal="SIGTERM")

    return run_job


def _stopped_sweep(tmp_path, monkeypatch, after_points: bool):
    """(spec, output, the closing output flattened, exit code) of a sweep its launcher stops after or before its
    points."""
    from commbench.comm import job

    spec = tmp_path / "allin.toml"
    spec.write_text(SWEEP)
    output = tmp_path / "allin.jsonl"
    monkeypatch.setattr(job, "run_job", _interrupted_after(after_points))
    result = CliRunner().invoke(app, ["sweep", str(spec), "-O", str(output), "--nproc", "1"])
    return spec, output, " ".join(result.output.split()), result.exit_code


def test_a_sweep_stopped_after_its_last_point_says_the_file_holds_every_point(tmp_path, monkeypatch):
    spec, output, said, exit_code = _stopped_sweep(tmp_path, monkeypatch, True)
    assert exit_code == 130, said
    assert f"every planned point (2) is in {output}: nothing is left for --resume" in said, said
    assert "continue with" not in said
    # what it says is what --resume finds
    monkeypatch.undo()
    again = CliRunner().invoke(app, ["sweep", str(spec), "-O", str(output), "--nproc", "1", "--resume"])
    assert again.exit_code == 0 and "nothing to do" in again.output, again.output


def test_a_sweep_stopped_before_its_points_says_continue_with_resume(tmp_path, monkeypatch):
    _, _, said, exit_code = _stopped_sweep(tmp_path, monkeypatch, False)
    assert exit_code == 130 and "continue with: commbench sweep" in said and "--resume" in said, said
    assert "nothing is left" not in said


def test_a_resume_stopped_after_the_last_point_counts_the_earlier_launch(tmp_path, monkeypatch):
    from commbench.comm import job

    spec = tmp_path / "allin.toml"
    spec.write_text(SWEEP)
    output = tmp_path / "allin.jsonl"
    assert CliRunner().invoke(app, ["sweep", str(spec), "-O", str(output), "--nproc", "1"]).exit_code == 0
    output.write_text("".join(output.read_text().splitlines(keepends=True)[:-1]))   # 1 of the 2 points
    assert holds_every_planned_point(output) is None
    monkeypatch.setattr(job, "run_job", _interrupted_after(True))
    result = CliRunner().invoke(app, ["sweep", str(spec), "-O", str(output), "--nproc", "1", "--resume"])
    said = " ".join(result.output.split())
    assert result.exit_code == 130 and f"every planned point (2) is in {output}" in said, said
    assert holds_every_planned_point(output) == 2
    assert sum(json.loads(line)["record_type"] == "header" for line in output.read_text().splitlines()) == 2


LATE_SIGNAL = """
import os, signal, sys
from commbench.comm.stop_signals import exit_on_stop, hold_stops, release_stops
hold_stops(); release_stops()
code = int(sys.argv[1])
exit_on_stop(code)              # the command has printed its last line
os.kill(os.getpid(), signal.SIGTERM)   # the batch system's signal to the launcher, after its ranks'
import time; time.sleep(5)
sys.exit(code)
"""


@pytest.mark.parametrize("code", [0, 1, 130])
def test_a_signal_after_the_command_finished_claims_nothing_of_its_files(code):
    # 'its output is complete' followed '... continue with: ... --resume' after 3 of 26 points (probe BQ F1 trial a)
    done = subprocess.run([sys.executable, "-c", LATE_SIGNAL, str(code)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == code, (done.returncode, done.stderr)
    assert "complete" not in done.stderr
    if code == 130:   # the interrupted command's own line said what was kept
        assert done.stderr == ""
    else:
        assert done.stderr == (f"interrupted (SIGTERM) after the command finished (exit {code}): nothing was cut "
                               "short; the lines above say what it did\n")
