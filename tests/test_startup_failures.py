"""Start-up failures: a rank that never joins is named (not the healthy rank that gave up waiting on
it), in one line with no traceback and no results file claimed; launcher variables are checked
like RANK/WORLD_SIZE; joining an external launch ends at --timeout and at Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from commbench.comm.local_ranks import RunFailed, launch_local
from commbench.comm.stop_signals import STOP_SIGNALS, StopSignal, hold_stops, raise_stop_signal, release_stops

REPO = Path(__file__).resolve().parents[1]


def _stops_before_joining(rank_env, timeout_s):
    from commbench.comm.backends import create_backend

    if rank_env.rank == 1:
        os.kill(os.getpid(), signal.SIGSTOP)
    create_backend("gloo", rank_env, timeout_s).shutdown()
    return "joined"


@pytest.mark.timeout(60)
def test_a_rank_stopped_at_start_is_named_not_the_rank_that_waited(tmp_path, capfd):
    output = tmp_path / "never.jsonl"
    started = time.monotonic()
    with pytest.raises(RunFailed) as caught:
        launch_local(2, _stops_before_joining, 2.0, backend="gloo", output_path=str(output), timeout_s=2.0)
    message = str(caught.value)
    assert message.startswith("rank(s) 1 never joined the job at start-up and were killed; rank(s) 0 gave up waiting")
    assert message.endswith(f"nothing was written to {output}") and "\n" not in message
    assert "Traceback" not in capfd.readouterr().err
    assert time.monotonic() - started < 2.0 + 5 + 10  # timeout + crash grace + slack for a loaded host


def cli(env_extra: dict, *args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_", "RANK", "WORLD_SIZE"))}
    env.update(PYTHONPATH=str(REPO), **env_extra)
    return subprocess.Popen([sys.executable, "-m", "commbench", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


BENCH = ("bench", "all_reduce", "-b", "8", "-e", "8", "--backend", "gloo")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("env,must", [
    ({"SLURM_PROCID": "3", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0"}, "SLURM_PROCID=3 with SLURM_NTASKS=2 is invalid"),
    ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "1"}, "OMPI_COMM_WORLD_RANK=1 with OMPI_COMM_WORLD_SIZE=1"),
    ({"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "2", "SLURM_LOCALID": "-1"}, "SLURM_LOCALID='-1' is invalid"),
    ({"RANK": "0", "WORLD_SIZE": "1" + "0" * 20}, "WORLD_SIZE='1" + "0" * 20 + "' is invalid"),
    ({"RANK": "0", "WORLD_SIZE": "1000000"}, "WORLD_SIZE=1000000 is invalid: allowed 1..131,072"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "70000"}, "MASTER_PORT=70000 is invalid"),
])
def test_launcher_variables_are_checked_in_one_line(tmp_path, env, must):
    proc = cli(env, *BENCH, "-J", str(tmp_path / "r.jsonl"))
    out, err = proc.communicate(timeout=50)
    assert proc.returncode == 2, err
    assert err.strip().splitlines() == [err.strip()] and must in err
    assert not (tmp_path / "r.jsonl").exists()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.timeout(90)
def test_joining_a_launch_with_no_peer_ends_at_the_timeout_in_one_line(tmp_path):
    output = tmp_path / "r.jsonl"
    proc = cli({"RANK": "1", "WORLD_SIZE": "2", "MASTER_PORT": str(_free_port())}, *BENCH, "--timeout", "2",
               "-J", str(output))
    out, err = proc.communicate(timeout=80)
    assert proc.returncode == 1, err
    *notes, line = err.strip().splitlines()   # the one error line, after the waiting note where it waited past 3 s
    assert all(n.startswith("note: waiting for every rank") and "--timeout=2 s" in n for n in notes) and len(notes) <= 1, err
    assert "rendezvous at tcp://127.0.0.1:" in line and "as rank 1 of 2" in line and "--timeout=2 s" in line, err
    assert not output.exists()


ABANDONED_HELPER = """
import os, sys, time
from commbench.comm import rendezvous
from commbench.comm.local_ranks import RunFailed
rendezvous.MARGIN_S = 0.0

def connect():  # torch's store: blocked in C++, then logging its failure to fd 2 after the wait gave up
    time.sleep(0.6)
    os.write(2, b"[c10d] The client socket has timed out\\n")
    time.sleep(60)

try:
    rendezvous.join_within(connect, timeout_s=0.2, where="at tcp://x as rank 1 of 2")
except RunFailed as exc:
    print(f"error: {exc}", file=sys.stderr)
time.sleep(1.0)
rendezvous.exit_if_abandoned(1)
sys.exit(3)
"""


@pytest.mark.timeout(60)
def test_a_rendezvous_helper_left_blocked_neither_logs_under_the_one_line_nor_outlives_the_exit_code():
    """CI saw `terminate called without an active exception` (exit -6) and torch's 40-frame connect log under
    the one-line timeout error: the helper thread was still in C++ when the wait ended and at teardown."""
    proc = subprocess.run([sys.executable, "-c", ABANDONED_HELPER], env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=50)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines() == ["error: rendezvous at tcp://x as rank 1 of 2 did not complete "
                                                "within --timeout=0.2 s (is every rank of the launch running, "
                                                "and MASTER_ADDR/MASTER_PORT right?)"]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_joining_ends_at_once(tmp_path, signum):
    """The default --timeout is 300 s (torch retries the connect for minutes): the signal must not wait."""
    proc = cli({"RANK": "1", "WORLD_SIZE": "2", "MASTER_PORT": str(_free_port())}, *BENCH,
               "-J", str(tmp_path / "r.jsonl"))
    deadline = time.monotonic() + 60
    while os.readlink(f"/proc/{proc.pid}/fd/2") != os.devnull:  # quiet while torch retries the connect
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(1.0)
    proc.send_signal(signum)
    sent = time.monotonic()
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - sent < 15
    assert proc.returncode == 130, err
    name = signal.Signals(signum).name
    # RANK / WORLD_SIZE set by hand, no torchrun variable: the env launch
    assert err.strip() == (f"interrupted ({name}): rank 1 of the env launch stopped; "
                           f"nothing was written to {tmp_path / 'r.jsonl'}")


@pytest.mark.timeout(90)
def test_ctrl_c_on_a_terminal_shows_the_cursor_and_starts_a_new_line(tmp_path):
    """The live view (rank 0) hides the cursor; killed mid-draw it cannot show it again: the launcher does."""
    import pty

    master, slave = pty.openpty()
    output = tmp_path / "tty.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "commbench", "bench", "all_reduce", "--nproc", "2", "-b", "8",
                             "-e", "64", "-n", "1000000", "--backend", "gloo", "-J", str(output)],
                            stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    while b"\x1b[?25l" not in seen and time.monotonic() < deadline:  # the live view is up
        seen += os.read(master, 65536)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.returncode == 130
    tail = seen[seen.rindex(b"\x1b[?25l"):]
    assert b"\x1b[?25h" in tail, tail[-300:]
    before_message = tail[:tail.index(b"interrupted (SIGINT)")]
    assert before_message.endswith((b"\n", b"\r\n")), before_message[-80:]


def _catches(pid: int, signum: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


@pytest.mark.timeout(90)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_the_imports_is_one_line_and_130(tmp_path, signum):
    """Signalled as soon as the process can catch it (the CLI's imports take seconds): never a silent 143/129."""
    proc = cli({}, "sweep", "ci-small", "-O", str(tmp_path / "s.jsonl"))
    deadline = time.monotonic() + 30
    while not _catches(proc.pid, signum):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.002)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err)
    assert len(err.strip().splitlines()) == 1 and f"interrupted ({signal.Signals(signum).name})" in err, err
    assert not (tmp_path / "s.jsonl").exists()


SIGNALLED_BEFORE_THE_COMMAND = """import os, runpy, signal, sys
import typer.main

real_get_command = typer.main.get_command


def get_command(app):  # after the CLI's imports, before typer parses the arguments and starts the command
    os.kill(os.getpid(), signal.SIGHUP)
    return real_get_command(app)


typer.main.get_command = get_command
sys.argv[0] = "commbench"
runpy.run_module("commbench", run_name="__main__")
"""


@pytest.mark.timeout(60)
def test_a_signal_between_the_imports_and_the_command_is_one_line_and_130(tmp_path):
    """Raised there, it escaped as a traceback (exit -2); typer turns one during its parsing into a silent 130."""
    (tmp_path / "signalled_before_the_command.py").write_text(SIGNALLED_BEFORE_THE_COMMAND)
    done = subprocess.run([sys.executable, "-m", "signalled_before_the_command", "sweep", "ci-small", "-O",
                           str(tmp_path / "s.jsonl")], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=50)
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1 and "interrupted (SIGHUP)" in done.stderr, done.stderr
    assert not (tmp_path / "s.jsonl").exists()


def test_a_plain_ctrl_c_is_named_sigint(monkeypatch):
    """Python's own SIGINT handler raises KeyboardInterrupt() with no name: the line said 'interrupted ()'."""
    from typer.testing import CliRunner

    from commbench.cli.app import app

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt()

    monkeypatch.setattr("commbench.cli.sweep.load_sweep", ctrl_c)
    result = CliRunner().invoke(app, ["sweep", "ci-small"])
    assert result.exit_code == 130
    assert result.output.strip() == "interrupted (SIGINT) before the command finished", result.output


@pytest.fixture
def stop_handlers_restored():
    saved = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def test_a_held_stop_signal_is_raised_once_on_release(stop_handlers_restored):
    hold_stops()
    assert signal.getsignal(signal.SIGHUP) not in (signal.SIG_DFL, signal.SIG_IGN)  # the kill below is caught
    os.kill(os.getpid(), signal.SIGHUP)
    with pytest.raises(StopSignal, match="SIGHUP"):
        release_stops()
    release_stops()  # reported once
    assert all(signal.getsignal(signum) is raise_stop_signal for signum in STOP_SIGNALS)


def test_release_without_hold_keeps_the_callers_handlers(stop_handlers_restored):
    """Commands invoked in-process (CliRunner, pytest) never held: their handlers stay."""
    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    release_stops()
    assert {signum: signal.getsignal(signum) for signum in STOP_SIGNALS} == before


STOPPED_IN_EXEC = """import os, signal, sys
from commbench.comm.stop_signals import stops_raise
with stops_raise():
    try:
        exec("os.kill(os.getpid(), signal.SIGHUP)\\nimport time\\ntime.sleep(30)")  # as dataclasses build methods
    except KeyboardInterrupt:
        sys.exit(130)
"""


@pytest.mark.timeout(60)
def test_a_stop_caught_inside_exec_still_exits_130_under_python_m(tmp_path):
    """A plain KeyboardInterrupt raised inside exec() of a string is marked unhandled even when caught: under
    `python -m` the interpreter then ended by sending itself SIGINT (-2; seen with SIGHUP during torch's import)."""
    (tmp_path / "stopped_in_exec.py").write_text(STOPPED_IN_EXEC)
    done = subprocess.run([sys.executable, "-m", "stopped_in_exec"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=50)
    assert done.returncode == 130, (done.returncode, done.stderr)


@pytest.mark.timeout(120)
def test_sigterm_mid_run_under_torchrun_is_one_line_per_rank(tmp_path):
    """torchrun forwards SIGTERM to its workers: each says what was kept (it died silently with 143)."""
    output = tmp_path / "tr.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                             "-m", "commbench", "bench", "all_reduce", "-b", "8", "-e", "64", "-n", "1000000",
                             "--backend", "gloo", "-J", str(output)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 90
    while not (output.exists() and output.stat().st_size):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    ours = sorted(line for line in err.splitlines() if line.startswith("interrupted ("))
    assert ours == [f"interrupted (SIGTERM): rank {r} of the torchrun launch stopped; results measured so far are "
                    f"in {output}" for r in (0, 1)], err[-3000:]


_STOP_IN_HEADER = """
import os, signal, sys
import commbench.results.provenance as provenance
original = provenance.collect_header
def collect_header(backend, **kwargs):  # rank 1 stops in the start-up exchange (the header's gather)
    if backend.rank == 1:
        os.kill(os.getpid(), signal.SIGSTOP)
    return original(backend, **kwargs)
provenance.collect_header = collect_header
sys.argv = ["commbench", *sys.argv[1:]]
from commbench.__main__ import main
main()
"""


@pytest.mark.timeout(90)
def test_a_rank_stopped_in_the_start_up_exchange_is_named_in_one_line_without_tracebacks(tmp_path):
    # found from outside: two tracebacks (local_ranks.py ... work.wait()) then 'error: rank 0 failed: RuntimeError:
    # ...Timed out waiting', though rank 1 was the one stopped
    output = tmp_path / "stopped.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_", "RANK", "WORLD_SIZE"))}
    env.update(PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", _STOP_IN_HEADER, *BENCH, "--nproc", "3", "-n", "2", "-T", "3",
                           "-O", str(output)], env=env, text=True, capture_output=True, timeout=80,
                          start_new_session=True)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("error: start-up failed: rank(s) 1 hung"), proc.stderr
