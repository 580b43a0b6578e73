"""A launcher started inside another's task inherits the outer one's variables beside its own; the innermost one's
ranks are the job. Open MPI's mpirun under Slurm starts one daemon per node with `srun --ntasks-per-node=1` (PRRTE
src/mca/plm/slurm/plm_slurm_module.c), so its ranks carry that step's SLURM_PROCID (the node's index) and
SLURM_STEP_NUM_TASKS (the node count): Slurm was read first, and `mpirun -np 4` on 2 nodes ran OMPI ranks 0 and 2
as one 2-rank job (launcher slurm, status ok), rank 1 refused by the -O lock, rank 3 a raw gloo error (probe P6).
Also found there: a task with a launcher's variables but its rank unset started its own local job (exit 0) while
the others waited out their timeout, and every srun step met on port 29500, so two jobs sharing a first node met in
one store."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.comm.launch import detect_rank_env
from commbench.comm import launch
from commbench.errors import CommbenchError
from tests.launched import launch_cli

# what rank 3 of `mpirun -np 4` on 2 nodes sees: its daemon is task 1 of a 2-task srun step
MPIRUN_IN_SLURM = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
                   "MASTER_ADDR": "node0", "MASTER_PORT": "29632", "SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0",
                   "SLURM_PROCID": "1", "SLURM_LOCALID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "2"}
STEP = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_LOCALID": "1",
        "SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "4", "SLURM_STEP_NODELIST": "node[0-1]"}


def _place(env):
    rank_env = detect_rank_env(env)
    return rank_env.launcher, rank_env.rank, rank_env.world_size, rank_env.local_rank


def test_mpirun_inside_slurm_is_open_mpis_job():
    assert _place(MPIRUN_IN_SLURM) == ("mpi", 3, 4, 1)
    assert _place({**MPIRUN_IN_SLURM, "OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
                   "SLURM_PROCID": "0"}) == ("mpi", 0, 4, 0)


def test_torchrun_inside_srun_and_inside_mpirun_is_torchruns_job():
    torchrun = {"RANK": "5", "WORLD_SIZE": "16", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "8", "GROUP_RANK": "0",
                "TORCHELASTIC_RUN_ID": "x", "MASTER_ADDR": "node0", "MASTER_PORT": "29400"}
    assert _place({**STEP, **torchrun}) == ("torchrun", 5, 16, 1)
    assert _place({**MPIRUN_IN_SLURM, **torchrun}) == ("torchrun", 5, 16, 1)


def test_rank_by_hand_inside_mpirun_must_be_open_mpis():
    assert _place({**MPIRUN_IN_SLURM, "RANK": "3", "WORLD_SIZE": "4"}) == ("mpi", 3, 4, 1)   # a wrapper's restatement
    with pytest.raises(CommbenchError) as info:
        detect_rank_env({**MPIRUN_IN_SLURM, "RANK": "1", "WORLD_SIZE": "4"})   # the step's SLURM_PROCID, not the rank
    line = str(info.value)
    assert "RANK=1" in line and "OMPI_COMM_WORLD_RANK=3" in line and "mpirun" in line and "\n" not in line, line


def test_an_mpich_launch_inside_slurm_is_hydras_job():
    hydra = {**STEP, "SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "2", "PMI_RANK": "3",
             "PMI_SIZE": "4", "MPI_LOCALRANKID": "1", "MASTER_ADDR": "node0"}
    assert _place(hydra) == ("hydra", 3, 4, 1)   # Hydra's proxies' step is not the ranks' (test_mpich_hydra_launch)
    # srun --mpi=pmi2 sets them to the step's own ranks: the Slurm launch
    assert _place({**STEP, "PMI_RANK": "1", "PMI_SIZE": "4"}) == ("slurm", 1, 4, 1)


@pytest.mark.parametrize("env, named, missing", [
    ({k: v for k, v in STEP.items() if k != "SLURM_PROCID"}, "SLURM_STEP_NUM_TASKS=4", "SLURM_PROCID"),
    ({"TORCHELASTIC_RUN_ID": "none", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1", "WORLD_SIZE": "4",
      "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}, "TORCHELASTIC_RUN_ID=none", "RANK"),
    ({**STEP, "TORCHELASTIC_RUN_ID": "none", "LOCAL_WORLD_SIZE": "2"}, "LOCAL_WORLD_SIZE=2", "RANK and WORLD_SIZE"),
    ({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1"}, "OMPI_COMM_WORLD_SIZE=4",
     "OMPI_COMM_WORLD_RANK"),
    ({**STEP, "OMPI_COMM_WORLD_RANK": "3"}, "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE"),
])
def test_a_launchers_variables_without_its_rank_are_refused(env, named, missing):
    with pytest.raises(CommbenchError) as info:
        detect_rank_env(env)
    line = str(info.value)
    assert named in line and f"but {missing} " in line and "\n" not in line, line


def test_what_is_no_launch_stays_none():
    assert detect_rank_env({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "1",
                            "SLURM_LOCALID": "0"}) is None   # srun --pty bash, its rank unset: --nproc applies
    assert detect_rank_env({"WORLD_SIZE": "2"}) is None      # an exported WORLD_SIZE: a note (test_partial_rank_env)
    assert detect_rank_env({"SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_NTASKS": "8"}) is None   # batch script


def test_the_refusal_is_one_line_and_exit_2_before_anything_starts(tmp_path):
    env = {k: v for k, v in STEP.items() if k != "SLURM_PROCID"}
    result = CliRunner().invoke(app, ["bench", "all_reduce", "-b", "8", "-e", "8", "-n", "1", "-w", "0",
                                      "-O", str(tmp_path / "s5.jsonl")], env={**env, "COLUMNS": "400"})
    assert result.exit_code == 2, result.output
    assert "SLURM_PROCID is not" in result.output and len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "s5.jsonl").exists()


def test_an_srun_steps_port_comes_from_its_job_and_step():
    ports = {(job, step): detect_rank_env({**STEP, "SLURM_JOB_ID": job, "SLURM_STEP_ID": step}).master_port
             for job in ("77", "78", "123456") for step in ("0", "1")}
    assert len(set(ports.values())) == len(ports) and all(15000 <= p <= 24999 for p in ports.values()), ports
    assert ports[("77", "0")] == launch.slurm_default_port(STEP) == 15770
    assert detect_rank_env({**STEP, "MASTER_PORT": "29511"}).master_port == 29511   # MASTER_PORT wins
    assert detect_rank_env({k: v for k, v in STEP.items() if k != "SLURM_JOB_ID"}).master_port == 29500
    # the other launchers' default is unchanged (torchrun always sets MASTER_PORT)
    assert detect_rank_env({k: v for k, v in MPIRUN_IN_SLURM.items() if k != "MASTER_PORT"}).master_port == 29500


@pytest.mark.timeout(150)
def test_mpirun_inside_slurm_runs_as_one_job_on_gloo(tmp_path):
    out = tmp_path / "mr.jsonl"
    results = launch_cli(["bench", "all_reduce", "-b", "8", "-e", "8", "-n", "2", "-w", "1", "-T", "20",
                          "--backend", "gloo", "-O", str(out)], ("hA", "hA", "hB"), launcher="mpi_in_slurm",
                         timeout_s=120)
    assert [code for code, _, _ in results] == [0, 0, 0], [output[-400:] for _, _, output in results]
    header = json.loads(out.read_text().splitlines()[0])
    assert (header["launcher"], header["world_size"]) == ("mpi", 3), header


def test_srun_ports_of_neighbouring_jobs_never_meet():
    """15000 + (10 x job + step) mod 10000 gave job J's step 10 the port of job J+1's step 0 (probe P6, session 44):
    steps 0..SLURM_PORT_STEPS-1 of jobs less than SLURM_PORT_JOBS ids apart now never share a port, and a later step
    shares only its own job's (README)."""
    def port(job: int, step: int) -> int:
        return launch.slurm_default_port({"SLURM_JOB_ID": str(job), "SLURM_STEP_ID": str(step)})

    assert port(4242, 10) != port(4243, 0) and port(4242, 10) == port(4242, 0)
    assert all(port(job, step) != port(job + 1, 0) for job in (77, 999, 4242) for step in range(10, 40))
    ports = {port(job, step) for job in range(5000, 5000 + launch.SLURM_PORT_JOBS)
             for step in range(launch.SLURM_PORT_STEPS)}
    assert len(ports) == launch.SLURM_PORT_JOBS * launch.SLURM_PORT_STEPS
    assert (min(ports), max(ports)) == (15000, 24999)


def test_tuning_combinations_under_srun_never_take_a_later_steps_port(monkeypatch):
    """Combination i rendezvoused on the step's port + 1 + i: under the srun default port scheme that is the port of
    the job's step i + 1 (job 77 step 0 on 15770: its combination 0 on 15771, step 1's), or the next job's step 0
    (fix F1). Rank 0 now picks a free port per combination and shares it through the launch's store."""
    import threading

    from commbench.comm.nccl_tuning import TuningCombo
    from commbench.sweep.combos import CombinationPorts, combo_environ
    from tests.distributed import free_port

    import itertools

    from commbench.comm import rank_checkin

    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    # two ranks as threads of one process: its join count (the check-in's namespace) is theirs alike
    monkeypatch.setattr(rank_checkin, "_instances", itertools.repeat(0))
    step = {**STEP, "SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "2", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(free_port())}
    got, stores = {}, []

    def rank(procid):
        ports = CombinationPorts({**step, "SLURM_PROCID": str(procid)}, wait_s=30)
        stores.append(ports)   # rank 0's store server lives as long as its process does, not its thread
        got[procid] = [ports.port(index) for index in range(3)]

    threads = [threading.Thread(target=rank, args=(procid,)) for procid in (1, 0)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert got[0] == got[1] and len(got[0]) == 3, got   # every rank meets on rank 0's pick
    steps = {launch.slurm_default_port({**step, "SLURM_STEP_ID": str(s)}) for s in range(launch.SLURM_PORT_STEPS)}
    assert not steps & set(got[0]) and not any(15000 <= port < 25000 for port in got[0]), got
    env = combo_environ(TuningCombo(), {**STEP, "TORCHELASTIC_USE_AGENT_STORE": "True"}, port=got[0][1])
    assert env["MASTER_PORT"] == str(got[0][1]) and "TORCHELASTIC_USE_AGENT_STORE" not in env
