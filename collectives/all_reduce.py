"""all_reduce: every rank ends with the reduction of all ranks' buffers.

busbw = algbw * 2(n-1)/n (nccl-tests docs/PERFORMANCE.md: a ring moves 2(n-1)/n of the data per
rank). size = the buffer. In-place by default (the torch API's form); out-of-place (a separate
output, as nccl-tests' first group) with `out_of_place`: native on NCCL through CuPy, a device copy
plus the in-place call on torch.distributed (which has no out-of-place all_reduce; the record's
notes say so).
"""

from __future__ import annotations

import numpy as np

from collectives.base import (POISON, PointSpec, PreparedPoint, WholeBufferCollective, count_wrong,
                              out_of_place_notes, per_seed, reduction_data, salted)


class AllReduce(WholeBufferCollective):
    name = "all_reduce"
    reduces = True
    in_place_mode = "both"

    def busbw_factor(self, num_ranks: int) -> float:
        return 2 * (num_ranks - 1) / num_ranks

    def prepare(self, comm, backend, spec: PointSpec) -> PreparedPoint:
        count, size_bytes = self.count_for(spec.size_bytes, spec.dtype.itemsize, comm.size)
        data = per_seed(lambda seed: reduction_data(spec.op, spec.dtype, comm.rank, comm.size, 0, count, seed))
        in_place = self.is_in_place(spec)
        out = backend.empty(count, spec.dtype)
        inp = out if in_place else backend.empty(count, spec.dtype)

        def fill(salt: int = 0) -> None:
            if not in_place:
                backend.write(out, np.full(count, POISON))
            backend.write(inp, data(salted(spec.seed, salt))[0])

        def check(salt: int = 0) -> int:
            _, expected, rel_tol = data(salted(spec.seed, salt))
            return count_wrong(backend.download(out), expected, spec.dtype, rel_tol)

        run = (lambda: comm.all_reduce(out, spec.op)) if in_place else (lambda: comm.all_reduce_into(out, inp, spec.op))
        return PreparedPoint(size_bytes=size_bytes, count=count, busbw_factor=self.busbw_factor(comm.size),
                             stages=[("all_reduce", run)], fill=fill, check=check,
                             notes=out_of_place_notes(comm, in_place))
