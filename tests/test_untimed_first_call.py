"""nccl-tests' BenchTime always makes one untimed call before its timed loop (its "Sync"), whatever -w
and -c are: with -w 0 -c 0 the first timed iteration must not be the collective's first call on the
point's buffers (a cold first call: first touch, lazy connections; 1.3-2x the rest on gloo)."""

from __future__ import annotations

import pytest

from collectives import REGISTRY, PointSpec
from commbench.dtypes import get_dtype
from commbench.measure.harness import LoopOptions, measure_point
from tests.distributed import run_ranks


class CountingComm:
    """Passes every call through; counts the all_reduce calls."""

    def __init__(self, comm) -> None:
        self.comm, self.calls = comm, 0
        self.rank, self.size, self.global_ranks = comm.rank, comm.size, comm.global_ranks

    def all_reduce(self, buf, op):
        self.calls += 1
        self.comm.all_reduce(buf, op)


def _calls(backend, warmup_iters, check):
    comm = CountingComm(backend.world)
    spec = PointSpec(size_bytes=256, dtype=get_dtype("float32"))
    record = measure_point(backend, comm, REGISTRY["all_reduce"], spec,
                           LoopOptions(iters=3, warmup_iters=warmup_iters, check=check), run_id="sync")
    return comm.calls, record.warmup_iters, record.num_wrong


@pytest.mark.parametrize("warmup_iters, check, untimed", [(0, False, 1), (0, True, 2), (2, False, 2), (2, True, 4)])
def test_one_untimed_call_precedes_the_timed_loop(warmup_iters, check, untimed):
    calls, recorded_warmup, num_wrong = run_ranks(_calls, 2, timeout_s=60, args=(warmup_iters, check))[0]
    assert calls == 3 + untimed  # timed + (check before and after, warm-up, or the sync call)
    assert recorded_warmup == warmup_iters  # the record says what -w asked, as nccl-tests prints it
    assert num_wrong == (0 if check else None)
