"""all_to_all (even splits): rank r sends its chunk p to rank p and receives chunk r of every rank.

busbw = algbw * (n-1)/n (nccl-tests docs/PERFORMANCE.md). size = the send buffer per rank (n
chunks); count = elements per peer chunk. No in-place form.
"""

from __future__ import annotations

import numpy as np

from collectives.base import POISON, ChunkedCollective, PointSpec, PreparedPoint, count_wrong, pattern, per_seed, salted


class AllToAll(ChunkedCollective):
    name = "all_to_all"
    in_place_mode = "never"

    def prepare(self, comm, backend, spec: PointSpec) -> PreparedPoint:
        n, rank = comm.size, comm.rank
        count = self.count_for(spec.size_bytes, spec.dtype.itemsize, n)[0]
        # Chunk p of rank s's send buffer holds pattern(s, p*count ...): what rank p must receive from s.
        data = per_seed(lambda seed: (pattern(rank, 0, count * n, spec.dtype, seed), np.concatenate(
            [pattern(s, rank * count, count, spec.dtype, seed) for s in range(n)])))
        inp, out = backend.empty(count * n, spec.dtype), backend.empty(count * n, spec.dtype)
        return PreparedPoint(
            size_bytes=count * n * spec.dtype.itemsize, count=count, busbw_factor=self.busbw_factor(n),
            stages=[("all_to_all", lambda: comm.all_to_all(out, inp))],
            fill=lambda salt=0: (backend.write(out, np.full(count * n, POISON)),
                                 backend.write(inp, data(salted(spec.seed, salt))[0])),
            check=lambda salt=0: count_wrong(backend.download(out), data(salted(spec.seed, salt))[1], spec.dtype),
        )
