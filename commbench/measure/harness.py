"""The measurement harness: data check, warm-up, timed loop, reduction across ranks.

Per point (as nccl-tests, with per-iteration statistics):
1. check (optional, outside timing): fill buffers with a known pattern, run one iteration, count
   wrong elements on every rank and sum them over the world (without the check, buffers are still
   filled, so no run times uninitialised memory);
2. warm-up: `warmup_iters` untimed iterations, then a device sync and a world barrier;
3. timed loop: each iteration's stages are bracketed by stopwatch marks (CUDA events on GPU; the
   host clock after a device sync on CPU); nothing else runs between marks;
4. reduction: per iteration and per stage, the slowest rank's time counts (a MAX all-reduce over the
   world after the loop); median, mean, min and p99 over iterations.
algbw = bytes / median time (GB = 1e9 B); busbw = algbw * the collective's factor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from collectives.base import Collective, PointSpec, PreparedPoint
from commbench.comm.backend import Backend, Communicator
from commbench.dtypes import get_dtype
from commbench.results.records import Measurement

_FLOAT64 = get_dtype("float64")
_INT64 = get_dtype("int64")


@dataclass(frozen=True, kw_only=True)
class LoopOptions:
    iters: int = 20
    warmup_iters: int = 5
    check: bool = True
    cuda_graph: bool = False  # time replays of each stage captured once by backend.capture (nccl-tests -G)


@dataclass(frozen=True, kw_only=True)
class GroupInfo:
    """How the measured communicator sits in the world (for sub-group sweeps)."""

    layout: str = "world"
    num_groups: int = 1


def run_once(prepared: PreparedPoint) -> None:
    for _, stage in prepared.stages:
        stage()


def check_point(backend: Backend, prepared: PreparedPoint) -> int:
    """Fill, run one iteration, and return the number of wrong elements summed over all ranks."""
    prepared.fill()
    run_once(prepared)
    backend.synchronize()
    wrong = backend.upload(np.array([prepared.check()], dtype=np.int64), _INT64)
    backend.world.all_reduce(wrong, "sum")
    return int(backend.download(wrong)[0])


def time_iterations(backend: Backend, prepared: PreparedPoint, iters: int, warmup_iters: int,
                    cuda_graph: bool = False) -> np.ndarray:
    """Per-iteration times in µs, shape (iters, stages + 1): each stage, then the whole iteration;
    each entry is the slowest rank's. With `cuda_graph`, each stage is captured once after warm-up
    and the timed loop replays the captures (backends that can: `capture(stage) -> replay`)."""
    stages = [stage for _, stage in prepared.stages]
    for _ in range(warmup_iters):
        for stage in stages:
            stage()
    if cuda_graph:
        stages = [backend.capture(stage) for stage in stages]
        for stage in stages:
            stage()
    backend.synchronize()
    backend.world.barrier()
    num_stages = len(stages)
    marks_per_iter = num_stages + 1
    watch = backend.stopwatch(iters * marks_per_iter)
    mark = watch.mark
    if num_stages == 1:
        only = stages[0]
        for it in range(iters):
            mark(2 * it)
            only()
            mark(2 * it + 1)
    else:
        for it in range(iters):
            base = it * marks_per_iter
            mark(base)
            for index, stage in enumerate(stages, start=1):
                stage()
                mark(base + index)
    watch.finish()
    local = np.empty((iters, num_stages + 1))
    for it in range(iters):
        base = it * marks_per_iter
        for s in range(num_stages):
            local[it, s] = watch.elapsed_us(base + s, base + s + 1)
        local[it, num_stages] = watch.elapsed_us(base, base + num_stages)
    slowest = backend.upload(local.ravel(), _FLOAT64)
    backend.world.all_reduce(slowest, "max")
    return backend.download(slowest).reshape(iters, num_stages + 1)


def measure_point(backend: Backend, comm: Communicator, collective: Collective, spec: PointSpec,
                  loop: LoopOptions, *, run_id: str, group: GroupInfo = GroupInfo(),
                  point_key: str | None = None) -> Measurement:
    """Measure one point on `comm` (every rank of the world calls this together)."""
    prepared = collective.prepare(comm, backend, spec)
    if loop.check:
        num_wrong = check_point(backend, prepared)
    else:
        # Never time uninitialised memory: stray NaNs or denormals change how fast a CPU reduces.
        prepared.fill()
        num_wrong = None
    times_us = time_iterations(backend, prepared, loop.iters, loop.warmup_iters, loop.cuda_graph)
    total_us = times_us[:, -1]
    median_us = float(np.median(total_us))
    algbw_gbps = (prepared.algbw_bytes or prepared.size_bytes) / (median_us * 1e-6) / 1e9 if median_us > 0 else 0.0
    stage_medians = {}
    if len(prepared.stages) > 1:
        stage_medians = {name: float(np.median(times_us[:, i])) for i, (name, _) in enumerate(prepared.stages)}
    metrics = dict(prepared.metrics)
    if prepared.stage_metrics is not None:
        metrics.update(prepared.stage_metrics(stage_medians))
    return Measurement(
        run_id=run_id, collective=collective.name, backend=backend.name,
        size_bytes=prepared.size_bytes, count=prepared.count, dtype=spec.dtype.name,
        op=spec.op if collective.reduces else None,
        in_place=spec.in_place or collective.in_place_mode == "always",
        world_size=backend.world_size, group_size=comm.size, group_layout=group.layout,
        num_groups=group.num_groups, iters=loop.iters, warmup_iters=loop.warmup_iters,
        time_us_median=median_us, time_us_mean=float(np.mean(total_us)), time_us_min=float(np.min(total_us)),
        time_us_p99=float(np.percentile(total_us, 99)), algbw_gbps=algbw_gbps,
        busbw_gbps=algbw_gbps * prepared.busbw_factor, num_wrong=num_wrong,
        stages_us_median=stage_medians, metrics=metrics,
        params={**spec.params, **prepared.params, **({"cuda_graph": True} if loop.cuda_graph else {})},
        notes=backend.notes(collective.name), point_key=point_key,
    )


def failed_measurement(collective: Collective, spec: PointSpec, backend: Backend, comm_size: int,
                       loop: LoopOptions, *, run_id: str, error: str, group: GroupInfo = GroupInfo(),
                       point_key: str | None = None) -> Measurement:
    """The record of a point that raised or timed out: its identity and the error, no numbers."""
    return Measurement(
        run_id=run_id, collective=collective.name, backend=backend.name, size_bytes=spec.size_bytes,
        count=0, dtype=spec.dtype.name, op=spec.op if collective.reduces else None, in_place=spec.in_place,
        world_size=backend.world_size, group_size=comm_size, group_layout=group.layout,
        num_groups=group.num_groups, iters=loop.iters, warmup_iters=loop.warmup_iters,
        status="failed", error=error, params=dict(spec.params), point_key=point_key,
    )
