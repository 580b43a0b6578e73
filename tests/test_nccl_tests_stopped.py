"""A bench --format nccl-tests run stopped by a signal mid-sweep: the text ends with whole rows and one comment
line saying it stopped (no half row, no footer that claims the test concluded); the JSONL keeps every record.

The ranks run the real CLI in subprocesses whose measure_point stalls at 32 B in-place: the size's out-of-place
record is written, its in-place cell never is; the signal is sent once both ranks stall there, so it lands at the
same place every time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from commbench.results.importers.nccl_tests import parse_text
from commbench.results.records import measurements
from tests.distributed import free_port

REPO = Path(__file__).resolve().parents[1]
STALLS_AT_32_IN_PLACE = """
import os, sys, time
import commbench.measure.bench as bench
real = bench.measure_point
def measure(backend, comm, collective, spec, loop, **kw):
    if spec.in_place and spec.size_bytes == 32:
        open(os.path.join(os.environ["STALLED_DIR"], str(os.getpid())), "w").close()
        time.sleep(300)
    return real(backend, comm, collective, spec, loop, **kw)
bench.measure_point = measure
sys.argv = ["commbench", *sys.argv[1:]]
from commbench.__main__ import main
main()
"""
ARGS = ["bench", "all_reduce", "-b", "8", "-e", "64", "-n", "2", "-w", "0", "--timeout", "60", "--format", "nccl-tests"]


def _start(args: list[str], stalled: Path, env: dict | None = None) -> subprocess.Popen:
    stalled.mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, "-c", STALLS_AT_32_IN_PLACE, *args], cwd=REPO, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), "STALLED_DIR": str(stalled), **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _wait_until_stalled(procs: list[subprocess.Popen], stalled: Path, wait_s: float = 60.0) -> None:
    """Until both ranks sit in 32 B in-place (each leaves a file there as it stalls)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if len(list(stalled.iterdir())) == 2:
            return
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.05)
    raise AssertionError(f"the ranks did not reach 32 B in-place in {wait_s} s")


def _finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out, err


def _check_text(text: str, out: Path) -> None:
    lines = text.splitlines()
    rows = [line for line in lines if line[:12].strip().isdigit()]
    assert [row.split()[0] for row in rows] == ["8", "16"] and all("N/A" not in row for row in rows), text
    assert text.endswith("\n") and lines[-1].startswith("# stopped, no footer: interrupted (SIG"), text
    assert not any(line.startswith(("# Out of bounds", "# Avg bus", "# Collective test concluded")) for line in lines)
    imported = parse_text(text, "log.txt")
    assert imported.problems == []
    assert [(m.size_bytes, m.in_place) for m in measurements(imported.records)] == \
        [(8, False), (8, True), (16, False), (16, True)]
    kept = [json.loads(line) for line in out.read_text().splitlines()][1:]  # 32 B out-of-place: in the JSONL
    assert [(r["size_bytes"], r["in_place"], r["status"]) for r in kept][-1] == (32, False, "ok") and len(kept) == 5


def test_a_local_launch_stopped_mid_size_ends_its_text_at_whole_rows_and_says_so(tmp_path):
    out = tmp_path / "ar.jsonl"
    proc = _start(ARGS + ["--nproc", "2", "-J", str(out)], tmp_path / "stalled")
    _wait_until_stalled([proc], tmp_path / "stalled")
    proc.send_signal(signal.SIGINT)
    code, text, err = _finish(proc)
    assert code == 130 and err.strip() == f"interrupted (SIGINT): 5 point(s) kept in {out}", err
    _check_text(text, out)
    assert text.splitlines()[-1].startswith(f"# stopped, no footer: interrupted (SIGINT): 5 point(s) kept in {out}")


def test_ranks_of_a_launcher_stopped_mid_size_print_no_half_row_and_no_footer(tmp_path):
    """Under torchrun/srun (a batch system's SIGTERM) rank 0 printed the size's out-of-place cell with N/A for
    in-place, read back as a size whose collective has no in-place form, then a footer saying the test
    concluded OK."""
    out = tmp_path / "ar.jsonl"
    common = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2"}
    ranks = [_start(ARGS + ["-J", str(out)], tmp_path / "stalled", {**common, "RANK": str(r), "LOCAL_RANK": str(r)})
             for r in range(2)]
    try:
        _wait_until_stalled(ranks, tmp_path / "stalled")
        for proc in ranks:
            proc.send_signal(signal.SIGTERM)
        (code, text, err), (code1, _, err1) = (_finish(proc) for proc in ranks)
    finally:
        for proc in ranks:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert (code, code1) == (130, 130), (err, err1)
    assert err.strip().startswith("interrupted (SIGTERM): rank 0 of the env launch stopped"), err
    _check_text(text, out)
