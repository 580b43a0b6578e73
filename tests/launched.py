"""Run `commbench ARGS` as every rank of a faked multi-host launch (fork start, gloo, one process per rank).

`launch_cli(args, hosts, launcher="torchrun")` forks one process per entry of `hosts`; each sets the variables the
launcher sets for its task (torchrun: RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE / TORCHELASTIC_RUN_ID;
slurm: an srun step's SLURM_PROCID / SLURM_LOCALID / SLURM_STEP_NUM_TASKS / SLURM_STEP_ID; mpi_in_slurm: Open MPI's
OMPI_COMM_WORLD_* beside the SLURM_* of the srun step that started mpirun's daemons, one per host; hydra: MPICH's
mpiexec's PMI_RANK / PMI_SIZE / MPI_LOCALRANKID / MPI_LOCALNRANKS, no MASTER_ADDR), fakes its host name
(`socket.gethostname`, which commbench reads for hosts and racks) and runs the CLI in-process. Returns
[(exit code, stdout, output)] in rank order; a rank that hangs past `timeout_s` fails the test.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import traceback
from typing import Sequence

from tests.distributed import free_port

_LAUNCH_PREFIXES = ("SLURM_", "OMPI_", "PMI_", "MPI_LOCAL", "TORCHELASTIC_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                    "GROUP_RANK", "MASTER_", "COMMBENCH_", "CUDA_VISIBLE_DEVICES")


def launch_env(rank: int, hosts: Sequence[str], launcher: str, port: int) -> dict[str, str]:
    """The variables `launcher` gives rank `rank` of a job whose ranks sit on `hosts` (local rank: its place among
    its host's ranks)."""
    local = hosts[:rank].count(hosts[rank])
    world = len(hosts)
    if launcher == "torchrun":
        return {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(local),
                "LOCAL_WORLD_SIZE": str(hosts.count(hosts[rank])), "TORCHELASTIC_RUN_ID": "test",
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    if launcher == "slurm":
        return {"SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0", "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(local),
                "SLURM_NTASKS": str(world), "SLURM_STEP_NUM_TASKS": str(world), "SLURM_STEP_NODELIST": "localhost",
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    if launcher == "mpi_in_slurm":   # mpirun in a Slurm allocation: its ranks inherit the srun step that started
        nodes = list(dict.fromkeys(hosts))   # one PRRTE daemon per node (SLURM_PROCID: the node's index)
        return {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(world),
                "OMPI_COMM_WORLD_LOCAL_RANK": str(local), "OMPI_COMM_WORLD_LOCAL_SIZE": str(hosts.count(hosts[rank])),
                "SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0", "SLURM_PROCID": str(nodes.index(hosts[rank])),
                "SLURM_LOCALID": "0", "SLURM_NTASKS": str(len(nodes)), "SLURM_STEP_NUM_TASKS": str(len(nodes)),
                "SLURM_STEP_NODELIST": "localhost", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    if launcher == "hydra":   # MPICH / Intel MPI's mpiexec, no Slurm (pmi_proxy: pmip_cb.c), MASTER_ADDR unset
        return {"PMI_RANK": str(rank), "PMI_SIZE": str(world), "PMI_FD": "9", "MPI_LOCALRANKID": str(local),
                "MPI_LOCALNRANKS": str(hosts.count(hosts[rank])), "MASTER_PORT": str(port)}
    raise ValueError(launcher)


def _rank_main(rank, hosts, launcher, port, args, extra_env, queue) -> None:
    import socket

    try:
        for key in [k for k in os.environ if k.startswith(_LAUNCH_PREFIXES)]:
            del os.environ[key]
        os.environ.update(launch_env(rank, hosts, launcher, port), **(extra_env or {}))
        socket.gethostname = lambda: hosts[rank]
        from typer.testing import CliRunner

        from commbench.cli.app import app
        result = CliRunner().invoke(app, list(args))
        queue.put((rank, (result.exit_code, result.stdout, result.output)))
    except BaseException:  # noqa: BLE001 - report everything to the parent
        queue.put((rank, (-1, "", traceback.format_exc())))


def launch_cli(args: Sequence[str], hosts: Sequence[str], *, launcher: str = "torchrun",
               extra_env: dict[str, str] | None = None, timeout_s: float = 90.0,
               ranks: Sequence[int] | None = None) -> list[tuple[int, str, str]]:
    """`ranks`: the ranks whose results are awaited and returned (default every rank; a test may kill the others)."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, list(hosts), launcher, port, args, extra_env, queue),
                         daemon=True) for r in range(len(hosts))]
    for proc in procs:
        proc.start()
    results: dict[int, tuple[int, str, str]] = {}
    try:
        for _ in (procs if ranks is None else ranks):
            rank, value = queue.get(timeout=timeout_s)
            results[rank] = value
    finally:
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
    awaited = range(len(hosts)) if ranks is None else ranks
    missing = [r for r in awaited if r not in results]
    assert not missing, f"ranks {missing} gave no result within {timeout_s} s"
    return [results[r] for r in awaited]
