"""The fault matrix, through the whole measurement (check, warm-up, timed loop, check again): a no-op, a
half-done, a wrong-peer (another rank's data), a NaN, an all-zeros, a no-op after its first call, a
stale output (the first call's), a narrowed dtype and an off-by-one-chunk collective are caught for
every workload and dtype at 2, 3 and 4 gloo ranks; the right data never is."""

from __future__ import annotations

import dataclasses

import pytest

from collectives import REGISTRY, PointSpec
from commbench.dtypes import dtype_names, get_dtype
from commbench.measure.harness import LoopOptions, check_point, measure_point
from tests.distributed import run_ranks
from tests.faulty_comm import MODES, FaultyComm

STANDARD = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "sendrecv", "broadcast", "reduce")


def _specs(world):
    specs = [(name, PointSpec(size_bytes=world * 256, dtype=get_dtype("float32"), root=world - 1)) for name in STANDARD]
    specs.append(("reduce_scatter", PointSpec(size_bytes=world * 256, dtype=get_dtype("bfloat16"), in_place=True)))
    for name in ("all_reduce", "broadcast", "reduce"):  # their out-of-place forms
        specs.append((name, PointSpec(size_bytes=world * 256, dtype=get_dtype("int32"), out_of_place=True, root=1)))
    specs.append(("all_reduce", PointSpec(size_bytes=256, dtype=get_dtype("int8"), op="max")))
    specs.append(("all_reduce", PointSpec(size_bytes=256, dtype=get_dtype("float16"), op="prod")))
    for dtype in dtype_names():  # every dtype on every size-swept workload, reducing and not
        for name in STANDARD:
            specs.append((name, PointSpec(size_bytes=world * 64, dtype=get_dtype(dtype), root=world - 1)))
    for impl in ("native", "pairwise", "duplex"):
        specs.append(("grad_reduce_scatter", PointSpec(size_bytes=world * 512, dtype=get_dtype("bfloat16"),
                                                        params={"algorithm": "flat", "rs_impl": impl})))
    moe = dict(tokens_per_rank=16, hidden=24, num_experts=2 * world, top_k=2, routing="uniform",
               dispatch_mode="per-expert", dispatch_dtype="bf16", combine_dtype="bf16", seed=3)
    specs += [("moe_all_to_all", spec) for spec, _ in REGISTRY["moe_all_to_all"].plan_specs(moe, world)]
    return specs


def _wrong_by_mode(backend):
    out = {}
    # The data check before the timed loop and the one after it catch the faults (the first call of a kind of output
    # is the first check's, so first_only/stale show in the second): one timed call between them, no warm-up.
    loop = LoopOptions(iters=1, warmup_iters=0)
    for index, (name, spec) in enumerate(_specs(backend.world_size)):
        spec = dataclasses.replace(spec, seed=index + 1)
        for mode in ("none", *MODES):
            if mode == "wrong_peer" and spec.params.get("rs_impl") == "duplex":
                continue  # point-to-point sends cannot swap in a peer's data
            if mode == "nan" and not spec.dtype.is_float:
                continue
            if mode == "narrow" and not spec.dtype.is_float and spec.dtype.itemsize == 1:
                continue  # no narrower integer type to pass through
            if mode == "shift" and spec.params.get("rs_impl") == "pairwise":
                continue  # its all_to_all's chunks are then summed: one chunk off leaves the sum right
            comm = backend.world if mode == "none" else FaultyComm(backend.world, mode)
            out[(index, name, spec.dtype.name, mode)] = measure_point(backend, comm, REGISTRY[name], spec, loop,
                                                                     run_id="faults").num_wrong
    return out


@pytest.mark.parametrize("world", [2, 3, 4])
def test_noop_half_and_wrong_peer_are_caught_for_every_workload(world):
    results = run_ranks(_wrong_by_mode, world, timeout_s=300)  # ~13 s alone; shared 2-core hosts run far slower
    wrong = results[0]
    assert {name for _, name, _, _ in wrong} == set(REGISTRY) and {mode for *_, mode in wrong} == {"none", *MODES}
    missed = [key for key, count in wrong.items() if (key[3] == "none") != (count == 0)]
    assert missed == [], f"right data reported wrong or a fault not caught: {missed}"


def _stale(backend):
    """The same buffers measured for a second point: the previous point's correct data must fail."""
    spec = PointSpec(size_bytes=1024, dtype=get_dtype("float32"), seed=1)
    prepared = REGISTRY["all_to_all"].prepare(backend.world, backend, spec)
    first = check_point(backend, prepared)
    again = REGISTRY["all_to_all"].prepare(backend.world, backend, dataclasses.replace(spec, seed=2))
    again.fill = lambda: None  # pretend the new point's fill never happened: last point's data remains
    return first, check_point(backend, again)


def test_stale_data_from_the_previous_point_fails():
    (first, stale), _ = run_ranks(_stale, 2)
    assert first == 0 and stale > 0
