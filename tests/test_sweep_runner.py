"""The sweep runner on gloo ranks: a hung point is timed out, recorded, and the sweep goes on;
a killed sweep resumes with every point exactly once; Ctrl-C leaves a valid file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from collectives import REGISTRY
from collectives.base import PointSpec
from commbench.results.records import Measurement, read_records
from commbench.sweep import SweepJob, load_sweep, parse_sweep, plan_sweep, run_sweep_on_backend
from tests.distributed import run_ranks
from tests.injected_collectives import InjectedAllReduce

HANG_SIZE = 2048
REPO = Path(__file__).resolve().parents[1]


class HangOnce(InjectedAllReduce):
    """all_reduce, except that rank 1 sleeps past the timeout before the HANG_SIZE point's collective."""

    name = "test_hang"
    sleep_s = 2.5

    def before(self, comm, spec: PointSpec) -> None:
        if spec.size_bytes == HANG_SIZE and comm.rank == 1:
            time.sleep(self.sleep_s)


@pytest.fixture
def hang_collective():
    REGISTRY[HangOnce.name] = HangOnce()
    yield
    del REGISTRY[HangOnce.name]


def small_sweep(*runs, timeout_s=20.0):
    return parse_sweep({"defaults": {"iters": 3, "warmup_iters": 1, "timeout_s": timeout_s}, "run": list(runs)}, "t.toml")


def measurements_of(path):
    return [r for r in read_records([path]) if isinstance(r, Measurement)]


def test_every_standard_collective_once(tmp_path):
    out = tmp_path / "out.jsonl"
    spec = small_sweep(*({"collective": c, "sizes": ["1K", "16K"]} for c in
                         ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "sendrecv", "broadcast")))
    job = SweepJob(sweep=spec, backend="gloo", output_path=str(out), show_progress=False)
    outcomes = run_ranks(run_sweep_on_backend, 2, args=(job,))
    assert all(o.num_ok == 12 and o.num_failed == 0 and o.stopped is None for o in outcomes)
    records = measurements_of(out)
    assert [r.point_key for r in records] == [p.key for p in plan_sweep(spec, 2, backend="gloo")]
    assert all(r.status == "ok" and r.num_wrong == 0 and r.time_us_median > 0 for r in records)


def test_hung_point_is_timed_out_recorded_and_the_sweep_goes_on(tmp_path, hang_collective):
    out = tmp_path / "out.jsonl"
    spec = small_sweep({"collective": "all_reduce", "sizes": ["1K"]},
                       {"collective": "test_hang", "sizes": ["1K", HANG_SIZE, "4K"], "timeout_s": 1.0},
                       {"collective": "all_gather", "sizes": ["4K"]})
    job = SweepJob(sweep=spec, backend="gloo", output_path=str(out), show_progress=False)
    started = time.perf_counter()
    outcomes = run_ranks(run_sweep_on_backend, 2, args=(job,), timeout_s=60)
    elapsed_s = time.perf_counter() - started
    assert outcomes[0].num_ok == 4 and outcomes[0].num_failed == 1 and outcomes[0].stopped is None
    by_size = {(r.collective, r.size_bytes): r for r in measurements_of(out)}
    hung = by_size[("test_hang", HANG_SIZE)]
    assert hung.status == "failed" and "timeout 1 s" in hung.error and hung.point_key
    assert by_size[("test_hang", 4096)].status == "ok" and by_size[("all_gather", 4096)].status == "ok"
    assert elapsed_s < 30


def test_resume_after_everything_is_done_measures_nothing(tmp_path):
    out = tmp_path / "out.jsonl"
    spec = small_sweep({"collective": "all_reduce", "sizes": ["1K", "2K"]})
    job = SweepJob(sweep=spec, backend="gloo", output_path=str(out), show_progress=False)
    run_ranks(run_sweep_on_backend, 2, args=(job,))
    with out.open("a") as handle:
        handle.write('{"record_type": "measurement", "run_id": "torn')  # a write cut by a kill
    again = SweepJob(sweep=spec, backend="gloo", output_path=str(out), resume=True, show_progress=False)
    outcomes = run_ranks(run_sweep_on_backend, 2, args=(again,))
    assert outcomes[0].num_skipped == 2 and outcomes[0].num_ok == 0
    assert out.read_text().endswith("\n") and len(measurements_of(out)) == 2


def cli(*args):
    return [sys.executable, "-m", "commbench", "sweep", *args]


def wait_for_measurements(path: Path, count: int, proc, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count('"record_type":"measurement"') >= count:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"{path} never reached {count} measurements")


def test_ci_small_killed_midway_then_resumed_has_every_point_exactly_once(tmp_path):
    """End to end through the CLI with the shipped CI sweep: SIGKILL the launch mid-way, resume."""
    out = tmp_path / "ci.jsonl"
    proc = subprocess.Popen(cli("ci-small", "-O", str(out)),
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    wait_for_measurements(out, 5, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    done_before = measurements_of(out)
    spec = load_sweep(str(REPO / "sweeps/ci-small.toml"))
    planned = [p.key for p in plan_sweep(spec, spec.nproc, backend="gloo")]
    assert 5 <= len(done_before) < len(planned)
    resumed = subprocess.run(cli("ci-small", "-O", str(out), "--resume"), cwd=REPO, capture_output=True,
                             text=True, timeout=240)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    counts = Counter(r.point_key for r in measurements_of(out))
    assert sorted(counts) == sorted(planned) and set(counts.values()) == {1}
    assert all(r.status == "ok" and r.num_wrong == 0 for r in measurements_of(out))
    kept = {r.point_key: r.time_us_median for r in done_before}
    assert all(r.time_us_median == kept[r.point_key] for r in measurements_of(out) if r.point_key in kept)
    refused = subprocess.run(cli("ci-small", "-O", str(out)), cwd=REPO, capture_output=True, text=True,
                             timeout=120)
    assert refused.returncode == 2 and "--resume" in refused.stderr


def test_ctrl_c_leaves_a_valid_file_and_prints_the_resume_command(tmp_path):
    sweep_file = tmp_path / "slow.toml"
    sweep_file.write_text('[sweep]\nnproc = 2\n[defaults]\niters = 200\nwarmup_iters = 0\n'
                          '[[run]]\ncollective = "all_reduce"\nsizes = { min = "1K", max = "1G", factor = 2 }\n')
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen(cli(str(sweep_file), "-o", str(out)), cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    wait_for_measurements(out, 2, proc)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends to the terminal's process group
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "--resume" in stderr, stderr
    for line in out.read_text().splitlines():
        json.loads(line)  # every line is a whole record
    assert len(measurements_of(out)) >= 2


def spoil(path: Path, keep: int) -> None:
    """The file's first `keep` lines, its 2nd measurement failed and its 3rd with wrong elements."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[2].update(status="failed", error="RuntimeError: boom")
    lines[3].update(num_wrong=3)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines[:keep]))


def test_resume_reports_the_failed_and_wrong_points_it_does_not_measure_again(tmp_path):
    out = tmp_path / "out.jsonl"
    spec = small_sweep({"collective": "all_reduce", "sizes": ["1K", "2K", "4K"]})
    run_ranks(run_sweep_on_backend, 2, args=(SweepJob(sweep=spec, backend="gloo", output_path=str(out),
                                                      show_progress=False),))
    spoil(out, keep=4)  # header, ok, failed, wrong: every point recorded
    again = SweepJob(sweep=spec, backend="gloo", output_path=str(out), resume=True, show_progress=False)
    first = run_ranks(run_sweep_on_backend, 2, args=(again,))[0]
    assert (first.num_skipped, first.num_ok, first.num_failed) == (3, 0, 0)
    assert first.earlier == ("0:all_reduce float32 2 KiB: failed (RuntimeError: boom)",
                             "0:all_reduce float32 4 KiB: 3 wrong element(s)")
    spoil(out, keep=3)  # the wrong point's record cut off: measured again, the failed one not
    second = run_ranks(run_sweep_on_backend, 2, args=(again,))[0]
    assert (second.num_skipped, second.num_ok) == (2, 1) and len(second.earlier) == 1


def test_a_resumed_sweep_over_a_failed_point_exits_1(tmp_path):
    """A CI sweep killed and resumed ended 'done' / 'nothing to do', exit 0, while its file held a failed
    point and a wrong one that --resume never measures again; now exit 1, naming them."""
    sweep_file = tmp_path / "s.toml"
    sweep_file.write_text('[sweep]\nbackend = "gloo"\nnproc = 2\n[defaults]\niters = 2\nwarmup_iters = 0\n'
                          'timeout_s = 30\n[[run]]\ncollective = "all_reduce"\nsizes = ["1K", "2K", "4K"]\n')
    out = tmp_path / "out.jsonl"
    first = subprocess.run(cli(str(sweep_file), "-O", str(out)), cwd=REPO, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stdout + first.stderr
    clean = out.read_text()
    spoil(out, keep=3)  # the 4 KiB point still to measure
    resumed = subprocess.run(cli(str(sweep_file), "-O", str(out), "--resume"), cwd=REPO, capture_output=True,
                             text=True, timeout=120)
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr
    assert "1 point(s) measured, 0 failed" in resumed.stderr and "2 KiB: failed (RuntimeError: boom)" in resumed.stderr
    from typer.testing import CliRunner

    from commbench.cli.app import app

    out.write_text(clean)
    spoil(out, keep=4)  # every point recorded: nothing to launch, still not a pass
    done = CliRunner().invoke(app, ["sweep", str(sweep_file), "-O", str(out), "--resume"])
    assert done.exit_code == 1 and "nothing measured" in done.output and "2 point(s)" in done.output, done.output
    out.write_text(clean)
    done = CliRunner().invoke(app, ["sweep", str(sweep_file), "-O", str(out), "--resume"])
    assert done.exit_code == 0 and "nothing to do" in done.output, done.output


class FailOnLastRank(InjectedAllReduce):
    """all_reduce, except that the last rank raises at once at the HANG_SIZE point (its peers then time out)."""

    name = "test_fail_last_rank"

    def before(self, comm, spec: PointSpec) -> None:
        if spec.size_bytes == HANG_SIZE and comm.rank == comm.size - 1:
            raise RuntimeError("injected: this rank's own failure")


def test_the_failed_record_names_the_rank_that_failed_first_not_only_its_peers_timeouts(tmp_path):
    """On 4 ranks, rank 3 raised at once and ranks 0-2 timed out waiting for it: the record kept the first three
    errors by rank number, three gloo timeouts and '...', and lost rank 3's, the cause. Now the errors are in the
    order the ranks reported them: the cause first."""
    REGISTRY[FailOnLastRank.name] = FailOnLastRank()
    try:
        out = tmp_path / "out.jsonl"
        spec = small_sweep({"collective": "test_fail_last_rank", "sizes": ["1K", HANG_SIZE, "4K"], "timeout_s": 1.0})
        job = SweepJob(sweep=spec, backend="gloo", output_path=str(out), show_progress=False)
        outcomes = run_ranks(run_sweep_on_backend, 4, args=(job,), timeout_s=60)
    finally:
        del REGISTRY[FailOnLastRank.name]
    assert outcomes[0].num_ok == 2 and outcomes[0].num_failed == 1 and outcomes[0].stopped is None
    failed = [r for r in measurements_of(out) if r.status == "failed"]
    assert len(failed) == 1 and failed[0].size_bytes == HANG_SIZE
    assert "(timeout 1 s): rank 3: RuntimeError: injected: this rank's own failure; rank " in failed[0].error


def test_after_a_hang_a_point_this_command_failed_is_not_reported_as_recorded_before(tmp_path):
    """After a hung point the same command resumes with fresh ranks; the failed record it had just written was read
    back as a point 'recorded before this launch' ('1 failed ...; 1 point(s) ... recorded before this launch failed').
    The keys the file held before the command (SweepJob.recorded_before) tell the two apart."""
    import dataclasses

    from commbench.results.records import JsonlWriter
    from commbench.sweep.runner import _pending
    from tests.test_nccl_tests_text import record

    spec = parse_sweep({"sweep": {"backend": "gloo"}, "run": [{"collective": "all_reduce", "sizes": [8, 16, 32]}]},
                       "t.toml")
    points = plan_sweep(spec, 2, backend="gloo")
    output = tmp_path / "s.jsonl"
    writer = JsonlWriter(str(output))
    for point in points[:2]:   # 8 B failed in an earlier command, 16 B in this one before its ranks were restarted
        writer.write(dataclasses.replace(record(point.point.spec.size_bytes, 1.0, in_place=True), status="failed",
                                         error="hung", point_key=point.key, time_us_median=None, algbw_gbps=None,
                                         busbw_gbps=None, num_wrong=None, loop_time_us={}))
    writer.close()
    job = SweepJob(sweep=spec, backend="gloo", output_path=str(output), resume=True)
    plan, earlier = _pending(job, points, 0)
    assert json.loads(plan)["pending"] == [2] and len(earlier) == 2   # --resume given: both were recorded before
    plan, earlier = _pending(dataclasses.replace(job, recorded_before=frozenset({points[0].key})), points, 0)
    assert json.loads(plan)["pending"] == [2] and len(earlier) == 1 and earlier[0].startswith(points[0].label), earlier
