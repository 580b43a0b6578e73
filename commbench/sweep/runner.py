"""The sweep runner: every point of a sweep file in one launch, resumable, one failure at a time.

Every rank plans the same points (plan.py); rank 0 reads what the output file already holds
(--resume) and publishes the points still to measure through the launch's store. Rank 0 writes one
RunHeader, then one Measurement per point, appended and fsynced as each finishes, so a kill or
Ctrl-C keeps everything already measured. Failures are contained as isolation.py describes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path
from dataclasses import dataclass

from collectives import get_collective
from commbench.errors import CommbenchError, first_line
from commbench.comm.launch import RankEnv
from commbench.comm.progress import NO_PROGRESS, RankProgress
from commbench.measure.harness import failed_measurement, measure_point
from commbench.results.records import JsonlWriter, Measurement, new_run_id, to_dict
from commbench.sweep.dead_peer import dead_peer_stop, end_stuck, report_alone
from commbench.sweep.isolation import (RECOVERABLE_BACKENDS, Coordinator, IsolatedBackend, PeerDied, peer_failure,
                                       peer_gone, timed_out)
from commbench.sweep.plan import SweepPoint, plan_sweep
from commbench.files import repair_torn_tail
from commbench.sweep.resume import (continued_identity, earlier_problems, identity_entries, recorded_keys,
                                    resume_identities, sweep_identity)
from commbench.sweep.schema import Sweep, sweep_words
from commbench.comm.topology import resolve_on_ranks

SHARE_TIMEOUT_S = 300.0
AGREE_MARGIN_S = 30.0
OWN_LAUNCHES = ("local", "single")  # launches whose parent process watches the ranks (local_ranks.py)


@dataclass(frozen=True, kw_only=True)
class SweepJob:
    """Everything a rank needs (picklable: it travels to spawned ranks)."""

    sweep: Sweep
    backend: str  # resolved: nccl or gloo
    output_path: str
    resume: bool = False
    argv: tuple[str, ...] = ()
    show_progress: bool = True
    # the point keys the file held before this command, when it restarts ranks after a hang (None: every key there
    # was): a point this command recorded failed is its own failure, not one 'recorded before this launch'
    recorded_before: frozenset[str] | None = None


@dataclass(frozen=True, kw_only=True)
class SweepOutcome:
    num_planned: int
    num_skipped: int
    num_ok: int
    num_failed: int
    num_wrong: int
    stopped: str | None  # why the sweep stopped before its last point, or None
    earlier: tuple[str, ...] = ()  # points skipped as already recorded whose record failed or was wrong (rank 0)


def typed_first_line(exc: BaseException) -> str:
    """The exception's type and first line (a sweep records errors of many kinds side by side)."""
    line = first_line(exc)
    return line if line == type(exc).__name__ else f"{type(exc).__name__}: {line}"


def agree_timeout_s(point: SweepPoint) -> float:
    """How long ranks wait for each other's report: a failing point may run into its timeout a few
    times (data check, timed loop, reduction) before every rank gets out."""
    return 3 * point.config.timeout_s + AGREE_MARGIN_S


def _pending(job: SweepJob, points: list[SweepPoint], rank: int) -> tuple[str | None, tuple[str, ...]]:
    """Rank 0: what every rank is to measure (JSON for the store), and the failed or wrong points the
    file already holds (kept on rank 0: they are reported, never measured again)."""
    if rank != 0:
        return None, ()
    done: set[str] = set()
    if job.resume:
        repair_torn_tail(job.output_path)
        done = recorded_keys(job.output_path)
    pending = [i for i, p in enumerate(points) if p.key not in done]
    before = done if job.recorded_before is None else done & job.recorded_before
    earlier = earlier_problems(job.output_path, [p for p in points if p.key in before]) if before else ()
    return json.dumps({"run_id": new_run_id(), "pending": pending}), earlier


def run_sweep_on_backend(backend, job: SweepJob, *, launcher: str = "local",
                         progress: RankProgress = NO_PROGRESS) -> SweepOutcome:
    """The sweep on an already joined backend (every rank calls this)."""
    from commbench.results.provenance import collect_header
    from commbench.sweep.view import SweepView

    from commbench.comm.same_config import check_same_config, config_digest
    try:
        check_same_config(backend, config_digest({  # what plans the points (before any exchange that depends on it)
            "sweep": sweep_identity(job.sweep, backend.world_size, backend.name), "resume": job.resume,
            "topology": job.sweep.topology, "tuning": [c.label for c in job.sweep.tuning],
            "timeouts_s": [e.timeout_s for e in job.sweep.entries]}), "sweep")   # not in the identity: in the waits
    except CommbenchError:
        # every rank stops here after the same all-gather: tear the group down together (as bench does), or a rank
        # still holding it at interpreter exit while its peer has gone aborts in gloo (SIGABRT, not exit 2)
        backend.shutdown()
        raise
    try:
        topology = resolve_on_ranks(job.sweep.topology, backend)  # every rank: may gather host names
    except CommbenchError as exc:   # racks the file declares that the hosts contradict: every rank, in its words
        backend.shutdown()
        raise CommbenchError(sweep_words(str(exc))) from None
    points = plan_sweep(job.sweep, backend.world_size, backend=backend.name, output_path=job.output_path,
                        argv=job.argv, topology=topology)
    coord = Coordinator.from_default_group(backend)
    plan, earlier = _pending(job, points, backend.rank)
    shared = json.loads(coord.share("plan", plan, SHARE_TIMEOUT_S))
    run_id, pending = shared["run_id"], [points[i] for i in shared["pending"]]
    is_writer = backend.rank == 0
    iso = IsolatedBackend(backend, pending[0].config.timeout_s if pending else points[0].config.timeout_s)
    counts = {"ok": 0, "failed": 0, "wrong": 0}
    stopped = None
    if not pending:
        return SweepOutcome(num_planned=len(points), num_skipped=len(points), num_ok=0, num_failed=0,
                            num_wrong=0, stopped=None, earlier=earlier)
    notes = list(dict.fromkeys(n for p in points for n in backend.notes(p.config.collective)))
    header = collect_header(iso, run_id=run_id, argv=list(job.argv), launcher=launcher, topology=topology.to_dict(),
                            notes=[f"sweep {job.sweep.name} ({job.sweep.path})", *notes])
    identity = sweep_identity(job.sweep, backend.world_size, backend.name)
    if job.resume and is_writer:   # the identity the file's sweep carries (an earlier commbench's): one sweep's runs
        identity = continued_identity(job.output_path, resume_identities(job.sweep, backend.world_size,
                                                                         backend.name)) or identity
    header = dataclasses.replace(header, sweep_identity=identity, planned_points=len(points),
                                 sweep_entries=identity_entries(job.sweep),
                                 resumes_run_id=resumed_run_id(job.output_path, identity) if job.resume and is_writer else "")
    refused = coord.share("resume-setup", resumed_on_another_setup(job.output_path, header)
                          if job.resume and is_writer else None, SHARE_TIMEOUT_S)
    if refused:  # every rank: nothing written, the group torn down together (as check_same_config's refusal)
        backend.shutdown()
        raise CommbenchError(refused)
    watch = None
    if launcher not in OWN_LAUNCHES and backend.world_size > 1:
        from commbench.comm.peer_watch import start_peer_watch

        watch = start_peer_watch(backend.rank, backend.world_size,
                                 lambda value: coord.share(f"peer-watch/{run_id}", value, SHARE_TIMEOUT_S))
    writer = JsonlWriter(job.output_path) if is_writer else None
    current: dict = {"step": -1, "label": None, "pending": None, "recorded": set()}
    if watch is not None:
        coord.died = watch.died
        watch.on_stuck = lambda dead: end_stuck(watch, current, writer, job.output_path, iso.rank)
    view = (SweepView(title=f"sweep {job.sweep.name} on {backend.name}, {backend.world_size} rank(s)",
                      num_points=len(pending), num_skipped=len(points) - len(pending), output_path=job.output_path,
                      emulated=bool(header.emulated))
            if is_writer and job.show_progress else None)
    if view:
        view.console.print(topology.describe(), highlight=False)
        if job.resume:
            for line in resumed_by_another_version(job.output_path, header) + resumed_elsewhere(job.output_path,
                                                                                               header):
                view.console.print(line, highlight=False, markup=False)
    ended = False
    try:
        if writer:
            writer.write(header)
        for step, point in enumerate(pending):
            if view:
                view.starting(point.label)
            record, stopped = _measure_isolated(iso, coord, point, step, run_id, progress,
                                                fresh_ranks=launcher == "local", watch=watch, current=current)
            counts["ok" if record.status == "ok" else "failed"] += 1
            counts["wrong"] += record.num_wrong or 0
            if writer:
                with watch.lock if watch is not None else contextlib.nullcontext():
                    writer.write(record)
                    current["recorded"].add(step)
                progress.recorded(step, record.status == "ok")
            if view:
                view.finished(point.label, record)
            if stopped:
                break
        ended = True
    except KeyboardInterrupt:   # a stop signal is an interruption, never a death: batch systems signal every task,
        ended = True            # and a peer told 'rank 1 died' first would record the point as failed
        raise
    finally:
        if watch is not None:
            watch.close(bye=ended)
        if view:
            view.close()
        if writer:
            writer.close()
    return SweepOutcome(num_planned=len(points), num_skipped=len(points) - len(pending), num_ok=counts["ok"],
                        num_failed=counts["failed"], num_wrong=counts["wrong"], stopped=stopped, earlier=earlier)


def _measure_isolated(iso: IsolatedBackend, coord: Coordinator, point: SweepPoint, step: int,
                      run_id: str, progress: RankProgress = NO_PROGRESS, *,
                      fresh_ranks: bool = True, watch=None, current: dict | None = None) -> tuple[Measurement, str | None]:
    """Measure one point; on any rank's failure, record it and recover (gloo) or say why we stop.

    `fresh_ranks`: commbench's own launch, whose watcher kills the ranks a dead peer left waiting and starts fresh ones
    (local_ranks.py). Under another launcher (torchrun, srun) nothing replaces a dead rank: a rank whose collective
    failed because a peer closed its connection records the point failed and stops at once (as bench), instead of
    waiting the agreement's 3 x timeout_s + 30 s for a report that never comes, deaf to the launcher's SIGTERM.

    `watch` (a PeerWatch, under such a launcher): once it knows a rank died, every rank stops at once naming it,
    whether its own collective failed on the dead rank, ran on a sub-group without it, or waits in the agreement;
    `current` tells its stuck handler where the sweep is (rank 0: the failed record it writes)."""
    collective = get_collective(point.config.collective)
    spec, loop = point.point.spec, point.config.loop
    record, error, stopped = None, None, None
    group_size = iso.world_size if point.point.groups is None else len(point.point.groups[0])
    unmeasured = failed_measurement(collective, spec, iso, group_size, loop, run_id=run_id, error="",
                                    group=point.point.group, point_key=point.key) if iso.rank == 0 else None
    if current is not None:
        current.update(step=step, label=point.label, pending=unmeasured)
    progress.at(step, point.label, to_dict(unmeasured) if unmeasured is not None else None)
    try:
        iso.set_timeout(point.config.timeout_s)
        comm = iso.comm_for(point.point.groups)
        record = measure_point(iso, comm, collective, spec, loop, run_id=run_id, group=point.point.group,
                               point_key=point.key)
    except Exception as exc:  # noqa: BLE001 - a point that raises or times out is a failed record
        error = typed_first_line(exc)
        progress.failed(step, error)
    reported = False
    dead_peer = watch is not None and (watch.died.is_set() or peer_gone(error))
    if not dead_peer and not (not fresh_ranks and peer_gone(error)):
        try:
            failed, stopped = _agree(coord, point, step, error, iso.rank)
        except PeerDied:   # a rank died while this one waited for every rank's report
            dead_peer = reported = True
    if dead_peer:
        failed, stopped = dead_peer_stop(coord, watch, point, step, error, iso.rank, reported=reported)
    elif not fresh_ranks and peer_gone(error):   # no peer watch: who died is not known here
        failed = report_alone(coord, step, error, iso.rank)
        stopped = f"{peer_failure(error)} while measuring {point.label}; nothing replaces it under a launcher"
    if not failed:
        assert record is not None
        return record, None
    reason = "; ".join(f"rank {r}: {e}" for r, e in failed[:3]) + (" ..." if len(failed) > 3 else "")
    # the timeout only where a rank waited past it: a killed rank's point (probe P3) failed on a closed connection
    timeout = f" (timeout {point.config.timeout_s:g} s)" if any(timed_out(e) for _, e in failed) else ""
    record = failed_measurement(collective, spec, iso, group_size, loop, run_id=run_id,
                                error=f"failed while measuring {point.label}{timeout}: {reason}",
                                group=point.point.group, point_key=point.key)
    if stopped is None and iso.name not in RECOVERABLE_BACKENDS:
        stopped = f"a {iso.name} communicator cannot be trusted after a failed point ({point.label})"
    elif stopped is None:
        try:
            iso.rebuild()
        except Exception as exc:  # noqa: BLE001
            stopped = f"could not make fresh process groups after {point.label}: {typed_first_line(exc)}"
    return record, stopped


def _agree(coord: Coordinator, point: SweepPoint, step: int, error: str | None,
           rank: int) -> tuple[list[tuple[int, str]], str | None]:
    """Every rank's failures for the point, or (this rank's, why the sweep stops) when a rank does not report."""
    try:
        return coord.agree(f"point{step}", error, agree_timeout_s(point)), None
    except TimeoutError as exc:
        return ([(rank, error or f"no report from every rank: {exc}")],
                f"ranks stopped answering while measuring {point.label} ({exc})")


def _earlier_headers(path) -> list:
    from commbench.results.records import RunHeader, iter_records

    return [r for r in iter_records(path, drop_samples=True) if isinstance(r, RunHeader)] if Path(path).exists() else []


def resumed_run_id(path, identity: str) -> str:
    """The run a --resume goes on from: the file's last run of this sweep identity (its last header of it), "" where
    the file holds none. Recorded in the header (resumes_run_id), so readers join the two runs only when the header
    says so: two separate launches of one sweep appended or concatenated into one file stay two runs."""
    return next((h.run_id for h in reversed(_earlier_headers(path)) if h.sweep_identity == identity), "")


def resumed_on_another_setup(path, header) -> str | None:
    """One line refusing a launch that would resume a run of `path` measured on another setup in what makes two runs
    other measurements (results.run_setup.resume_setup_changes: NCCL version, devices, fabric, on gloo the torch
    version and threads per rank, the NCCL_* settings that change the fabric), naming the field, the file's value and
    this launch's, as --resume refuses a changed sweep (resume.check_resume_identity): the file would hold two setups'
    points under one sweep, which `compare` judges as one run and `fit` refuses as a mix. None where they agree."""
    from commbench.results.run_setup import resume_setup_changes

    earlier = _earlier_headers(path)
    schemas = {h.schema_version for h in earlier if h.sweep_identity == header.sweep_identity} - {header.schema_version}
    if schemas:   # one run's records in two schemas: a reader takes each line by the schema this version writes
        return (f"--resume into {str(path)!r} is refused: its run of this sweep was written in record schema "
                f"{', '.join(map(str, sorted(schemas)))} and this commbench writes schema {header.schema_version}: "
                "one run would hold records of two schemas; sweep into another -O")
    changes = resume_setup_changes(earlier[-1], header) if earlier else []
    if not changes:
        return None
    return (f"--resume into {str(path)!r} is refused: its run {earlier[-1].run_id} was measured with another setup "
            f"({'; '.join(changes)}, file -> this launch): one file would hold two setups' points; launch with the "
            "file's setting, or sweep into another -O")


def resumed_by_another_version(path, header) -> list[str]:
    """A note when this launch resumes a sweep of `path` that another commbench version wrote (a launch of it: the
    file's headers of this sweep identity), naming both versions, as `compare` notes another commbench: the run's
    points then come from two versions of the measuring code, joined as one run. The record schema is the same (a
    header of another `schema_version` is refused before: resumed_on_another_setup)."""
    from commbench.results.records import SCHEMA_VERSION

    theirs = {h.run_id: h.commbench_version for h in _earlier_headers(path)
              if h.sweep_identity == header.sweep_identity and h.commbench_version
              and h.commbench_version != header.commbench_version}
    if not theirs:
        return []
    named = ", ".join(f"run {run_id}: commbench {version}" for run_id, version in theirs.items())
    return [f"note: resuming {path}, written by another commbench version ({named}; this launch: commbench "
            f"{header.commbench_version}): the run's points are measured by both versions, joined as one run "
            f"(record schema {SCHEMA_VERSION} on both sides); sweep into another -O to keep them apart"]


def resumed_elsewhere(path, header) -> list[str]:
    """A note when this launch resumes a run of `path` on other hosts (or with other NCCL_* settings that do not
    change the fabric, NCCL_DEBUG say): its points join that run in one file, which `compare` judges as one run and
    `report` draws as two curves; what makes another measurement is refused before (resumed_on_another_setup)."""
    from commbench.results.run_setup import mixed_setup_texts, same_setup

    earlier = _earlier_headers(path)
    if not earlier or same_setup(earlier[-1], header):
        return []
    last = earlier[-1]
    def env(h) -> str:
        return " ".join(f"{k}={v}" for k, v in sorted(h.nccl_settings().items())) or "none"
    differs = "; ".join(mixed_setup_texts({last.run_id: last, header.run_id: header})
                        + ([f"NCCL_* settings ({env(last)} -> {env(header)})"] * (env(last) != env(header))))
    return [f"note: resuming run {last.run_id} of {path} on another setup: {differs}. Its points and this launch's "
            "share one file: `compare` judges them as one run, `report` draws them apart"]


def run_sweep_rank(rank_env: RankEnv, job: SweepJob) -> SweepOutcome:
    """Join the launch and run the sweep (every rank of the launch calls this)."""
    from commbench.comm.backends import create_backend

    timeout_s = max(entry.timeout_s for entry in job.sweep.entries)
    # the collectives' timeout covers rank 0's reading of the file (SHARE_TIMEOUT_S); joining the launch ends at the
    # sweep's own timeout_s (+ 5 s), as bench's at --timeout (README "Multi-node")
    backend = create_backend(job.backend, rank_env, max(timeout_s, SHARE_TIMEOUT_S), join_timeout_s=timeout_s,
                             join_setting="the sweep's timeout_s")
    outcome = run_sweep_on_backend(backend, job, launcher=rank_env.launcher, progress=rank_env.progress or NO_PROGRESS)
    if outcome.stopped is None:
        backend.shutdown()
    return outcome
