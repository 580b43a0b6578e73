"""The ranks' rendezvous folder (a FileStore's file in TMPDIR) goes when its run ends, however it ends: 34
`commbench-rdzv-*` folders were left in /tmp by a day of test runs, by launchers killed with SIGKILL (the one
clean-up that cannot run). A killed run's folder goes at the next launch; a live run's is never taken."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from commbench.comm import local_ranks
from commbench.comm.rendezvous_folder import PREFIX, remove_abandoned, rendezvous_folder
from commbench.errors import CommbenchError, Interrupted
from tests.processes import gone_within

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def scratch_tmp(tmp_path, monkeypatch) -> Path:
    """A private TMPDIR for this process and the commands it starts."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _left(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("commbench-r"))


def _rank(rank_env, _arg):
    return rank_env.rank


def _refuse(rank_env, _arg):
    raise CommbenchError("--op='x' is invalid")


def _sleep(rank_env, _arg):
    time.sleep(60)


def _launch(fn, output: Path):
    return local_ranks.launch_local(2, fn, None, backend="gloo", output_path=str(output), timeout_s=10)


def test_a_normal_failed_or_interrupted_launch_leaves_no_folder(scratch_tmp, tmp_path):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    assert _launch(_rank, tmp_path / "ok.jsonl") == {0: 0, 1: 1}
    assert _left(scratch_tmp) == []
    with pytest.raises(CommbenchError):
        _launch(_refuse, tmp_path / "refused.jsonl")
    assert _left(scratch_tmp) == []
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(Interrupted):
            _launch(_sleep, tmp_path / "stopped.jsonl")
    finally:
        timer.cancel()
    assert _left(scratch_tmp) == []


def _rank_pids(proc: subprocess.Popen, output: Path, wait_s: float = 30.0) -> list[int]:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        children = [int(pid) for task in Path(f"/proc/{proc.pid}/task").glob("*/children")
                    for pid in task.read_text().split()]
        if len(children) >= 2 and output.exists() and output.stat().st_size:
            return children
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("ranks did not start")


def _unlocked_within(folder: Path, seconds: float = 10.0) -> bool:
    """True once no process holds the folder's lock: a killed rank's main thread shows as a zombie (gone_within)
    while its other threads (gloo's) still end, holding its files for some ms more on a loaded host."""
    deadline = time.monotonic() + seconds
    while True:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
        finally:
            os.close(fd)
        time.sleep(0.05)


def test_a_killed_launchers_folder_goes_at_the_next_launch(scratch_tmp, tmp_path):
    output = tmp_path / "killed.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "commbench", "bench", "all_reduce", "--nproc", "2", "-b", "8",
                             "-e", "64", "-n", "1000000", "-J", str(output)],
                            env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        pids = _rank_pids(proc, output)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)   # kill -9: no clean-up runs
        proc.wait()
    assert gone_within(pids)
    left = _left(scratch_tmp)
    assert len(left) == 1   # what the kill left
    assert _unlocked_within(scratch_tmp / left[0])
    assert _launch(_rank, tmp_path / "next.jsonl") == {0: 0, 1: 1}
    assert _left(scratch_tmp) == []


def test_a_folder_is_kept_while_any_process_of_its_run_lives(scratch_tmp):
    """The launcher gone (os._exit: no clean-up) but a rank it forked still running: the folder stays until that rank
    ends too. A folder nobody locks goes; an older commbench's `commbench-rdzv-*` (no lock to tell) is left alone."""
    read, write = os.pipe()
    launcher = os.fork()
    if launcher == 0:   # the launcher: a folder, a rank forked from it that outlives it, then gone without clean-up
        try:
            with rendezvous_folder() as folder:
                rank = os.fork()
                if rank == 0:
                    time.sleep(60)
                    os._exit(0)
                os.write(write, f"{rank} {folder}\n".encode())
                os._exit(0)
        finally:
            os._exit(1)
    os.close(write)
    with os.fdopen(read) as pipe:
        rank_pid, folder = pipe.readline().split()
    os.waitpid(launcher, 0)
    abandoned = tempfile.mkdtemp(prefix=PREFIX)
    older = tempfile.mkdtemp(prefix="commbench-rdzv-")
    try:
        assert remove_abandoned(str(scratch_tmp)) == [abandoned]
        assert _left(scratch_tmp) == sorted([Path(folder).name, Path(older).name])
    finally:
        os.kill(int(rank_pid), signal.SIGKILL)
    assert gone_within([int(rank_pid)]) and _unlocked_within(Path(folder))
    with rendezvous_folder() as new:
        assert _left(scratch_tmp) == sorted([Path(new).name, Path(older).name])
    assert _left(scratch_tmp) == [Path(older).name]


def test_a_process_forked_inside_the_block_leaving_it_keeps_the_folder(scratch_tmp):
    """A child forked in the run that unwinds through the block (not os._exit) must not take the run's folder."""
    parent = os.getpid()
    try:
        with rendezvous_folder() as folder:
            child = os.fork()
            if child == 0:
                raise SystemExit   # the child leaves the block
            os.waitpid(child, 0)
            assert os.path.isdir(folder)
    finally:
        if os.getpid() != parent:
            os._exit(0)
    assert _left(scratch_tmp) == []


def test_a_folder_taken_before_it_was_opened_is_made_again(scratch_tmp, monkeypatch):
    """Another launch's remove_abandoned may remove a folder between its mkdtemp and its open (it is unlocked then):
    a loaded suite run saw `bench --nproc 1` end in FileNotFoundError (exit 1). A new folder is made instead."""
    from commbench.comm import rendezvous_folder as rf
    real_open, taken = rf._open_folder, []

    def taken_first(path):
        if not taken:
            taken.append(path)
            os.rmdir(path)   # what the other launch's remove_abandoned does
        return real_open(path)

    monkeypatch.setattr(rf, "_open_folder", taken_first)
    with rendezvous_folder() as path:
        assert os.path.isdir(path) and path != taken[0]
    assert _left(scratch_tmp) == []
