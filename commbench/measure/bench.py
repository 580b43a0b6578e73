"""One `commbench bench` job on one rank: join, describe the run, measure every size, write records.

Rank 0 writes the JSONL file (header first, then one Measurement per size, flushed as each size
finishes) and shows the table; every rank measures. A point that raises (a timed-out or broken
process group) is recorded as failed and ends the run: the communicator cannot be trusted after it.
"""

from __future__ import annotations

import dataclasses
import datetime
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectives import get_collective
from collectives.base import ChunkedCollective, Collective, PointSpec
from commbench.comm.launch import RankEnv
from commbench.comm.progress import NO_PROGRESS
from commbench.dtypes import get_dtype
from commbench.limits import WARMUP_ITERS_WHY, check_iters
from commbench.errors import CommbenchError, StartupFailed, first_line
from commbench.measure.harness import GroupInfo, LoopOptions, failed_measurement, measure_point
from commbench.results.nccl_tests_text import TextCycle
from commbench.results.records import JsonlWriter, Measurement, new_run_id, to_dict
from commbench.measure.subgroups import SubgroupSpec, check_bench_options, expand_points
from commbench.comm.topology import TopologySpec, resolve_on_ranks
from commbench.units import format_size, timeout_problem


@dataclass(frozen=True, kw_only=True)
class BenchConfig:
    """Everything a rank needs to run a bench job (picklable: it travels to spawned ranks)."""

    collective: str
    sizes_bytes: tuple[int, ...]
    dtype: str = "float32"
    op: str = "sum"
    in_place: bool = False
    out_of_place: bool = False  # all_reduce/broadcast: their out-of-place form (in-place is their default)
    root: int = 0
    loop: LoopOptions = LoopOptions()
    backend: str = "gloo"
    timeout_s: float = 300.0
    output_path: str = "results/bench.jsonl"
    output_format: str = "table"
    average: int = 1  # nccl-tests -a: which loop time --format nccl-tests prints (0 rank 0, 1 avg, 2 min, 3 max)
    argv: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    topology: TopologySpec | None = None  # racks (issue 4); None = from hostnames / commbench emulate
    subgroups: SubgroupSpec | None = None  # sub-group sweep (issue 4); None = the whole world
    show_view: bool = True  # False when a parent process shows the progress (NCCL tuning axes)
    size_bounds: tuple[int, int] | None = None  # -b and -e as given (nccl-tests' minBytes/maxBytes)
    size_step: tuple[float, str] | None = None  # -f or -i as the size loop uses them: (factor, "factor") or (bytes, "bytes")
    graph_launches: int = 0  # -G as given (nccl-tests' banner "graph:"); loop.iters is then -n x -G replays
    text_cycle: TextCycle = TextCycle()  # -N: this cycle of the nccl-tests text, continuing the earlier ones'


@dataclass(frozen=True, kw_only=True)
class BenchOutcome:
    num_points: int
    num_wrong: int
    error: str | None
    text_cycle: TextCycle | None = None  # rank 0's text so far, for the next -N cycle to continue (None elsewhere)
    failed_at_s: float | None = None  # time.time() when `error` happened: the CLI names the rank that failed first


def default_output_path(collective: str) -> str:
    """results/<collective>-<time>-<random>.jsonl: two runs started in the same second get two files."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return str(Path("results") / f"{collective}-{stamp}-{uuid.uuid4().hex[:6]}.jsonl")


def validate(config: BenchConfig, world_size: int) -> Collective:
    """Check what can be checked before any rank starts; raise CommbenchError naming the option."""
    collective = get_collective(config.collective)
    dtype = get_dtype(config.dtype)
    if collective.reduces:
        from commbench.comm.backend import REDUCE_OPS, avg_refusal, reduce_op

        if config.op not in REDUCE_OPS:  # the CLI and sweep files pass the op's name ('SUM' typed is 'sum')
            reduce_op(config.op)  # an unknown op: one line naming it and the allowed ones
            raise CommbenchError(f"op={config.op!r} is invalid here: pass {reduce_op(config.op)!r} "
                                 "(commbench.comm.backend.reduce_op)")
        if config.op == "avg" and (refusal := avg_refusal(config.backend, dtype)):
            raise CommbenchError(refusal)
    if config.in_place and collective.in_place_mode == "never":
        raise CommbenchError(f"--in-place is not possible for {collective.name}: it has no in-place form")
    if config.in_place and config.out_of_place:
        raise CommbenchError("--in-place and --out-of-place exclude each other: give one (--format nccl-tests "
                             "measures both where the collective has both)")
    needed = collective.min_ranks(config.backend)
    if world_size < needed:
        raise CommbenchError(f"{collective.name} on {config.backend} needs at least {needed} ranks, got {world_size} "
                             f"(use --nproc {needed} or more)")
    if not 0 <= config.root < world_size:
        raise CommbenchError(f"--root={config.root} is invalid: allowed 0..{world_size - 1}")
    check_iters(config.loop.iters, "--iters")
    check_iters(config.loop.warmup_iters, "--warmup-iters", minimum=0, why=WARMUP_ITERS_WHY)
    if timeout_problem(config.timeout_s):
        raise CommbenchError(f"--timeout={config.timeout_s} is invalid: {timeout_problem(config.timeout_s)}")
    check_bench_options(config, collective, world_size)
    smallest = min(measured_group_sizes(config, world_size))
    if smallest < needed:  # the world passed above; a sub-group is measured on its own ranks
        raise CommbenchError(f"--group-sizes {smallest} is invalid for {collective.name} on {config.backend}: it needs "
                             f"at least {needed} ranks per group")
    if config.root >= smallest:  # the root is a rank of each measured group (it was taken modulo the group size)
        raise CommbenchError(f"--root={config.root} is invalid with --group-sizes {smallest}: allowed 0..{smallest - 1} "
                             "(the root is a rank of each measured group)")
    if collective.reduces and config.op == "avg" and config.loop.check:
        from collectives.patterns import integer_avg_check_problem

        for group_size in measured_group_sizes(config, world_size):
            if problem := integer_avg_check_problem(dtype, group_size):
                raise CommbenchError(f"--check: {problem}; measure it with -c 0, "
                                     "or check a wider --dtype (int32, int64)")
    collective.check_params(dict(config.params), config.backend)
    if config.sizes_bytes and config.backend != "cupy-nccl":
        check_memory(max(config.sizes_bytes), world_size, config.backend)
    if not collective.takes_size:
        for group_size in measured_group_sizes(config, world_size):
            specs = collective.plan_specs(dict(config.params), group_size)  # raises on bad workload parameters
            if specs and config.backend != "cupy-nccl":  # its own buffers, not the size range it does not use
                spec, label = max(specs, key=lambda item: item[0].size_bytes)
                tokens = spec.params.get("tokens_per_rank")
                check_memory(spec.size_bytes, world_size, config.backend,
                             point=f"--tokens {tokens}" if tokens is not None else label)
    return collective


BUFFERS_PER_RANK = 3  # input, output and the check's reference copy, each of the largest size


def memory_limit_bytes(backend: str) -> tuple[int | None, str]:
    """What one machine can hold for all its ranks' buffers, and what that figure is (None: no GPU
    here to ask, e.g. planning an NCCL sweep on a laptop)."""
    import os

    if backend == "gloo":
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this machine's physical memory"
    import torch

    if not torch.cuda.is_available():
        return None, "no GPU visible"
    return torch.cuda.get_device_properties(0).total_memory, "one GPU's memory (per rank)"


def check_memory(max_size_bytes: int, world_size: int, backend: str, point: str | None = None,
                 advice: str = "use a smaller size or fewer ranks per machine") -> None:
    """Refuse, before launch, a largest size whose buffers cannot fit (they would crash the ranks); `point` names
    a workload's largest point when it is not swept by size (its size is then its nominal bytes per rank).
    Every command that measures calls it before its ranks start (bench and sweep through validate, verify-plan)."""
    limit, what = memory_limit_bytes(backend)
    if limit is None:
        return
    ranks_sharing = world_size if backend == "gloo" else 1
    needed = BUFFERS_PER_RANK * max_size_bytes * ranks_sharing
    if needed > limit:
        largest = (f"the largest point, {point} ({format_size(max_size_bytes)} per buffer)" if point
                   else f"the largest size, {format_size(max_size_bytes)},")
        raise CommbenchError(f"{largest} is too large here: {ranks_sharing} "
                             f"rank(s) x {BUFFERS_PER_RANK} buffers need {needed / 1e9:.1f} GB, more than {what} "
                             f"({limit / 1e9:.1f} GB); {advice}")


def measured_group_sizes(config: BenchConfig, world_size: int) -> list[int]:
    """The sizes of the groups a job measures on: its sub-group sizes, else the whole world."""
    return list(config.subgroups.sizes_for(world_size)) if config.subgroups else [world_size]


@dataclass(frozen=True, kw_only=True)
class PlannedPoint:
    """One point of a job: what to measure and on which groups (None = the whole world)."""

    spec: PointSpec
    groups: tuple[tuple[int, ...], ...] | None = None
    group: GroupInfo = GroupInfo()
    label: str = ""


def aligned_sizes(collective: Collective, sizes_bytes: tuple[int, ...], itemsize: int, num_ranks: int) -> list[int]:
    """The distinct sizes actually measured after nccl-tests' alignment, in sweep order."""
    seen: dict[int, None] = {}
    for size in sizes_bytes:
        seen.setdefault(collective.count_for(size, itemsize, num_ranks)[1], None)
    return list(seen)


def capacity_notes(params: dict) -> list[str]:
    """moe_all_to_all with an expert capacity: the header says so (each record's params carry it too)."""
    factor = params.get("capacity_factor")
    if factor is None:
        return []
    padded = params.get("pad_to_capacity")
    return [f"moe expert capacity: capacity_factor={factor:g}, pad_to_capacity={'true' if padded else 'false'} "
            "(Megatron-Core 0.16.1 drop-and-pad: each expert takes at most ceil(tokens per rank x top-k / experts x "
            "capacity_factor) of each rank's tokens, the earliest; the rest are not sent"
            + ("; every expert's buffer from every rank padded to the capacity: fixed sizes, no count exchange)"
               if padded else ")")]


def subgroup_notes(config: BenchConfig, collective: Collective, world_size: int) -> list[str]:
    """--group-sizes pow2's sizes left out on this world (they do not divide it), said in the run's header."""
    note = config.subgroups.left_out(world_size) if config.subgroups is not None and collective.takes_size else None
    return [note] if note else []


# the bench option that gives each list a job expands into points (a sweep file names them by their keys instead)
REPEAT_OPTIONS = {"tokens_per_rank": "--tokens", "algorithm": "--algorithm", "group_sizes": "--group-sizes",
                  "group_layout": "--group-layout"}


def repeat_notes(config: BenchConfig, names: dict[str, str] = REPEAT_OPTIONS) -> list[str]:
    """The values a list option gave more than once, said once in the run's header: each point is measured once
    (commbench.repeats; a point recorded twice made report and compare refuse the run). `names`: how the job's
    input spells each list (bench's options; a sweep passes its keys)."""
    from commbench.measure.subgroups import given_algorithms
    from commbench.repeats import repeat_note

    tokens = config.params.get("tokens_per_rank")
    lists = {"tokens_per_rank": tokens if isinstance(tokens, (list, tuple)) else (),
             "algorithm": given_algorithms(config.params["algorithm"]) if config.params.get("algorithm") else (),
             "group_sizes": config.subgroups.sizes or () if config.subgroups else (),
             "group_layout": config.subgroups.layouts if config.subgroups else ()}
    return [note for key, values in lists.items() if (note := repeat_note(names[key], values))]


def alignment_notes(config: BenchConfig, collective: Collective, world_size: int) -> list[str]:
    """Requested sizes that nccl-tests' alignment moves or merges on the measured groups, said once in the run's
    header (never a silent narrowing): a whole number of elements, for the chunked collectives 16 B multiples per
    rank; where nccl-tests would run 0 elements (less than that), one untrimmed element or chunk."""
    if not collective.takes_size or not config.sizes_bytes:
        return []
    itemsize = get_dtype(config.dtype).itemsize
    notes = []
    for ranks in measured_group_sizes(config, world_size):
        moved = [(s, collective.count_for(s, itemsize, ranks)[1]) for s in config.sizes_bytes]
        changed = [(s, a) for s, a in moved if s != a]
        if not changed:
            continue
        chunked = isinstance(collective, ChunkedCollective)
        empty = [s for s, _ in changed if (s // itemsize // ranks) // max(1, 16 // itemsize) == 0] if chunked else \
            [s for s, _ in changed if s < itemsize]
        shown = ", ".join(f"{format_size(s)} -> {format_size(a)}" for s, a in changed[:4])
        notes.append(f"{len(moved)} size(s) give {len(dict.fromkeys(a for _, a in moved))} point(s) on {ranks} ranks in "
                     f"{config.dtype}, aligned as nccl-tests aligns them (whole elements"
                     f"{', 16 B multiples per rank' if chunked else ''}): {shown}"
                     + (f" (+{len(changed) - 4} more)" if len(changed) > 4 else "")
                     + (f"; up to {format_size(max(empty))}, where nccl-tests runs 0 elements, one "
                        f"{'untrimmed chunk' if chunked else 'element'} is measured" if empty else ""))
    return notes


def plan_points(config: BenchConfig, collective: Collective, world_size: int, *,
                align_ranks: int | None = None) -> list[PlannedPoint]:
    """The points of a bench job, in order: every size aligned on `align_ranks` (default the whole world), or the
    workload's own points when it is swept by its parameters (takes_size False)."""
    if not collective.takes_size:
        group_size = measured_group_sizes(config, world_size)[0]
        return [PlannedPoint(spec=spec, label=label) for spec, label in collective.plan_specs(dict(config.params), group_size)]
    dtype = get_dtype(config.dtype)
    forms = placements(config, collective)
    return [PlannedPoint(spec=PointSpec(size_bytes=size, dtype=dtype, op=config.op, in_place=in_place,
                                        out_of_place=out_of_place, root=config.root, params=dict(config.params)),
                         label=format_size(size) + ("" if len(forms) == 1 else " out-of-place" if out_of_place else " in-place"))
            for size in aligned_sizes(collective, config.sizes_bytes, dtype.itemsize, align_ranks or world_size)
            for in_place, out_of_place in forms]


def planned_points(config: BenchConfig, collective: Collective, world_size: int, topology=None) -> list[PlannedPoint]:
    """plan_points expanded by algorithm and sub-group (expand_points); on sub-groups every group size's sizes are
    aligned on that group size, as nccl-tests aligns them on the ranks it runs on (aligned on the world first, a
    2-rank all_gather of -b 100 on 4 ranks measured 64 B, not 96 B)."""
    if config.subgroups is None or not collective.takes_size:
        return expand_points(plan_points(config, collective, world_size), config, collective, world_size, topology)
    points: list[PlannedPoint] = []
    for size in config.subgroups.sizes_for(world_size):
        one = dataclasses.replace(config, subgroups=dataclasses.replace(config.subgroups, sizes=(size,)))
        points += expand_points(plan_points(config, collective, world_size, align_ranks=size), one, collective,
                                world_size, topology)
    return points


def placements(config: BenchConfig, collective: Collective) -> list[tuple[bool, bool]]:
    """(in_place, out_of_place) of the specs a job measures per size, in order: both forms (out-of-place
    first) in nccl-tests' format where the collective has both, as nccl-tests does; else the one asked."""
    mode = collective.in_place_mode
    if mode == "never":
        return [(False, False)]
    if config.output_format == "nccl-tests":
        return [(False, True), (True, False)]
    return [(config.in_place, config.out_of_place)]


class GroupCache:
    """Communicators for the group layouts a job uses, created once each (collective over the world)."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self._made: dict = {}

    def get(self, groups):
        if groups is None:
            return self.backend.world
        if groups not in self._made:
            self._made[groups] = self.backend.split([list(g) for g in groups])
        return self._made[groups]


def first_failure(reason: str, rank: int, config: BenchConfig, step: int) -> str:
    """This rank's failure `reason` at point `step` of the job, led by a peer's that failed before it
    (first_failure_at)."""
    return first_failure_at(reason, rank, f"commbench/bench/cycle{config.text_cycle.cycle}/point{step}")


def point_failure(label: str, reason: str, rank: int, group_ranks) -> tuple[str, str | None]:
    """(the failed record's `error`, its `error_detail`): a peer's exit in one clear cause (measure.peer_left), the
    transport's raw text kept as the detail; any other failure as it reads, no detail."""
    from commbench.measure.peer_left import peer_left_cause

    cause = None if reason.startswith("rank ") and " failed first: " in reason else peer_left_cause(
        reason, rank, group_ranks)
    if cause is None:
        return f"failed while measuring {label}: {reason}", None
    return f"failed while measuring {label}: {cause}", reason


def first_failure_at(reason: str, rank: int, base: str) -> str:
    """This rank's failure `reason`, led by a peer's that failed before it (the cause: this rank's is then most
    often the broken connection it left, 'Connection closed by peer'). Ranks post their failures through the
    launch's store under the key prefix `base` (one per point) in the order they happen; nothing waits. Without a
    store (no torch.distributed job), `reason`."""
    try:
        from torch.distributed.distributed_c10d import _get_default_store

        store = _get_default_store()
        order = store.add(f"{base}/num_failed", 1)
        store.set(f"{base}/failed/{order}", f"{rank}\t{reason}")
        for earlier in range(1, order):
            key = f"{base}/failed/{earlier}"
            if store.check([key]):
                peer, _, why = store.get(key).decode().partition("\t")
                return f"rank {peer} failed first: {why} (then rank {rank}: {reason})"
    except Exception:  # noqa: BLE001 - the record keeps this rank's own reason
        pass
    return reason


def with_run_cycles(header, config: BenchConfig):
    """`header` of a cycle of a -N launch (config.text_cycle) with its run_cycles, so a launch stopped between two
    cycles is named by those never run (results.resumed.cycles_not_run); unchanged without -N."""
    cycle = config.text_cycle
    if cycle.num_cycles <= 1:
        return header
    return dataclasses.replace(header, run_cycles={"launch": cycle.launch, "cycle": cycle.cycle + 1,
                                                   "cycles": cycle.num_cycles})


# BenchConfig fields that may differ between ranks without changing a point (each rank's own file, text, view)
_PER_RANK_FIELDS = ("argv", "output_path", "show_view", "text_cycle")


def bench_digest(config: BenchConfig) -> str:
    """What decides a bench job's points on every rank (comm/same_config): its config less _PER_RANK_FIELDS."""
    from commbench.comm.same_config import config_digest

    return config_digest({k: v for k, v in dataclasses.asdict(config).items() if k not in _PER_RANK_FIELDS})


def run_bench_rank(rank_env: RankEnv, config: BenchConfig) -> BenchOutcome:
    """Run the job on this rank (every rank of the launch calls this)."""
    from commbench.comm.backends import create_backend
    from commbench.comm.same_config import check_same_config
    from commbench.results.provenance import collect_header
    from commbench.measure.view import BenchView

    collective = validate(config, rank_env.world_size)
    progress = rank_env.progress or NO_PROGRESS
    backend = create_backend(config.backend, rank_env, config.timeout_s)
    is_writer = backend.rank == 0
    records: list[Measurement] = []
    error, failed_at_s = None, None
    try:
        run_id = new_run_id()
        try:  # exchanges with every peer before the first point: a peer that died or stopped fails them
            check_same_config(backend, bench_digest(config), "bench configuration")   # before any planned exchange
            topology = resolve_on_ranks(config.topology, backend)
            if is_writer and config.show_view and (config.output_format != "nccl-tests" or config.text_cycle.first):
                print(("# " if config.output_format == "nccl-tests" else "") + topology.describe(), flush=True,
                      file=sys.stderr if config.output_format == "markdown" else sys.stdout)
            header = collect_header(backend, run_id=run_id, argv=list(config.argv), launcher=rank_env.launcher,
                                    topology=topology.to_dict(),
                                    notes=backend.notes(collective.name)
                                    + subgroup_notes(config, collective, backend.world_size)
                                    + alignment_notes(config, collective, backend.world_size)
                                    + repeat_notes(config)
                                    + capacity_notes(config.params))
        except RuntimeError as exc:  # not a bug of ours: one line, no traceback
            error = f"start-up failed: {first_line(exc)}"
            raise StartupFailed(error) from None
        points = planned_points(config, collective, backend.world_size, topology)
        for point in points:   # what the racks refuse, before the table or the file says anything
            collective.check_groups(point.spec, point.groups, backend.world_size)
        header = dataclasses.replace(header, planned_points=len(points))   # report/fit say when a run holds fewer
        header = with_run_cycles(header, config)
        comms = GroupCache(backend)
        writer = JsonlWriter(config.output_path) if is_writer else None
        paired = len(placements(config, collective)) if collective.takes_size else 1
        view = BenchView(config, header, len(points), forms_per_size=paired) if is_writer and config.show_view else None
        stopped = False
        try:
            if writer:
                writer.write(header)
            for step, point in enumerate(points):
                if view:
                    view.starting(point.label)
                comm = comms.get(point.groups)
                progress.at(step, point.label, to_dict(failed_measurement(
                    collective, point.spec, backend, comm.size, config.loop, run_id=run_id, error="",
                    group=point.group)) if is_writer else None)
                try:
                    record = measure_point(backend, comm, collective, point.spec, config.loop, run_id=run_id,
                                           group=point.group)
                except (RuntimeError, ValueError, MemoryError) as exc:
                    reason = first_line(exc)
                    error, detail = point_failure(point.label, first_failure(reason, backend.rank, config, step),
                                                  backend.rank, getattr(comm, "global_ranks", range(comm.size)))
                    failed_at_s = time.time()
                    progress.failed(step, reason)
                    record = failed_measurement(collective, point.spec, backend, comm.size, config.loop,
                                                run_id=run_id, error=error, group=point.group)
                    record = dataclasses.replace(record, error_detail=detail)
                records.append(record)
                if writer:
                    writer.write(record)
                    progress.recorded(step, record.status == "ok")
                if view:
                    view.add(record)
                if error:
                    break
        except KeyboardInterrupt:  # a stop signal (under a launcher): the text ends cleanly, the launcher says why
            stopped = True
            raise
        finally:
            if view:
                # the CLI runs no further -N cycle after a failed point or wrong data (bench.report_outcomes)
                view.close(stopped=stopped, last=config.text_cycle.last or error is not None
                           or any(r.num_wrong for r in records))
            if writer:
                writer.close()
    finally:
        if error is None:
            backend.shutdown()
    num_wrong = sum(r.num_wrong or 0 for r in records)
    return BenchOutcome(num_points=len(records), num_wrong=num_wrong, error=error,
                        text_cycle=view.carried() if view else None, failed_at_s=failed_at_s)
