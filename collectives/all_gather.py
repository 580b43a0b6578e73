"""all_gather: every rank ends with all ranks' chunks, chunk r from rank r.

busbw = algbw * (n-1)/n (nccl-tests docs/PERFORMANCE.md). size = the full output buffer (n chunks);
count = elements each rank sends. In-place: the input is chunk r of the output buffer.
"""

from __future__ import annotations

import numpy as np

from collectives.base import POISON, ChunkedCollective, PointSpec, PreparedPoint, count_wrong, pattern, per_seed, salted


class AllGather(ChunkedCollective):
    name = "all_gather"

    def prepare(self, comm, backend, spec: PointSpec) -> PreparedPoint:
        n, rank = comm.size, comm.rank
        count = self.count_for(spec.size_bytes, spec.dtype.itemsize, n)[0]
        expected = per_seed(lambda seed: np.concatenate([pattern(r, r * count, count, spec.dtype, seed) for r in range(n)]))
        out = backend.empty(count * n, spec.dtype)
        inp = out[rank * count:(rank + 1) * count] if spec.in_place else backend.empty(count, spec.dtype)

        def fill(salt: int = 0) -> None:
            backend.write(out, np.full(count * n, POISON))
            backend.write(inp, pattern(rank, rank * count, count, spec.dtype, salted(spec.seed, salt)))

        return PreparedPoint(
            size_bytes=count * n * spec.dtype.itemsize, count=count, busbw_factor=self.busbw_factor(n),
            stages=[("all_gather", lambda: comm.all_gather(out, inp))], fill=fill,
            check=lambda salt=0: count_wrong(backend.download(out), expected(salted(spec.seed, salt)), spec.dtype),
        )
