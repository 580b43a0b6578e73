"""Every collective returns exactly the right data on 2, 3 and 4 gloo ranks."""

import pytest

from collectives import REGISTRY, PointSpec
from commbench.dtypes import get_dtype
from commbench.measure.harness import check_point
from tests.distributed import run_ranks

STANDARD = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "sendrecv", "broadcast", "reduce")


def _wrong_elements(backend, cases):
    """{case: wrong elements summed over ranks} for each (collective, bytes, dtype, op, in_place)."""
    out = {}
    for name, size_bytes, dtype, op, in_place in cases:
        spec = PointSpec(size_bytes=size_bytes, dtype=get_dtype(dtype), op=op, in_place=in_place,
                         root=backend.world_size - 1)
        prepared = REGISTRY[name].prepare(backend.world, backend, spec)
        assert prepared.count > 0
        out[(name, size_bytes, dtype, op, in_place)] = check_point(backend, prepared)
    return out


@pytest.mark.parametrize("world", [2, 3, 4])
def test_every_collective_is_correct(world):
    cases = [(name, size, "float32", "sum", False) for name in STANDARD for size in (4, 4096, 100_000)]
    results = run_ranks(_wrong_elements, world, args=(cases,))
    assert results[0] == {case: 0 for case in cases}
    assert all(r == results[0] for r in results)


def test_dtypes_ops_and_in_place():
    cases = [("all_reduce", 1000, "bfloat16", "sum", False), ("all_reduce", 1000, "int8", "max", False),
             ("all_reduce", 1000, "float16", "min", False), ("all_reduce", 1000, "float32", "avg", False),
             ("all_reduce", 1000, "int32", "prod", False), ("all_reduce", 1000, "uint8", "sum", False),
             ("reduce_scatter", 1000, "bfloat16", "sum", True), ("reduce_scatter", 1000, "float64", "max", False),
             ("all_gather", 1000, "int64", "sum", True), ("all_to_all", 1000, "bfloat16", "sum", False),
             ("broadcast", 1000, "float16", "sum", False), ("sendrecv", 1000, "int8", "sum", False)]
    results = run_ranks(_wrong_elements, 3, args=(cases,))
    assert results[0] == {case: 0 for case in cases}


class _OffByOneComm:
    """Wraps a communicator so rank 1's all_reduce result is off by one: the check must notice."""

    def __init__(self, comm):
        self.comm = comm
        self.rank, self.size, self.global_ranks = comm.rank, comm.size, comm.global_ranks

    def all_reduce(self, buf, op):
        self.comm.all_reduce(buf, op)
        if self.rank == 1:
            buf.add_(1)


def _corrupted(backend):
    spec = PointSpec(size_bytes=64, dtype=get_dtype("float32"))
    prepared = REGISTRY["all_reduce"].prepare(_OffByOneComm(backend.world), backend, spec)
    return check_point(backend, prepared)


def test_check_counts_wrong_elements_over_all_ranks():
    assert run_ranks(_corrupted, 2) == [16, 16]  # 16 floats wrong on rank 1, summed to every rank
