"""cupy-nccl (CuPy's raw NCCL) opened the launch's TCPStore without checking in on it, so a rank started twice there
only waited out the NCCL unique-id exchange (fix F1, session 46; torch's backends check in since session 45). Every
backend now takes rank_checkin.checked_in_launch_store before it builds its communicator. No GPU here: CuPy and the
communicator's construction are stubbed, so the path is tested up to the NCCL unique-id exchange; the exchange itself
and ncclCommInitRank run only on a GPU (tests/test_cupy_gpu.py)."""

from __future__ import annotations

import multiprocessing as mp
import sys
import types

import pytest

from commbench.comm import cupy_backend
from commbench.comm.launch import RankEnv
from tests.distributed import free_port


def _fake_cupy_modules() -> dict:
    nccl = types.SimpleNamespace(get_version=lambda: 22105)
    cuda = types.SimpleNamespace(nccl=nccl, Device=lambda index: types.SimpleNamespace(use=lambda: None),
                                 Stream=lambda non_blocking: types.SimpleNamespace(synchronize=lambda: None))
    cupy = types.ModuleType("cupy")
    cupy.cuda = cuda
    return {"cupy": cupy, "cupy.cuda": cuda, "cupy.cuda.nccl": nccl}


def _rank(rank: int, world_size: int, port: int, queue) -> None:
    from commbench.comm.rank_checkin import LaunchesMet, RankStartedTwice

    sys.modules.update(_fake_cupy_modules())
    cupy_backend.cupy_status = lambda: (True, "stubbed")
    # the communicator (NCCL unique-id exchange + ncclCommInitRank) is what needs a GPU: stubbed
    cupy_backend.CupyNcclBackend._communicator = lambda self, key, members, timeout_s=None: "communicator"
    rank_env = RankEnv(rank=rank, world_size=world_size, local_rank=0, launcher="env", master_addr="127.0.0.1",
                       master_port=port)
    try:
        cupy_backend.CupyNcclBackend(rank_env, timeout_s=45)
        queue.put((rank, "joined"))
    except (RankStartedTwice, LaunchesMet) as exc:
        queue.put((rank, str(exc)))
    except BaseException as exc:  # noqa: BLE001 - report to the parent
        queue.put((rank, f"{type(exc).__name__}: {exc}"))


@pytest.mark.timeout(150)
def test_a_rank_started_twice_under_cupy_nccl_stops_every_rank_in_one_line():
    world_size, port = 3, free_port()
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(rank, world_size, port, queue), daemon=True) for rank in (0, 1, 1)]
    for proc in procs:
        proc.start()
    try:
        said = [queue.get(timeout=100)[1] for _ in procs]   # rank 2 never comes: only the refusal ends the wait
    finally:
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
    assert len(said) == 3 and all(line.startswith(f"rank 1 of 3 was started twice in the launch at tcp://127.0.0.1:"
                                                  f"{port}") for line in said), said
