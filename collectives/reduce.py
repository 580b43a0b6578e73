"""reduce: the root ends with the reduction of all ranks' buffers (nccl-tests' reduce_perf).

busbw = algbw (factor 1, nccl-tests docs/PERFORMANCE.md and src/reduce.cu ReduceGetBw). size = the buffer.
In-place by default (the torch API's form); out-of-place (a separate output, nccl-tests' first group) with
`out_of_place`: native on NCCL through CuPy, a device copy plus the in-place call on torch.distributed (the
record's notes say so). The check counts the root's output: gloo uses the other ranks' buffers as scratch
(torch.distributed.reduce: only the root receives the result), so theirs hold nothing to compare.
"""

from __future__ import annotations

from collectives.base import PointSpec, PreparedPoint, WholeBufferCollective, out_of_place_notes, reduction_buffers


class Reduce(WholeBufferCollective):
    name = "reduce"
    takes_root = True
    reduces = True
    in_place_mode = "both"

    def busbw_factor(self, num_ranks: int) -> float:
        return 1.0

    def prepare(self, comm, backend, spec: PointSpec) -> PreparedPoint:
        count, size_bytes = self.count_for(spec.size_bytes, spec.dtype.itemsize, comm.size)
        root = spec.root % comm.size
        b = reduction_buffers(self, comm, backend, spec, count)
        run = ((lambda: comm.reduce(b.out, root, spec.op)) if b.in_place
               else (lambda: comm.reduce_into(b.out, b.inp, root, spec.op)))
        return PreparedPoint(size_bytes=size_bytes, count=count, busbw_factor=1.0, stages=[("reduce", run)],
                             fill=b.fill, check=lambda salt=0: b.check(salt) if comm.rank == root else 0,
                             params={"root": root}, notes=out_of_place_notes(comm, b.in_place))
