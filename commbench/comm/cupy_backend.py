"""cupy-nccl: the same workloads on raw NCCL communicators from `cupy.cuda.nccl`, no torch.distributed.

What NCCL itself delivers, to set beside what a torch job sees (`--compare-backends`).
- Communicators: ncclCommInitRank through CuPy's NcclCommunicator; the unique id travels
  through the launcher's TCPStore (commbench.comm.nccl_id); `split` makes one communicator per
  group (as ncclCommSplit would, but with one id per group).
- Every NCCL call and every copy runs on one dedicated non-blocking stream; the stopwatch
  records CUDA events on it (as nccl-tests).
- all-to-all(v) = grouped ncclSend/ncclRecv in the pairwise order of commbench.comm.nccl_schedule
  (CuPy exposes no ncclAllToAll; nccl-tests' alltoall is built the same way).
- `capture(stage)` records a stage into a CUDA graph on the stream and returns its replay
  (`--cuda-graph`; nccl-tests -G captures the timed loop the same way).
- bfloat16 is held as uint16 storage (commbench.comm.nccl_types).
CuPy is imported only when this backend is created or its status is asked for.
"""

from __future__ import annotations

import importlib
from typing import Callable, Sequence

import numpy as np

from commbench.comm.launch import RankEnv
from commbench.comm.nccl_id import decode_unique_id, open_store, share_unique_id
from commbench.comm.nccl_schedule import all_to_all_schedule, even_splits
from commbench.comm.nccl_types import (
    NCCL_OPS, check_nccl_op, format_nccl_version, from_storage, nccl_dtype_of, storage_dtype, to_storage,
)
from commbench.dtypes import DType
from commbench.errors import CommbenchError, first_line

INSTALL_HINT = "pip install 'commbench[cuda]'"


def cupy_status(import_module: Callable = importlib.import_module) -> tuple[bool, str]:
    """(available, why) for cupy-nccl: CuPy importable, NCCL loadable, a GPU visible."""
    try:
        cupy = import_module("cupy")
    except ModuleNotFoundError as exc:
        if exc.name not in (None, "cupy"):
            return False, f"CuPy failed to import ({first_line(exc)})"
        return False, f"CuPy is not installed ({INSTALL_HINT})"
    except Exception as exc:  # noqa: BLE001 - CuPy raises many kinds when CUDA libraries are missing
        return False, f"CuPy failed to import ({first_line(exc)})"
    try:
        nccl = import_module("cupy.cuda.nccl")
        if not getattr(nccl, "available", False):
            raise ImportError("NCCL library not loaded")
        version = format_nccl_version(nccl.get_version())
    except Exception as exc:  # noqa: BLE001
        return False, f"CuPy {cupy.__version__} cannot load NCCL ({first_line(exc)}; pip install nvidia-nccl-cu12)"
    try:
        num_gpus = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CUDARuntimeError without a driver or device
        return False, f"no CUDA GPU is visible to CuPy ({first_line(exc)})"
    if num_gpus == 0:
        return False, "no CUDA GPU is visible to CuPy"
    return True, f"CuPy {cupy.__version__}, NCCL {version}, {num_gpus} GPU(s) visible"


def cupy_device_count() -> int:
    return importlib.import_module("cupy").cuda.runtime.getDeviceCount() if cupy_status()[0] else 0


class CupyCommunicator:
    """One NCCL communicator seen through the Communicator interface (buffers are cupy arrays)."""

    def __init__(self, comm, global_ranks: Sequence[int], rank: int, stream, nccl) -> None:
        self._comm, self._stream, self._nccl = comm, stream, nccl
        self.global_ranks = tuple(global_ranks)
        self.size = len(self.global_ranks)
        self.rank = rank
        self._token = None  # a 1-element buffer for barrier, made on first use
        self._schedules: dict = {}

    def all_reduce(self, buf, op: str) -> None:
        self._comm.allReduce(buf.data.ptr, buf.data.ptr, buf.size, nccl_dtype_of(buf.dtype), NCCL_OPS[op],
                             self._stream.ptr)

    def reduce_scatter(self, out, inp, op: str) -> None:
        self._comm.reduceScatter(inp.data.ptr, out.data.ptr, out.size, nccl_dtype_of(out.dtype), NCCL_OPS[op],
                                 self._stream.ptr)

    def all_gather(self, out, inp) -> None:
        self._comm.allGather(inp.data.ptr, out.data.ptr, inp.size, nccl_dtype_of(inp.dtype), self._stream.ptr)

    def broadcast(self, buf, root: int) -> None:
        self._comm.broadcast(buf.data.ptr, buf.data.ptr, buf.size, nccl_dtype_of(buf.dtype), root, self._stream.ptr)

    def reduce(self, buf, root: int, op: str) -> None:
        self._comm.reduce(buf.data.ptr, buf.data.ptr, buf.size, nccl_dtype_of(buf.dtype), NCCL_OPS[op], root,
                          self._stream.ptr)

    def reduce_into(self, out, inp, root: int, op: str) -> None:
        self._comm.reduce(inp.data.ptr, out.data.ptr, out.size, nccl_dtype_of(out.dtype), NCCL_OPS[op], root,
                          self._stream.ptr)

    out_of_place_note = None  # ncclAllReduce / ncclBroadcast / ncclReduce take separate send and receive buffers

    def all_reduce_into(self, out, inp, op: str) -> None:
        self._comm.allReduce(inp.data.ptr, out.data.ptr, out.size, nccl_dtype_of(out.dtype), NCCL_OPS[op],
                             self._stream.ptr)

    def broadcast_into(self, out, inp, root: int) -> None:
        self._comm.broadcast(inp.data.ptr, out.data.ptr, out.size, nccl_dtype_of(out.dtype), root, self._stream.ptr)

    def all_to_all(self, out, inp, out_splits=None, in_splits=None) -> None:
        key = (inp.size, out.size, None if in_splits is None else tuple(in_splits),
               None if out_splits is None else tuple(out_splits))
        schedule = self._schedules.get(key)
        if schedule is None:  # cached: the timed loop repeats the same splits, keep Python off the clock
            ins = even_splits(inp.size, self.size, "input") if in_splits is None else list(in_splits)
            outs = even_splits(out.size, self.size, "output") if out_splits is None else list(out_splits)
            schedule = self._schedules[key] = all_to_all_schedule(self.rank, self.size, ins, outs,
                                                                  in_elements=inp.size, out_elements=out.size)
        nccl_type, itemsize = nccl_dtype_of(inp.dtype), inp.itemsize
        send_ptr, recv_ptr, stream = inp.data.ptr, out.data.ptr, self._stream.ptr
        self._nccl.groupStart()
        try:
            for t in schedule:
                if t.kind == "send":
                    self._comm.send(send_ptr + t.offset * itemsize, t.count, nccl_type, t.peer, stream)
                else:
                    self._comm.recv(recv_ptr + t.offset * itemsize, t.count, nccl_type, t.peer, stream)
        finally:
            self._nccl.groupEnd()

    def send_recv(self, send_buf, dst: int, recv_buf, src: int) -> None:
        stream = self._stream.ptr
        self._nccl.groupStart()
        try:
            self._comm.send(send_buf.data.ptr, send_buf.size, nccl_dtype_of(send_buf.dtype), dst, stream)
            self._comm.recv(recv_buf.data.ptr, recv_buf.size, nccl_dtype_of(recv_buf.dtype), src, stream)
        finally:
            self._nccl.groupEnd()

    def barrier(self) -> None:
        """NCCL has no barrier: a 1-element all-reduce, then wait for the stream."""
        if self._token is None:
            import cupy

            with self._stream:
                self._token = cupy.zeros(1, dtype=np.int32)
        self.all_reduce(self._token, "sum")
        self._stream.synchronize()

    def destroy(self) -> None:
        if self._comm is not None:
            self._comm.destroy()
            self._comm = None


class CudaEventStopwatch:
    """CUDA events recorded on the backend's stream; read after one synchronize (as nccl-tests)."""

    def __init__(self, num_marks: int, stream) -> None:
        import cupy

        self._cuda = cupy.cuda
        self._stream = stream
        self._events = [cupy.cuda.Event() for _ in range(num_marks)]

    def mark(self, index: int) -> None:
        self._events[index].record(self._stream)

    def finish(self) -> None:
        self._stream.synchronize()

    def elapsed_us(self, start: int, end: int) -> float:
        return self._cuda.get_elapsed_time(self._events[start], self._events[end]) * 1e3


class CupyNcclBackend:
    """Joins the job described by `rank_env` with raw NCCL on GPU `local_rank`."""

    name = "cupy-nccl"

    def __init__(self, rank_env: RankEnv, *, timeout_s: float, device_index: int | None = None,
                 join_timeout_s: float | None = None) -> None:
        """`device_index`: the CUDA ordinal (backends.cuda_device_for; the local rank when not given).
        `join_timeout_s` (default `timeout_s`): how long a rank waits for the world's NCCL id (joining the launch)."""
        available, why = cupy_status()
        if not available:
            raise CommbenchError(f"--backend=cupy-nccl is not available here: {why}")
        import cupy
        from cupy.cuda import nccl

        self._cupy, self._nccl, self._timeout_s = cupy, nccl, timeout_s
        self.rank, self.world_size, self.local_rank = rank_env.rank, rank_env.world_size, rank_env.local_rank
        self.nccl_version = nccl.get_version()
        device_index = self.local_rank if device_index is None else device_index
        cupy.cuda.Device(device_index).use()
        self.device = f"cuda:{device_index}"
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._store = None if self.world_size == 1 else open_store(
            master_addr=rank_env.master_addr, master_port=rank_env.master_port, rank=self.rank,
            world_size=self.world_size, timeout_s=timeout_s, rendezvous=rank_env.rendezvous,
            join_timeout_s=join_timeout_s)
        self._num_splits = 0
        self._subgroups: list[CupyCommunicator] = []
        self.world = self._communicator("world", list(range(self.world_size)),
                                        timeout_s if join_timeout_s is None else join_timeout_s)

    def _communicator(self, key: str, members: list[int], timeout_s: float | None = None) -> CupyCommunicator:
        """ncclCommInitRank for the group `members` (world ranks) this rank belongs to."""
        creator = members[0]
        if self._store is None:
            raw = bytes(v & 0xFF for v in self._nccl.get_unique_id())
        else:
            raw = share_unique_id(self._store, key, is_creator=self.rank == creator,
                                  make_id=self._nccl.get_unique_id,
                                  timeout_s=self._timeout_s if timeout_s is None else timeout_s)
        unique_id = decode_unique_id(raw)
        group_rank = members.index(self.rank)
        try:
            comm = self._nccl.NcclCommunicator(len(members), unique_id, group_rank)
        except OverflowError:  # this CuPy build's char signedness differs from the platform guess
            comm = self._nccl.NcclCommunicator(len(members), decode_unique_id(raw, signed=min(unique_id) >= 0),
                                               group_rank)
        return CupyCommunicator(comm, members, group_rank, self.stream, self._nccl)

    def split(self, groups: Sequence[Sequence[int]], *, fresh: bool = False) -> CupyCommunicator:
        mine = [list(g) for g in groups if self.rank in g]
        if len(mine) != 1:
            raise ValueError(f"rank {self.rank} must be in exactly one group, is in {len(mine)}")
        if not fresh and len(groups) == 1 and mine[0] == list(range(self.world_size)):
            return self.world
        index = [list(g) for g in groups].index(mine[0])
        self._num_splits += 1
        comm = self._communicator(f"split{self._num_splits}/group{index}", mine[0])
        self._subgroups.append(comm)
        return comm

    def empty(self, count: int, dtype: DType):
        with self.stream:
            return self._cupy.empty(count, dtype=storage_dtype(dtype))

    def upload(self, values: np.ndarray, dtype: DType):
        buf = self.empty(len(values), dtype)
        self.write(buf, values)
        return buf

    def write(self, buf, values: np.ndarray) -> None:
        buf.set(to_storage(np.asarray(values).ravel(), buf.dtype), stream=self.stream)

    def download(self, buf) -> np.ndarray:
        return from_storage(buf.get(stream=self.stream))

    def stopwatch(self, num_marks: int) -> CudaEventStopwatch:
        return CudaEventStopwatch(num_marks, self.stream)

    def synchronize(self) -> None:
        self.stream.synchronize()

    def capture(self, stage: Callable[[], None]) -> Callable[[], None]:
        """Record `stage` into a CUDA graph on the stream; return a callable that replays it."""
        self.stream.begin_capture()
        try:
            stage()
        finally:
            graph = self.stream.end_capture()
        graph.upload(self.stream)
        stream = self.stream
        return lambda: graph.launch(stream)

    def check_op(self, op: str, dtype: DType) -> None:
        check_nccl_op(op, dtype, self.nccl_version)

    def notes(self, collective: str) -> list[str]:
        if "all_to_all" in collective:
            return ["cupy-nccl runs all-to-all as grouped ncclSend/ncclRecv in pairwise order (CuPy has no ncclAllToAll)"]
        return []

    def shutdown(self) -> None:
        self.synchronize()
        for comm in [*self._subgroups, self.world]:
            comm.destroy()
        self._subgroups = []
        self._store = None
