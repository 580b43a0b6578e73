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
    seed: int = 0  # varies the data pattern per point (the harness sets it from size and repetition)


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
        """Raise CommbenchError (one line) for workload parameters this backend cannot run; before launch."""

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
        """Chunks are trimmed to 16-byte multiples, as nccl-tests does ((count/nranks) & -(16/eltSize)
        in src/all_gather.cu, reduce_scatter.cu, alltoall.cu); below 16 B per rank, where nccl-tests
        would run 0 elements, the untrimmed count (at least 1)."""
        raw = size_bytes // (itemsize * num_ranks)
        align = max(1, 16 // itemsize)
        count = raw - raw % align or max(1, raw)
        return count, count * num_ranks * itemsize


# --- checkable data -------------------------------------------------------------------------
# Every pattern value, and every correct result, is an integer >= 1 (avg: > 0) that the dtype holds
# exactly, and every partial sum stays within the dtype's exact-integer range whatever the rank count
# or reduction order, so results are compared exactly (only avg, which divides, gets 2 ulp). Outputs
# are poisoned with POISON before the checked run: no correct result is 0, so a stale, skipped or
# half-written output is caught, and NaN/inf never equal an expected value. Patterns depend on a
# per-point seed (nccl-tests seeds initData with the repetition), so a previous point's data fails.

POISON = 0.0
_SUM_LEAD_MAX = 64  # the lead rank's value per index is 1..64 (varies by index: catches wrong chunks)


def _mix(key: np.ndarray) -> np.ndarray:
    """A cheap integer hash (the splitmix64 finaliser), elementwise on uint64."""
    x = key.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(29)
    return x


def _index_hash(start: int, count: int, rank: int, seed: int) -> np.ndarray:
    idx = np.arange(start, start + count, dtype=np.uint64)
    salt = ((rank * 0x100000001B3) ^ ((seed & 0xFFFFFFFF) * 0xC2B2AE3D27D4EB4F)) & 0xFFFFFFFFFFFFFFFF
    return _mix(idx ^ np.uint64(salt))


def pattern_modulus(dtype: DType) -> int:
    """Values of a non-reducing pattern are 1..modulus (exact in every dtype)."""
    return min(dtype.exact_int_limit, 251)


def pattern(rank: int, start: int, count: int, modulus: int, seed: int = 0) -> np.ndarray:
    """What rank `rank` sends at elements start..start+count: a hash of (rank, index, seed) mod m, + 1,
    so data from a wrong rank, offset or point differs at (m-1)/m of the elements."""
    return (_index_hash(start, count, rank, seed) % np.uint64(modulus) + np.uint64(1)).astype(np.float64)


def _sum_shape(dtype: DType, num_ranks: int) -> tuple[int, int]:
    """(ones, lead_max) of the sum pattern: at each index one lead rank holds 1..lead_max and `ones`
    other ranks hold 1, the rest 0, so every partial sum is <= ones + lead_max <= the exact limit."""
    limit = dtype.exact_int_limit
    ones = min(num_ranks - 1, limit // 2)
    return ones, max(1, min(_SUM_LEAD_MAX, limit - ones))


def _roles(rank: int, num_ranks: int, start: int, count: int, seed: int) -> np.ndarray:
    """Per index, this rank's position after the index's lead rank (0 = lead), cycling over ranks."""
    idx = np.arange(start, start + count, dtype=np.int64)
    return (rank - idx - seed) % num_ranks


def _lead_value(start: int, count: int, seed: int, lead_max: int, salt: int = 0) -> np.ndarray:
    return (_index_hash(start, count, 1 << 20 | salt, seed) % np.uint64(lead_max) + np.uint64(1)).astype(np.int64)


def reduction_inputs(op: str, dtype: DType, rank: int, num_ranks: int, start: int, count: int,
                     seed: int = 0) -> np.ndarray:
    """This rank's input at elements start..start+count for reducing with `op` over num_ranks."""
    role = _roles(rank, num_ranks, start, count, seed)
    if op == "prod":  # lead and next rank hold 2 or 3, the rest 1: product 4..9, max only 2..3
        first, second = (2 + _lead_value(start, count, seed, 2, salt) - 1 for salt in (1, 2))
        return np.where(role == 0, first, np.where(role == 1, second, 1)).astype(np.float64)
    ones, lead_max = _sum_shape(dtype, num_ranks)
    share = np.where(role == 0, _lead_value(start, count, seed, lead_max), (role <= ones).astype(np.int64))
    if op in ("sum", "avg"):
        return share.astype(np.float64)
    if op == "max":
        return (share + 1).astype(np.float64)
    if op == "min":
        return (lead_max + 2 - share).astype(np.float64)
    raise ValueError(f"op={op!r}: allowed sum, prod, max, min, avg")


def reduced_expected(op: str, dtype: DType, num_ranks: int, start: int, count: int, seed: int = 0) -> np.ndarray:
    """The exact result of reducing `reduction_inputs` over ranks 0..n-1 (O(count), any rank count)."""
    if op == "prod":
        first, second = (2 + _lead_value(start, count, seed, 2, salt) - 1 for salt in (1, 2))
        return (first * second if num_ranks > 1 else first).astype(np.float64)
    ones, lead_max = _sum_shape(dtype, num_ranks)
    lead = _lead_value(start, count, seed, lead_max)
    table = {"sum": lead + ones, "avg": (lead + ones) / num_ranks, "max": lead + 1, "min": lead_max + 2 - lead}
    if op not in table:
        raise ValueError(f"op={op!r}: allowed sum, prod, max, min, avg")
    return np.asarray(table[op], dtype=np.float64)


def count_wrong(actual: np.ndarray, expected: np.ndarray, dtype: DType, rel_tol: float = 0.0) -> int:
    """Elements that differ from `expected`; NaN and inf always count as wrong."""
    if rel_tol == 0.0:
        wrong = actual != expected
    else:
        wrong = ~(np.abs(actual - expected) <= rel_tol * np.abs(expected))
    if actual.dtype.kind == "f":
        wrong |= ~np.isfinite(actual)
    return int(np.count_nonzero(wrong))


def reduction_data(op: str, dtype: DType, rank: int, num_ranks: int, start: int,
                   count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, float]:
    """(this rank's input, the exact reduced result, relative tolerance) for elements start..start+count.
    Integers and non-dividing ops are exact (tolerance 0); avg is rounded once or twice (2 ulp)."""
    rel_tol = 2 * dtype.eps if op == "avg" else 0.0
    return (reduction_inputs(op, dtype, rank, num_ranks, start, count, seed),
            reduced_expected(op, dtype, num_ranks, start, count, seed), rel_tol)
