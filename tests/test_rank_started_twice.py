"""A rank started twice (two processes with RANK=1 in one launch) joined torch's rendezvous twice as that rank: the
store's keys of one overwrote the other's, and every rank reported only a rendezvous timeout after the full --timeout
(probe P6, session 44). Every rank now checks in on the launch's store first (comm/rank_checkin.py): the second
claim of a rank stops every rank still joining, in one line naming the rank; a missing rank is named at the
timeout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from commbench.comm.local_ranks import RunFailed
from commbench.comm.rank_checkin import check_in, launch_store
from tests.distributed import free_port

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(150)
def test_a_rank_started_twice_stops_every_rank_in_one_line_naming_it(tmp_path):
    port = str(free_port())
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "PMI_", "MPI_LOCAL", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_",
                                "TORCHELASTIC_", "COMMBENCH_"))}
    procs = [subprocess.Popen([sys.executable, "-m", "commbench", "bench", "all_reduce", "-b", "8", "-e", "8", "-n",
                               "2", "-w", "1", "-T", "60", "--backend", "gloo", "-O", str(tmp_path / f"d{i}.jsonl")],
                              text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                              env={**env, "PYTHONPATH": str(REPO), "RANK": rank, "WORLD_SIZE": "3",
                                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "COLUMNS": "400"})
             for i, rank in enumerate(("0", "1", "1"))]   # rank 2 never comes: only the refusal ends the wait early
    try:
        errs = [p.communicate(timeout=120)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, err in zip(procs, errs):
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert p.returncode == 2 and len(errors) == 1, err[-600:]
        assert errors[0].startswith("error: rank 1 of 3 was started twice in the launch at tcp://127.0.0.1:"), errors
        assert "Traceback" not in err and "did not complete" not in err, err[-600:]


def test_a_missing_rank_is_named_when_the_wait_ends():
    store = launch_store(master_addr="127.0.0.1", master_port=free_port(), rank=0, world_size=2, timeout_s=1)
    with pytest.raises(RunFailed) as info:
        check_in(store, rank=0, world_size=2, address="tcp://x", where="at tcp://x as rank 0 of 2", timeout_s=1,
                 namespace="b")
    line = str(info.value)
    assert "1 of 2 ranks joined (missing: rank 1)" in line and "--timeout=1 s" in line and "\n" not in line, line


def test_two_launches_meeting_on_one_store_are_refused_in_one_line_naming_both():
    """Probe P8: two jobs whose ranks met on one host and port (the same command) joined each other's ranks and both
    exited 0; each rank now checks the launch it belongs to against the store's first."""
    import threading

    from commbench.comm.rank_checkin import LaunchesMet

    port = free_port()
    server = launch_store(master_addr="127.0.0.1", master_port=port, rank=0, world_size=2, timeout_s=30)
    outcome = {}

    def job_a_rank0():
        try:
            check_in(server, rank=0, world_size=2, address="tcp://x", where="a", timeout_s=30, namespace="m",
                     launch="SLURM_JOB_ID=4242 SLURM_STEP_ID=0 world 2")
        except LaunchesMet as exc:
            outcome["a"] = str(exc)

    waiting = threading.Thread(target=job_a_rank0)
    waiting.start()
    client = launch_store(master_addr="127.0.0.1", master_port=port, rank=1, world_size=2, timeout_s=30)
    with pytest.raises(LaunchesMet) as info:
        check_in(client, rank=1, world_size=2, address="tcp://x", where="b", timeout_s=30, namespace="m",
                 launch="SLURM_JOB_ID=5242 SLURM_STEP_ID=0 world 2")
    waiting.join(timeout=20)
    line = str(info.value)
    assert line.startswith("two launches met at tcp://x") and "SLURM_JOB_ID=5242" in line and "4242" in line, line
    assert "\n" not in line and outcome.get("a") == line, outcome   # the waiting rank stops with the same line


def test_the_launch_identity_names_the_launchers_job_and_the_world():
    from commbench.comm.rank_checkin import launch_identity

    assert launch_identity(4, {"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "1", "PATH": "/bin"}) == \
        "SLURM_JOB_ID=7 SLURM_STEP_ID=1 world 4"
    assert launch_identity(2, {"TORCHELASTIC_RUN_ID": "u1"}) != launch_identity(2, {"TORCHELASTIC_RUN_ID": "u2"})
    assert launch_identity(2, {}) == "world 2"


def test_a_timeout_after_rank_0s_store_closed_still_says_one_line():
    """Probe P8: rank 0 (the store's server) timed out first and left; the others' reads of who joined failed with
    torch's raw 'Failed to recv' instead of the timeout line."""
    from commbench.comm.rank_checkin import _missing

    class Gone:
        def add(self, key, amount):
            raise RuntimeError("Failed to recv, got 0 bytes")

        def check(self, keys):
            raise RuntimeError("Failed to recv, got 0 bytes")

    failure = _missing(Gone(), "b", 4, "at tcp://x as rank 1 of 4", 10, "--timeout")
    assert isinstance(failure, RunFailed)
    line = str(failure)
    assert "did not complete within --timeout=10 s: not all 4 ranks joined" in line and "rank 0 names them" in line


def test_a_torchrun_restart_joins_under_its_attempts_prefix(monkeypatch):
    """Probe P8: torchrun's agent store outlives a restart; under the bare 'default_pg' prefix gloo read the dead
    attempt's rank addresses (3 of 8 restarts lost). The group's keys now sit under the attempt, as the check-in's."""
    import torch.distributed as dist

    from commbench.comm.torch_backend import checked_in_store

    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "3")
    port = free_port()
    store = checked_in_store(f"tcp://127.0.0.1:{port}", rank=0, world_size=1, join_s=10, timeout_s=10,
                             where="here", setting="--timeout")
    store.set("probe", "1")
    raw = dist.TCPStore("127.0.0.1", port, 1, False)
    assert raw.check(["attempt_3/default_pg/probe"]) and not raw.check(["default_pg/probe"])


def test_a_second_rank_0_on_another_host_is_refused_naming_both_hosts(monkeypatch):
    """Two launches' rank 0s on hosts A and B, both with MASTER_ADDR=A: B's rank 0 serves a store on B that nobody
    reaches and joins A's as a client, so ranks of both joined one store (netns probe, fix F1: job A's rank 0 waited
    out --timeout, B's rank 1 failed in gloo's raw words). Emulated on one host: A's store on one port, B's rank 0's
    own server on another, its client at A's."""
    import socket
    import threading

    import torch.distributed as dist

    from commbench.comm.rank_checkin import RankStartedTwice

    port_a, port_b = free_port(), free_port()
    host = {"name": "hostA"}
    monkeypatch.setattr(socket, "gethostname", lambda: host["name"])
    server_a = launch_store(master_addr="127.0.0.1", master_port=port_a, rank=0, world_size=2, timeout_s=30)
    outcome = {}

    def job_a_rank0():
        try:
            check_in(server_a, rank=0, world_size=2, address="tcp://A", where="a", timeout_s=30, namespace="h",
                     served_port=port_a)
        except RankStartedTwice as exc:
            outcome["a"] = str(exc)

    waiting = threading.Thread(target=job_a_rank0)
    waiting.start()
    client_of_a = launch_store(master_addr="127.0.0.1", master_port=port_a, rank=1, world_size=2, timeout_s=30)
    for _ in range(400):   # until A's rank 0 has checked in as the store's server
        if client_of_a.check(["commbench/checkin/h/rank0"]) or not waiting.is_alive():
            break
        waiting.join(0.05)
    assert waiting.is_alive(), "job A's rank 0 did not wait for its rank 1"
    host["name"] = "hostB"
    own_b = dist.TCPStore("127.0.0.1", port_b, 1, True, wait_for_workers=False)   # B's rank 0's server, unseen
    with pytest.raises(RankStartedTwice) as info:
        check_in(client_of_a, rank=0, world_size=2, address="tcp://A", where="b", timeout_s=30, namespace="h",
                 served_port=port_b)
    waiting.join(timeout=20)
    line = str(info.value)
    assert line.startswith("rank 0 of 2 was started on two hosts: hostA pid ") and "hostB pid " in line, line
    assert "\n" not in line and outcome.get("a") == line, outcome   # A's waiting rank 0 stops with the same line
    del own_b
