"""Which rank am I? Detect an existing launch (torchrun, Slurm, Open MPI, or local ranks that
commbench started itself: local_ranks.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from commbench.errors import CommbenchError

DEFAULT_MASTER_PORT = 29500
LOCAL_LAUNCH_ENV = "COMMBENCH_LOCAL_LAUNCH"  # set in ranks that commbench itself started
RENDEZVOUS_ENV = "COMMBENCH_RENDEZVOUS"  # their store: file://<private folder>/store (nothing listens)


@dataclass(frozen=True, kw_only=True)
class RankEnv:
    """This process's place in the job and where the rendezvous is."""

    rank: int
    world_size: int
    local_rank: int
    launcher: str  # "torchrun", "env", "emulate", "slurm", "mpi", "local" (started by commbench) or "single"
    master_addr: str
    master_port: int
    rendezvous: str | None = None  # init_method for local launches (a file store); None: tcp://addr:port
    progress: Any = field(default=None, compare=False)  # a RankProgress under commbench's own launcher

    @property
    def init_method(self) -> str:
        return self.rendezvous or f"tcp://{self.master_addr}:{self.master_port}"


def first_slurm_host(nodelist: str, variable: str = "SLURM_JOB_NODELIST") -> str:
    """First host of a Slurm node list, Slurm's hostlist syntax expanded (comm/hostlist.py): 'gpu[03-05,09],cpu1' ->
    'gpu03', 'node[1-2]-ib' -> 'node1-ib', 'rack[1-2]-gpu[01-08]' -> 'rack1-gpu01'."""
    from commbench.comm.hostlist import first_host

    try:
        return first_host(nodelist)
    except CommbenchError as exc:
        raise CommbenchError(f"{variable}: {exc}") from None


def _int(env: Mapping[str, str], key: str) -> int:
    text = env[key].strip()
    if not text.isdecimal() or len(text) > 9:
        raise CommbenchError(f"{key}={env[key]!r} is invalid: expected a whole number from 0 to 999,999,999")
    return int(text)


def _place(env: Mapping[str, str], rank_key: str, world_key: str, local_key: str) -> tuple[int, int, int]:
    """(rank, world size, local rank) from one launcher's variables, each checked: 0 <= rank < world
    <= MAX_WORLD_SIZE, 0 <= local rank < world (the launch cannot be joined otherwise: it would hang)."""
    from commbench.limits import MAX_WORLD_SIZE

    rank, world = _int(env, rank_key), _int(env, world_key)
    if not 1 <= world <= MAX_WORLD_SIZE:
        raise CommbenchError(f"{world_key}={world} is invalid: allowed 1..{MAX_WORLD_SIZE:,} ranks")
    if not rank < world:
        raise CommbenchError(f"{rank_key}={rank} with {world_key}={world} is invalid: need 0 <= {rank_key} < "
                             f"{world_key} (is this process part of that launch?)")
    local = _int(env, local_key) if local_key in env else 0
    if not local < world:
        raise CommbenchError(f"{local_key}={local} with {world_key}={world} is invalid: need 0 <= {local_key} < "
                             f"{world_key}")
    return rank, world, local


# Slurm's step ids above this are not srun steps: 0xfffffffa interactive, 0xfffffffb batch script, 0xfffffffc extern
# (slurm.h SLURM_INTERACTIVE_STEP / SLURM_BATCH_SCRIPT / SLURM_EXTERN_CONT)
_SLURM_SPECIAL_STEP_IDS = 0xFFFFFFF0


def slurm_step_tasks_key(env: Mapping[str, str]) -> str | None:
    """The variable holding the task count of the srun step this process is a task of, or None where it is in no
    srun step. srun sets SLURM_STEP_ID / SLURM_STEPID / SLURM_STEP_NUM_TASKS for each task of a step (Slurm's
    env_array_for_step); a batch script (sbatch) or an salloc shell has SLURM_PROCID and SLURM_NTASKS -- the job's
    task count -- but no step of its own, and its other tasks are never started unless srun starts them."""
    if "SLURM_PROCID" not in env:
        return None
    if "SLURM_STEP_NUM_TASKS" in env:
        return "SLURM_STEP_NUM_TASKS"
    step = env.get("SLURM_STEP_ID", env.get("SLURM_STEPID", "")).strip()
    if step.isdecimal() and int(step) < _SLURM_SPECIAL_STEP_IDS and "SLURM_NTASKS" in env:
        return "SLURM_NTASKS"
    return None


def slurm_unlaunched_note(env: Mapping[str, str] | None = None) -> str | None:
    """A line for a process in a Slurm job of several tasks that no srun step started (a batch script, an salloc
    shell): commbench starts its own local ranks there, and says so, rather than waiting for tasks that never start."""
    env = os.environ if env is None else env
    tasks = env.get("SLURM_NTASKS", "").strip()
    if "SLURM_PROCID" not in env or slurm_step_tasks_key(env) is not None or not tasks.isdecimal() or int(tasks) < 2:
        return None
    return (f"SLURM_NTASKS={tasks} but this process is not a task of an srun step (a batch script or an salloc "
            f"shell): commbench starts its own local ranks here; run it under srun for one rank per task")


def partial_rank_env_note(env: Mapping[str, str] | None = None) -> str | None:
    """A line for a process with some of torchrun's RANK / WORLD_SIZE / LOCAL_RANK set but not both RANK and
    WORLD_SIZE (an exported WORLD_SIZE, no launcher): detect_rank_env needs both, so this is no launch, and commbench
    starts its own local ranks, saying so rather than leaving the header's 'launcher: local' to tell it."""
    env = os.environ if env is None else env
    given = [key for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK") if key in env]
    missing = [key for key in ("RANK", "WORLD_SIZE") if key not in env]
    if not given or not missing:
        return None
    return (f"{' and '.join(f'{key}={env[key].strip()}' for key in given)} {'is' if len(given) == 1 else 'are'} set "
            f"but {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not: not a torchrun/srun launch; "
            "commbench starts its own local ranks here")


# variables torchrun (torch.distributed.run) sets for every worker besides RANK / WORLD_SIZE / LOCAL_RANK
TORCHRUN_MARKERS = ("TORCHELASTIC_RUN_ID", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK")


def _srun_rank_variables(env: Mapping[str, str]) -> bool:
    """True where RANK / WORLD_SIZE sit in the environment of an srun step's task with no torchrun variable beside
    them (not torchrun's, nor commbench's own ranks'): they were set by hand or inherited (`export RANK=$SLURM_PROCID`
    in a batch script gives every task 0). They must then be the step's own SLURM_PROCID / SLURM_STEP_NUM_TASKS
    (refused in one line naming both where not: two tasks would both join as one rank and wait out --timeout), and
    the launch is Slurm's."""
    tasks_key = slurm_step_tasks_key(env)
    if tasks_key is None or env.get(LOCAL_LAUNCH_ENV) or any(k in env for k in TORCHRUN_MARKERS):
        return False
    if _int(env, tasks_key) < 2:
        return False
    for mine, slurms in (("RANK", "SLURM_PROCID"), ("WORLD_SIZE", tasks_key)):
        if _int(env, mine) != _int(env, slurms):
            raise CommbenchError(f"{mine}={env[mine].strip()} but {slurms}={env[slurms].strip()} in this srun step, "
                                 f"and no torchrun variable ({', '.join(TORCHRUN_MARKERS[:2])}) says torchrun set "
                                 f"{mine}: set by hand or inherited (export RANK=$SLURM_PROCID in a batch script gives "
                                 "every task the same); unset RANK and WORLD_SIZE (srun places the ranks) or set them "
                                 "per task")
    return True


EMULATED_ENV = "COMMBENCH_EMULATED"  # set in the ranks `commbench emulate` starts (emulate/ranks.py)


def rank_variables_launcher(env: Mapping[str, str]) -> str:
    """Who set RANK / WORLD_SIZE, as far as the environment says: "local" (commbench's own ranks), "emulate"
    (`commbench emulate`'s), "torchrun" where one of torchrun's own variables (TORCHRUN_MARKERS) sits beside them,
    else "env" (set by hand, or by a launcher that names itself nowhere). Every such launch was labelled torchrun,
    ranks started with RANK / WORLD_SIZE / MASTER_* exported by hand and `emulate`'s alike."""
    if env.get(LOCAL_LAUNCH_ENV):
        return "local"
    if env.get(EMULATED_ENV):
        return "emulate"
    return "torchrun" if any(k in env for k in TORCHRUN_MARKERS) else "env"


def detect_rank_env(env: Mapping[str, str] | None = None) -> RankEnv | None:
    """The launch this process belongs to, or None when started alone (then `--nproc` applies)."""
    env = os.environ if env is None else env
    port = _int(env, "MASTER_PORT") if "MASTER_PORT" in env else DEFAULT_MASTER_PORT
    if not 0 <= port <= 65535:
        raise CommbenchError(f"MASTER_PORT={port} is invalid: a TCP port 0..65535")
    if "RANK" in env and "WORLD_SIZE" in env and not _srun_rank_variables(env):
        rank, world, local_rank = _place(env, "RANK", "WORLD_SIZE", "LOCAL_RANK")
        launcher = rank_variables_launcher(env)
        local = launcher == "local"
        return RankEnv(rank=rank, world_size=world, local_rank=local_rank,
                       launcher=launcher, master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
                       master_port=port, rendezvous=env.get(RENDEZVOUS_ENV) if local else None)
    tasks_key = slurm_step_tasks_key(env)
    if tasks_key is not None and _int(env, tasks_key) > 1:   # a 1-task step (srun --pty bash): --nproc applies
        rank, world, local_rank = _place(env, "SLURM_PROCID", tasks_key, "SLURM_LOCALID")
        variable = next((k for k in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST") if env.get(k)), None)
        addr = env.get("MASTER_ADDR") or (first_slurm_host(env[variable], variable) if variable else "127.0.0.1")
        return RankEnv(rank=rank, world_size=world, local_rank=local_rank,
                       launcher="slurm", master_addr=addr, master_port=port)
    if "OMPI_COMM_WORLD_RANK" in env and "OMPI_COMM_WORLD_SIZE" in env:
        rank, world, local_rank = _place(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                         "OMPI_COMM_WORLD_LOCAL_RANK")
        if world > 1 and "MASTER_ADDR" not in env:
            raise CommbenchError("MASTER_ADDR is not set: under mpirun pass it, e.g. "
                                 "mpirun -x MASTER_ADDR=<first host> -x MASTER_PORT=29500 commbench ...")
        return RankEnv(rank=rank, world_size=world, local_rank=local_rank,
                       launcher="mpi", master_addr=env.get("MASTER_ADDR", "127.0.0.1"), master_port=port)
    return None
