"""A sweep under a launcher (srun, torchrun) whose peer rank dies mid-point, and the store waits a signal must reach.

Under a simulated srun, rank 1 killed -9 at point 2: rank 0's gloo all_reduce raised 'Connection reset by peer' at
once, then rank 0 waited the agreement (3 x timeout_s + 30 s = 210 s) for a report rank 1 could never send, inside
TCPStore.wait in C++, where the launcher's SIGTERM did not take effect until the wait ended (torchrun and scancel
SIGKILL after 30 s: no record of the point, no 'interrupted' line). Now the store is polled (a Python signal handler
runs meanwhile), and a rank whose own collective failed on a closed connection records the point failed and stops
at once under a launcher, as bench does."""

from __future__ import annotations

import datetime
import os
import signal

from collectives import REGISTRY
from collectives.base import PointSpec
from commbench.results.records import Measurement, read_records
from commbench.sweep import SweepJob, parse_sweep, run_sweep_on_backend
from commbench.sweep.isolation import Coordinator
from tests.distributed import free_port, run_ranks, run_ranks_to_exit
from tests.injected_collectives import InjectedAllReduce

DIE_SIZE = 2048


class DieOnce(InjectedAllReduce):
    """all_reduce, except that rank 1 is killed (SIGKILL, as kill -9) before the DIE_SIZE point's collective."""

    name = "test_die"

    def before(self, comm, spec: PointSpec) -> None:
        if spec.size_bytes == DIE_SIZE and comm.rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)


def _sweep_under_torchrun(backend, job):
    return run_sweep_on_backend(backend, job, launcher="torchrun")


def test_a_peer_killed_under_a_launcher_records_the_point_failed_and_stops_without_the_agreement(tmp_path):
    """timeout_s 20: the old agreement waited 90 s for the dead rank, past this test's 60 s."""
    REGISTRY[DieOnce.name] = DieOnce()
    try:
        out = tmp_path / "out.jsonl"
        spec = parse_sweep({"defaults": {"iters": 3, "warmup_iters": 1, "timeout_s": 20.0},
                            "run": [{"collective": "test_die", "sizes": ["1K", DIE_SIZE, "4K"]}]}, "t.toml")
        job = SweepJob(sweep=spec, backend="gloo", output_path=str(out), show_progress=False)
        [outcome] = run_ranks(_sweep_under_torchrun, 2, args=(job,), timeout_s=60, ranks=(0,))
    finally:
        del REGISTRY[DieOnce.name]
    assert outcome.num_ok == 1 and outcome.num_failed == 1, outcome
    assert outcome.stopped and "closed its connection" in outcome.stopped and "test_die" in outcome.stopped
    records = [r for r in read_records([out]) if isinstance(r, Measurement)]
    assert [(r.size_bytes, r.status) for r in records] == [(1024, "ok"), (DIE_SIZE, "failed")]
    assert "rank 0: RuntimeError" in records[1].error and "by peer" in records[1].error, records[1].error
    # no rank waited past the timeout (probe P3: a kill -9 under torchrun was recorded 'failed while measuring ...
    # (timeout 300 s): rank 2: its process ended ...'); a point that hangs still names it (test_sweep_runner)
    assert "timeout" not in records[1].error, records[1].error


def test_the_agreement_wait_lets_a_signal_handler_run():
    """The handler posts the missing rank's report: it can only help while the wait is still waiting (the old
    TCPStore.wait ran it after its 20 s timeout, and agree raised TimeoutError)."""
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", free_port(), 1, True, timeout=datetime.timedelta(seconds=30))
    previous = signal.signal(signal.SIGALRM, lambda *_: store.set("commbench/sweep/point0/done/1", "1"))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        failed = Coordinator(store, rank=0, world_size=2).agree("point0", None, timeout_s=20)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert failed == []


TIMEOUT_S = 20.0


def _sweep_rank_3_dies_making_subgroups(backend, job, death_file):
    """Rank 3 is killed as the second entry's sub-groups ({0,1}, {2,3}) are made: rank 2 then waits in gloo's
    connectFullMesh (C++) for rank 3's address, ranks 0 and 1 measure on their own pair and wait for rank 2."""
    import time

    from commbench.sweep import isolation

    if backend.rank == 3:
        split = isolation.IsolatedBackend.split

        def dying_split(self, groups, *, fresh=False):
            if len(groups[0]) == 2:
                with open(death_file, "w") as handle:
                    handle.write(repr(time.monotonic()))
                os.kill(os.getpid(), signal.SIGKILL)
            return split(self, groups, fresh=fresh)

        isolation.IsolatedBackend.split = dying_split
    return run_sweep_on_backend(backend, job, launcher="torchrun")


def test_every_rank_stops_soon_after_a_peer_dies_in_group_creation_with_the_dead_rank_named(tmp_path):
    """On main the three others waited TIMEOUT_S in new_group / the world's reduction and then the agreement
    (3 x TIMEOUT_S + 30 s) for rank 3's report: 70 s at timeout_s 10. Now rank 0's peer watch sees rank 3's
    connection close, every rank learns it, and the ones blocked in C++ end themselves: exit 1, the point recorded
    failed with rank 3 named first, the first point kept."""
    import time

    out, death_file = tmp_path / "out.jsonl", tmp_path / "died"
    spec = parse_sweep({"defaults": {"iters": 3, "warmup_iters": 1, "timeout_s": TIMEOUT_S},
                        "run": [{"collective": "all_reduce", "sizes": ["1K"]},
                                {"collective": "all_reduce", "sizes": ["1K"], "group_sizes": [2]}]}, "t.toml")
    job = SweepJob(sweep=spec, backend="gloo", output_path=str(out), show_progress=False)
    ended = run_ranks_to_exit(_sweep_rank_3_dies_making_subgroups, 4, args=(job, str(death_file)),
                              timeout_s=3 * TIMEOUT_S)
    died_at = float(death_file.read_text())
    assert ended[3][0] == -signal.SIGKILL
    for rank, (code, at) in enumerate(ended[:3]):
        assert code is not None, f"rank {rank} still running {time.monotonic() - died_at:.0f} s after rank 3 died"
        assert (at - died_at) < 0.5 * TIMEOUT_S, (rank, at - died_at)
        # 1: ended by the watch while blocked; 0: the sweep returned its stopped outcome to this harness (the CLI
        # then exits 1: test_every_surviving_rank_of_the_cli_says_which_rank_died_and_exits_1)
        assert code in (0, 1), (rank, code)
    records = [r for r in read_records([out]) if isinstance(r, Measurement)]
    assert [(r.group_size, r.status) for r in records] == [(4, "ok"), (2, "failed")]
    assert records[1].error.startswith("failed while measuring") and "rank 3" in records[1].error, records[1].error


class DieOnRank2(InjectedAllReduce):
    """all_reduce, except that rank 2 is killed (SIGKILL) before the DIE_SIZE point's collective."""

    name = "test_die_rank2"

    def before(self, comm, spec: PointSpec) -> None:
        if spec.size_bytes == DIE_SIZE and comm.rank == 2:
            os.kill(os.getpid(), signal.SIGKILL)


def test_every_surviving_rank_of_the_cli_says_which_rank_died_and_exits_1(tmp_path):
    """`commbench sweep` under torchrun (faked), rank 2 of 3 killed: rank 0 and rank 1 each print one line naming
    rank 2 and exit 1 (on main rank 1 said nothing and exited 0, rank 0's line named no rank)."""
    from tests.launched import launch_cli

    sweep_file = tmp_path / "s.toml"
    sweep_file.write_text('[defaults]\niters = 3\nwarmup_iters = 1\ntimeout_s = 20.0\n\n[[run]]\n'
                          f'collective = "test_die_rank2"\nsizes = ["1K", {DIE_SIZE}, "4K"]\n')
    REGISTRY[DieOnRank2.name] = DieOnRank2()
    try:
        results = launch_cli(["sweep", str(sweep_file), "-O", str(tmp_path / "out.jsonl"), "--backend", "gloo"],
                             ("a", "a", "a"), ranks=(0, 1), timeout_s=60)
    finally:
        del REGISTRY[DieOnRank2.name]
    for rank, (code, _, output) in enumerate(results):
        lines = [line for line in output.splitlines() if "rank 2 died" in line]
        assert code == 1 and len(lines) == 1, (rank, code, output)
    assert results[1][2].count("sweep stopped") == 1 and "rank 1: sweep stopped: rank 2 died" in results[1][2]


class StopSignalOnRank1(InjectedAllReduce):
    """all_reduce, except that rank 1 takes a stop signal (KeyboardInterrupt, as stops_raise makes SIGTERM) before
    the DIE_SIZE point's collective."""

    name = "test_stop_rank1"

    def before(self, comm, spec: PointSpec) -> None:
        if spec.size_bytes == DIE_SIZE and comm.rank == 1:
            raise KeyboardInterrupt


def _interrupted_under_torchrun(backend, job):
    try:
        return run_sweep_on_backend(backend, job, launcher="torchrun")
    except KeyboardInterrupt:
        return "interrupted"


def test_a_peer_interrupted_is_not_named_dead(tmp_path):
    """A rank ended by a stop signal says BYE to the peer watch: its peers stop on the closed connection as before,
    never with 'rank 1 died' (batch systems signal every task; a death would be the wrong word in the record)."""
    REGISTRY[StopSignalOnRank1.name] = StopSignalOnRank1()
    try:
        spec = parse_sweep({"defaults": {"iters": 3, "warmup_iters": 1, "timeout_s": 20.0},
                            "run": [{"collective": "test_stop_rank1", "sizes": ["1K", DIE_SIZE, "4K"]}]}, "t.toml")
        job = SweepJob(sweep=spec, backend="gloo", output_path=str(tmp_path / "out.jsonl"), show_progress=False)
        outcome, interrupted = run_ranks(_interrupted_under_torchrun, 2, args=(job,), timeout_s=60)
    finally:
        del REGISTRY[StopSignalOnRank1.name]
    assert interrupted == "interrupted"
    assert outcome.stopped and "died" not in outcome.stopped and "closed its connection" in outcome.stopped, outcome
