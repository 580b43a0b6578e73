"""How nccl-tests turns a requested size into its `count` and the bytes it measures, per collective: shared by the
collectives (which measure at those sizes) and the nccl-tests importer (which plans a log's banner sweep with them,
and may not import the collectives: tests/test_layering.py)."""

from __future__ import annotations

# nccl-tests' per-rank chunked collectives (src/all_gather.cu, reduce_scatter.cu, alltoall.cu) and commbench's
# gradient reduce-scatter built on reduce_scatter; every other collective's size is one buffer of `count` elements
CHUNKED_COLLECTIVES = frozenset({"all_gather", "reduce_scatter", "all_to_all", "grad_reduce_scatter"})
WHOLE_BUFFER_COLLECTIVES = frozenset({"all_reduce", "broadcast", "reduce", "sendrecv", "moe_all_to_all"})


def whole_buffer_count(size_bytes: int, itemsize: int) -> tuple[int, int]:
    """(count, bytes) of one buffer of `size_bytes` (all_reduce, broadcast, reduce, sendrecv): at least 1 element."""
    count = max(1, size_bytes // itemsize)
    return count, count * itemsize


def chunked_count(size_bytes: int, itemsize: int, num_ranks: int) -> tuple[int, int]:
    """(count of one chunk, bytes of all `num_ranks` chunks): chunks trimmed to 16-byte multiples, as nccl-tests does
    ((count/nranks) & -(16/eltSize) in src/all_gather.cu, reduce_scatter.cu, alltoall.cu); below 16 B per rank, where
    nccl-tests would run 0 elements, the untrimmed count (at least 1)."""
    raw = size_bytes // (itemsize * num_ranks)
    align = max(1, 16 // itemsize)
    count = raw - raw % align or max(1, raw)
    return count, count * num_ranks * itemsize


def nccl_tests_count(collective: str, size_bytes: int, itemsize: int, num_ranks: int) -> tuple[int, int]:
    """(count, bytes measured) of `collective` at a requested `size_bytes` on `num_ranks` ranks; ValueError for a
    collective commbench does not measure (nccl-tests' gather, scatter, hypercube)."""
    if collective in CHUNKED_COLLECTIVES:
        return chunked_count(size_bytes, itemsize, num_ranks)
    if collective in WHOLE_BUFFER_COLLECTIVES:
        return whole_buffer_count(size_bytes, itemsize)
    raise ValueError(f"no nccl-tests size rule for collective {collective!r}")
