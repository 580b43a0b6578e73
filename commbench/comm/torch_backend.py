"""torch.distributed backends: NCCL on GPUs, gloo on CPU."""

from __future__ import annotations

import datetime
import os
import time
from typing import Sequence

import numpy as np
import torch
import torch.distributed as dist

from commbench.comm.backend import REDUCE_OPS, avg_refusal
from commbench.comm.rendezvous import join_within
from commbench.dtypes import DType
from commbench.errors import CommbenchError, first_line

_TORCH_OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "max": dist.ReduceOp.MAX,
              "min": dist.ReduceOp.MIN, "avg": dist.ReduceOp.AVG}

# torch 2.13 renamed the tensor collectives; older releases only have the old names.
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def torch_dtype(dtype: DType) -> torch.dtype:
    return getattr(torch, dtype.torch_name)


class TorchCommunicator:
    """A torch.distributed process group seen through the Communicator interface."""

    def __init__(self, group: dist.ProcessGroup | None, global_ranks: Sequence[int], rank: int) -> None:
        self.group = group
        self.global_ranks = tuple(global_ranks)
        self.size = len(self.global_ranks)
        self.rank = rank

    def all_reduce(self, buf: torch.Tensor, op: str) -> None:
        dist.all_reduce(buf, op=_TORCH_OPS[op], group=self.group)

    def reduce_scatter(self, out: torch.Tensor, inp: torch.Tensor, op: str) -> None:
        _reduce_scatter(out, inp, op=_TORCH_OPS[op], group=self.group)

    def all_gather(self, out: torch.Tensor, inp: torch.Tensor) -> None:
        _all_gather(out, inp, group=self.group)

    def all_to_all(self, out: torch.Tensor, inp: torch.Tensor, out_splits=None, in_splits=None) -> None:
        dist.all_to_all_single(out, inp, output_split_sizes=None if out_splits is None else list(out_splits),
                               input_split_sizes=None if in_splits is None else list(in_splits), group=self.group)

    def broadcast(self, buf: torch.Tensor, root: int) -> None:
        dist.broadcast(buf, src=self.global_ranks[root], group=self.group)

    def reduce(self, buf: torch.Tensor, root: int, op: str) -> None:
        dist.reduce(buf, dst=self.global_ranks[root], op=_TORCH_OPS[op], group=self.group)

    out_of_place_note = ("out-of-place all_reduce/broadcast/reduce on torch.distributed: a device copy into the output, "
                         "then the in-place call (torch has no out-of-place form); the time includes the copy")

    def all_reduce_into(self, out: torch.Tensor, inp: torch.Tensor, op: str) -> None:
        out.copy_(inp)
        dist.all_reduce(out, op=_TORCH_OPS[op], group=self.group)

    def broadcast_into(self, out: torch.Tensor, inp: torch.Tensor, root: int) -> None:
        if self.rank == root:
            out.copy_(inp)
        dist.broadcast(out, src=self.global_ranks[root], group=self.group)

    def reduce_into(self, out: torch.Tensor, inp: torch.Tensor, root: int, op: str) -> None:
        out.copy_(inp)
        dist.reduce(out, dst=self.global_ranks[root], op=_TORCH_OPS[op], group=self.group)

    def send_recv(self, send_buf: torch.Tensor, dst: int, recv_buf: torch.Tensor, src: int) -> None:
        ops = [dist.P2POp(dist.isend, send_buf, self.global_ranks[dst], self.group),
               dist.P2POp(dist.irecv, recv_buf, self.global_ranks[src], self.group)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    def start_send(self, buf: torch.Tensor, dst: int):
        return dist.isend(buf, self.global_ranks[dst], group=self.group)

    def start_recv(self, buf: torch.Tensor, src: int):
        return dist.irecv(buf, self.global_ranks[src], group=self.group)

    def barrier(self) -> None:
        dist.barrier(group=self.group)


class HostStopwatch:
    """Host clock after a device sync (the only clock gloo on CPU offers)."""

    def __init__(self, num_marks: int, sync) -> None:
        self._stamps = [0.0] * num_marks
        self._sync = sync

    def mark(self, index: int) -> None:
        self._sync()
        self._stamps[index] = time.perf_counter()

    def finish(self) -> None:
        pass

    def elapsed_us(self, start: int, end: int) -> float:
        return (self._stamps[end] - self._stamps[start]) * 1e6


class CudaEventStopwatch:
    """CUDA events recorded on the current stream; read after one synchronize (as nccl-tests)."""

    def __init__(self, num_marks: int) -> None:
        self._events = [torch.cuda.Event(enable_timing=True) for _ in range(num_marks)]

    def mark(self, index: int) -> None:
        self._events[index].record()

    def finish(self) -> None:
        torch.cuda.synchronize()

    def elapsed_us(self, start: int, end: int) -> float:
        return self._events[start].elapsed_time(self._events[end]) * 1e3


def checked_in_store(method: str, *, rank: int, world_size: int, join_s: float, timeout_s: float, where: str,
                     setting: str):
    """The launch's store at tcp://host:port, this rank checked in on it (rank_checkin: a rank started twice stops
    every rank in one line), as torch's tcp:// rendezvous would hand it to init_process_group: its timeout the
    collectives', under the "default_pg" prefix (torch 2.13 distributed_c10d.init_process_group)."""
    from urllib.parse import urlparse

    from commbench.comm.rank_checkin import checked_in_launch_store

    address = urlparse(method)
    store = checked_in_launch_store(master_addr=address.hostname or "127.0.0.1", master_port=address.port or 0,
                                    rank=rank, world_size=world_size, join_s=join_s, timeout_s=timeout_s, where=where,
                                    setting=setting)
    # torchrun's agent store outlives a restart: without the attempt in the prefix gloo read the dead attempt's rank
    # addresses (probe P8: 3 of 8 restarts lost, "connectFullMesh ... Connection refused" or a join timeout)
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return dist.PrefixStore(f"attempt_{attempt}/default_pg", store)


class TorchBackend:
    """Process-group backend. `init` joins the job described by the environment (env:// rendezvous)."""

    def __init__(self, name: str, *, rank: int, world_size: int, local_rank: int, timeout_s: float,
                 init_method: str | None = None, device_index: int | None = None,
                 join_timeout_s: float | None = None, join_setting: str = "--timeout") -> None:
        """`device_index`: the CUDA ordinal for nccl (backends.cuda_device_for; `local_rank` when not given).
        `timeout_s`: the collectives'; `join_timeout_s` (default `timeout_s`): how long joining a launch commbench
        did not start waits for its ranks, `join_setting` the option or field that gave it (rendezvous.join_within)."""
        if name not in ("nccl", "gloo"):
            raise CommbenchError(f"backend={name!r} is not a torch.distributed backend: allowed nccl, gloo")
        self.name = name
        self.rank, self.world_size, self.local_rank = rank, world_size, local_rank
        device_index = local_rank if device_index is None else device_index
        if name == "nccl":
            torch.cuda.set_device(device_index)
            self.device = f"cuda:{device_index}"
            self._torch_device = torch.device(self.device)
        else:
            self.device = "cpu"
            self._torch_device = torch.device("cpu")
        kwargs = {"device_id": self._torch_device} if name == "nccl" else {}
        method = init_method or "env://"
        join_s = timeout_s if join_timeout_s is None else join_timeout_s
        where = f"at {method} as rank {rank} of {world_size}"

        def connect() -> None:
            if name == "nccl":  # the current device is per thread: the helper thread uses this rank's too
                torch.cuda.set_device(device_index)
            store = None   # a launch's ranks check in first (a rank started twice); commbench's own use a file
            if method.startswith("tcp://"):
                store = checked_in_store(method, rank=rank, world_size=world_size, join_s=join_s,
                                         timeout_s=timeout_s, where=where, setting=join_setting)
            dist.init_process_group(name, init_method=method if store is None else None, store=store, rank=rank,
                                    world_size=world_size, timeout=datetime.timedelta(seconds=timeout_s), **kwargs)
            if name == "gloo":
                # gloo's full-mesh connect returns on a rank once its own pairs are up, and torch 2.13 adds no
                # barrier after init (distributed_c10d.py _is_barrier_after_init: only with TORCH_DIST_INIT_BARRIER=1):
                # a peer that got through and left at once (nothing to exchange, or an error) closed sockets a
                # starved rank was still connecting on ("Gloo connectFullMesh failed ... Connection closed by peer").
                dist.barrier()

        if method.startswith("file://"):  # commbench's own ranks: a local file, the launcher watches them
            try:
                connect()
            except RuntimeError as exc:  # the store's wait timed out: a peer never came
                from commbench.comm.local_ranks import RunFailed

                waited = f" after --timeout={timeout_s:g} s" if "timeout" in str(exc).lower() else ""
                raise RunFailed(f"rendezvous failed: {first_line(exc)}{waited}") from None
        else:
            join_within(connect, timeout_s=join_s, where=where, setting=join_setting,
                        waiting_note=local_rank == 0)   # one note per node, not one per rank
        self.world = TorchCommunicator(None, range(world_size), rank)

    def split(self, groups: Sequence[Sequence[int]], *, fresh: bool = False) -> TorchCommunicator:
        mine = [list(g) for g in groups if self.rank in g]
        if len(mine) != 1:
            raise ValueError(f"rank {self.rank} must be in exactly one group, is in {len(mine)}")
        if not fresh and len(groups) == 1 and len(mine[0]) == self.world_size and mine[0] == sorted(mine[0]):
            return self.world
        group, _ = dist.new_subgroups_by_enumeration([list(g) for g in groups])
        return TorchCommunicator(group, mine[0], mine[0].index(self.rank))

    def empty(self, count: int, dtype: DType) -> torch.Tensor:
        return torch.empty(count, dtype=torch_dtype(dtype), device=self._torch_device)

    def upload(self, values: np.ndarray, dtype: DType) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(values)).to(device=self._torch_device, dtype=torch_dtype(dtype))

    def write(self, buf: torch.Tensor, values: np.ndarray) -> None:
        buf.copy_(torch.from_numpy(np.ascontiguousarray(values)))

    def download(self, buf: torch.Tensor) -> np.ndarray:
        host = buf.detach().to("cpu")
        wide = torch.float64 if (host.is_floating_point() or host.dtype == torch.bfloat16) else torch.int64
        return host.to(wide).numpy()

    def stopwatch(self, num_marks: int):
        if self.name == "nccl":
            return CudaEventStopwatch(num_marks)
        return HostStopwatch(num_marks, self.synchronize)

    def synchronize(self) -> None:
        if self.name == "nccl":
            torch.cuda.synchronize()

    def check_op(self, op: str, dtype: DType) -> None:
        if op not in REDUCE_OPS:
            raise CommbenchError(f"--op={op!r} is invalid: allowed {', '.join(REDUCE_OPS)}")
        if op == "avg" and (refusal := avg_refusal(self.name, dtype)):
            raise CommbenchError(refusal)

    def notes(self, collective: str) -> list[str]:
        if self.name == "gloo" and collective == "reduce_scatter":
            return ["gloo (torch 2.13) implements reduce_scatter as a full all-reduce; its time is not a true reduce-scatter's"]
        return []

    def accumulate(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        """dst += src on the device (local sum of received chunks, e.g. a pairwise reduce-scatter)."""
        dst.add_(src)

    def shutdown(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
