"""A failed point's record holds the count and size measuring it would have recorded (found from outside: count 0,
and moe_all_to_all's nominal tokens x top-k rows where its ok records hold the busiest rank's routed bytes)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from collectives import REGISTRY, PointSpec
from commbench.dtypes import get_dtype
from commbench.measure.harness import LoopOptions, failed_measurement
from tests.distributed import run_ranks


def _specs(world):
    specs = [(name, PointSpec(size_bytes=1000, dtype=get_dtype("float32"), root=world - 1))
             for name in ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "sendrecv", "broadcast", "reduce")]
    specs += [("grad_reduce_scatter", PointSpec(size_bytes=world * 1000, dtype=get_dtype("bfloat16"),
                                                params={"algorithm": algorithm}))
              for algorithm in ("flat", "hierarchical", "hierarchical-allreduce")]
    for routing in ("zipf:1.2", "uniform"):
        moe = dict(tokens_per_rank=64, hidden=24, num_experts=2 * world, top_k=2, routing=routing,
                   dispatch_mode="per-expert", dispatch_dtype="bf16", combine_dtype="bf16", seed=3)
        specs += [("moe_all_to_all", spec) for spec, _ in REGISTRY["moe_all_to_all"].plan_specs(moe, world)]
    capped = dict(tokens_per_rank=64, hidden=24, num_experts=2 * world, top_k=2, routing="zipf:1.2",
                  capacity_factor=1.1, seed=3)
    specs += [("moe_all_to_all", spec) for spec, _ in REGISTRY["moe_all_to_all"].plan_specs(capped, world)]
    return specs


def _prepared_and_failed(backend):
    out = []
    for name, spec in _specs(backend.world_size):
        prepared = REGISTRY[name].prepare(backend.world, backend, spec)
        failed = failed_measurement(REGISTRY[name], spec, backend, backend.world_size, LoopOptions(iters=1),
                                    run_id="x", error="e")
        out.append((name, spec.size_bytes, (prepared.count, prepared.size_bytes), (failed.count, failed.size_bytes)))
    return out


def test_a_failed_record_holds_the_size_and_count_the_point_measures():
    rows = run_ranks(_prepared_and_failed, 3, timeout_s=120)[0]
    assert [r for r in rows if r[2] != r[3]] == []
    moe = [r for r in rows if r[0] == "moe_all_to_all"]
    assert any(nominal != measured[1] for _, nominal, measured, _ in moe)  # routed bytes, not the nominal size


def test_a_point_that_cannot_be_sized_keeps_the_requested_size():
    spec = REGISTRY["moe_all_to_all"].plan_specs(dict(tokens_per_rank=8, hidden=16, num_experts=6, top_k=2), 3)[0][0]
    backend = SimpleNamespace(name="gloo", world_size=3)
    failed = failed_measurement(REGISTRY["moe_all_to_all"], spec, backend, 4, LoopOptions(iters=1), run_id="x",
                                error="e")  # 6 experts on a group of 4: refused as prepare refuses it
    assert (failed.count, failed.size_bytes) == (0, spec.size_bytes)
    assert dataclasses.asdict(failed)["status"] == "failed"
