"""reduce: the root ends with the reduction of all ranks' buffers (nccl-tests' reduce_perf).

busbw = algbw (factor 1, nccl-tests docs/PERFORMANCE.md and src/reduce.cu ReduceGetBw). size = the buffer.
In-place by default (the torch API's form); out-of-place (a separate output, nccl-tests' first group) with
`out_of_place`: native on NCCL through CuPy, a device copy plus the in-place call on torch.distributed (the
record's notes say so). The check counts the root's output: gloo uses the other ranks' buffers as scratch
(torch.distributed.reduce: only the root receives the result), so theirs hold nothing to compare.
"""

from __future__ import annotations

import numpy as np

from collectives.base import (POISON, PointSpec, PreparedPoint, WholeBufferCollective, count_wrong,
                              out_of_place_notes, per_seed, reduction_data, salted)


class Reduce(WholeBufferCollective):
    name = "reduce"
    reduces = True
    in_place_mode = "both"

    def busbw_factor(self, num_ranks: int) -> float:
        return 1.0

    def prepare(self, comm, backend, spec: PointSpec) -> PreparedPoint:
        count, size_bytes = self.count_for(spec.size_bytes, spec.dtype.itemsize, comm.size)
        root = spec.root % comm.size
        data = per_seed(lambda seed: reduction_data(spec.op, spec.dtype, comm.rank, comm.size, 0, count, seed))
        in_place = self.is_in_place(spec)
        out = backend.empty(count, spec.dtype)
        inp = out if in_place else backend.empty(count, spec.dtype)

        def fill(salt: int = 0) -> None:
            if not in_place:
                backend.write(out, np.full(count, POISON))
            backend.write(inp, data(salted(spec.seed, salt))[0])

        def check(salt: int = 0) -> int:
            if comm.rank != root:
                return 0
            _, expected, rel_tol = data(salted(spec.seed, salt))
            return count_wrong(backend.download(out), expected, spec.dtype, rel_tol)

        run = ((lambda: comm.reduce(out, root, spec.op)) if in_place
               else (lambda: comm.reduce_into(out, inp, root, spec.op)))
        return PreparedPoint(size_bytes=size_bytes, count=count, busbw_factor=1.0, stages=[("reduce", run)],
                             fill=fill, check=check, params={"root": root}, notes=out_of_place_notes(comm, in_place))
