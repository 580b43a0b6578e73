"""sendrecv: each rank sends its buffer to rank+1 and receives from rank-1 (a ring shift, as
nccl-tests' sendrecv_perf).

busbw = algbw (factor 1, nccl-tests docs/PERFORMANCE.md). size = bytes each rank sends.
"""

from __future__ import annotations

import numpy as np

from collectives.base import POISON, PointSpec, PreparedPoint, WholeBufferCollective, count_wrong, pattern, salted


class SendRecv(WholeBufferCollective):
    name = "sendrecv"
    in_place_mode = "never"

    def min_ranks(self, backend_name: str) -> int:
        return 2 if backend_name == "gloo" else 1  # gloo cannot send to itself; NCCL can

    def busbw_factor(self, num_ranks: int) -> float:
        return 1.0

    def prepare(self, comm, backend, spec: PointSpec) -> PreparedPoint:
        n, rank = comm.size, comm.rank
        count, size_bytes = self.count_for(spec.size_bytes, spec.dtype.itemsize, n)
        send, recv = backend.empty(count, spec.dtype), backend.empty(count, spec.dtype)
        dst, src = (rank + 1) % n, (rank - 1) % n
        return PreparedPoint(
            size_bytes=size_bytes, count=count, busbw_factor=1.0,
            stages=[("sendrecv", lambda: comm.send_recv(send, dst, recv, src))],
            fill=lambda salt=0: (backend.write(recv, np.full(count, POISON)),
                                 backend.write(send, pattern(rank, 0, count, spec.dtype, salted(spec.seed, salt)))),
            check=lambda salt=0: count_wrong(backend.download(recv),
                                             pattern(src, 0, count, spec.dtype, salted(spec.seed, salt)), spec.dtype),
        )
