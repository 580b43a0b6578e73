"""A stop signal that reaches the ranks before the launcher (Slurm's scancel and time limit, systemd's
KillMode=control-group: every process of the job is signalled, the ranks a few ms ahead) is an interruption, as one
that reaches the launcher alone: exit 130, the one line that says what was kept, and no record for the point the
ranks were measuring (probe BQ F1: the rank's negative exit code was taken as 'killed from outside', the point recorded
failed, and `--resume` then refused to measure it again). SIGKILL (kill -9, the OOM killer) stays a failed point."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.processes import alive
from tests.test_launch_watchdog import finish, lines, rank_pids, start_cli

SWEEP = """[sweep]
name = "stopped"
backend = "gloo"
nproc = 2
[defaults]
iters = 20
warmup_iters = 1
timeout_s = 20
[[run]]
collective = "all_reduce"
sizes = [8, 16, 32]
[[run]]
name = "long"
collective = "all_reduce"
sizes = [64]
iters = 30000   # 1.5 s or more: the signal, 0.3 s in, lands while it runs
warmup_iters = 0
"""


def _signal_ranks_then_launcher(proc, pids: list[int], signum: int, lag_s: float | None) -> None:
    """`signum` to every rank, then to the launcher `lag_s` later (None: the ranks only). A child of the launcher gone
    by then (a short-lived helper process rank_pids saw beside the ranks on a loaded machine) is skipped; the exit code
    and lines the tests assert say whether the ranks were stopped."""
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            continue
    if lag_s is not None:
        time.sleep(lag_s)
        proc.send_signal(signum)


@pytest.mark.parametrize("signum, lag_s", [(signal.SIGTERM, 0.05), (signal.SIGHUP, 0.05), (signal.SIGINT, 0.05),
                                           (signal.SIGTERM, 0.5), (signal.SIGTERM, None)])
def test_bench_ranks_signalled_first_is_an_interruption(tmp_path, signum, lag_s):
    output = tmp_path / "sig.jsonl"
    proc = start_cli("bench", "all_reduce", "--nproc", "2", "-b", "8", "-e", "64", "-n", "1000000", "-J", str(output))
    pids = rank_pids(proc, output)
    time.sleep(0.3)
    _signal_ranks_then_launcher(proc, pids, signum, lag_s)
    code, _, err = finish(proc, 30)
    name = signal.Signals(signum).name
    assert (code, err.strip()) == (130, f"interrupted ({name}): no point measured ({output} holds none: only a run header)")
    assert [r for r in lines(output) if r["record_type"] == "measurement"] == []
    assert not any(alive(pid) for pid in pids)


def test_one_rank_signalled_is_an_interruption_not_a_failed_point(tmp_path):
    # rank 0 may see its peer's closed connection and record the point failed before the launcher sees the rank die
    output = tmp_path / "one.jsonl"
    proc = start_cli("bench", "all_reduce", "--nproc", "2", "--backend", "gloo", "-b", "8", "-e", "64", "-n", "1000000",
                     "-T", "5", "-J", str(output))
    pids = rank_pids(proc, output)
    time.sleep(0.3)
    os.kill(pids[1], signal.SIGTERM)
    code, _, err = finish(proc, 30)
    assert (code, err.strip()) == (130, f"interrupted (SIGTERM): no point measured ({output} holds none: only a run header)")
    assert [r for r in lines(output) if r["record_type"] == "measurement"] == []


@pytest.mark.parametrize("lag_s", [0.05, None])
def test_sweep_ranks_signalled_first_keeps_the_points_and_resume_measures_the_rest(tmp_path, lag_s):
    spec = tmp_path / "stopped.toml"
    spec.write_text(SWEEP)
    output = tmp_path / "sweep.jsonl"
    proc = start_cli("sweep", str(spec), "-O", str(output))
    pids = rank_pids(proc, output)
    deadline = time.monotonic() + 60
    while sum('"record_type":"measurement"' in line for line in output.read_text().splitlines()) < 3:
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.3)   # the long point has started
    _signal_ranks_then_launcher(proc, pids, signal.SIGTERM, lag_s)
    code, _, err = finish(proc, 30)
    assert code == 130, err
    assert err.strip().splitlines()[-1] == (f"interrupted (SIGTERM): 3 point(s) kept in {output}; continue with: "
                                            f"commbench sweep {spec} -O {output} --resume --nproc 2"), err
    assert [r["status"] for r in lines(output) if r["record_type"] == "measurement"] == ["ok"] * 3
    # --resume measures the point the signal cut short (a failed record would have it refused)
    again = start_cli("sweep", str(spec), "-O", str(output), "--resume")
    code, _, err = finish(again, 60)
    assert code == 0, err
    assert [r["status"] for r in lines(output) if r["record_type"] == "measurement"] == ["ok"] * 4


def test_a_rank_killed_by_sigkill_stays_a_failed_point(tmp_path):
    output = tmp_path / "crash.jsonl"
    proc = start_cli("bench", "all_reduce", "--nproc", "2", "-b", "8", "-e", "64", "-n", "1000000", "-J", str(output))
    pids = rank_pids(proc, output)
    time.sleep(0.3)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:   # the other rank may leave on its own once the first is killed
            pass
    code, _, err = finish(proc)
    assert code == 1 and err.strip().startswith("error: rank "), err
    assert [r["status"] for r in lines(output) if r["record_type"] == "measurement"] == ["failed"], err


@pytest.mark.parametrize("lag_s", [0.2, None])
def test_tune_ranks_signalled_first_says_what_it_kept(tmp_path, lag_s):
    from tests.test_all_ranks_hung import hang_sweep
    from tests.test_tune_fresh_ranks import PLAN

    sweep = hang_sweep(tmp_path / "hang.toml", "[16]")
    out = tmp_path / "out"
    output = out / "tune-sweep.jsonl"
    proc = start_cli("tune", "--sweep", str(sweep), "-O", str(out), *PLAN)
    pids = rank_pids(proc, output)
    time.sleep(0.5)
    _signal_ranks_then_launcher(proc, pids, signal.SIGTERM, lag_s)
    code, _, err = finish(proc, 60)
    assert code == 130, err
    assert err.strip().splitlines()[-1] == ("interrupted (SIGTERM) before the fit was written: no point measured "
                                            f"({output} holds none); nothing fitted or planned"), err
    assert [r for r in lines(output) if r["record_type"] == "measurement"] == []
    assert not (out / "plan.json").exists()
