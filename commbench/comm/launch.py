"""Which rank am I? Detect an existing launch (torchrun, Slurm, Open MPI, MPICH / Intel MPI's Hydra, or local ranks
that commbench started itself: local_ranks.py)."""

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
    launcher: str  # "torchrun", "env", "emulate", "slurm", "mpi", "hydra", "local" (started by commbench) or "single"
    master_addr: str
    master_port: int
    rendezvous: str | None = None  # init_method for local launches (a file store); None: tcp://addr:port
    progress: Any = field(default=None, compare=False)  # a RankProgress under commbench's own launcher

    @property
    def init_method(self) -> str:
        return self.rendezvous or tcp_url(self.master_addr, self.master_port)


def tcp_url(host: str, port: int) -> str:
    """tcp://host:port, an IPv6 literal in brackets (RFC 3986 3.2.2): torch's env:// takes MASTER_ADDR=::1, but a
    tcp:// init_method of `tcp://::1:29500` fails to parse ("Port could not be cast to integer value")."""
    return f"tcp://[{host}]:{port}" if ":" in host and not host.startswith("[") else f"tcp://{host}:{port}"


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
# variables Open MPI's launcher (mpirun: PRRTE / ORTE) sets for each rank it starts
OMPI_VARIABLES = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                  "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK")


# variables MPICH's and Intel MPI's process manager (Hydra's pmi_proxy) sets for each rank it starts: MPI_LOCALNRANKS /
# MPI_LOCALRANKID (the ranks on this host, this one's index among them), then PMI_RANK / PMI_SIZE, or, under
# `mpiexec -pmi-port`, PMI_PORT / PMI_ID and no PMI_SIZE (pmodels/mpich src/pm/hydra/proxy/pmip_cb.c:889-985 at v4.3.2,
# 15f59ab2). Slurm's mpi/pmi2 plugin also sets PMI_RANK / PMI_SIZE, to the step's own task id and count
# (SchedMD/slurm src/plugins/mpi/pmi2/mpi_pmi2.c, p_mpi_hook_slurmstepd_task), as Flux does.
HYDRA_VARIABLES = ("PMI_RANK", "PMI_SIZE", "PMI_ID", "MPI_LOCALRANKID", "MPI_LOCALNRANKS")
# the local rank: Hydra's MPI_LOCALRANKID, else PMI_LOCAL_RANK, which HPE Cray PALS's mpiexec sets on Polaris: ALCF's
# user guide, "On Polaris specifically, you can use the environment variable PMI_LOCAL_RANK (as well as PMI_LOCAL_SIZE)
# to learn information about the node-local MPI ranks" (argonne-lcf/user-guides docs/polaris/data-science/frameworks/
# pytorch.md:55 at 7d04a3f9; its mpiexec is PALS's, docs/running-jobs/index.md:75). No launcher's own manual in reach
# defines it: MPICH's Hydra sets MPI_LOCALRANKID (pmip_cb.c above), Flux's PALS plugin only PALS_* (flux-core
# src/shell/plugins/pals.c at b2074a23), Slurm's pmi2 PMI_RANK / PMI_SIZE; HPE's PALS man pages were not reachable.
PMI_LOCAL_RANK_KEYS = ("MPI_LOCALRANKID", "PMI_LOCAL_RANK")


def _in_ompi_launch(env: Mapping[str, str]) -> bool:
    return "OMPI_COMM_WORLD_SIZE" in env


def _in_pmi_launch(env: Mapping[str, str]) -> bool:
    """PMI_RANK and PMI_SIZE: a PMI launcher's ranks (MPICH / Intel MPI's Hydra mpiexec, HPE's PALS, Flux; srun
    --mpi=pmi2 sets them too, to its step's own)."""
    return "PMI_RANK" in env and "PMI_SIZE" in env


def _pmi_is_the_step(env: Mapping[str, str], tasks_key: str | None) -> bool:
    """Whether PMI_RANK / PMI_SIZE are the srun step's own SLURM_PROCID / task count (srun --mpi=pmi2): then the step
    is the launch. Otherwise they are an inner launcher's: Hydra under Slurm starts one pmi_proxy per node with srun
    (its bootstrap), so its ranks carry that step's SLURM_PROCID (the proxy's index) and task count (the nodes)."""
    return tasks_key is not None and all(env[pmi].strip() == env[slurm].strip() for pmi, slurm in
                                         (("PMI_RANK", "SLURM_PROCID"), ("PMI_SIZE", tasks_key)))


def _listed(env: Mapping[str, str], keys: tuple[str, ...] | list[str]) -> str:
    return ", ".join(f"{key}={env[key].strip()}" for key in keys if key in env)


def _refuse_missing_rank(env: Mapping[str, str]) -> None:
    """A launcher's own variables with its rank or world size missing (unset by a wrapper, or lost): refused in one
    line naming what is there and what is not. Without the check such a process started its own local job (launcher
    local, exit 0) while the launch's other ranks waited out their timeout. Checked innermost launcher first (the one
    whose variables detect_rank_env reads): torchrun's, then Open MPI's, then an srun step's."""
    if env.get(LOCAL_LAUNCH_ENV) or env.get(EMULATED_ENV):
        return
    markers = [key for key in TORCHRUN_MARKERS if key in env]
    missing = [key for key in ("RANK", "WORLD_SIZE") if key not in env]
    if markers and missing:
        raise CommbenchError(f"{_listed(env, markers)} (torchrun's) {'is' if len(markers) == 1 else 'are'} set but "
                             f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not: this process "
                             "cannot tell its place in the torchrun launch; run it as torchrun starts it, or unset "
                             f"{', '.join(markers)} to start local ranks (--nproc)")
    if markers:
        return   # torchrun's ranks: the variables of launchers outside it do not matter
    ompi = [key for key in OMPI_VARIABLES if key in env]
    ompi_missing = [key for key in OMPI_VARIABLES[:2] if key not in env]
    if ompi and ompi_missing:
        raise CommbenchError(f"{_listed(env, ompi)} (Open MPI's mpirun) {'is' if len(ompi) == 1 else 'are'} set but "
                             f"{' and '.join(ompi_missing)} {'is' if len(ompi_missing) == 1 else 'are'} not: this "
                             "process cannot tell its place in the mpirun launch; run it as mpirun starts it, or "
                             f"unset {', '.join(ompi)} to start local ranks (--nproc)")
    if ompi or not missing:
        return   # Open MPI's ranks, or RANK / WORLD_SIZE as the launch (by hand)
    hydra = [key for key in HYDRA_VARIABLES if key in env]
    hydra_missing = [key for key in ("PMI_RANK", "PMI_SIZE") if key not in env]
    if hydra and hydra_missing:   # mpiexec -pmi-port (PMI_ID, no PMI_SIZE), or a wrapper that unset them
        raise CommbenchError(f"{_listed(env, hydra)} (an MPI launcher's: MPICH / Intel MPI's mpiexec) "
                             f"{'is' if len(hydra) == 1 else 'are'} set but {' and '.join(hydra_missing)} "
                             f"{'is' if len(hydra_missing) == 1 else 'are'} not: this process cannot tell its place "
                             "in the launch (mpiexec -pmi-port sets no PMI_SIZE); run mpiexec without -pmi-port, or "
                             "set RANK, WORLD_SIZE and MASTER_ADDR per rank")
    if "SLURM_PROCID" in env:
        return   # srun's rank is set
    step = env.get("SLURM_STEP_ID", env.get("SLURM_STEPID", "")).strip()
    in_step = "SLURM_STEP_NUM_TASKS" in env or (step.isdecimal() and int(step) < _SLURM_SPECIAL_STEP_IDS)
    tasks = env.get("SLURM_STEP_NUM_TASKS", env.get("SLURM_NTASKS", "")).strip()
    if in_step and tasks != "1":   # a 1-task step (srun --pty bash) is no launch: --nproc applies there
        present = [key for key in ("SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS",
                                   "SLURM_LOCALID") if key in env]
        raise CommbenchError(f"{_listed(env, present)} (an srun step's task) {'is' if len(present) == 1 else 'are'} "
                             "set but SLURM_PROCID is not: this process cannot tell its place in the srun step; run "
                             "it as srun starts it, or unset SLURM_STEP_ID and SLURM_STEP_NUM_TASKS to start local "
                             "ranks (--nproc)")


def _outer_rank_variables(env: Mapping[str, str]) -> str | None:
    """The launch whose ranks RANK / WORLD_SIZE restate, where they sit with no torchrun variable beside them (not
    torchrun's, nor commbench's own or emulate's ranks'): set by hand or inherited (`export RANK=$SLURM_PROCID` in
    a batch script gives every task 0; a wrapper's `RANK=$OMPI_COMM_WORLD_RANK`). Inside an mpirun launch they must
    be its OMPI_COMM_WORLD_RANK / _SIZE ("mpi"), else inside an srun step of several tasks its SLURM_PROCID / step
    task count ("slurm"); refused in one line naming both where not (two tasks would both join as one rank and wait
    out --timeout). None: RANK / WORLD_SIZE are the launch (torchrun's, commbench's, or by hand with no other)."""
    if env.get(LOCAL_LAUNCH_ENV) or env.get(EMULATED_ENV) or any(k in env for k in TORCHRUN_MARKERS):
        return None
    if _in_ompi_launch(env):
        launcher, where, pairs = "mpi", "this mpirun launch", (("RANK", "OMPI_COMM_WORLD_RANK"),
                                                                ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"))
    elif _in_pmi_launch(env):
        launcher, where, pairs = "hydra", "this mpiexec (PMI) launch", (("RANK", "PMI_RANK"),
                                                                         ("WORLD_SIZE", "PMI_SIZE"))
    else:
        tasks_key = slurm_step_tasks_key(env)
        if tasks_key is None or _int(env, tasks_key) < 2:
            return None
        launcher, where, pairs = "slurm", "this srun step", (("RANK", "SLURM_PROCID"), ("WORLD_SIZE", tasks_key))
    for mine, theirs in pairs:
        if _int(env, mine) != _int(env, theirs):
            raise CommbenchError(f"{mine}={env[mine].strip()} but {theirs}={env[theirs].strip()} in {where}, "
                                 f"and no torchrun variable ({', '.join(TORCHRUN_MARKERS[:2])}) says torchrun set "
                                 f"{mine}: set by hand or inherited (export RANK=$SLURM_PROCID in a batch script gives "
                                 "every task the same); unset RANK and WORLD_SIZE (the launcher places the ranks) or "
                                 "set them per task")
    return launcher


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


# srun steps of one job whose ports differ (SLURM_STEP_ID 0..9); a job's step 10 shares step 0's port, and so on
SLURM_PORT_STEPS = 10
# consecutive job ids whose steps never share a port: 10,000 ports (15000..24999) / SLURM_PORT_STEPS
SLURM_PORT_JOBS = 1000


def slurm_default_port(env: Mapping[str, str]) -> int | None:
    """The rendezvous port of an srun step where MASTER_PORT is not set: 15000 + SLURM_PORT_STEPS x (SLURM_JOB_ID mod
    SLURM_PORT_JOBS) + SLURM_STEP_ID mod SLURM_PORT_STEPS, so two jobs (or two steps of one job) whose first host is
    the same node do not meet on one port (a fixed 29500 put job B's ranks into job A's store): steps 0..9 of jobs
    less than 1,000 ids apart never share one; a step past 9 shares the port of its own job's step 10 apart, never
    another job's (15000 + (10 x job + step) mod 10000 gave job J's step 10 job J+1's step 0's). The same range as
    PyTorch Lightning's SLURMEnvironment.main_port (15000 + the job id's last 4 digits; Lightning-AI/pytorch-lightning
    src/lightning/fabric/plugins/environments/slurm.py at 03f57f9c); 15000..24999 is below Linux's ephemeral range
    (net.ipv4.ip_local_port_range, 32768..60999 by default), so no outgoing connection holds it. None without a job
    id."""
    job = env.get("SLURM_JOB_ID", env.get("SLURM_JOBID", "")).strip()
    step = env.get("SLURM_STEP_ID", env.get("SLURM_STEPID", "0")).strip()
    if not job.isdecimal():
        return None
    step_id = int(step) if step.isdecimal() and int(step) < _SLURM_SPECIAL_STEP_IDS else 0
    return 15000 + SLURM_PORT_STEPS * (int(job) % SLURM_PORT_JOBS) + step_id % SLURM_PORT_STEPS


def _pmi_rank_env(env: Mapping[str, str], port: int | None) -> RankEnv:
    """A PMI launcher's rank (Hydra's mpiexec: HYDRA_VARIABLES). Its ranks meet at MASTER_ADDR, which mpiexec passes
    on (it forwards the whole environment by default, or -genv MASTER_ADDR <host>); where unset, 127.0.0.1 only when
    every rank is on this host (MPI_LOCALNRANKS = PMI_SIZE), else refused in one line: no PMI variable names rank 0's
    host, and each rank starting a local job of its own ran PMI_SIZE one-rank jobs."""
    local_key = next((key for key in PMI_LOCAL_RANK_KEYS if key in env), "MPI_LOCALRANKID")
    rank, world, local_rank = _place(env, "PMI_RANK", "PMI_SIZE", local_key)
    local_ranks = env.get("MPI_LOCALNRANKS", "").strip()
    all_here = local_ranks.isdecimal() and int(local_ranks) == world
    if world > 1 and not all_here and not env.get("MASTER_ADDR"):
        here = f"MPI_LOCALNRANKS={local_ranks} of " if local_ranks else ""
        raise CommbenchError(f"MASTER_ADDR is not set under this mpiexec launch ({here}PMI_SIZE={world} ranks, not all "
                             "on this host): pass rank 0's host, e.g. mpiexec -genv MASTER_ADDR <first host> -genv "
                             "MASTER_PORT 29500 commbench ...")
    return RankEnv(rank=rank, world_size=world, local_rank=local_rank, launcher="hydra",
                   master_addr=env.get("MASTER_ADDR") or "127.0.0.1",
                   master_port=DEFAULT_MASTER_PORT if port is None else port)


def detect_rank_env(env: Mapping[str, str] | None = None) -> RankEnv | None:
    """The launch this process belongs to, or None when started alone (then `--nproc` applies).

    A launcher started inside another's task inherits the outer one's variables beside its own, so the innermost
    launcher's variables win: torchrun's RANK / WORLD_SIZE, then Open MPI's OMPI_COMM_WORLD_*, then a PMI launcher's
    PMI_RANK / PMI_SIZE (MPICH / Intel MPI's Hydra mpiexec; where they are not the srun step's own), then an srun
    step's.
    mpirun inside a Slurm allocation starts one daemon on each node it has none on with `srun --ntasks-per-node=1
    --ntasks=<those nodes>` (openpmix/prrte src/mca/plm/slurm/plm_slurm_module.c at 0d601f8e, launch_daemons), so its
    ranks there carry that step's SLURM_PROCID (the daemon's index) and task count (the node count): read as the
    launch, they ran as another job (the probe's `mpirun -np 4` on 2 nodes: ranks 0 and 2 as one 2-rank job)."""
    env = os.environ if env is None else env
    port = _int(env, "MASTER_PORT") if "MASTER_PORT" in env else None
    if port is not None and not 0 <= port <= 65535:
        raise CommbenchError(f"MASTER_PORT={port} is invalid: a TCP port 0..65535")
    _refuse_missing_rank(env)
    if "RANK" in env and "WORLD_SIZE" in env and _outer_rank_variables(env) is None:
        rank, world, local_rank = _place(env, "RANK", "WORLD_SIZE", "LOCAL_RANK")
        launcher = rank_variables_launcher(env)
        local = launcher == "local"
        return RankEnv(rank=rank, world_size=world, local_rank=local_rank,
                       launcher=launcher, master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
                       master_port=DEFAULT_MASTER_PORT if port is None else port,
                       rendezvous=env.get(RENDEZVOUS_ENV) if local else None)
    if _in_ompi_launch(env):
        rank, world, local_rank = _place(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                         "OMPI_COMM_WORLD_LOCAL_RANK")
        if world > 1 and "MASTER_ADDR" not in env:
            raise CommbenchError("MASTER_ADDR is not set: under mpirun pass it, e.g. "
                                 "mpirun -x MASTER_ADDR=<first host> -x MASTER_PORT=29500 commbench ...")
        return RankEnv(rank=rank, world_size=world, local_rank=local_rank, launcher="mpi",
                       master_addr=env["MASTER_ADDR"] if world > 1 else env.get("MASTER_ADDR", "127.0.0.1"),
                       master_port=DEFAULT_MASTER_PORT if port is None else port)
    tasks_key = slurm_step_tasks_key(env)
    if tasks_key is not None and _int(env, tasks_key) < 2:
        tasks_key = None   # a 1-task step (srun --pty bash) is no launch: --nproc applies, or an mpiexec inside it
    if _in_pmi_launch(env) and not _pmi_is_the_step(env, tasks_key):
        return _pmi_rank_env(env, port)
    if tasks_key is not None:
        rank, world, local_rank = _place(env, "SLURM_PROCID", tasks_key, "SLURM_LOCALID")
        variable = next((k for k in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST") if env.get(k)), None)
        addr = env.get("MASTER_ADDR") or (first_slurm_host(env[variable], variable) if variable else "127.0.0.1")
        if port is None:
            port = slurm_default_port(env) or DEFAULT_MASTER_PORT
        return RankEnv(rank=rank, world_size=world, local_rank=local_rank,
                       launcher="slurm", master_addr=addr, master_port=port)
    return None
