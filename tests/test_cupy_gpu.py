"""cupy-nccl on one real GPU (NCCL world size 1): buffers, every workload's data check, CUDA graphs.
Skipped without a GPU and CuPy/NCCL."""

from __future__ import annotations

import numpy as np
import pytest

from commbench.comm.cupy_backend import cupy_status
from commbench.comm.launch import RankEnv
from commbench.dtypes import dtype_names, get_dtype

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cupy_status()[0], reason=cupy_status()[1])]


@pytest.fixture(scope="module")
def backend():
    from commbench.comm.cupy_backend import CupyNcclBackend
    from tests.distributed import free_port

    single = RankEnv(rank=0, world_size=1, local_rank=0, launcher="single", master_addr="127.0.0.1",
                     master_port=free_port())
    made = CupyNcclBackend(single, timeout_s=60)
    yield made
    made.shutdown()


@pytest.mark.parametrize("name", dtype_names())
def test_upload_download_roundtrip(backend, name):
    values = np.arange(1, 65, dtype=np.float64) % 100
    np.testing.assert_array_equal(backend.download(backend.upload(values, get_dtype(name))), values)


def test_uneven_all_to_all_and_graph_replay(backend):
    inp = backend.upload(np.arange(6.0), get_dtype("bfloat16"))
    out = backend.empty(6, get_dtype("bfloat16"))
    backend.world.all_to_all(out[:4], inp[2:6], out_splits=[4], in_splits=[4])
    assert backend.download(out[:4]).tolist() == [2.0, 3.0, 4.0, 5.0]
    buf = backend.upload(np.ones(8), get_dtype("float32"))
    replay = backend.capture(lambda: backend.world.all_reduce(buf, "sum"))
    backend.write(buf, np.full(8, 3.0))
    replay()
    backend.synchronize()
    assert backend.download(buf).tolist() == [3.0] * 8  # world size 1: the sum is the input


def test_every_workload_checks_clean_with_and_without_graphs(backend):
    from collectives import REGISTRY
    from commbench.measure.bench import BenchConfig, plan_points
    from commbench.measure.harness import LoopOptions, measure_point

    failures = []
    for name, collective in REGISTRY.items():
        if collective.min_ranks(backend.name) > 1:
            continue
        config = BenchConfig(collective=name, sizes_bytes=(4096,), backend=backend.name)
        for point in plan_points(config, collective, 1)[:1]:
            for graph in (False, True):
                record = measure_point(backend, backend.world, collective, point.spec,
                                       LoopOptions(iters=5, warmup_iters=2, cuda_graph=graph), run_id="gpu")
                if record.num_wrong or not record.time_us_median > 0:
                    failures.append((name, graph, record.num_wrong, record.time_us_median))
    assert failures == []
