"""nccl-tests' size rules live in one place (commbench/nccl_tests_counts.py): the collectives measure at them and the
nccl-tests importer plans a log's banner sweep with them (the importer may not import the collectives:
tests/test_layering.py). Every collective's count_for is the shared rule."""

from __future__ import annotations

import pytest

from collectives import get_collective
from commbench.nccl_tests_counts import nccl_tests_count


@pytest.mark.parametrize("name", ["all_reduce", "broadcast", "reduce", "sendrecv", "all_gather", "reduce_scatter",
                                  "all_to_all", "grad_reduce_scatter", "moe_all_to_all"])
def test_every_collective_counts_as_the_shared_rule(name):
    workload = get_collective(name)
    for size in (1, 7, 16, 100, 4096, 65520, 1 << 20):
        for ranks in (1, 2, 3, 4, 8):
            for itemsize in (1, 2, 4, 8):
                assert workload.count_for(size, itemsize, ranks) == nccl_tests_count(name, size, itemsize, ranks)


def test_a_collective_without_a_rule_is_refused():
    assert nccl_tests_count("all_gather", 65536, 4, 3) == (5460, 65520)   # 16-byte chunks: 21844 -> 21840 B
    with pytest.raises(ValueError):
        nccl_tests_count("hypercube", 1024, 4, 2)
