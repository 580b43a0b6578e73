"""grad_reduce_scatter on gloo: flat and hierarchical give the same sums; byte accounting per tier."""

from __future__ import annotations

import numpy as np
import pytest

from collectives import get_collective
from collectives.base import PointSpec, reduced_expected
from collectives.grad_reduce_scatter import owned_shard, stage_groups, stage_tier_bytes
from commbench.dtypes import get_dtype
from commbench.measure.harness import LoopOptions, measure_point
from commbench.comm.topology import from_ranks_per_rack, parse_rack_list
from tests.distributed import run_ranks

MIB = 1 << 20


def _shards(backend, algorithm, dtype_name, params, size_bytes, rs_impl):
    """Fill, run once; return (owned shard or None, this rank's output, wrong count)."""
    collective = get_collective("grad_reduce_scatter")
    spec = PointSpec(size_bytes=size_bytes, dtype=get_dtype(dtype_name),
                     params={"algorithm": algorithm, "rs_impl": rs_impl, **params})
    prepared, out, shard = collective.build(backend.world, backend, spec)
    prepared.fill()
    for _, stage in prepared.stages:
        stage()
    return shard, backend.download(out), prepared.check()


def _assemble(results, num_shards):
    chunks = {shard: values for shard, values, _ in results}
    assert sorted(chunks) == list(range(num_shards)), "every shard owned exactly once"
    return np.concatenate([chunks[s] for s in range(num_shards)])


@pytest.mark.parametrize("racks,ranks_per_rack", [(2, 2), (2, 3)])
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
@pytest.mark.parametrize("rs_impl", ["pairwise", "duplex", "native"])
def test_flat_and_hierarchical_sum_every_shard_identically(racks, ranks_per_rack, dtype_name, rs_impl):
    n = racks * ranks_per_rack
    size_bytes = n * 1000 * get_dtype(dtype_name).itemsize
    params = {"ranks_per_rack": ranks_per_rack}
    flat = run_ranks(_shards, n, args=("flat", dtype_name, params, size_bytes, rs_impl))
    hier = run_ranks(_shards, n, args=("hierarchical", dtype_name, params, size_bytes, rs_impl))
    assert all(wrong == 0 for _, _, wrong in flat + hier)
    flat_full, hier_full = _assemble(flat, n), _assemble(hier, n)
    expected = reduced_expected("sum", get_dtype(dtype_name), n, 0, n * 1000)
    np.testing.assert_array_equal(flat_full, expected)
    np.testing.assert_array_equal(hier_full, flat_full)
    # the mappings differ: rank k*R + l owns shard l*K + k under hierarchical
    assert [s for s, _, _ in flat] == list(range(n))
    assert [s for s, _, _ in hier] == [l * racks + k for k in range(racks) for l in range(ranks_per_rack)]


def test_hierarchical_allreduce_gives_every_rank_the_whole_sum():
    results = run_ranks(_shards, 4, args=("hierarchical-allreduce", "float32", {"ranks_per_rack": 2}, 4 * 4096, "pairwise"))
    expected = reduced_expected("sum", get_dtype("float32"), 4, 0, 4096)
    for shard, values, wrong in results:
        assert shard is None and wrong == 0
        np.testing.assert_array_equal(values, expected)


def test_non_contiguous_racks_from_a_rack_list():
    params = {"racks": "0,2;1,3"}
    hier = run_ranks(_shards, 4, args=("hierarchical", "float32", params, 4 * 4 * 256, "pairwise"))
    assert all(wrong == 0 for _, _, wrong in hier)
    # racks {0,2} and {1,3}: rank 0 = rack 0 local 0 -> shard 0; rank 2 = rack 0 local 1 -> shard 2
    assert [s for s, _, _ in hier] == [0, 1, 2, 3]
    np.testing.assert_array_equal(_assemble(hier, 4), reduced_expected("sum", get_dtype("float32"), 4, 0, 4 * 256))


def test_owned_shard_mapping_by_hand():
    assert owned_shard("flat", 1, 1, 2, 3) == 3
    assert [owned_shard("hierarchical", k, l, 2, k * 3 + l) for k in range(2) for l in range(3)] == [0, 2, 4, 1, 3, 5]
    assert owned_shard("hierarchical-allreduce", 0, 0, 2, 0) is None


def test_stage_groups_for_contiguous_and_strided_partitions():
    topo = from_ranks_per_rack(8, 4)
    assert stage_groups([tuple(range(8))], topo) == ([[0, 1, 2, 3], [4, 5, 6, 7]],
                                                     [[0, 4], [1, 5], [2, 6], [3, 7]])
    # strided sub-groups of 4 (stride 2): {0,2,4,6} and {1,3,5,7}
    rack_groups, cross_groups = stage_groups([(0, 2, 4, 6), (1, 3, 5, 7)], topo)
    assert rack_groups == [[0, 2], [4, 6], [1, 3], [5, 7]]
    assert cross_groups == [[0, 4], [2, 6], [1, 5], [3, 7]]


def test_tier_bytes_by_hand():
    s = 64 * MIB
    # flat pairwise over 2x2: each rank sends 1 chunk (16 MiB) in-rack and 2 chunks across
    assert stage_tier_bytes("rs", "pairwise", "gloo", s, 4, 2, 2) == (16 * MIB, 32 * MIB)
    # hierarchical: rack RS (2 ranks, 64 MiB) sends 32 MiB up; cross RS (2 ranks, 32 MiB) sends 16 MiB out
    assert stage_tier_bytes("rs", "pairwise", "gloo", s, 2, 2, 0) == (32 * MIB, 0)
    assert stage_tier_bytes("rs", "pairwise", "gloo", s // 2, 2, 1, 2) == (0, 16 * MIB)
    # ring RS over 2x2 in rank order (NCCL): 48 MiB per rank, 2 of 4 ring edges cross racks
    assert stage_tier_bytes("rs", "native", "nccl", s, 4, 2, 2) == (24 * MIB, 24 * MIB)
    # gloo's native RS is a full all-reduce: twice the bytes
    assert stage_tier_bytes("rs", "native", "gloo", s, 4, 2, 2) == (48 * MIB, 48 * MIB)
    # cross-rack all-reduce on the 32 MiB block over 2 racks: 2(n-1)/n = 1 -> 32 MiB out
    assert stage_tier_bytes("ar", "native", "nccl", s // 2, 2, 1, 2) == (0, 32 * MIB)


def _measure(backend, algorithm):
    spec = PointSpec(size_bytes=4 * MIB, dtype=get_dtype("float32"),
                     params={"algorithm": algorithm, "ranks_per_rack": 2})
    return measure_point(backend, backend.world, get_collective("grad_reduce_scatter"), spec,
                         LoopOptions(iters=2, warmup_iters=1), run_id="t")


def test_measurement_records_stages_bytes_and_busbw():
    flat = run_ranks(_measure, 4, args=("flat",))[0]
    hier = run_ranks(_measure, 4, args=("hierarchical",))[0]
    assert flat.num_wrong == 0 and hier.num_wrong == 0
    assert set(hier.stages_us_median) == {"rack_rs", "cross_rack_rs"}
    assert set(hier.metrics["stage_busbw_gbps"]) == {"rack_rs", "cross_rack_rs"}
    assert hier.params["algorithm"] == "hierarchical" and hier.params["rs_impl"] == "duplex"  # auto on gloo
    # 4 MiB over 2x2: flat sends 2 of its 4 chunks (1 MiB each) across; hierarchical sends half of its
    # 2 MiB block across: 1 MiB per rank, so each rack's uplink carries 1/R of flat's bytes
    assert flat.metrics["scale_out_bytes_per_rank"] == 2 * MIB
    assert hier.metrics["scale_out_bytes_per_rank"] == MIB
    assert hier.metrics["scale_out_bytes_per_rack"] * 2 == flat.metrics["scale_out_bytes_per_rack"]
    assert flat.metrics["scale_up_bytes_per_rank"] == MIB and hier.metrics["scale_up_bytes_per_rank"] == 2 * MIB
    # duplex sends each peer its chunk, as pairwise: the record names the model its bytes come from
    assert flat.metrics["byte_model"] == hier.metrics["byte_model"] == "pairwise"


def test_bad_algorithm_and_op_are_one_line_errors():
    from commbench.errors import CommbenchError

    collective = get_collective("grad_reduce_scatter")

    class _Comm:
        rank, size, global_ranks = 0, 1, (0,)

    class _Backend:
        name, world_size = "gloo", 1

    with pytest.raises(CommbenchError, match="--algorithm='ring'"):
        collective.prepare(_Comm(), _Backend(), PointSpec(size_bytes=64, dtype=get_dtype("float32"),
                                                           params={"algorithm": "ring"}))
    with pytest.raises(CommbenchError, match="--op='max'"):
        collective.prepare(_Comm(), _Backend(), PointSpec(size_bytes=64, dtype=get_dtype("float32"), op="max"))
    with pytest.raises(CommbenchError, match="--rack-ranks"):
        parse_rack_list("0,1;1,2", 3)
