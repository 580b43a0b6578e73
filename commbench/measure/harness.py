"""The measurement harness: data check, warm-up, timed loop, reduction across ranks.

Per point (as nccl-tests, with per-iteration statistics beside nccl-tests' own time):
1. check (optional, outside timing): outputs poisoned and inputs filled with a pattern seeded by the
   point (size and repetition, as nccl-tests seeds initData with the repetition), one iteration, then
   every rank counts wrong elements and they are summed over the world; the buffers are refilled
   afterwards (without the check they are still filled, so no run times uninitialised memory). The
   check runs again after the timed loop (and stage loop) on the same buffers and timed callables
   with a salted seed (as nccl-tests' -c checks after timing): a collective that stops working after
   its first call, or leaves the first call's data, fails; #wrong is the sum of both checks;
2. warm-up: `warmup_iters` untimed iterations (at least one call before timing, as nccl-tests' "Sync"
   call: the check's, else one here), then a device sync and a world barrier;
3. timed loop: `iters` iterations back to back, a stopwatch mark between iterations (CUDA events on
   GPU; the host clock after a device sync on CPU) and the host clock around the whole loop, read
   after a device sync (nccl-tests' BenchTime: loop time / iters);
4. reduction: per iteration the slowest rank's time (MAX over the world) -> median, mean, min, max
   (p99 from 100 iterations on); the loop time / iters of every rank -> nccl-tests' -a modes (avg,
   rank 0, min, max);
5. stages (multi-stage workloads only): each stage again in its own loop, every stage of every
   iteration started behind a world barrier, its time the slowest rank's. A stage's time then holds
   no wait for a slow rank's previous stage (that wait is charged to the stage that was slow), and
   the stage medians add up to the iteration's within the noise (barrier exit skew).
algbw = bytes / median time (GB = 1e9 B); busbw = algbw * the collective's factor.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from dataclasses import dataclass

import numpy as np

from collectives.base import Collective, PointSpec, PreparedPoint
from commbench.comm.backend import Backend, Communicator
from commbench.dtypes import get_dtype
from commbench.results.records import AGG_UNGROUPED, MIN_ITERS_FOR_P99, Measurement

_FLOAT64 = get_dtype("float64")
_INT64 = get_dtype("int64")


@dataclass(frozen=True, kw_only=True)
class LoopOptions:
    iters: int = 20
    warmup_iters: int = 5
    check: bool = True
    cuda_graph: bool = False  # time replays of each stage captured once by backend.capture (nccl-tests -G)
    agg_iters: int = 1        # -m: each timed iteration runs every stage this many times back to back (not grouped)
    blocking: bool = False    # nccl-tests -z 1: the host waits for the device after every stage, then a world barrier


def aggregated(backend: Backend, stages: list, agg_iters: int, blocking: bool) -> list:
    """Each stage run `agg_iters` times per call (-m: separate launches back to back, not nccl-tests' one NCCL group:
    recorded as params.agg_iters_ungrouped, records.AGG_UNGROUPED), with a device sync and a barrier of every rank after each run when `blocking` (nccl-tests
    -z 1: src/common.cu startColl synchronises its streams, then Barrier(args), MPI_Barrier across
    processes)."""
    if agg_iters == 1 and not blocking:
        return stages

    def wrap(stage):
        def run():
            for _ in range(agg_iters):
                stage()
                if blocking:
                    backend.synchronize()
                    backend.world.barrier()
        return run

    return [wrap(stage) for stage in stages]


@dataclass(frozen=True, kw_only=True)
class GroupInfo:
    """How the measured communicator sits in the world (for sub-group sweeps)."""

    layout: str = "world"
    num_groups: int = 1


def run_once(prepared: PreparedPoint) -> None:
    for _, stage in prepared.stages:
        stage()


_REPETITION = itertools.count(1)  # every rank measures the same points in the same order


def point_seed(spec: PointSpec, repetition: int) -> int:
    """The data-pattern seed of a point: from its size and the process's repetition count."""
    return (spec.size_bytes * 0x9E3779B1 + repetition * 0x85EBCA77) & 0x7FFFFFFF


def check_point(backend: Backend, prepared: PreparedPoint, *, salt: int = 0, stages: list | None = None) -> int:
    """Fill (outputs poisoned) with the point's pattern salted by `salt`, run one iteration (`stages`:
    the timed callables, e.g. graph replays; default the prepared ones), and return the wrong elements
    summed over all ranks."""
    if salt:
        prepared.fill(salt)
    else:
        prepared.fill()
    for stage in stages if stages is not None else [stage for _, stage in prepared.stages]:
        stage()
    backend.synchronize()
    wrong = backend.upload(np.array([prepared.check(salt) if salt else prepared.check()], dtype=np.int64), _INT64)
    backend.world.all_reduce(wrong, "sum")
    return int(backend.download(wrong)[0])


@dataclass(frozen=True, kw_only=True)
class LoopTimes:
    """What the timed loop measured: per iteration the slowest rank's time, and every rank's loop
    time / iters (world-rank order)."""

    iter_us: np.ndarray
    loop_us_by_rank: np.ndarray


def ready_stages(backend: Backend, prepared: PreparedPoint, warmup_iters: int, cuda_graph: bool = False) -> list:
    """Warm up, then the stage callables to time (with `cuda_graph`, replays of captures made once)."""
    stages = [stage for _, stage in prepared.stages]
    for _ in range(warmup_iters):
        for stage in stages:
            stage()
    if cuda_graph:
        stages = [backend.capture(stage) for stage in stages]
        for stage in stages:
            stage()
    return stages


def _world_max(backend: Backend, values: np.ndarray) -> np.ndarray:
    buf = backend.upload(values.ravel(), _FLOAT64)
    backend.world.all_reduce(buf, "max")
    return backend.download(buf).reshape(values.shape)


def time_loop(backend: Backend, stages: list, iters: int) -> LoopTimes:
    """The timed loop: iterations back to back, marks between them, host clock around it all."""
    backend.synchronize()
    backend.world.barrier()
    watch = backend.stopwatch(iters + 1)
    mark = watch.mark
    if len(stages) == 1:
        only = stages[0]
        start_s = time.perf_counter()
        mark(0)
        for it in range(1, iters + 1):
            only()
            mark(it)
    else:
        start_s = time.perf_counter()
        mark(0)
        for it in range(1, iters + 1):
            for stage in stages:
                stage()
            mark(it)
    watch.finish()
    backend.synchronize()
    loop_us = (time.perf_counter() - start_s) * 1e6 / iters
    local = np.array([watch.elapsed_us(it, it + 1) for it in range(iters)])
    every = backend.empty(backend.world_size, _FLOAT64)
    backend.world.all_gather(every, backend.upload(np.array([loop_us]), _FLOAT64))
    return LoopTimes(iter_us=_world_max(backend, local), loop_us_by_rank=backend.download(every))


def time_stages(backend: Backend, stages: list, iters: int) -> np.ndarray:
    """Per-stage times in µs, shape (iters, stages): every stage of every iteration started behind a
    world barrier, each entry the slowest rank's."""
    num_stages = len(stages)
    watch = backend.stopwatch(2 * iters * num_stages)
    for it in range(iters):
        for index, stage in enumerate(stages):
            backend.synchronize()
            backend.world.barrier()
            base = 2 * (it * num_stages + index)
            watch.mark(base)
            stage()
            watch.mark(base + 1)
    watch.finish()
    local = np.array([[watch.elapsed_us(2 * (it * num_stages + s), 2 * (it * num_stages + s) + 1)
                       for s in range(num_stages)] for it in range(iters)])
    return _world_max(backend, local)


def time_statistics(iter_us: np.ndarray, loop_us_by_rank: np.ndarray) -> dict:
    """The named statistics of a point (Measurement fields) from what the loop measured."""
    iters = len(iter_us)
    return dict(
        time_us_median=float(np.median(iter_us)), time_us_mean=float(np.mean(iter_us)),
        time_us_min=float(np.min(iter_us)), time_us_max=float(np.max(iter_us)),
        time_us_p99=float(np.percentile(iter_us, 99)) if iters >= MIN_ITERS_FOR_P99 else None,
        iter_times_us=[round(float(t), 3) for t in iter_us],
        loop_time_us={"avg": float(np.mean(loop_us_by_rank)), "rank0": float(loop_us_by_rank[0]),
                      "min": float(np.min(loop_us_by_rank)), "max": float(np.max(loop_us_by_rank))},
    )


def measure_point(backend: Backend, comm: Communicator, collective: Collective, spec: PointSpec,
                  loop: LoopOptions, *, run_id: str, group: GroupInfo = GroupInfo(),
                  point_key: str | None = None) -> Measurement:
    """Measure one point on `comm` (every rank of the world calls this together)."""
    spec = dataclasses.replace(spec, seed=point_seed(spec, next(_REPETITION)))
    prepared = collective.prepare(comm, backend, spec)
    num_wrong = check_point(backend, prepared) if loop.check else None
    # Refill after the check (and fill without it): never time uninitialised or check-run memory:
    # stray NaNs or denormals change how fast a CPU reduces.
    prepared.fill()
    # nccl-tests' BenchTime makes one untimed call before its loop whatever -w and -c are (its "Sync"):
    # the check's call is that one; with neither a check nor a warm-up, make it here (else the first timed
    # iteration is a cold first call: first touch, lazy connections).
    timed = ready_stages(backend, prepared, loop.warmup_iters or (0 if loop.check else 1), loop.cuda_graph)
    stages = aggregated(backend, timed, loop.agg_iters, loop.blocking)
    measured = time_loop(backend, stages, loop.iters)
    if loop.agg_iters > 1:  # per operation, as nccl-tests divides by iters * agg_iters
        measured = LoopTimes(iter_us=measured.iter_us / loop.agg_iters,
                             loop_us_by_rank=measured.loop_us_by_rank / loop.agg_iters)
    stats = time_statistics(measured.iter_us, measured.loop_us_by_rank)
    median_us = stats["time_us_median"]
    algbw_gbps = (prepared.algbw_bytes or prepared.size_bytes) / (median_us * 1e-6) / 1e9 if median_us > 0 else 0.0
    stage_medians = {}
    if len(prepared.stages) > 1:
        stage_us = time_stages(backend, stages, loop.iters) / loop.agg_iters
        stage_medians = {name: float(np.median(stage_us[:, i])) for i, (name, _) in enumerate(prepared.stages)}
    if loop.check:  # again after the timed loop, on its buffers and callables, with fresh data (nccl-tests -c):
        # one operation, not -m of them (an in-place sum run twice holds the sum of the sum)
        num_wrong += check_point(backend, prepared, salt=1, stages=aggregated(backend, timed, 1, loop.blocking))
    metrics = dict(prepared.metrics)
    if prepared.stage_metrics is not None:
        metrics.update(prepared.stage_metrics(stage_medians))
    return Measurement(
        run_id=run_id, collective=collective.name, backend=backend.name,
        size_bytes=prepared.size_bytes, count=prepared.count, dtype=spec.dtype.name,
        op=spec.op if collective.reduces else None,
        in_place=collective.is_in_place(spec),
        world_size=backend.world_size, group_size=comm.size, group_layout=group.layout,
        num_groups=group.num_groups, iters=loop.iters, warmup_iters=loop.warmup_iters,
        **stats, algbw_gbps=algbw_gbps,
        busbw_gbps=algbw_gbps * prepared.busbw_factor, num_wrong=num_wrong,
        stages_us_median=stage_medians, metrics=metrics,
        params={**spec.params, **prepared.params, **loop_params(loop)},
        notes=backend.notes(collective.name) + prepared.notes, point_key=point_key,
    )


def loop_params(loop: LoopOptions) -> dict:
    """The params a record keeps of how its loop ran (CUDA graph, -m calls back to back: agg_iters_ungrouped, never
    nccl-tests' grouped agg_iters; -z blocking): a failed point's
    record holds them too, so it matches the point it failed at (compare's key holds the params)."""
    return {**({"cuda_graph": True} if loop.cuda_graph else {}),
            **({AGG_UNGROUPED: loop.agg_iters} if loop.agg_iters > 1 else {}),
            **({"blocking": True} if loop.blocking else {})}


def recorded_size(collective: Collective, spec: PointSpec, num_ranks: int) -> tuple[int, int]:
    """(count, size_bytes) a point records unmeasured (failed, skipped): what measuring it would have recorded
    (`point_size`: for moe_all_to_all the busiest rank's routed bytes, not the nominal tokens x top-k rows). A point
    that cannot be sized (its params refused on this group, as `prepare` refuses them) keeps the requested size
    and count 0."""
    try:
        return collective.point_size(spec, num_ranks)
    except ValueError:
        return 0, spec.size_bytes


def failed_measurement(collective: Collective, spec: PointSpec, backend: Backend, comm_size: int,
                       loop: LoopOptions, *, run_id: str, error: str, group: GroupInfo = GroupInfo(),
                       point_key: str | None = None) -> Measurement:
    """The record of a point that raised or timed out: its identity (`recorded_size`) and the error, no times."""
    count, size_bytes = recorded_size(collective, spec, comm_size)
    return Measurement(
        run_id=run_id, collective=collective.name, backend=backend.name, size_bytes=size_bytes,
        count=count, dtype=spec.dtype.name, op=spec.op if collective.reduces else None, in_place=collective.is_in_place(spec),
        world_size=backend.world_size, group_size=comm_size, group_layout=group.layout,
        num_groups=group.num_groups, iters=loop.iters, warmup_iters=loop.warmup_iters,
        status="failed", error=error, params={**spec.params, **loop_params(loop)}, point_key=point_key,
    )
