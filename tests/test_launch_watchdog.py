"""commbench's own local launcher, through the CLI: hung ranks end the run, signals, loopback only."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from commbench.comm.job import run_job
from tests.processes import alive, gone_within

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 3  # --timeout of the hang tests; the launcher's grace is then 3 + 5 s


def start_cli(*args: str, tmpdir: Path | None = None) -> subprocess.Popen:
    """`tmpdir`: the launch's TMPDIR (where its ranks' rendezvous folder goes), for a launcher the test kills."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **({"TMPDIR": str(tmpdir)} if tmpdir else {})}
    return subprocess.Popen([sys.executable, "-m", "commbench", *args], env=env, cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def rank_pids(proc: subprocess.Popen, output: Path, num: int = 2, wait_s: float = 30.0) -> list[int]:
    """The launcher's rank processes, once they have written the output's first line."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        children = []
        for task in Path(f"/proc/{proc.pid}/task").glob("*/children"):
            children += [int(p) for p in task.read_text().split()]
        if len(children) >= num and output.exists() and output.stat().st_size:
            return sorted(children)
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("ranks did not start")


def finish(proc: subprocess.Popen, wait_s: float = 60.0) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=wait_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out, err


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("stopped_rank", [1, 0])
def test_bench_rank_stopped_forever_ends_within_timeout_plus_grace(tmp_path, stopped_rank):
    output = tmp_path / "hang.jsonl"
    proc = start_cli("bench", "all_reduce", "--nproc", "2", "-b", "8", "-e", "64", "-n", "1000000", "-w", "0",
                     "--timeout", str(TIMEOUT_S), "-J", str(output))
    pids = rank_pids(proc, output)
    time.sleep(0.5)
    os.kill(pids[stopped_rank], signal.SIGSTOP)
    stopped_at = time.monotonic()
    code, _, err = finish(proc)
    assert time.monotonic() - stopped_at < TIMEOUT_S + (TIMEOUT_S + 5) + 8
    assert code == 1
    assert len(err.strip().splitlines()) == 1, err
    assert f"rank(s) {stopped_rank} hung" in err and "point 8 B failed" in err
    failed = [r for r in lines(output) if r["record_type"] == "measurement"]
    assert [r["status"] for r in failed] == ["failed"] and failed[0]["size_bytes"] == 8
    # the record names the stopped rank as the terminal does (not only the others' timeouts), and its count
    assert failed[0]["error"].startswith(f"point 8 B failed: rank(s) {stopped_rank} hung"), failed[0]["error"]
    assert failed[0]["count"] == 2
    assert not any(alive(pid) for pid in pids)


def test_sweep_rank_stopped_forever_records_the_point_and_goes_on(tmp_path):
    sweep = tmp_path / "hang.toml"
    sweep.write_text(f"""[sweep]
name = "hang"
nproc = 2
backend = "gloo"
[defaults]
timeout_s = {TIMEOUT_S}
[[run]]
name = "slow"
collective = "all_reduce"
sizes = [8]
iters = 1000000
warmup_iters = 0
[[run]]
name = "quick"
collective = "all_reduce"
sizes = [8, 16]
iters = 3
""")
    output = tmp_path / "sweep.jsonl"
    proc = start_cli("sweep", str(sweep), "-O", str(output))
    pids = rank_pids(proc, output)
    time.sleep(0.5)
    os.kill(pids[1], signal.SIGSTOP)
    code, _, err = finish(proc)
    assert code == 1
    assert "rank(s) 1 hung" in err and "starting fresh ranks" in err
    records = [r for r in lines(output) if r["record_type"] == "measurement"]
    assert [(r["size_bytes"], r["status"]) for r in records] == [(8, "failed"), (8, "ok"), (16, "ok")]
    assert "2 point(s) measured, 1 failed, 0 skipped" in err
    assert "before this launch" not in err   # the point this command failed, not one recorded before it
    assert not alive(pids[1])


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_bench_stopped_by_a_signal_says_what_was_kept(tmp_path, signum):
    output = tmp_path / "sig.jsonl"
    proc = start_cli("bench", "all_reduce", "--nproc", "2", "-b", "8", "-e", "64", "-n", "1000000", "-J", str(output))
    pids = rank_pids(proc, output)
    proc.send_signal(signum)
    code, _, err = finish(proc, 20)
    assert code == 130
    assert err.strip() == f"interrupted ({signal.Signals(signum).name}): no point measured ({output} holds none: only a run header)"
    time.sleep(0.2)
    assert not any(alive(pid) for pid in pids)


def test_ranks_die_with_a_killed_launcher(tmp_path):
    output = tmp_path / "kill.jsonl"
    # kill -9 leaves the ranks' rendezvous folder (until the next launch in that TMPDIR): in tmp_path, not in /tmp
    proc = start_cli("bench", "all_reduce", "--nproc", "2", "-b", "8", "-e", "64", "-n", "1000000", "-J", str(output),
                     tmpdir=tmp_path)
    pids = rank_pids(proc, output)
    proc.kill()
    proc.wait()
    assert gone_within(pids)


def test_a_killed_rank_is_a_run_failure_exit_1(tmp_path):
    output = tmp_path / "crash.jsonl"
    proc = start_cli("bench", "all_reduce", "--nproc", "2", "-b", "8", "-e", "64", "-n", "1000000", "-J", str(output))
    pids = rank_pids(proc, output)
    os.kill(pids[1], signal.SIGKILL)
    code, _, err = finish(proc)
    assert code == 1
    assert err.strip().startswith("error: rank 1 was killed by SIGKILL at 8 B")
    assert [r["status"] for r in lines(output) if r["record_type"] == "measurement"] == ["failed"]


def test_a_killed_rank_is_named_in_the_record_not_the_peer_that_saw_it_die(tmp_path):
    # found from outside: kill -9 of rank 2 of 3: the terminal said 'rank 2 was killed by SIGKILL', the record (rank 0
    # writes it) 'rank 1 failed first: ...Connection closed by peer' and count 0
    output = tmp_path / "crash.jsonl"
    proc = start_cli("bench", "all_reduce", "--nproc", "3", "--backend", "gloo", "-b", "8", "-e", "64", "-n", "1000000",
                     "-T", "5", "-J", str(output))
    pids = rank_pids(proc, output, num=3)
    time.sleep(0.5)
    os.kill(pids[2], signal.SIGKILL)
    code, _, err = finish(proc)
    assert code == 1 and err.strip().startswith("error: rank 2 was killed by SIGKILL at 8 B"), err
    failed = [r for r in lines(output) if r["record_type"] == "measurement"]
    assert [r["status"] for r in failed] == ["failed"]
    assert failed[0]["error"].startswith("rank 2 was killed by SIGKILL at 8 B"), failed[0]["error"]
    assert (failed[0]["size_bytes"], failed[0]["count"]) == (8, 2)


def _listening(rank_env, _config):
    """The TCP sockets this rank listens on, after joining the job ((address, port) in hex as /proc shows)."""
    from commbench.comm.backends import create_backend

    backend = create_backend("gloo", rank_env, 10)
    backend.world.barrier()
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:
                found.append(fields[1].split(":")[0])
    backend.shutdown()
    return found


def test_local_launch_listens_on_loopback_only(tmp_path):
    results = run_job(_listening, None, nproc=2, backend="gloo", validate_world=lambda world: None,
                      output_path=str(tmp_path / "none.jsonl"), timeout_s=10)
    loopback = {"0100007F", "00000000000000000000000001000000"}
    for rank, addresses in results.items():
        assert addresses, f"rank {rank}: gloo should listen somewhere"
        assert set(addresses) <= loopback, f"rank {rank} listens on {addresses}"


def test_spawned_ranks_work_as_gpu_backends_start_them(tmp_path):
    """NCCL/CuPy ranks are spawned (CUDA does not survive a fork): the same path, on gloo."""
    from commbench.comm.local_ranks import launch_local

    results = launch_local(2, _listening, None, backend="gloo", output_path=str(tmp_path / "none.jsonl"),
                           timeout_s=10, start_method="spawn")
    assert sorted(results) == [0, 1] and all(results.values())


def test_bench_leaves_no_process_in_its_group(tmp_path):
    output = tmp_path / "done.jsonl"
    proc = start_cli("bench", "all_reduce", "--nproc", "2", "-b", "8", "-e", "64", "-n", "2", "-J", str(output))
    code, out, err = finish(proc)
    assert code == 0, err
    header = lines(output)[0]
    assert any("nothing listens beyond loopback" in note for note in header["notes"])  # says which address
    assert "gloo binds 127.0.0.1" in out
    left = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == proc.pid and fields[0] != "Z":
            left.append(stat.parent.name)
    assert left == []
