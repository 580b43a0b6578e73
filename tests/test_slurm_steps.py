"""Only an srun step of several tasks is a Slurm launch (found from outside: SLURM_PROCID + SLURM_NTASKS, which a batch
script and `srun --pty bash` have too, were read as one: `tune` was refused about an --nproc never given, `sweep`
dropped its file's nproc=2 and measured one rank, and a batch script of 8 tasks without srun waited --timeout for 7
ranks that never start)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from commbench.comm.launch import detect_rank_env, slurm_unlaunched_note

REPO = Path(__file__).resolve().parents[1]
BATCH = {"SLURM_JOB_ID": "1", "SLURM_PROCID": "0", "SLURM_NTASKS": "8", "SLURM_LOCALID": "0",
         "SLURM_JOB_NODELIST": "localhost"}
ONE_TASK_STEP = {"SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0", "SLURM_STEPID": "0", "SLURM_STEP_NUM_TASKS": "1",
                 "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0", "SLURM_STEP_NODELIST": "localhost"}


def test_a_step_of_several_tasks_is_a_launch_and_a_batch_script_or_one_task_step_is_not():
    step = detect_rank_env({**ONE_TASK_STEP, "SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "4", "SLURM_PROCID": "2"})
    assert (step.launcher, step.rank, step.world_size) == ("slurm", 2, 4)
    # srun --preserve-env keeps the job's SLURM_NTASKS: the step's own count decides
    kept = detect_rank_env({**ONE_TASK_STEP, "SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "8"})
    assert kept.world_size == 2
    assert detect_rank_env(ONE_TASK_STEP) is None
    assert detect_rank_env(BATCH) is None
    assert detect_rank_env({**BATCH, "SLURM_STEP_ID": str(0xFFFFFFFB)}) is None   # the batch script's own step id
    assert "srun" in slurm_unlaunched_note(BATCH) and "SLURM_NTASKS=8" in slurm_unlaunched_note(BATCH)
    assert slurm_unlaunched_note(ONE_TASK_STEP) is None and slurm_unlaunched_note({}) is None


def _run(env_extra: dict, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_"))}
    env.update(PYTHONPATH=str(REPO), **env_extra)
    return subprocess.run([sys.executable, "-m", "commbench", *args], env=env, text=True, capture_output=True,
                          timeout=timeout, start_new_session=True)


def _worlds(path: Path) -> set[int]:
    return {json.loads(line)["world_size"] for line in path.read_text().splitlines()
            if json.loads(line)["record_type"] == "measurement"}


@pytest.mark.timeout(150)
def test_a_one_task_step_honours_nproc_and_the_sweep_files_nproc(tmp_path):
    bench = _run(ONE_TASK_STEP, "bench", "all_reduce", "--nproc", "2", "-b", "1K", "-e", "1K", "-n", "2", "-w", "1",
                 "-T", "30", "-O", str(tmp_path / "b.jsonl"))
    assert bench.returncode == 0, bench.stderr
    assert _worlds(tmp_path / "b.jsonl") == {2}
    sweep_file = tmp_path / "s.toml"
    sweep_file.write_text('[sweep]\nname = "s"\nnproc = 2\n[[run]]\ncollective = "all_reduce"\nsizes = ["1K"]\n'
                          'iters = 2\nwarmup_iters = 1\n')
    sweep = _run(ONE_TASK_STEP, "sweep", str(sweep_file), "-O", str(tmp_path / "s.jsonl"))
    assert sweep.returncode == 0, sweep.stderr
    assert _worlds(tmp_path / "s.jsonl") == {2}


@pytest.mark.timeout(150)
def test_a_batch_script_without_srun_starts_local_ranks_and_says_why(tmp_path):
    run = _run(BATCH, "bench", "all_reduce", "-b", "1K", "-e", "1K", "-n", "2", "-w", "1", "-T", "60",
               "-O", str(tmp_path / "b.jsonl"), timeout=100)
    assert run.returncode == 0, run.stderr
    assert _worlds(tmp_path / "b.jsonl") == {2}
    assert "SLURM_NTASKS=8" in run.stderr and "srun" in run.stderr


@pytest.mark.timeout(150)
def test_under_a_launch_sweep_refuses_another_nproc_and_notes_the_files(tmp_path):
    import socket

    sweep_file = tmp_path / "s.toml"
    sweep_file.write_text('[sweep]\nname = "s"\nnproc = 4\n[[run]]\ncollective = "all_reduce"\nsizes = ["1K"]\n'
                          'iters = 2\nwarmup_iters = 1\n')
    step = {**ONE_TASK_STEP, "SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "2", "SLURM_STEP_NODELIST": "127.0.0.1"}
    refused = _run(step, "sweep", str(sweep_file), "--nproc", "3", "-O", str(tmp_path / "r.jsonl"))
    assert refused.returncode == 2 and refused.stderr.strip() == (
        "error: --nproc=3 conflicts with the slurm launch of 2 ranks: omit --nproc under a launcher")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_"))}
    procs = [subprocess.Popen([sys.executable, "-m", "commbench", "sweep", str(sweep_file), "-O",
                               str(tmp_path / "s.jsonl")], text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env={**env, "PYTHONPATH": str(REPO), **step, "SLURM_PROCID": str(rank),
                                   "SLURM_LOCALID": str(rank), "MASTER_PORT": port}, start_new_session=True)
             for rank in range(2)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    assert "[sweep] nproc=4 does not apply under the slurm launch of 2 ranks" in errs[0]
    assert _worlds(tmp_path / "s.jsonl") == {2}
