"""`commbench sweep` over the NCCL tuning axes ([sweep] nccl_algo / nccl_proto / nccl_channels or the
--nccl-* options): the whole sweep once per combination, each in fresh processes (commbench.sweep.combos),
all into one results file. Each entry's params gain the combination (nccl_algo, ...), so every point
key names its combination and --resume continues where any combination stopped."""

from __future__ import annotations

import dataclasses
import functools

from commbench.comm.job import run_job
from commbench.comm.launch import detect_rank_env
from commbench.comm.nccl_tuning import TuningCombo
from commbench.results.records import Measurement
from commbench.sweep.combos import (ComboResult, RankFailure, guarded_rank, run_combinations, skipped_header,
                                    skipped_record)
from commbench.sweep.plan import plan_sweep
from commbench.sweep.resume import resume_identities, sweep_identity
from commbench.sweep.runner import SweepJob, run_sweep_rank
from commbench.sweep.tuned_bench import stall_timeout_s, world_size_of
from commbench.sweep.schema import Sweep


def combo_sweep(sweep: Sweep, combo: TuningCombo) -> Sweep:
    entries = tuple(dataclasses.replace(e, params={**e.params, **combo.params()}) for e in sweep.entries)
    return dataclasses.replace(sweep, entries=entries, tuning=())


def launch_passes(sweep: Sweep) -> list[Sweep]:
    """The sweeps a launch of `sweep` runs, in order: one per NCCL tuning combination (NCCL's default first,
    each with the combination in its params and so in its point keys), else the sweep itself."""
    return [combo_sweep(sweep, combo) for combo in sweep.tuning] or [sweep]


def tuned_resume_identities(sweep: Sweep, world_size: int, backend: str) -> tuple[str, ...]:
    """The sweep identities a file --resume'd by `sweep` may hold: the sweep's own (resume_identities) and, with
    tuning axes, each combination's, which is what its runs' headers carry (run_sweep_on_backend hashes the
    combination's sweep); without these `sweep F --resume` refused the file its own tuned launch wrote."""
    own = resume_identities(sweep, world_size, backend)
    combos = [i for combo in sweep.tuning for i in resume_identities(combo_sweep(sweep, combo), world_size, backend)]
    return tuple(dict.fromkeys((*own, *combos)))


def sweep_combo(combo: TuningCombo, *, job: SweepJob, nproc: int | None) -> str | None:
    """One combination's sweep (runs in the combination's own process); None or why it failed."""
    tuned = dataclasses.replace(job, sweep=combo_sweep(job.sweep, combo), show_progress=False)
    outcomes = run_job(guarded_rank, (run_sweep_rank, tuned), nproc=nproc, backend=job.backend,
                       validate_world=lambda world: plan_sweep(tuned.sweep, world, backend=job.backend) and None,
                       output_path=job.output_path, timeout_s=max(e.timeout_s for e in job.sweep.entries))
    for outcome in outcomes.values():
        if isinstance(outcome, RankFailure):
            return outcome.reason
        if outcome.stopped:
            return outcome.stopped
    return None


def skipped_sweep_records(combo: TuningCombo, reason: str, run_id: str, num_recorded: int, *, job: SweepJob,
                          world_size: int) -> list[Measurement]:
    """A `skipped` record for every point of the combination the file does not hold yet."""
    from collectives import get_collective
    from commbench.sweep.resume import recorded_keys

    done = recorded_keys(job.output_path)
    out = []
    for point in plan_sweep(combo_sweep(job.sweep, combo), world_size, backend=job.backend):
        if point.key in done:
            continue
        out.append(skipped_record(point.point, run_id=run_id, collective=get_collective(point.config.collective),
                                  backend=job.backend, world_size=world_size, loop=point.config.loop, combo=combo,
                                  reason=reason, point_key=point.key))
    return out


def wrong_points(job: SweepJob, world_size: int) -> tuple[str, ...]:
    """'combination point: N wrong element(s)' for every point of any combination whose record in the file
    found wrong data. A combination NCCL refuses (its points failed or skipped) is data; wrong data is not."""
    from commbench.sweep.resume import earlier_problems

    out: list[str] = []
    for combo in job.sweep.tuning:
        points = plan_sweep(combo_sweep(job.sweep, combo), world_size, backend=job.backend)
        out += [f"{combo.label} {problem}" for problem in earlier_problems(job.output_path, points, failed=False)]
    return tuple(out)


def run_tuned_sweep(job: SweepJob, *, nproc: int | None, start_method: str = "spawn") -> list[ComboResult]:
    rank_env = detect_rank_env()
    outside = rank_env is not None and rank_env.launcher != "local"
    world = world_size_of(nproc, job.backend)
    is_writer = not outside or rank_env.rank == 0
    pending = [p for combo in job.sweep.tuning for p in plan_sweep(combo_sweep(job.sweep, combo), world, backend=job.backend)]
    return run_combinations(
        list(job.sweep.tuning), functools.partial(sweep_combo, job=job, nproc=nproc), output_path=job.output_path,
        total_points=len(pending) // max(1, len(job.sweep.tuning)),
        skipped_records=functools.partial(skipped_sweep_records, job=job, world_size=world),
        make_header=lambda combo, env, reason: skipped_header(
            backend=job.backend, world_size=world, combo=combo, env=env, argv=list(job.argv),
            launcher=rank_env.launcher if rank_env else "local", reason=reason),
        is_writer=is_writer, show_progress=is_writer and job.show_progress, start_method=start_method,
        stall_timeout_s=stall_timeout_s(max(e.timeout_s for e in job.sweep.entries)),
        plan_id=continued_plan(job, world) if job.resume else sweep_identity(job.sweep, world, job.backend))


def continued_plan(job: SweepJob, world_size: int) -> str:
    """The tuning plan a --resume continues: the file's last plan of this sweep (its identity, or one an earlier
    commbench wrote for it: resume.resume_identities), else this sweep's identity; with a new id, the file's plan
    read as cut short before the combinations the resume measured (resumed.combinations_not_started)."""
    from pathlib import Path

    from commbench.results.records import RunHeader, iter_records

    own = resume_identities(job.sweep, world_size, job.backend)
    plans = [r.nccl_tuning.get("plan") for r in iter_records(job.output_path, on_bad_line=lambda *_: None,
                                                              drop_samples=True)
             if isinstance(r, RunHeader) and isinstance(r.nccl_tuning, dict)] if Path(job.output_path).exists() else []
    return next((plan for plan in reversed(plans) if plan in own), own[0])
