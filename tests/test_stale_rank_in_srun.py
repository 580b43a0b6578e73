"""RANK / WORLD_SIZE left in an srun step's environment (`export RANK=$SLURM_PROCID` in the batch script gives every
task RANK=0) won over SLURM_PROCID with no check: two tasks both joined as rank 0, and the run failed only at
--timeout ('1/2 clients joined'), naming neither value; `env` and the header said launcher torchrun. Now a RANK or
WORLD_SIZE that disagrees with the step's own SLURM_PROCID / SLURM_STEP_NUM_TASKS, where no torchrun variable says
torchrun set them, is refused in one line naming both; agreeing values are the Slurm launch; torchrun inside srun is
still torchrun's."""

from __future__ import annotations

import pytest

from commbench.comm.launch import detect_rank_env
from commbench.errors import CommbenchError
from tests.launched import launch_cli

STEP = {"SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2",
        "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "SLURM_STEP_NODELIST": "hB"}


def test_a_stale_rank_in_an_srun_step_is_refused_naming_both():
    with pytest.raises(CommbenchError) as info:
        detect_rank_env({**STEP, "RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"})
    line = str(info.value)
    assert "RANK=0" in line and "SLURM_PROCID=1" in line and "\n" not in line, line
    with pytest.raises(CommbenchError, match=r"WORLD_SIZE=8 .*SLURM_STEP_NUM_TASKS=2"):
        detect_rank_env({**STEP, "RANK": "1", "WORLD_SIZE": "8"})


def test_agreeing_values_are_the_slurm_launch_and_torchrun_inside_srun_is_torchrun():
    same = detect_rank_env({**STEP, "RANK": "1", "WORLD_SIZE": "2"})
    assert (same.launcher, same.rank, same.world_size) == ("slurm", 1, 2)
    # torchrun started by srun (one task per node): its own ranks, its variables say so
    torchrun = detect_rank_env({**STEP, "RANK": "5", "WORLD_SIZE": "16", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "8",
                                "TORCHELASTIC_RUN_ID": "x"})
    assert (torchrun.launcher, torchrun.rank, torchrun.world_size) == ("torchrun", 5, 16)


@pytest.mark.timeout(120)
def test_the_launch_says_it_at_once(tmp_path):
    results = launch_cli(["bench", "all_reduce", "-b", "1K", "-e", "1K", "-n", "2", "-w", "1", "-T", "5",
                          "-J", str(tmp_path / "s.jsonl")], ("hA", "hB"), launcher="slurm",
                         extra_env={"RANK": "0", "WORLD_SIZE": "2"})
    code, _, output = results[1]
    assert code == 2 and "RANK=0" in output and "SLURM_PROCID=1" in output, output
