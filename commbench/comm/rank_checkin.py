"""Every rank of a launch checks in on the launch's TCPStore before joining its process group, so a rank started
twice (two processes given one RANK / SLURM_PROCID / OMPI_COMM_WORLD_RANK / PMI_RANK) is found within seconds and
every rank stops with one line naming it. Before, both joined torch's rendezvous as that rank: the store's key of
one overwrote the other's, and every rank waited out --timeout for a peer that never came (probe P6, session 44).

The first process to claim a rank holds it (TCPStore.compare_set on an unset key sets it, atomically on the
server); a second finds it held, records why and wakes the others. A rank's check-in then waits until all
`world_size` ranks have checked in (one counter, one key the last sets), so a missing rank is named at the timeout.
Every rank also checks the launch it belongs to (launch_identity: the launcher's job ids and the world size) against
the first one recorded on the store, so two launches whose ranks meet on one host and port (two jobs' srun ports, or
mpirun's fixed 29500) are refused in one line naming both, not joined into one job (probe P8: job B's rank 1 filled
job A's empty slot, both exited 0 with another job's rank in their results)."""

from __future__ import annotations

import datetime
import itertools
import os
import socket

from commbench.errors import CommbenchError

PREFIX = "commbench/checkin"
NAMED_MISSING_MAX_WORLD = 1024   # the timeout names missing ranks up to this world (one store check each)
_instances = itertools.count()   # every rank joins its launches in the same order, so indices agree


class RankStartedTwice(CommbenchError):
    """Two processes of one launch were given the same rank."""


class LaunchesMet(CommbenchError):
    """Ranks of two launches met on one store (one host and port)."""


# the variables that name a launch, per launcher (the same in every rank of it, different between launches): Slurm's
# job and step, torchrun's run id, Open MPI's job id (PRRTE: OMPI_MCA_ess_base_jobid), a PMI launcher's KVS name
LAUNCH_KEYS = ("SLURM_JOB_ID", "SLURM_STEP_ID", "TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid", "PMI_KVSNAME")


def launch_identity(world_size: int, env=None) -> str:
    """What tells this launch from another whose ranks could reach the same store: the launcher's job ids present and
    the world size (ranks started by hand with RANK / WORLD_SIZE carry only the world size)."""
    env = os.environ if env is None else env
    named = [f"{key}={env[key]}" for key in LAUNCH_KEYS if env.get(key)]
    return " ".join(named + [f"world {world_size}"])


def torchelastic_agent_store() -> bool:
    """torchrun's agent already serves MASTER_PORT; then every rank is a client (torch rendezvous.py)."""
    return os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"


def launch_store(*, master_addr: str, master_port: int, rank: int, world_size: int, timeout_s: float):
    """The launch's TCPStore at MASTER_ADDR:MASTER_PORT: rank 0 serves it (multi_tenant: one server for torch and
    cupy-nccl in one process) unless torchrun's agent does, as torch's tcp:// rendezvous does
    (torch/distributed/rendezvous.py _create_c10d_store, torch 2.13), but without waiting there for the workers to
    connect: check_in waits for them, and learns of a rank started twice meanwhile."""
    import torch.distributed as dist

    return dist.TCPStore(master_addr, master_port, world_size, rank == 0 and not torchelastic_agent_store(),
                         datetime.timedelta(seconds=timeout_s), wait_for_workers=False, multi_tenant=True)


def checked_in_launch_store(*, master_addr: str, master_port: int, rank: int, world_size: int, join_s: float,
                            timeout_s: float, where: str, setting: str = "--timeout"):
    """The launch's store (launch_store), this rank checked in on it (check_in: a rank started twice, or two launches
    met, stop every rank in one line), its timeout then `timeout_s` (the collectives'): the one path every backend's
    join takes before it builds its communicator (torch's process group, cupy-nccl's NCCL unique-id exchange).
    `join_s`: how long the check-in waits for every rank, named as `setting`."""
    try:
        store = launch_store(master_addr=master_addr, master_port=master_port, rank=rank, world_size=world_size,
                             timeout_s=join_s)
    except RuntimeError as exc:
        if rank != 0 or "EADDRINUSE" not in str(exc):
            raise
        # a refusal before anything is measured, exit 2 as the other launch's ranks get ("two launches met")
        raise LaunchesMet(f"rendezvous {where} failed: port {master_port} is in use on this host (EADDRINUSE) as rank "
                          "0 starts the launch's store: another launch's store is on it, or rank 0 was started twice; "
                          "set another MASTER_PORT, or start each rank once") from None
    check_in(store, rank=rank, world_size=world_size, address=f"tcp://{master_addr}:{master_port}", where=where,
             timeout_s=join_s, setting=setting,
             served_port=master_port if rank == 0 and not torchelastic_agent_store() else None)
    store.set_timeout(datetime.timedelta(seconds=timeout_s))
    return store


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


def check_in(store, *, rank: int, world_size: int, address: str, where: str, timeout_s: float,
             setting: str = "--timeout", namespace: str | None = None, launch: str | None = None,
             served_port: int | None = None) -> None:
    """Claim `rank` on `store` and wait until every rank of the launch has claimed its own. RankStartedTwice (one
    line naming the rank and both processes) where another process holds `rank`, on that process and on every
    rank waiting; a RunFailed naming the ranks that did not check in when the store's timeout passes. `namespace`
    tells a launch's successive joins apart (default: this process's join count, plus torchrun's restart count);
    `address` the store's (the lines name it), `where` this rank's join (its timeout line). `served_port`: the port
    of the store server this process runs (rank 0's, unless torchrun's agent serves): the store `address` reaches must
    be that one, else rank 0 runs on two hosts (served_elsewhere)."""
    if namespace is None:
        namespace = f"{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/{next(_instances)}"
    base = f"{PREFIX}/{namespace}"
    me = f"{socket.gethostname()} pid {os.getpid()}"
    launch = launch_identity(world_size) if launch is None else launch
    first = _text(store.compare_set(f"{base}/launch", "", launch))
    if first != launch:
        line = (f"two launches met at {address}: this rank {rank} ({me}) is of the launch '{launch}', the store's ranks "
                f"of '{first}': their ranks would join one job; give each launch its own MASTER_PORT (or MASTER_ADDR)")
        store.set(f"{base}/refused", line)
        store.set(f"{base}/done", "refused")
        raise LaunchesMet(line)
    if served_port is not None:
        elsewhere = served_elsewhere(store, served_port, me)
        if elsewhere is not None:
            line = (f"rank {rank} of {world_size} was started on two hosts: {elsewhere} serves the launch's store at "
                    f"{address}, and {me} was given rank {rank} too (rank 0 serves the store on its own host, so this "
                    "one's is not the store its ranks meet at): start rank 0 once, on the host MASTER_ADDR names, or "
                    "give each launch its own MASTER_ADDR/MASTER_PORT")
            store.set(f"{base}/refused", line)
            store.set(f"{base}/done", "refused")
            raise RankStartedTwice(line)
    held = _text(store.compare_set(f"{base}/rank{rank}", "", me))
    if held != me:
        line = (f"rank {rank} of {world_size} was started twice in the launch at {address}: {held} holds it, {me} "
                "was given it too, and every rank still joining stops: start each rank once (each process needs its "
                "own RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK or PMI_RANK)")
        store.set(f"{base}/refused", line)
        store.set(f"{base}/done", "refused")
        raise RankStartedTwice(line)
    if store.add(f"{base}/count", 1) == world_size:
        store.set(f"{base}/done", "joined")
    try:
        store.wait([f"{base}/done"])
    except RuntimeError:   # the store's timeout (DistStoreError): a rank never came
        raise _missing(store, base, world_size, where, timeout_s, setting) from None
    if store.check([f"{base}/refused"]):
        refused = _text(store.get(f"{base}/refused"))
        raise (LaunchesMet if refused.startswith("two launches met") else RankStartedTwice)(refused)


SERVER_KEY = f"{PREFIX}/server"   # who serves the store: set by the rank 0 that found it is its own
SERVER_WAIT_S = 3.0   # how long a rank 0 whose store is served elsewhere waits to learn by whom


def served_elsewhere(store, served_port: int, me: str) -> str | None:
    """Who serves the store `store` reaches, where that is not this process's own server on `served_port`; None where
    it is (then `me` is recorded as its server), or where the own server cannot be reached on loopback to tell.
    Rank 0 serves the launch's store on its host and connects to it at MASTER_ADDR like every rank (torch TCPStore):
    a rank 0 on host B with MASTER_ADDR naming host A, where another rank 0 serves, binds its own server unseen and
    joins A's store as a client. A token written through MASTER_ADDR and looked for on the own server tells them
    apart, whichever rank 0 started first."""
    import torch.distributed as dist

    token = f"{PREFIX}/token/{me}/{os.urandom(6).hex()}"
    store.set(token, "1")
    try:
        own = dist.TCPStore("127.0.0.1", served_port, 1, False, datetime.timedelta(seconds=SERVER_WAIT_S),
                            wait_for_workers=False)
        ours = own.check([token])
    except RuntimeError:   # the own server is not on loopback: nothing to tell
        return None
    if ours:
        store.set(SERVER_KEY, me)
        return None
    try:
        store.wait([SERVER_KEY], datetime.timedelta(seconds=SERVER_WAIT_S))
        return _text(store.get(SERVER_KEY))
    except RuntimeError:   # its rank 0 has not checked in yet
        return "a rank 0 on the host MASTER_ADDR names"


def _missing(store, base: str, world_size: int, where: str, timeout_s: float, setting: str) -> CommbenchError:
    from commbench.comm.local_ranks import RunFailed

    try:
        joined = f"{store.add(f'{base}/count', 0)} of {world_size} ranks joined"
        named = ""
        if world_size <= NAMED_MISSING_MAX_WORLD:
            missing = [r for r in range(world_size) if not store.check([f"{base}/rank{r}"])]
            shown = ", ".join(map(str, missing[:8])) + (f", ... ({len(missing)})" if len(missing) > 8 else "")
            named = f" (missing: rank{'s' if len(missing) > 1 else ''} {shown})" if missing else ""
    except RuntimeError:   # rank 0, which serves the store, timed out too and is gone: what joined is unread
        joined, named = f"not all {world_size} ranks joined", " (which: rank 0's store closed first; rank 0 names them)"
    return RunFailed(f"rendezvous {where} did not complete within {setting}={timeout_s:g} s: {joined}{named} (is "
                     "every rank of the launch running, and MASTER_ADDR/MASTER_PORT right?)")
