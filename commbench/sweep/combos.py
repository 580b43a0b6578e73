"""Process-per-combination launcher for the NCCL tuning axes.

NCCL reads NCCL_ALGO / NCCL_PROTO / NCCL_{MIN,MAX}_NCHANNELS when a communicator is created and keeps
some of it per process, so each combination runs in a fresh child process with its environment set;
the child starts (or, under torchrun/srun/mpirun, becomes) the ranks through the existing job runner,
on fresh communicators. All combinations append to one results file; this process shows one progress
bar, advanced by the measurements the ranks append. A combination NCCL refuses (the child or a rank
fails) is recorded, point by point, as `status="skipped"` with NCCL's first error line, and the next
combination runs. NCCL's default (no override) is always measured first: it is the baseline.
"""

from __future__ import annotations

import datetime
import json
import multiprocessing
import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from commbench import __version__
from commbench.comm.launch import detect_rank_env
from commbench.comm.nccl_conf import read_conf_files
from commbench.comm.nccl_tuning import (COMBO_ENV, TUNED_ENV_KEYS, TUNING_ENV, TuningCombo, inherited_tuning_env,
                                        tuning_from_env)
from commbench.errors import first_line
from commbench.results.records import JsonlWriter, Measurement, RunHeader, new_run_id

POLL_S = 0.2


@dataclass(frozen=True, kw_only=True)
class RankFailure:
    """What a guarded rank returns instead of raising (so NCCL's reason reaches the parent)."""

    reason: str


@dataclass(frozen=True, kw_only=True)
class ComboResult:
    combo: TuningCombo
    num_recorded: int  # measurements the ranks wrote for it
    skipped_reason: str | None  # NCCL's (or the rank's) first error line when the combination was refused


def guarded_rank(rank_env, payload: tuple[Callable, Any]) -> Any:
    """`rank_fn(rank_env, config)`, with any exception returned as a RankFailure (picklable)."""
    rank_fn, config = payload
    try:
        return rank_fn(rank_env, config)
    except Exception as exc:  # noqa: BLE001 - an NCCL refusal is data here, not a crash
        line = first_line(exc)
        return RankFailure(reason=line if line != type(exc).__name__ else type(exc).__name__)


def combo_environ(combo: TuningCombo, base: dict[str, str], plan: dict | None = None, *,
                  port: int | None = None) -> dict[str, str]:
    """The environment of a combination's processes: the tuned keys replaced by the combination's
    (inherited values dropped, so the baseline really is NCCL's default; the `plan` names them, "inherited",
    and each header records it), and the launch's `plan` (TUNING_ENV: every combination it runs, which each
    header records). Under an outside launcher each combination rendezvouses on its own `port`
    (CombinationPorts: a free port rank 0's host picked, shared through the launch's store), hosted by rank 0's
    child, so no store key of one combination is seen by the next."""
    env = {k: v for k, v in base.items() if k not in TUNED_ENV_KEYS}
    env.update(combo.env())
    env[COMBO_ENV] = combo.label
    if plan is not None:   # what was dropped goes with the plan into every header (nccl_tuning.inherited)
        inherited = inherited_tuning_env(base)
        env[TUNING_ENV] = json.dumps({**plan, "inherited": inherited} if inherited else plan)
    if port is not None:
        env["MASTER_PORT"] = str(port)
        env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    return env


def under_outside_launcher(env: dict[str, str]) -> bool:
    """Whether this process is a rank of a launch commbench did not start (torchrun, srun, mpirun, mpiexec)."""
    if not any(key in env for key in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")):
        return False
    launched = detect_rank_env(env)
    return launched is not None and launched.launcher != "local"


class CombinationPorts:
    """The rendezvous port of each combination under an outside launcher. MASTER_PORT + 1 + index met other
    launches' ports: an srun step's default port (15000 + 10 x (job mod 1000) + step mod 10) plus 1 is the port of
    the job's next step, or of the next job's step 0. Instead every rank's process joins the launch's own store
    (its MASTER_PORT, rank 0's process serving it for the whole tuning launch, each rank checked in), and before
    each combination rank 0 picks a port its host's kernel says is free (bind to port 0) and publishes it there;
    the other ranks read it. No fixed arithmetic, so no other launch's port scheme can meet it."""

    KEY = "commbench/combinations/port"

    def __init__(self, env: dict[str, str], wait_s: float) -> None:
        from commbench.comm.rank_checkin import checked_in_launch_store

        rank_env = detect_rank_env(env)
        assert rank_env is not None
        self.rank, self.wait_s = rank_env.rank, wait_s
        where = f"at tcp://{rank_env.master_addr}:{rank_env.master_port} as rank {rank_env.rank} of " \
                f"{rank_env.world_size} (NCCL tuning combinations)"
        self.store = checked_in_launch_store(master_addr=rank_env.master_addr, master_port=rank_env.master_port,
                                             rank=rank_env.rank, world_size=rank_env.world_size, join_s=wait_s,
                                             timeout_s=wait_s, where=where)

    def port(self, index: int) -> int:
        """Combination `index`'s port: rank 0 picks and publishes it, every other rank waits for it."""
        key = f"{self.KEY}/{index}"
        if self.rank == 0:
            with socket.socket() as probe:
                probe.bind(("", 0))
                port = probe.getsockname()[1]
            self.store.set(key, str(port))
            return port
        try:
            self.store.wait([key], datetime.timedelta(seconds=self.wait_s))
        except RuntimeError:
            from commbench.comm.local_ranks import RunFailed

            raise RunFailed(f"rank 0 did not publish NCCL tuning combination {index + 1}'s port within "
                            f"{self.wait_s:g} s (has rank 0 stopped?)") from None
        return int(self.store.get(key))


def _child(conn, run_one: Callable[[TuningCombo], str | None], combo: TuningCombo, env: dict[str, str]) -> None:
    os.environ.clear()
    os.environ.update(env)
    try:
        reason = run_one(combo)
    except BaseException as exc:  # noqa: BLE001 - report anything, including SystemExit, as the reason
        reason = first_line(exc)
    conn.send(reason)
    conn.close()


def _new_records(path: str, offset: int) -> tuple[str | None, int]:
    """(run id of the first header, number of measurements) appended to `path` after byte `offset`."""
    run_id, count = None, 0
    try:
        with open(path, "rb") as handle:  # a line at a time: a combination may append many records
            handle.seek(offset)
            for line in handle:
                try:
                    data = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(data, dict):
                    continue
                if data.get("record_type") == "header" and run_id is None:
                    run_id = data.get("run_id")
                elif data.get("record_type") == "measurement":
                    count += 1
    except OSError:
        return None, 0
    return run_id, count


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def skipped_header(*, backend: str, world_size: int, combo: TuningCombo, env: dict[str, str], argv: list[str],
                   launcher: str, reason: str) -> RunHeader:
    """The header for a combination refused before its ranks wrote one (written by this process)."""
    return RunHeader(
        run_id=new_run_id(), started_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        argv=argv, commbench_version=__version__, python_version=sys.version.split()[0], torch_version=None,
        nccl_version=None, cuda_version=None, cupy_version=None, backend=backend, world_size=world_size,
        hostnames=[socket.gethostname()], devices=[], nccl_env={k: v for k, v in sorted(env.items()) if k.startswith("NCCL_")},
        nccl_conf=read_conf_files(env), launcher=launcher, nccl_tuning=tuning_from_env(env), notes=[f"NCCL tuning combination {combo.label} refused before any point: {reason}"])


def skipped_record(planned, *, run_id: str, collective, backend: str, world_size: int, loop, combo: TuningCombo,
                   reason: str, point_key: str | None = None) -> Measurement:
    """The record of a planned point (commbench.measure.bench.PlannedPoint) a refused combination never measured."""
    from commbench.measure.harness import loop_params, recorded_size
    spec = planned.spec
    group_size = world_size if planned.groups is None else len(planned.groups[0])
    count, size_bytes = recorded_size(collective, spec, group_size)
    return Measurement(
        run_id=run_id, collective=collective.name, backend=backend, size_bytes=size_bytes, count=count,
        dtype=spec.dtype.name, op=spec.op if collective.reduces else None, in_place=collective.is_in_place(spec),
        world_size=world_size, group_size=group_size,
        group_layout=planned.group.layout, num_groups=planned.group.num_groups, iters=loop.iters,
        warmup_iters=loop.warmup_iters, status="skipped", error=f"NCCL refused {combo.label}: {reason}",
        params={**spec.params, **loop_params(loop)}, point_key=point_key)


def run_combinations(combos: list[TuningCombo], run_one: Callable[[TuningCombo], str | None], *, output_path: str,
                     total_points: int, skipped_records: Callable[[TuningCombo, str, str, int], list[Measurement]],
                     make_header: Callable[[TuningCombo, dict[str, str], str], RunHeader], is_writer: bool = True,
                     show_progress: bool = True, start_method: str = "spawn",
                     stall_timeout_s: float | None = None, plan_id: str | None = None) -> list[ComboResult]:
    """Run `run_one(combo)` for every combination, each in a fresh child process with its NCCL_*
    environment; `run_one` returns None or the reason the combination failed (picklable callable).

    `total_points`: measurements per combination (for the progress bar).
    `skipped_records(combo, reason, run_id, num_recorded)`: the skipped records of the points a
    refused combination did not record; `make_header(combo, env, reason)`: a header for them when
    the ranks wrote none. Only the writer (rank 0 / the local parent) writes or shows anything.
    `stall_timeout_s`: a combination whose results file does not grow for this long (a hung NCCL
    init, say) is terminated and recorded as skipped.
    `plan_id`: what ties the launches of one plan together (a sweep's identity, so --resume continues it; a fresh
    id when None): with the combinations' labels it goes in every header (RunHeader.nccl_tuning), so a launch cut
    short before some combinations started leaves a file that says which.
    """
    context = multiprocessing.get_context(start_method)
    results: list[ComboResult] = []
    plan = {"plan": plan_id or new_run_id(), "combinations": [c.label for c in combos]}
    ports = (CombinationPorts(dict(os.environ), (stall_timeout_s or 600.0) + 60.0)
             if under_outside_launcher(dict(os.environ)) else None)
    progress = _progress(total_points * len(combos), output_path) if is_writer and show_progress else None
    try:
        for index, combo in enumerate(combos):
            env = combo_environ(combo, dict(os.environ), plan, port=ports.port(index) if ports else None)
            offset = _size(output_path)
            if progress:
                progress.describe(f"{combo.label} ({index + 1}/{len(combos)})")
            receive, send = context.Pipe(duplex=False)
            child = context.Process(target=_child, args=(send, run_one, combo, env), daemon=False)
            child.start()
            send.close()
            # only the writer watches the file: other ranks' hosts may not see it
            stalled = _wait(child, output_path, stall_timeout_s if is_writer else None, progress, lambda: (
                sum(r.num_recorded for r in results) + _new_records(output_path, offset)[1]
                + sum(total_points - r.num_recorded for r in results if r.skipped_reason)))
            if stalled:
                reason = stalled
            else:
                reason = receive.recv() if receive.poll() else f"the combination's process exited with code {child.exitcode}"
            run_id, recorded = _new_records(output_path, offset)
            if reason is not None and is_writer:
                with JsonlWriter(output_path) as writer:
                    if run_id is None:
                        header = make_header(combo, env, reason)
                        writer.write(header)
                        run_id = header.run_id
                    for record in skipped_records(combo, reason, run_id, recorded):
                        writer.write(record)
            results.append(ComboResult(combo=combo, num_recorded=recorded, skipped_reason=reason))
            if progress:
                progress.set(total_points * len(results))
    finally:
        if progress:
            progress.close()
    return results


def _wait(child, output_path: str, stall_timeout_s: float | None, progress, done) -> str | None:
    """Wait for the child, feeding the progress bar; end it when the results file stops growing."""
    last_size, last_change = _size(output_path), time.monotonic()
    while child.is_alive():
        child.join(POLL_S)
        if progress:
            progress.set(done())
        size = _size(output_path)
        if size != last_size:
            last_size, last_change = size, time.monotonic()
        elif stall_timeout_s is not None and time.monotonic() - last_change > stall_timeout_s:
            child.terminate()
            child.join(10)
            if child.is_alive():
                child.kill()
                child.join()
            return f"no new record for {stall_timeout_s:g} s: the combination was stopped (a hang?)"
    return None


class _progress:
    """One bar over every combination's points (rich), fed from the results file."""

    def __init__(self, total: int, output_path: str) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        from commbench.results.render import stdout_console

        console = stdout_console()
        console.print(f"results → {output_path}", markup=False, highlight=False)
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                            console=console)
        self.task = self.bar.add_task("measuring", total=total)
        self.bar.start()

    def describe(self, text: str) -> None:
        self.bar.update(self.task, description=f"measuring {text}")

    def set(self, done: int) -> None:
        self.bar.update(self.task, completed=done)

    def close(self) -> None:
        self.bar.stop()
