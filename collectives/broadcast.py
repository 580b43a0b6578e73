"""broadcast: every rank ends with the root's buffer.

busbw = algbw (factor 1, nccl-tests docs/PERFORMANCE.md). size = the buffer. In-place by default (the
torch API's form); out-of-place with `out_of_place`: the root sends from its input into every rank's
output (native on NCCL through CuPy; a copy on the root plus the in-place call on torch.distributed).
"""

from __future__ import annotations

import numpy as np

from collectives.base import (POISON, PointSpec, PreparedPoint, WholeBufferCollective, count_wrong, out_of_place_notes,
                              pattern, per_seed, salted)


class Broadcast(WholeBufferCollective):
    name = "broadcast"
    takes_root = True
    in_place_mode = "both"

    def busbw_factor(self, num_ranks: int) -> float:
        return 1.0

    def prepare(self, comm, backend, spec: PointSpec) -> PreparedPoint:
        count, size_bytes = self.count_for(spec.size_bytes, spec.dtype.itemsize, comm.size)
        root = spec.root % comm.size
        expected = per_seed(lambda seed: pattern(root, 0, count, spec.dtype, seed))
        in_place = self.is_in_place(spec)
        out = backend.empty(count, spec.dtype)
        inp = out if in_place else backend.empty(count, spec.dtype)

        def fill(salt: int = 0) -> None:
            if not in_place or comm.rank != root:
                backend.write(out, np.full(count, POISON))
            if comm.rank == root:
                backend.write(inp, expected(salted(spec.seed, salt)))

        run = (lambda: comm.broadcast(out, root)) if in_place else (lambda: comm.broadcast_into(out, inp, root))
        return PreparedPoint(
            size_bytes=size_bytes, count=count, busbw_factor=1.0, stages=[("broadcast", run)], fill=fill,
            check=lambda salt=0: count_wrong(backend.download(out), expected(salted(spec.seed, salt)), spec.dtype),
            params={"root": root}, notes=out_of_place_notes(comm, in_place),
        )
