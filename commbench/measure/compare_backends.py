"""`commbench bench ... --compare-backends torch-nccl,cupy-nccl`: the same points on several backends
in one launch, and how much slower each is than the last one listed (the baseline).

With torch-nccl against cupy-nccl the ratio is the framework overhead a torch user pays over NCCL
itself. Every backend is created once, up front (torch.distributed and the cupy-nccl unique-id
exchange share one TCPStore server, see commbench.comm.nccl_id); points are interleaved (size by
size, every backend in turn) so slow drift (clocks, thermals) hits all backends alike. Each
backend's records follow its own RunHeader; a non-baseline record carries in `metrics`:
`baseline_backend`, `baseline_time_us_median`, `time_ratio_to_baseline` (this median / baseline
median, measured / measured) and `time_us_over_baseline`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterator, Sequence

from commbench.measure.bench import (BenchConfig, BenchOutcome, GroupCache, PlannedPoint, planned_points, validate,
                                     with_run_cycles)
from commbench.comm.launch import RankEnv
from commbench.comm.topology import resolve_on_ranks
from commbench.errors import CommbenchError, first_line
from commbench.measure.harness import failed_measurement, measure_point
from commbench.results.records import JsonlWriter, Measurement, new_run_id

BACKEND_ALIASES = {"torch-nccl": "nccl", "torch-gloo": "gloo"}
TORCH_BACKENDS = ("nccl", "gloo")


@dataclass(frozen=True, kw_only=True)
class CompareConfig:
    """A bench job measured on each of `backends` (picklable: it travels to spawned ranks)."""

    bench: BenchConfig
    backends: tuple[str, ...]


def parse_compare_backends(text: str) -> tuple[str, ...]:
    """'torch-nccl,cupy-nccl' -> ('nccl', 'cupy-nccl'), refusing what one launch cannot hold."""
    from commbench.comm.backends import BACKEND_NAMES, backend_status

    from commbench.repeats import comma_entries
    names = tuple(BACKEND_ALIASES.get(n, n) for n in comma_entries("--compare-backends", text, "torch-nccl,cupy-nccl"))
    if len(names) < 2 or len(set(names)) != len(names):
        raise CommbenchError(f"--compare-backends={text!r} is invalid: name two or more different backends, "
                             f"e.g. torch-nccl,cupy-nccl")
    unknown = [n for n in names if n not in BACKEND_NAMES]
    if unknown:
        raise CommbenchError(f"--compare-backends={text!r} is invalid: {unknown[0]!r} is no backend "
                             f"(allowed: torch-nccl, torch-gloo, {', '.join(BACKEND_NAMES)})")
    if sum(n in TORCH_BACKENDS for n in names) > 1:
        raise CommbenchError(f"--compare-backends={text!r} is invalid: one launch holds one torch.distributed "
                             f"backend (nccl or gloo)")
    for name in names:
        available, why = backend_status(name)
        if not available:
            raise CommbenchError(f"--compare-backends: {name} is not available here: {why}")
    return names


def with_baseline(record: Measurement, baseline: Measurement) -> Measurement:
    """`record` with its comparison to `baseline` (same point, another backend) in metrics."""
    if record.status != "ok" or baseline.status != "ok" or not baseline.time_us_median:
        return record
    metrics = {**record.metrics, "baseline_backend": baseline.backend,
               "baseline_time_us_median": baseline.time_us_median,
               "time_ratio_to_baseline": record.time_us_median / baseline.time_us_median,
               "time_us_over_baseline": record.time_us_median - baseline.time_us_median}
    return dataclasses.replace(record, metrics=metrics)


def compare_points(backends: Sequence, collective, points: Sequence[PlannedPoint], config: BenchConfig,
                   run_ids: Sequence[str]) -> Iterator[list[Measurement]]:
    """For each point, one record per backend (in `backends` order), compared with the last.
    Stops after the first point that fails on any backend."""
    caches = [GroupCache(b) for b in backends]
    for point in points:
        records = []
        for backend, cache, run_id in zip(backends, caches, run_ids):
            comm = cache.get(point.groups)
            try:
                records.append(measure_point(backend, comm, collective, point.spec, config.loop, run_id=run_id,
                                             group=point.group))
            except (RuntimeError, ValueError) as exc:
                reason = first_line(exc)
                records.append(failed_measurement(collective, point.spec, backend, comm.size, config.loop,
                                                  run_id=run_id, group=point.group,
                                                  error=f"failed on {backend.name} while measuring {point.label}: {reason}"))
                break
        if len(records) == len(backends):
            records = [with_baseline(r, records[-1]) for r in records[:-1]] + [records[-1]]
        yield records
        if any(r.status != "ok" for r in records):
            return


def run_compare_rank(rank_env: RankEnv, config: CompareConfig) -> BenchOutcome:
    """Run the comparison on this rank (every rank of the launch calls this)."""
    from commbench.comm.backends import create_backend
    from commbench.results.provenance import collect_header

    bench = config.bench
    collective = validate(bench, rank_env.world_size)
    backends = []
    try:
        for name in config.backends:
            validate(dataclasses.replace(bench, backend=name), rank_env.world_size)
            backends.append(create_backend(name, rank_env, bench.timeout_s))
        run_ids = [new_run_id() for _ in backends]
        # the points a single-backend bench measures: one per --algorithm, with the racks in their params
        topology = resolve_on_ranks(bench.topology, backends[0])
        headers = [with_run_cycles(collect_header(b, run_id=run_id, argv=list(bench.argv), launcher=rank_env.launcher,
                                                  topology=topology.to_dict(), notes=b.notes(collective.name)), bench)
                   for b, run_id in zip(backends, run_ids)]
        points = planned_points(bench, collective, rank_env.world_size, topology)
        writer = JsonlWriter(bench.output_path) if rank_env.rank == 0 else None
        rows: list[list[Measurement]] = []
        labels: list[str] = []
        try:
            for header in headers if writer else ():
                writer.write(header)
            for point, records in zip(points, compare_points(backends, collective, points, bench, run_ids)):
                rows.append(records)
                labels.append(point.label)
                for record in records if writer else ():
                    writer.write(record)
        finally:
            if writer:
                writer.close()
    finally:
        for backend in reversed(backends):
            backend.shutdown()
    if rank_env.rank == 0 and bench.output_format == "table":
        print_comparison(rows, [b.name for b in backends], labels)
    errors = [r.error for row in rows for r in row if r.error]
    return BenchOutcome(num_points=len(rows), num_wrong=sum(r.num_wrong or 0 for row in rows for r in row),
                        error=errors[0] if errors else None)


def print_comparison(rows: list[list[Measurement]], names: list[str], labels: list[str]) -> None:
    """One line per point, named by its label (size, and algorithm or sub-group where the job has several)."""
    from commbench.results.render import stdout_console
    from commbench.results.tables import Col, print_table

    baseline = names[-1]
    cols = [Col(name="point")] + [Col(name=f"{name} (µs)") for name in names]
    cols += [Col(name=f"{name} / {baseline}") for name in names[:-1]]
    cells = []
    for row, label in zip(rows, labels):
        times = [f"{r.time_us_median:.2f}" if r.status == "ok" else "failed" for r in row]
        times += [""] * (len(names) - len(times))
        ratios = [f"{r.metrics['time_ratio_to_baseline']:.3f}" if "time_ratio_to_baseline" in r.metrics else "-"
                  for r in row[:len(names) - 1]]
        ratios += ["-"] * (len(names) - 1 - len(ratios))
        cells.append([label, *times, *ratios])
    print_table(stdout_console(), f"measured median time per backend; ratio = backend / {baseline}",
                cols, cells)
