"""Which rank am I? Detect an existing launch (torchrun, Slurm, Open MPI) or start local ranks with
torch's own elastic launcher (what `torchrun --standalone` does)."""

from __future__ import annotations

import logging
import os
import re
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from commbench.errors import CommbenchError

DEFAULT_MASTER_PORT = 29500
LOCAL_LAUNCH_ENV = "COMMBENCH_LOCAL_LAUNCH"  # set in ranks that commbench itself started


@dataclass(frozen=True, kw_only=True)
class RankEnv:
    """This process's place in the job and where the rendezvous is."""

    rank: int
    world_size: int
    local_rank: int
    launcher: str  # "torchrun", "slurm", "mpi", "local" (started by commbench) or "single"
    master_addr: str
    master_port: int


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
        return RankEnv(rank=_int(env, "RANK"), world_size=_int(env, "WORLD_SIZE"),
                       local_rank=_int(env, "LOCAL_RANK") if "LOCAL_RANK" in env else 0,
                       launcher="local" if env.get(LOCAL_LAUNCH_ENV) else "torchrun", master_addr=env.get("MASTER_ADDR", "127.0.0.1"), master_port=port)
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


def _local_entry(fn: Callable[..., Any], *args: Any) -> Any:
    os.environ[LOCAL_LAUNCH_ENV] = "1"
    rank_env = detect_rank_env()
    assert rank_env is not None, "the elastic agent sets RANK/WORLD_SIZE"
    return fn(rank_env, *args)


def launch_local(nproc: int, fn: Callable[..., Any], *args: Any) -> dict[int, Any]:
    """Run `fn(rank_env, *args)` on `nproc` local ranks via torch's elastic launcher; return per-rank results.

    `fn` and `args` must be picklable (ranks are spawned). Ranks inherit stdout/stderr.
    """
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    logging.getLogger("torch.distributed.elastic").setLevel(logging.ERROR)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # what torchrun sets; silences its warning
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=nproc, run_id=uuid.uuid4().hex[:8],
                          rdzv_backend="c10d", rdzv_endpoint="127.0.0.1:0", max_restarts=0,
                          monitor_interval=0.05, start_method="spawn")
    return elastic_launch(config, _local_entry)(fn, *args)
