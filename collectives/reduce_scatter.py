"""reduce_scatter: rank r ends with chunk r of the reduction of all ranks' buffers.

busbw = algbw * (n-1)/n (nccl-tests docs/PERFORMANCE.md). size = the full input buffer per rank
(n chunks); count = elements of one chunk (what each rank receives). In-place: the output is chunk r
of the input buffer.
"""

from __future__ import annotations

import numpy as np

from collectives.base import POISON, ChunkedCollective, PointSpec, PreparedPoint, count_wrong, per_seed, reduction_data, salted


class ReduceScatter(ChunkedCollective):
    name = "reduce_scatter"
    reduces = True

    def prepare(self, comm, backend, spec: PointSpec) -> PreparedPoint:
        n, count = comm.size, self.count_for(spec.size_bytes, spec.dtype.itemsize, comm.size)[0]
        data = per_seed(lambda seed: (reduction_data(spec.op, spec.dtype, comm.rank, n, 0, count * n, seed)[0],
                                      *reduction_data(spec.op, spec.dtype, comm.rank, n, comm.rank * count, count, seed)[1:]))
        inp = backend.empty(count * n, spec.dtype)
        out = inp[comm.rank * count:(comm.rank + 1) * count] if spec.in_place else backend.empty(count, spec.dtype)

        def fill(salt: int = 0) -> None:
            if not spec.in_place:
                backend.write(out, np.full(count, POISON))  # the in-place output is the input's chunk
            backend.write(inp, data(salted(spec.seed, salt))[0])

        def check(salt: int = 0) -> int:
            _, expected, rel_tol = data(salted(spec.seed, salt))
            return count_wrong(backend.download(out), expected, spec.dtype, rel_tol)

        return PreparedPoint(
            size_bytes=count * n * spec.dtype.itemsize, count=count, busbw_factor=self.busbw_factor(n),
            stages=[("reduce_scatter", lambda: comm.reduce_scatter(out, inp, spec.op))],
            fill=fill, check=check,
        )
