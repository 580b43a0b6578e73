"""When every rank is stuck, none stops first for the one-hung-rank watchdog to notice: the launcher
ends the point after the grace all the same, through the CLI (bench and sweep)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.processes import alive
from tests.test_launch_watchdog import TIMEOUT_S, finish, lines, rank_pids, start_cli


@pytest.mark.timeout(120)
def test_bench_every_rank_stopped_ends_within_timeout_plus_grace(tmp_path):
    output = tmp_path / "hang.jsonl"
    proc = start_cli("bench", "all_reduce", "--nproc", "2", "-b", "8", "-e", "64", "-n", "1000000", "-w", "0",
                     "--timeout", str(TIMEOUT_S), "-J", str(output))
    pids = rank_pids(proc, output)
    time.sleep(0.5)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    stopped_at = time.monotonic()
    code, _, err = finish(proc)
    waited_s = time.monotonic() - stopped_at
    assert code == 1, err
    assert len(err.strip().splitlines()) == 1, err
    assert "point 8 B failed: every rank (0, 1) hung" in err
    assert waited_s < (TIMEOUT_S + 5) + 8  # the grace plus the slack the one-rank test allows
    failed = [r for r in lines(output) if r["record_type"] == "measurement"]
    assert [(r["size_bytes"], r["status"]) for r in failed] == [(8, "failed")]
    assert not any(alive(pid) for pid in pids)


def _stop_every_rank(pids):
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)


def hang_sweep(path, then_sizes: str):
    """A 2-rank gloo sweep whose first point runs far past its timeout (a rank stopped or killed there hangs it) and
    whose second entry measures `then_sizes` (TOML) quickly: what fresh ranks go on with."""
    path.write_text(f"""[sweep]
name = "hang"
nproc = 2
backend = "gloo"
[defaults]
timeout_s = {TIMEOUT_S}
[[run]]
collective = "all_reduce"
sizes = [8]
iters = 100000
warmup_iters = 0
[[run]]
collective = "all_reduce"
sizes = {then_sizes}
iters = 3
""")
    return path


def _kill_rank_1(pids):  # as the OOM killer does: handled like a hang, not the end of the sweep
    os.kill(pids[1], signal.SIGKILL)


# the two faults a fresh-ranks sweep goes on past, and what it says of each (sweep's and tune's tests)
FAULTS = [(_stop_every_rank, "every rank (0, 1) hung"), (_kill_rank_1, "rank 1 was killed by SIGKILL")]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fault, said", FAULTS)
def test_sweep_records_the_stuck_point_and_goes_on_with_fresh_ranks(tmp_path, fault, said):
    sweep = hang_sweep(tmp_path / "hang.toml", "[16]")
    output = tmp_path / "sweep.jsonl"
    proc = start_cli("sweep", str(sweep), "-O", str(output))
    pids = rank_pids(proc, output)
    time.sleep(0.5)
    fault(pids)
    code, _, err = finish(proc, 90)
    assert code == 1, err
    assert said in err and "starting fresh ranks" in err
    records = [r for r in lines(output) if r["record_type"] == "measurement"]
    assert [(r["size_bytes"], r["status"]) for r in records] == [(8, "failed"), (16, "ok")]
    assert not any(alive(pid) for pid in pids)
