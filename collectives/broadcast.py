"""broadcast: every rank ends with the root's buffer.

busbw = algbw (factor 1, nccl-tests docs/PERFORMANCE.md). size = the buffer; the torch API is
in-place only.
"""

from __future__ import annotations

import numpy as np

from collectives.base import POISON, PointSpec, PreparedPoint, WholeBufferCollective, count_wrong, pattern, per_seed, salted


class Broadcast(WholeBufferCollective):
    name = "broadcast"
    in_place_mode = "always"

    def busbw_factor(self, num_ranks: int) -> float:
        return 1.0

    def prepare(self, comm, backend, spec: PointSpec) -> PreparedPoint:
        count, size_bytes = self.count_for(spec.size_bytes, spec.dtype.itemsize, comm.size)
        root = spec.root % comm.size
        expected = per_seed(lambda seed: pattern(root, 0, count, spec.dtype, seed))
        buf = backend.empty(count, spec.dtype)

        def fill(salt: int = 0) -> None:
            backend.write(buf, expected(salted(spec.seed, salt)) if comm.rank == root else np.full(count, POISON))

        return PreparedPoint(
            size_bytes=size_bytes, count=count, busbw_factor=1.0,
            stages=[("broadcast", lambda: comm.broadcast(buf, root))], fill=fill,
            check=lambda salt=0: count_wrong(backend.download(buf), expected(salted(spec.seed, salt)), spec.dtype),
            params={"root": root},
        )
