"""all_reduce: every rank ends with the reduction of all ranks' buffers.

busbw = algbw * 2(n-1)/n (nccl-tests docs/PERFORMANCE.md: a ring moves 2(n-1)/n of the data per
rank). size = the buffer; the torch API is in-place only.
"""

from __future__ import annotations

from collectives.base import PointSpec, PreparedPoint, WholeBufferCollective, count_wrong, per_seed, reduction_data, salted


class AllReduce(WholeBufferCollective):
    name = "all_reduce"
    reduces = True
    in_place_mode = "always"

    def busbw_factor(self, num_ranks: int) -> float:
        return 2 * (num_ranks - 1) / num_ranks

    def prepare(self, comm, backend, spec: PointSpec) -> PreparedPoint:
        count, size_bytes = self.count_for(spec.size_bytes, spec.dtype.itemsize, comm.size)
        data = per_seed(lambda seed: reduction_data(spec.op, spec.dtype, comm.rank, comm.size, 0, count, seed))
        buf = backend.empty(count, spec.dtype)

        def check(salt: int = 0) -> int:
            _, expected, rel_tol = data(salted(spec.seed, salt))
            return count_wrong(backend.download(buf), expected, spec.dtype, rel_tol)

        return PreparedPoint(
            size_bytes=size_bytes, count=count, busbw_factor=self.busbw_factor(comm.size),
            stages=[("all_reduce", lambda: comm.all_reduce(buf, spec.op))],
            fill=lambda salt=0: backend.write(buf, data(salted(spec.seed, salt))[0]), check=check,
        )
