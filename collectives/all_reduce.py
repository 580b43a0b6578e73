"""all_reduce: every rank ends with the reduction of all ranks' buffers.

busbw = algbw * 2(n-1)/n (nccl-tests docs/PERFORMANCE.md: a ring moves 2(n-1)/n of the data per
rank). size = the buffer. In-place by default (the torch API's form); out-of-place (a separate
output, as nccl-tests' first group) with `out_of_place`: native on NCCL through CuPy, a device copy
plus the in-place call on torch.distributed (which has no out-of-place all_reduce; the record's
notes say so).
"""

from __future__ import annotations

from collectives.base import PointSpec, PreparedPoint, WholeBufferCollective, out_of_place_notes, reduction_buffers


class AllReduce(WholeBufferCollective):
    name = "all_reduce"
    reduces = True
    in_place_mode = "both"

    def busbw_factor(self, num_ranks: int) -> float:
        return 2 * (num_ranks - 1) / num_ranks

    def prepare(self, comm, backend, spec: PointSpec) -> PreparedPoint:
        count, size_bytes = self.count_for(spec.size_bytes, spec.dtype.itemsize, comm.size)
        b = reduction_buffers(self, comm, backend, spec, count)
        run = ((lambda: comm.all_reduce(b.out, spec.op)) if b.in_place
               else (lambda: comm.all_reduce_into(b.out, b.inp, spec.op)))
        return PreparedPoint(size_bytes=size_bytes, count=count, busbw_factor=self.busbw_factor(comm.size),
                             stages=[("all_reduce", run)], fill=b.fill, check=b.check,
                             notes=out_of_place_notes(comm, b.in_place))
