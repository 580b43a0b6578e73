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

from commbench.comm.backend import Backend, Communicator
from commbench.dtypes import DType


@dataclass(frozen=True, kw_only=True)
class PointSpec:
    """What to measure at one point: the requested size and how."""

    size_bytes: int
    dtype: DType
    op: str = "sum"
    in_place: bool = False
    root: int = 0
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True)
class PreparedPoint:
    """Buffers bound to callables. `stages` run in order make one iteration; `check` counts this
    rank's wrong elements after `fill` then one iteration."""

    size_bytes: int  # nccl-tests' "size" for the collective, after alignment
    count: int  # nccl-tests' "count" column (elements)
    busbw_factor: float
    stages: list[tuple[str, Callable[[], None]]]
    fill: Callable[[], None]
    check: Callable[[], int]
    algbw_bytes: int | None = None  # bytes for algbw when not size_bytes (e.g. busiest rank's)
    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    stage_metrics: Callable[[dict[str, float]], dict[str, Any]] | None = None


class Collective(ABC):
    name: ClassVar[str]
    reduces: ClassVar[bool] = False  # takes --op
    # "optional": out-of-place by default, --in-place allowed; "always": the torch API is in-place
    # only (all_reduce, broadcast); "never": no in-place form (all_to_all, sendrecv).
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

    def min_ranks(self, backend_name: str) -> int:
        return 1

    @abstractmethod
    def busbw_factor(self, num_ranks: int) -> float:
        """nccl-tests' factor from algbw to busbw (docs/PERFORMANCE.md)."""

    @abstractmethod
    def count_for(self, size_bytes: int, itemsize: int, num_ranks: int) -> tuple[int, int]:
        """(count column, aligned size in bytes) for a requested size, as nccl-tests aligns it."""

    @abstractmethod
    def prepare(self, comm: Communicator, backend: Backend, spec: PointSpec) -> PreparedPoint: ...

    def check_params(self, params: dict[str, Any], backend_name: str) -> None:
        """Check, before any rank starts, the parameters that `prepare` would refuse on `backend_name`
        (raises CommbenchError naming the parameter). Default: nothing to check."""

    def plan_specs(self, params: dict[str, Any], num_ranks: int) -> list[tuple[PointSpec, str]]:
        """Workloads swept by their own parameters (takes_size False): (spec, label) per point, from
        the job's params; raises CommbenchError for bad parameters."""
        raise NotImplementedError(f"{self.name} is swept by size")


class WholeBufferCollective(Collective):
    """"size" is one buffer of `count` elements (all_reduce, broadcast, sendrecv)."""

    def count_for(self, size_bytes: int, itemsize: int, num_ranks: int) -> tuple[int, int]:
        count = max(1, size_bytes // itemsize)
        return count, count * itemsize


class ChunkedCollective(Collective):
    """"size" is n per-rank chunks and `count` one chunk, as nccl-tests aligns them (reduce_scatter:
    the input; all_gather: the output; all_to_all: the send buffer). busbw = algbw * (n-1)/n
    (nccl-tests docs/PERFORMANCE.md): each rank moves all chunks but its own."""

    def busbw_factor(self, num_ranks: int) -> float:
        return (num_ranks - 1) / num_ranks

    def count_for(self, size_bytes: int, itemsize: int, num_ranks: int) -> tuple[int, int]:
        count = max(1, size_bytes // (itemsize * num_ranks))
        return count, count * num_ranks * itemsize


# --- checkable data -------------------------------------------------------------------------

def pattern_modulus(dtype: DType, num_ranks: int, reduces: bool) -> int:
    """Largest pattern period whose values (and their sums over ranks, when reducing) stay exact."""
    if reduces:
        return max(1, min(8, dtype.exact_int_limit // max(num_ranks, 1)))
    return min(dtype.exact_int_limit, 251)


def pattern(rank: int, start: int, count: int, modulus: int) -> np.ndarray:
    """Element idx of rank r holds ((3r + idx) mod m) + 1: small integers, exact in every dtype."""
    return ((3 * rank + np.arange(start, start + count, dtype=np.int64)) % modulus + 1).astype(np.float64)


def reduced_pattern(op: str, num_ranks: int, start: int, count: int, modulus: int) -> np.ndarray:
    """The exact result of reducing `pattern` over ranks 0..n-1 (periodic in idx, so O(m*n) work)."""
    period = np.stack([pattern(r, 0, modulus, modulus) for r in range(num_ranks)])
    table = {"sum": period.sum(0), "max": period.max(0), "min": period.min(0),
             "avg": period.sum(0) / num_ranks, "prod": np.prod(period, 0)}[op]
    return table[np.arange(start, start + count, dtype=np.int64) % modulus]


def prod_pattern(rank: int, start: int, count: int, num_ranks: int) -> np.ndarray:
    """For prod: exactly one rank holds 2 at each index, the rest 1, so the product is exactly 2."""
    idx = np.arange(start, start + count, dtype=np.int64)
    return np.where((idx + rank) % num_ranks == 0, 2.0, 1.0)


def count_wrong(actual: np.ndarray, expected: np.ndarray, dtype: DType, rel_tol: float = 0.0) -> int:
    """Elements that differ from `expected` (compared after rounding `expected` to the dtype)."""
    if rel_tol == 0.0:
        return int(np.count_nonzero(actual != expected))
    return int(np.count_nonzero(np.abs(actual - expected) > rel_tol * np.abs(expected)))


def reduction_data(op: str, dtype: DType, rank: int, num_ranks: int, start: int,
                   count: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(this rank's input, the exact reduced result, relative tolerance) for elements start..start+count."""
    if op == "prod":
        inputs = prod_pattern(rank, start, count, num_ranks)
        expected = inputs if num_ranks == 1 else np.full(count, 2.0)
        return inputs, expected, 0.0
    modulus = pattern_modulus(dtype, num_ranks, reduces=True)
    inputs = pattern(rank, start, count, modulus)
    expected = reduced_pattern(op, num_ranks, start, count, modulus)
    if op == "avg":
        rel_tol = 2 * dtype.eps  # the mean is rounded to the dtype, perhaps twice (sum, then divide)
    elif op == "sum" and num_ranks * modulus > dtype.exact_int_limit:
        rel_tol = dtype.eps * num_ranks  # too many ranks for exact sums in this dtype
    else:
        rel_tol = 0.0
    return inputs, expected, rel_tol
