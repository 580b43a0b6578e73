"""The interface every collective workload fills (after nccl-tests' per-collective files).

A workload knows its name, how a requested size maps onto buffer element counts (and back to the
"size" nccl-tests reports), its bus-bandwidth factor, and how to prepare a point: allocate buffers,
fill them with a checkable pattern, run once (as one or more timed stages), and count wrong
elements. The harness, never the workload, owns warm-up, timing and reduction across ranks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np


from collectives.patterns import (POISON, avg_rel_bound, count_wrong, pattern, per_seed,  # noqa: F401 (re-exported)
                                  reduced_expected, reduction_data, reduction_inputs, salted, value_range)
from commbench.comm.backend import Backend, Communicator
from commbench.dtypes import DType
from commbench.nccl_tests_counts import chunked_count, whole_buffer_count


@dataclass(frozen=True, kw_only=True)
class PointSpec:
    """What to measure at one point: the requested size and how."""

    size_bytes: int
    dtype: DType
    op: str = "sum"
    in_place: bool = False
    root: int = 0
    out_of_place: bool = False  # all_reduce/broadcast ("both"): the out-of-place form instead of the default
    params: dict[str, Any] = field(default_factory=dict)
    seed: int = 0  # varies the data pattern per point (the harness sets it from size and repetition)


@dataclass(kw_only=True)
class PreparedPoint:
    """Buffers bound to callables. `stages` run in order make one iteration; `check(salt)` counts this
    rank's wrong elements after `fill(salt)` then one iteration (the harness checks with salt 0 before
    the timed loop and salt 1 after it, on the same buffers)."""

    size_bytes: int  # nccl-tests' "size" for the collective, after alignment
    count: int  # nccl-tests' "count" column (elements)
    busbw_factor: float
    stages: list[tuple[str, Callable[[], None]]]
    fill: Callable[..., None]  # fill(salt=0): the pattern of seed `salted(spec.seed, salt)`
    check: Callable[..., int]  # check(salt=0): wrong elements against that pattern
    algbw_bytes: int | None = None  # bytes for algbw when not size_bytes (e.g. busiest rank's)
    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    stage_metrics: Callable[[dict[str, float]], dict[str, Any]] | None = None
    notes: list[str] = field(default_factory=list)  # how this point was measured, when it matters


def out_of_place_notes(comm, in_place: bool) -> list[str]:
    """The communicator's note on its out-of-place form, for a point measuring it."""
    note = None if in_place else getattr(comm, "out_of_place_note", None)
    return [note] if note else []


class Collective(ABC):
    name: ClassVar[str]
    reduces: ClassVar[bool] = False  # takes --op
    takes_root: ClassVar[bool] = False  # takes --root (broadcast, reduce); a sweep entry of another refuses root
    # "optional": out-of-place by default, --in-place allowed; "both": in-place by default (the torch
    # API's form), --out-of-place allowed (all_reduce, broadcast); "never": no in-place form
    # (all_to_all, sendrecv).
    in_place_mode: ClassVar[str] = "optional"
    takes_size: ClassVar[bool] = True  # False for workloads swept by their own parameters
    # Workload parameters a job may set (sweep entry keys, PointSpec.params); values are checked
    # where they are used (`plan_specs`, `prepare`). Empty: the collective takes none.
    param_names: ClassVar[tuple[str, ...]] = ()
    multi_stage: ClassVar[bool] = False  # an iteration has several timed stages (shown per stage)
    uses_topology: ClassVar[bool] = False  # bench/sweep pass the rack topology in PointSpec.params
    algorithms: ClassVar[tuple[str, ...]] = ()  # names --algorithm accepts; empty: the option doesn't apply
    default_params: ClassVar[dict[str, Any]] = {}  # params a job gets unless the user sets them
    default_sizes_bytes: ClassVar[tuple[int, ...] | None] = None  # sizes when -b/-e are not given
    # what algbw counts where it is not nccl-tests' size / time (PreparedPoint.algbw_bytes set): a '# note:' line of
    # the nccl-tests text says it, so a parser holding nccl-tests' definition is warned; "": size / time
    algbw_note: ClassVar[str] = ""

    def min_ranks(self, backend_name: str) -> int:
        return 1

    def is_in_place(self, spec: "PointSpec") -> bool:
        """Whether `spec` measures the in-place form (what the record's in_place says)."""
        if self.in_place_mode == "both":
            return spec.in_place or not spec.out_of_place
        return spec.in_place and self.in_place_mode != "never"

    @abstractmethod
    def busbw_factor(self, num_ranks: int) -> float:
        """nccl-tests' factor from algbw to busbw (docs/PERFORMANCE.md)."""

    @abstractmethod
    def count_for(self, size_bytes: int, itemsize: int, num_ranks: int) -> tuple[int, int]:
        """(count column, aligned size in bytes) for a requested size, as nccl-tests aligns it."""

    @abstractmethod
    def prepare(self, comm: Communicator, backend: Backend, spec: PointSpec) -> PreparedPoint: ...

    def point_size(self, spec: PointSpec, num_ranks: int) -> tuple[int, int]:
        """(count, size_bytes) that `prepare` on `num_ranks` ranks records, without preparing it (a failed point's
        record, a sweep's dry run); raises ValueError where `prepare` would refuse the point."""
        return self.count_for(spec.size_bytes, spec.dtype.itemsize, num_ranks)

    def listed_size(self, spec: PointSpec, num_ranks: int) -> tuple[int, str]:
        """(size_bytes, basis) a sweep's dry run lists for the point: what the run records ("recorded"), or where
        that is too costly to know ahead, the requested size with a basis that says which size it is."""
        try:
            return self.point_size(spec, num_ranks)[1], "recorded"
        except ValueError:
            return spec.size_bytes, "requested (refused on this group)"

    def check_params(self, params: dict[str, Any], backend_name: str) -> None:
        """Raise CommbenchError (one line) for workload parameters this backend cannot run; before launch."""

    def check_groups(self, spec: "PointSpec", groups, world_size: int) -> None:
        """Raise CommbenchError (one line) where `prepare` would refuse `spec` on `groups` (None: the world) for what
        is known only once the ranks run (the racks): bench asks before it prints or writes anything."""

    def refuse_unused(self, *, op: Any = None, root: Any = None) -> None:
        """A given op where the collective does not reduce, a given root where it has none (None: not given), refused
        in one line, by bench (-o / -r) and a sweep file (op / root) alike: an op would only be recorded, a root would
        split one point into two point keys (two identical rows in a report)."""
        from collectives import REGISTRY
        from commbench.errors import invalid

        def takers(has) -> str:
            names = [name for name, collective in REGISTRY.items() if has(collective)]
            return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)

        if op is not None and not self.reduces:
            raise invalid("--op", op, f"{self.name} does not reduce ({takers(lambda c: c.reduces)} take an op): "
                                      "remove --op")
        if root is not None and not self.takes_root:
            raise invalid("--root", root, f"{self.name} has no root ({takers(lambda c: c.takes_root)} take one): "
                                          "remove --root")

    def plan_specs(self, params: dict[str, Any], num_ranks: int) -> list[tuple[PointSpec, str]]:
        """Workloads swept by their own parameters (takes_size False): (spec, label) per point, from
        the job's params; raises CommbenchError for bad parameters."""
        raise NotImplementedError(f"{self.name} is swept by size")


class WholeBufferCollective(Collective):
    """"size" is one buffer of `count` elements (all_reduce, broadcast, sendrecv)."""

    def count_for(self, size_bytes: int, itemsize: int, num_ranks: int) -> tuple[int, int]:
        return whole_buffer_count(size_bytes, itemsize)


@dataclass(frozen=True)
class ReductionBuffers:
    """A whole-buffer reduction's buffers in its measured form (all_reduce, reduce): `out` receives the result,
    `inp` is `out` in place or a buffer of its own; `fill` writes the inputs (and poisons a separate output) and
    `check` counts the wrong elements of `out` against the exact reduction (reduction_data)."""

    out: Any
    inp: Any
    in_place: bool
    fill: Callable[..., None]
    check: Callable[..., int]


def reduction_buffers(collective: Collective, comm, backend, spec: PointSpec, count: int) -> ReductionBuffers:
    data = per_seed(lambda seed: reduction_data(spec.op, spec.dtype, comm.rank, comm.size, 0, count, seed))
    in_place = collective.is_in_place(spec)
    out = backend.empty(count, spec.dtype)
    inp = out if in_place else backend.empty(count, spec.dtype)

    def fill(salt: int = 0) -> None:
        if not in_place:
            backend.write(out, np.full(count, POISON))
        backend.write(inp, data(salted(spec.seed, salt))[0])

    def check(salt: int = 0) -> int:
        _, expected, rel_tol = data(salted(spec.seed, salt))
        return count_wrong(backend.download(out), expected, spec.dtype, rel_tol)

    return ReductionBuffers(out=out, inp=inp, in_place=in_place, fill=fill, check=check)


class ChunkedCollective(Collective):
    """"size" is n per-rank chunks and `count` one chunk, as nccl-tests aligns them (reduce_scatter:
    the input; all_gather: the output; all_to_all: the send buffer). busbw = algbw * (n-1)/n
    (nccl-tests docs/PERFORMANCE.md): each rank moves all chunks but its own."""

    def busbw_factor(self, num_ranks: int) -> float:
        return (num_ranks - 1) / num_ranks

    def count_for(self, size_bytes: int, itemsize: int, num_ranks: int) -> tuple[int, int]:
        """Chunks trimmed to 16-byte multiples, as nccl-tests does (commbench.nccl_tests_counts.chunked_count)."""
        return chunked_count(size_bytes, itemsize, num_ranks)
