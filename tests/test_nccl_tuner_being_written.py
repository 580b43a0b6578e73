"""`nccl-tuner` refuses a results file a commbench run is still writing (it holds the file's OutputLock), as
compare, fit and tune --results do (files.refuse_being_written): it read the points written so far as the whole
run, so a size whose NCCL default was not yet measured read as "not measured", and a rule could stand where the
rest of the run shows NCCL's default faster."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.records import JsonlWriter
from tests.test_nccl_tuner import DEFAULT, RING_LL, _header, _record

HOLD = ("import fcntl, sys, time\nh = open(sys.argv[1], 'a')\nfcntl.flock(h.fileno(), fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\ntime.sleep(120)\n")


def test_a_results_file_being_written_is_refused(tmp_path):
    """A commbench run still writing the file (it holds its OutputLock): its points not yet written would read as
    not measured, and a rule could stand where the rest of the run shows NCCL's default faster. One line, exit 2,
    as compare, fit and tune --results refuse it (files.refuse_being_written)."""
    path = tmp_path / "running.jsonl"
    with JsonlWriter(path) as writer:
        writer.write(_header("a", ["h"] * 4))
        for record in [_record("a", size, combo, us) for size in (1024, 4096)
                       for combo, us in ((DEFAULT, 100.0), (RING_LL, 60.0))]:
            writer.write(record)
    writer_process = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer_process.stdout.readline().strip() == "locked"
        conf = tmp_path / "c.conf"
        result = CliRunner().invoke(app, ["nccl-tuner", str(path), "-O", str(conf)], env={"COLUMNS": "300"})
        said = " ".join(result.output.split())
        assert result.exit_code == 2, said
        assert f"is still being written by PID {writer_process.pid}" in said and "Traceback" not in said, said
        assert not conf.exists()
    finally:
        writer_process.kill()
        writer_process.wait()
    result = CliRunner().invoke(app, ["nccl-tuner", str(path), "-O", str(tmp_path / "c.conf")])
    assert result.exit_code == 0, result.output   # the run has ended: its file is read
