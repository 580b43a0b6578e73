"""Every rank of a launch must run the same configuration (found from outside: ranks started with different -b crashed
gloo with SIGABRT and C++ frame dumps, and with -c 0 and different dtypes both exited 0 with float32 points recorded as
ok against a bfloat16 peer; two ranks reading different sweep files aborted rank 0 and gave rank 1 a 72-line
traceback). At start-up the ranks all-gather a hash of what decides their points and stop with one line."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from commbench.comm.same_config import mismatch_line
from commbench.measure.bench import BenchConfig, bench_digest

REPO = Path(__file__).resolve().parents[1]


def test_the_line_names_the_ranks_that_differ_from_rank_0():
    assert mismatch_line(["a", "a", "a"], "sweep") is None
    line = mismatch_line(["a", "b", "b", "a", "a", "a", "a", "c"], "bench configuration")
    assert "rank(s) 1-2, 7 differ from rank 0" in line and "8 ranks" in line and "\n" not in line


def test_the_digest_counts_what_plans_points_not_each_ranks_own_file_or_view():
    base = BenchConfig(collective="all_reduce", sizes_bytes=(1024,), argv=("a",), output_path="r0.jsonl")
    same = dataclasses.replace(base, argv=("b",), output_path="r1.jsonl", show_view=False)
    assert bench_digest(base) == bench_digest(same)
    assert bench_digest(base) != bench_digest(dataclasses.replace(base, dtype="bfloat16"))
    assert bench_digest(base) != bench_digest(dataclasses.replace(base, sizes_bytes=(2048,)))


def _two_ranks(tmp_path: Path, argvs: list[list[str]]) -> list[tuple[int, str]]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_"))}
    procs = [subprocess.Popen([sys.executable, "-m", "commbench", *argv], cwd=tmp_path, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                              env={**env, "PYTHONPATH": str(REPO), "SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0",
                                   "SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "2", "SLURM_PROCID": str(rank),
                                   "SLURM_LOCALID": str(rank), "SLURM_STEP_NODELIST": "127.0.0.1",
                                   "MASTER_PORT": port})
             for rank, argv in enumerate(argvs)]
    try:
        return [(p.wait(timeout=90), p.communicate()[1]) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)


@pytest.mark.timeout(120)
def test_ranks_with_different_dtypes_and_no_data_check_stop_in_one_line_and_record_nothing(tmp_path):
    bench = ["bench", "all_reduce", "-b", "1K", "-e", "4K", "-n", "2", "-w", "1", "-T", "20", "-c", "0", "-O", "r.jsonl"]
    results = _two_ranks(tmp_path, [bench + ["-d", "float32"], bench + ["-d", "bfloat16"]])
    for rc, err in results:
        assert rc == 2, err
        assert err.strip().splitlines() == [err.strip()], err
        assert "do not run the same bench configuration: rank(s) 1 differ from rank 0" in err
    assert not (tmp_path / "r.jsonl").exists() or '"measurement"' not in (tmp_path / "r.jsonl").read_text()


@pytest.mark.timeout(120)
def test_ranks_reading_different_sweep_files_stop_in_one_line(tmp_path):
    for rank, size in enumerate(("1K", "2K")):
        (tmp_path / f"s{rank}.toml").write_text(f'[sweep]\nname = "s"\n[[run]]\ncollective = "all_reduce"\n'
                                                f'sizes = ["{size}"]\niters = 2\nwarmup_iters = 1\n')
    results = _two_ranks(tmp_path, [["sweep", f"s{rank}.toml", "-O", f"o{rank}.jsonl"] for rank in range(2)])
    for rc, err in results:
        assert rc == 2, err
        assert err.strip().splitlines() == [err.strip()], err
        assert "do not run the same sweep: rank(s) 1 differ from rank 0" in err
