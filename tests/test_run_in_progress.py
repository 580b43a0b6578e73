"""A results file a commbench run is still writing (it holds the file's OutputLock) is a run in progress, not a run
cut short: `compare` refused nothing and failed it as cut short (a gate failing a run that has not ended), `report`
called it cut short. Now compare refuses to judge it (one line naming the writer, exit 2) and report says the
file is in progress."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from commbench.cli.app import app
from tests.test_compare_appended_cut_short import SIZES, _run
from tests.test_compare import write

HOLD = ("import fcntl, sys, time\nh = open(sys.argv[1], 'a')\nfcntl.flock(h.fileno(), fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\ntime.sleep(120)\n")


def _writer(path):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_file_being_written_is_not_judged_as_cut_short(tmp_path):
    base = write(tmp_path / "base.jsonl", _run("b", SIZES, 3))
    new = write(tmp_path / "new.jsonl", _run("n", SIZES[:2], 4))   # 2 of 4 planned points written so far
    writer = _writer(new)
    try:
        gate = CliRunner().invoke(app, ["compare", str(base), str(new)])
        assert gate.exit_code == 2, gate.output
        assert f"NEW={str(new)!r} is still being written by PID {writer.pid}" in " ".join(gate.output.split())
        report = CliRunner().invoke(app, ["report", str(new), "-O", str(tmp_path / "rep")], env={"COLUMNS": "250"})
        assert report.exit_code == 0, report.output
        said = " ".join(report.output.split())
        assert f"in progress: {new} is being written by PID {writer.pid}" in said and "cut short or still running" in said
    finally:
        writer.kill()
        writer.wait()
    # the run ended without writing the rest: now it is cut short, judged and failed as such
    ended = CliRunner().invoke(app, ["compare", str(base), str(new)])
    assert ended.exit_code == 1 and "cut short" in ended.output and "still being written" not in ended.output, ended.output
