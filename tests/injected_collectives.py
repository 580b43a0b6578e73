"""An all_reduce whose `before(comm, spec)` runs on each rank before the point's collective: the tests make a rank
hang, raise or die there (sweep runner, a peer gone under a launcher)."""

from __future__ import annotations

from collectives.base import Collective, PointSpec, PreparedPoint


class InjectedAllReduce(Collective):
    """all_reduce with an injected fault before the collective; subclasses set `name` and `before`."""

    reduces = True
    in_place_mode = "both"

    def before(self, comm, spec: PointSpec) -> None:
        raise NotImplementedError

    def busbw_factor(self, num_ranks: int) -> float:
        return 1.0

    def count_for(self, size_bytes: int, itemsize: int, num_ranks: int) -> tuple[int, int]:
        return size_bytes // itemsize, size_bytes

    def prepare(self, comm, backend, spec: PointSpec) -> PreparedPoint:
        buf = backend.empty(spec.size_bytes // spec.dtype.itemsize, spec.dtype)

        def stage() -> None:
            self.before(comm, spec)
            comm.all_reduce(buf, "sum")

        return PreparedPoint(size_bytes=spec.size_bytes, count=len(buf), busbw_factor=1.0, stages=[("all_reduce", stage)],
                             fill=lambda *_: None, check=lambda *_: 0)
