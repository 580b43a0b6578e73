"""`commbench bench` over the NCCL tuning axes: one bench job per combination, each in fresh processes
(commbench.sweep.combos), all into one results file. Every record names its settings in
`params` (nccl_algo, nccl_proto, nccl_channels; "default" where NCCL chose) and each run's header
holds the NCCL_* environment its ranks saw."""

from __future__ import annotations

import dataclasses
import functools

from collectives import get_collective
from commbench.comm.backends import max_local_ranks
from commbench.comm.job import DEFAULT_NPROC, run_job
from commbench.errors import CommbenchError
from commbench.comm.launch import detect_rank_env
from commbench.comm.nccl_tuning import TuningCombo
from commbench.measure.bench import BenchConfig, planned_points, validate
from commbench.comm.topology import resolve_before_launch
from commbench.results.records import Measurement
from commbench.sweep.combos import (ComboResult, RankFailure, guarded_rank, run_combinations, skipped_header,
                                    skipped_record)


def combo_config(config: BenchConfig, combo: TuningCombo) -> BenchConfig:
    return dataclasses.replace(config, params={**config.params, **combo.params()}, show_view=False)


def world_size_of(nproc: int | None, backend: str) -> int:
    """The world each combination will have; local rank counts are checked here, before any launch."""
    rank_env = detect_rank_env()
    if rank_env is not None and rank_env.launcher != "local":
        return rank_env.world_size
    nproc = DEFAULT_NPROC if nproc is None else nproc
    limit, why = max_local_ranks(backend)
    if not 1 <= nproc <= limit:
        from commbench.comm.backends import ranks_allowed
        raise CommbenchError(ranks_allowed("--nproc", nproc, backend, limit, why))
    return nproc


def bench_combo(combo: TuningCombo, *, config: BenchConfig, nproc: int | None, rank_fn=None) -> str | None:
    """One combination's bench job (runs in the combination's own process); None or why it failed."""
    from commbench.measure.bench import run_bench_rank

    tuned = combo_config(config, combo)
    outcomes = run_job(guarded_rank, (rank_fn or run_bench_rank, tuned), nproc=nproc, backend=config.backend,
                       validate_world=lambda world: validate(tuned, world), output_path=config.output_path,
                       timeout_s=config.timeout_s)
    for outcome in outcomes.values():
        if isinstance(outcome, RankFailure):
            return outcome.reason
        if getattr(outcome, "error", None):
            return outcome.error
    return None


def planned_specs(config: BenchConfig, world_size: int) -> list:
    collective = get_collective(config.collective)
    racks = resolve_before_launch(config.topology, world_size)
    return planned_points(config, collective, world_size, racks)


def skipped_bench_records(combo: TuningCombo, reason: str, run_id: str, num_recorded: int, *, config: BenchConfig,
                          world_size: int) -> list[Measurement]:
    """A `skipped` record for every point the refused combination did not measure."""
    collective = get_collective(config.collective)
    tuned = combo_config(config, combo)
    return [skipped_record(point, run_id=run_id, collective=collective, backend=config.backend, world_size=world_size,
                           loop=config.loop, combo=combo, reason=reason)
            for point in planned_specs(tuned, world_size)[num_recorded:]]


def stall_timeout_s(point_timeout_s: float) -> float:
    """How long a combination may go without a new record: start-up and NCCL init, plus a point
    running into its timeout a few times (check, timed loop, reduction)."""
    return 120.0 + 3 * point_timeout_s


def run_tuned_bench(config: BenchConfig, combos: list[TuningCombo], *, nproc: int | None,
                    start_method: str = "spawn", rank_fn=None) -> list[ComboResult]:
    """Every combination of a bench job; NCCL's default first."""
    world = world_size_of(nproc, config.backend)
    validate(config, world)
    rank_env = detect_rank_env()
    is_writer = rank_env is None or rank_env.launcher == "local" or rank_env.rank == 0
    num_points = len(planned_specs(config, world))
    launcher = rank_env.launcher if rank_env else "local"
    return run_combinations(
        combos, functools.partial(bench_combo, config=config, nproc=nproc, rank_fn=rank_fn),
        output_path=config.output_path, total_points=num_points,
        skipped_records=functools.partial(skipped_bench_records, config=config, world_size=world),
        make_header=lambda combo, env, reason: skipped_header(backend=config.backend, world_size=world, combo=combo,
                                                             env=env, argv=list(config.argv), launcher=launcher,
                                                             reason=reason),
        is_writer=is_writer, show_progress=config.output_format == "table" and is_writer, start_method=start_method,
        stall_timeout_s=stall_timeout_s(config.timeout_s))


def run_ids_in(path: str) -> set[str]:
    """The run ids a results file holds (none when it does not exist yet)."""
    from pathlib import Path

    from commbench.results.records import iter_records

    return {rec.run_id for rec in iter_records(path, drop_samples=True)} if Path(path).exists() else set()


def wrong_points_since(path: str, earlier_run_ids: set[str]) -> tuple[str, ...]:
    """'combination collective dtype size: N wrong element(s)' for every point a run not in `earlier_run_ids`
    (this launch's combinations) recorded with wrong data. A combination NCCL refuses is data; wrong data is not."""
    from commbench.comm.nccl_tuning import combo_from_params
    from commbench.results.records import iter_records
    from commbench.units import format_size

    out = []
    for rec in iter_records(path):
        if isinstance(rec, Measurement) and rec.run_id not in earlier_run_ids and rec.num_wrong:
            out.append(f"{combo_from_params(rec.params).label} {rec.collective} {rec.dtype} "
                       f"{format_size(rec.size_bytes)}: {rec.num_wrong} wrong element(s)")
    return tuple(out)


def summary_lines(results: list[ComboResult]) -> list[str]:
    """One line per combination: measured, or skipped with NCCL's reason."""
    lines = []
    for result in results:
        if result.skipped_reason:
            lines.append(f"skipped {result.combo.label}: {result.skipped_reason}")
        else:
            lines.append(f"measured {result.combo.label}: {result.num_recorded} point(s)")
    return lines


def baseline_failed(results: list[ComboResult]) -> str | None:
    for result in results:
        if result.combo.is_default and result.skipped_reason:
            return result.skipped_reason
    return None

