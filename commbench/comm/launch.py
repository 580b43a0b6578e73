"""Which rank am I? Detect an existing launch (torchrun, Slurm, Open MPI, or local ranks that
commbench started itself: local_ranks.py)."""

from __future__ import annotations

import os
import re
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
    launcher: str  # "torchrun", "slurm", "mpi", "local" (started by commbench) or "single"
    master_addr: str
    master_port: int
    rendezvous: str | None = None  # init_method for local launches (a file store); None: tcp://addr:port
    progress: Any = field(default=None, compare=False)  # a RankProgress under commbench's own launcher

    @property
    def init_method(self) -> str:
        return self.rendezvous or f"tcp://{self.master_addr}:{self.master_port}"


def first_slurm_host(nodelist: str) -> str:
    """First hostname of a Slurm node list: 'gpu[03-05,09],cpu1' -> 'gpu03'."""
    match = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not match:
        raise CommbenchError(f"SLURM_JOB_NODELIST={nodelist!r} cannot be parsed: set MASTER_ADDR explicitly")
    prefix, ranges = match.group(1), match.group(2)
    if not ranges:
        return prefix
    return prefix + ranges.split(",")[0].split("-")[0]


def _int(env: Mapping[str, str], key: str) -> int:
    try:
        return int(env[key])
    except ValueError:
        raise CommbenchError(f"{key}={env[key]!r} is invalid: expected an integer") from None


def detect_rank_env(env: Mapping[str, str] | None = None) -> RankEnv | None:
    """The launch this process belongs to, or None when started alone (then `--nproc` applies)."""
    env = os.environ if env is None else env
    port = _int(env, "MASTER_PORT") if "MASTER_PORT" in env else DEFAULT_MASTER_PORT
    if "RANK" in env and "WORLD_SIZE" in env:
        rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
        if not 0 <= rank < world:
            raise CommbenchError(f"RANK={rank} with WORLD_SIZE={world} is invalid: need 0 <= RANK < WORLD_SIZE")
        local = bool(env.get(LOCAL_LAUNCH_ENV))
        return RankEnv(rank=rank, world_size=world,
                       local_rank=_int(env, "LOCAL_RANK") if "LOCAL_RANK" in env else 0,
                       launcher="local" if local else "torchrun", master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
                       master_port=port, rendezvous=env.get(RENDEZVOUS_ENV) if local else None)
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        world = _int(env, "SLURM_NTASKS")
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or "127.0.0.1"
        addr = env.get("MASTER_ADDR") or first_slurm_host(nodelist)
        return RankEnv(rank=_int(env, "SLURM_PROCID"), world_size=world,
                       local_rank=_int(env, "SLURM_LOCALID") if "SLURM_LOCALID" in env else 0,
                       launcher="slurm", master_addr=addr, master_port=port)
    if "OMPI_COMM_WORLD_RANK" in env and "OMPI_COMM_WORLD_SIZE" in env:
        world = _int(env, "OMPI_COMM_WORLD_SIZE")
        if world > 1 and "MASTER_ADDR" not in env:
            raise CommbenchError("MASTER_ADDR is not set: under mpirun pass it, e.g. "
                                 "mpirun -x MASTER_ADDR=<first host> -x MASTER_PORT=29500 commbench ...")
        return RankEnv(rank=_int(env, "OMPI_COMM_WORLD_RANK"), world_size=world,
                       local_rank=_int(env, "OMPI_COMM_WORLD_LOCAL_RANK") if "OMPI_COMM_WORLD_LOCAL_RANK" in env else 0,
                       launcher="mpi", master_addr=env.get("MASTER_ADDR", "127.0.0.1"), master_port=port)
    return None
