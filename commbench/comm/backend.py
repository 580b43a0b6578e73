"""The backend interface: what collectives and the harness may call. Collectives never touch
torch.distributed or CuPy directly; they call a Communicator (one group of ranks) and the Backend
(buffers, clocks, groups). Buffers are opaque to collectives: they fill and check through
`upload`/`download` with numpy arrays."""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np

from commbench.dtypes import DType, get_dtype
from commbench.errors import invalid

Buffer = Any  # a torch.Tensor for torch backends, a cupy.ndarray for cupy-nccl

REDUCE_OPS = ("sum", "prod", "max", "min", "avg")


def avg_refusal(backend: str, dtype: DType) -> str | None:
    """Why `backend` cannot average `dtype` (None: it can). NCCL averages integers as the sum, then one truncating
    division (ncclAvg on integral types is FuncSumPostDiv, NCCL src/device/reduce_kernel.h; torch's
    ProcessGroupNCCL.getNcclReduceOp passes ReduceOp.AVG on for every type but bool). torch 2.13's gloo divides the
    sum in floating point and cannot store the quotient back ("result type Float can't be cast to the desired output
    type Int"), so gloo averages floating-point types only."""
    if dtype.is_float or backend != "gloo":
        return None
    return (f"--op=avg with --dtype {dtype.name} is not possible on gloo (torch's gloo averages in floating point and "
            f"cannot store the result as {dtype.name}); NCCL averages integers (the sum, then a truncating division): "
            "run it on the nccl or cupy-nccl backend, or use a floating-point --dtype")


def reduce_op(name: str, field: str = "--op") -> str:
    """A reduction op as typed (`SUM`, `Sum`, `sum`: nccl-tests users type either case, as `-d`) -> its name in
    REDUCE_OPS; an unknown one is refused in one line naming `field`, the value and the allowed ones."""
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in REDUCE_OPS:
        raise invalid(field, name, f"allowed: {', '.join(REDUCE_OPS)} (either case)")
    return key


class Communicator(Protocol):
    """One group of ranks. `rank`/`size` are within the group; `global_ranks[i]` is group rank i's world rank."""

    rank: int
    size: int
    global_ranks: tuple[int, ...]

    def all_reduce(self, buf: Buffer, op: str) -> None: ...
    def reduce_scatter(self, out: Buffer, inp: Buffer, op: str) -> None: ...
    def all_gather(self, out: Buffer, inp: Buffer) -> None: ...
    def all_to_all(self, out: Buffer, inp: Buffer, out_splits: Sequence[int] | None = None,
                   in_splits: Sequence[int] | None = None) -> None: ...
    def broadcast(self, buf: Buffer, root: int) -> None: ...
    def all_reduce_into(self, out: Buffer, inp: Buffer, op: str) -> None:
        """Out-of-place all_reduce (nccl-tests' first group); `out_of_place_note` says how it is done
        when not natively."""
    def broadcast_into(self, out: Buffer, inp: Buffer, root: int) -> None: ...
    def reduce(self, buf: Buffer, root: int, op: str) -> None:
        """In-place reduce to group rank `root`; the other ranks' `buf` is undefined afterwards (gloo's scratch)."""
    def reduce_into(self, out: Buffer, inp: Buffer, root: int, op: str) -> None: ...
    def send_recv(self, send_buf: Buffer, dst: int, recv_buf: Buffer, src: int) -> None: ...
    def start_send(self, buf: Buffer, dst: int) -> Any:
        """Begin sending `buf` to group rank `dst`; returns a handle with wait(). Optional: workloads
        that use it check `hasattr`."""
    def start_recv(self, buf: Buffer, src: int) -> Any: ...
    def barrier(self) -> None: ...


class Stopwatch(Protocol):
    """Preallocated time marks: `mark(i)` stamps mark i (a device event on GPU, a host clock after a
    device sync on CPU); after `finish()`, `elapsed_us(i, j)` is the time from mark i to mark j."""

    def mark(self, index: int) -> None: ...
    def finish(self) -> None: ...
    def elapsed_us(self, start: int, end: int) -> float: ...


class Backend(Protocol):
    name: str  # "nccl", "gloo", "cupy-nccl"
    rank: int
    world_size: int
    local_rank: int
    device: str
    world: Communicator

    def split(self, groups: Sequence[Sequence[int]], *, fresh: bool = False) -> Communicator:
        """Collective over the world: create every group at once; return the caller's (nccl-tests' split).
        `fresh`: always new communicators (own connections), even for groups that already exist."""
    def empty(self, count: int, dtype: DType) -> Buffer: ...
    def upload(self, values: np.ndarray, dtype: DType) -> Buffer: ...
    def write(self, buf: Buffer, values: np.ndarray) -> None:
        """Copy host values into an existing buffer (converting to its dtype)."""
    def download(self, buf: Buffer) -> np.ndarray:
        """Copy to host as float64 (floats) or int64 (integers)."""
    def stopwatch(self, num_marks: int) -> Stopwatch: ...
    def synchronize(self) -> None: ...
    def check_op(self, op: str, dtype: DType) -> None:
        """Raise CommbenchError if this backend cannot reduce `dtype` with `op`."""
    def notes(self, collective: str) -> list[str]:
        """Caveats to record with a measurement (e.g. how the backend implements the collective)."""
    def shutdown(self) -> None: ...


_NAME_BYTES = 128


def gather_strings(backend: Backend, value: str) -> list[str]:
    """Every rank's `value` (truncated to 128 bytes), in world-rank order, via the backend's all_gather."""
    raw = value.encode()[:_NAME_BYTES].ljust(_NAME_BYTES, b"\0")
    mine = backend.upload(np.frombuffer(raw, dtype=np.uint8).astype(np.float64), get_dtype("uint8"))
    every = backend.empty(_NAME_BYTES * backend.world_size, get_dtype("uint8"))
    backend.world.all_gather(every, mine)
    flat = backend.download(every).astype(np.uint8).tobytes()
    return [flat[i:i + _NAME_BYTES].rstrip(b"\0").decode(errors="replace") for i in range(0, len(flat), _NAME_BYTES)]
