"""From a Sweep to the ordered list of points one launch measures, each with a stable key.

A sweep entry is a BenchConfig per dtype; its points come from `commbench.measure.bench.planned_points` (plan_points and
`commbench.measure.subgroups.expand_points`) with the launch's rack topology, the same planner `commbench
bench` uses, so sub-group, rack-aware and MoE workloads plan their points in one place.
The point key names what was measured (collective, dtype, op, placement, size, group size and
layout, params incl. racks for rack-aware workloads, world size), not where it sits in the file,
so `--resume` survives reordering entries.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from collectives import get_collective
from commbench.measure.bench import BenchConfig, PlannedPoint, planned_points, validate
from commbench.limits import check_point_count
from commbench.errors import CommbenchError
from commbench.measure.harness import LoopOptions
from commbench.sweep.schema import ENTRY_KEYS, GROUP_KEYS, RACK_KEYS, Sweep, SweepEntry, sweep_words
from commbench.comm.topology import Topology, TopologySpec, resolve_before_launch
from commbench.units import format_size

# Rough alpha-beta used only for --dry-run's run-time estimate (labelled as an estimate, never a result):
# per-collective latency (s) and bus bandwidth (B/s) per backend, and a fixed cost per point (s): its data check,
# barriers, timing sync and record write. gloo's was 0.02 s, 5-7x below what ci-small's 33 points took beside the
# check and timed loops (4 ranks on 2 cores: 0.14 s a point, 4.7 s in all; the estimate said 1 s). The launch's
# process start and rendezvous are not counted (said where the estimate is printed).
ESTIMATE_LATENCY_S = {"gloo": 150e-6, "nccl": 25e-6}
ESTIMATE_BUSBW_BPS = {"gloo": 0.5e9, "nccl": 100e9}
ESTIMATE_POINT_OVERHEAD_S = {"gloo": 0.1, "nccl": 0.05}


@dataclass(frozen=True, kw_only=True)
class SweepPoint:
    entry: SweepEntry
    config: BenchConfig
    point: PlannedPoint
    key: str

    @property
    def label(self) -> str:
        return f"{self.entry.name} {self.point.spec.dtype.name} {self.point.label}"


def entry_configs(entry: SweepEntry, *, backend: str, topology: TopologySpec | None = None, output_path: str = "",
                  argv: tuple[str, ...] = ()) -> list[BenchConfig]:
    """One BenchConfig per dtype of the entry; `topology`: the launch's racks (Sweep.topology)."""
    loop = LoopOptions(iters=entry.iters, warmup_iters=entry.warmup_iters, check=entry.check)
    params = {**get_collective(entry.collective).default_params, **entry.params}  # as `commbench bench` does
    return [BenchConfig(collective=entry.collective, sizes_bytes=entry.sizes_bytes, dtype=dtype, op=entry.op,
                        in_place=entry.in_place, out_of_place=entry.out_of_place, root=entry.root, loop=loop,
                        backend=backend,
                        timeout_s=entry.timeout_s, output_path=output_path, argv=argv, params=params,
                        topology=topology, subgroups=entry.subgroups)
            for dtype in entry.dtypes]


def point_key(config: BenchConfig, point: PlannedPoint, world_size: int) -> str:
    spec = point.spec
    # make_groups is a function of (world size, group size, layout): those three name the groups
    groups = "world" if point.groups is None else f"{point.group.layout}:g{len(point.groups[0])}"
    in_place = get_collective(config.collective).is_in_place(spec)   # what is measured, as the record says
    key = (f"{config.collective}/{spec.dtype.name}/{spec.op}/{'ip' if in_place else 'oop'}/root{spec.root}/"
           f"{spec.size_bytes}B/{groups}/w{world_size}/n{config.loop.iters}")
    if spec.params:
        digest = hashlib.sha1(json.dumps(spec.params, sort_keys=True, default=str).encode()).hexdigest()[:10]
        key += f"/p{digest}"
    return key


def entry_error(sweep: Sweep, entry: SweepEntry, world_size: int, exc: Exception) -> CommbenchError:
    """An entry the world cannot run, named by the file, the entry and its keys (not bench's options): one wording
    for --dry-run and the launch, whichever check meets it first."""
    keys = (*ENTRY_KEYS, *RACK_KEYS, *GROUP_KEYS, *get_collective(entry.collective).param_names)
    return CommbenchError(f"sweep {sweep.path}: run[{entry.index}] ({entry.collective}) "
                          f"on {world_size} ranks: {sweep_words(str(exc), keys)}")


def plan_sweep(sweep: Sweep, world_size: int, *, backend: str, output_path: str = "",
               argv: tuple[str, ...] = (), topology: Topology | None = None) -> list[SweepPoint]:
    """Every point of the sweep, in file order; an entry the world cannot run fails with its index.
    Identical points planned twice (same key) are measured once; an entry all of whose points earlier
    entries plan is refused (a copy left unchanged). `topology`: the launch's racks as
    resolved on the ranks (`resolve_on_ranks`); None before launch (--dry-run, checks)."""
    points: list[SweepPoint] = []
    seen: dict[str, int] = {}  # point key -> index of the entry that planned it first
    for entry in sweep.entries:
        before = len(points)
        planned_by: set[int] = set()
        for config in entry_configs(entry, backend=backend, output_path=output_path, argv=argv,
                                    topology=sweep.topology):
            try:
                collective = validate(config, world_size)
                racks = topology or resolve_before_launch(config.topology, world_size)
                planned = planned_points(config, collective, world_size, racks)
            except (CommbenchError, ValueError) as exc:
                raise entry_error(sweep, entry, world_size, exc) from None
            if not planned:
                raise CommbenchError(f"sweep {sweep.path}: run[{entry.index}] ({entry.collective}) plans no points "
                                     f"on {world_size} ranks: check its sizes or parameters")
            check_point_count(len(points) + len(planned), f"sweep {sweep.path}")
            for point in planned:
                key = point_key(config, point, world_size)
                if key not in seen:
                    seen[key] = entry.index
                    points.append(SweepPoint(entry=entry, config=config, point=point, key=key))
                else:
                    planned_by.add(seen[key])
        if len(points) == before:  # a copy of earlier entries (a pasted entry left unchanged): it would add nothing
            earlier = ", ".join(f"run[{i}]" for i in sorted(planned_by - {entry.index}))
            raise CommbenchError(f"sweep {sweep.path}: run[{entry.index}] ({entry.collective}) adds no point: every point "
                                 f"it plans on {world_size} ranks is already planned by {earlier} (same collective, "
                                 f"dtype, op, placement, size, groups, params and iters): remove it or change it")
    return points


def keys_known_before_launch(sweep: Sweep) -> bool:
    """Whether plan_sweep before launch gives the keys the ranks will plan: a key holds the racks only for
    collectives that use them, and racks named by host names (or NVLink domains) are known only on the ranks."""
    if not (sweep.topology or TopologySpec()).needs_hostnames:
        return True
    return not any(get_collective(entry.collective).uses_topology for entry in sweep.entries)


def group_size_of(point: SweepPoint, world_size: int) -> int:
    return world_size if point.point.groups is None else len(point.point.groups[0])


def listed_size(point: SweepPoint, world_size: int) -> tuple[int, str]:
    """(size_bytes, basis) the dry run lists: the size the run will record where that is known ahead cheaply
    (moe_all_to_all: the busiest rank's routed bytes, from the seeded routing), else the requested one, so named."""
    return get_collective(point.config.collective).listed_size(point.point.spec, group_size_of(point, world_size))


def estimate_point_s(point: SweepPoint, world_size: int, backend: str, size_bytes: int | None = None) -> float:
    """A rough run time for one point (dry run only): (check + warm-up + timed iterations) x alpha-beta, at
    `size_bytes` (default: the spec's requested size)."""
    collective = get_collective(point.config.collective)
    group_size = group_size_of(point, world_size)
    factor = collective.busbw_factor(group_size) if group_size > 1 else 1.0
    size = point.point.spec.size_bytes if size_bytes is None else size_bytes
    one_s = ESTIMATE_LATENCY_S[backend] + size * max(factor, 1.0) / ESTIMATE_BUSBW_BPS[backend]
    loop = point.config.loop
    return ESTIMATE_POINT_OVERHEAD_S[backend] + (loop.iters + loop.warmup_iters + int(loop.check)) * one_s


def describe(point: SweepPoint) -> dict[str, str]:
    """The dry run's text fields of a point (its size: listed_size, its params: the spec's)."""
    groups = point.point.groups
    where = f"{point.point.group.num_groups} x {len(groups[0])} {point.point.group.layout}" if groups else "world"
    return {"entry": point.entry.name, "collective": point.config.collective, "dtype": point.point.spec.dtype.name,
            "groups": where, "how": how_measured(point)}


def how_measured(point: SweepPoint) -> str:
    """What else tells two points of one collective, dtype and size apart (the point key's op, placement, root and
    timed iterations): 'sum, in-place, iters 20'; the op only where the collective reduces, a root other than 0."""
    spec, collective = point.point.spec, get_collective(point.config.collective)
    parts = ([spec.op] if collective.reduces and spec.op else []) + \
        ["in-place" if collective.is_in_place(spec) else "out-of-place"]
    if spec.root:
        parts.append(f"root {spec.root}")
    return ", ".join(parts + [f"iters {point.config.loop.iters}"])


REPEAT_KEYS = {"tokens_per_rank": "tokens_per_rank", "algorithm": "algorithm", "group_sizes": "group_sizes",
               "group_layout": "group_layout"}  # measure.bench.repeat_notes' lists, by the sweep file's keys


def one_rack_notes(sweep: Sweep, entry: SweepEntry, config: BenchConfig, world_size: int) -> list[str]:
    """A line where an entry's hierarchical algorithm (grad_reduce_scatter's hierarchical, hierarchical-allreduce)
    runs on one rack of `world_size` ranks: no cross-rack stage is measured, while its records still say the
    algorithm (probe CG F6: ci-small's 2 racks x 2 ranks launched with --nproc 2). Racks from host names are known
    only at launch: nothing said of them here."""
    algorithms = [a for a in str(config.params.get("algorithm", "")).split(",") if a.startswith("hierarchical")]
    spec = sweep.topology
    if not algorithms or not get_collective(entry.collective).uses_topology or spec is None or spec.needs_hostnames:
        return []
    try:
        racks = resolve_before_launch(spec, world_size)
    except (CommbenchError, ValueError):
        return []   # plan_sweep refuses it, naming the entry
    if racks.num_racks > 1:
        return []
    return [f"run[{entry.index}] ({entry.name}): algorithm {', '.join(algorithms)} on one rack of {world_size} "
            "rank(s): no cross-rack stage is measured, only the rack's own reduce-scatter, though the "
            "records name the algorithm; launch the sweep's world (its [sweep] world_size) to measure the hierarchy"]


def size_notes(sweep: Sweep, world_size: int) -> list[str]:
    """Values a list key gives more than once (each point is measured once: measure.bench.repeat_notes), and
    entries whose listed sizes are not all measured as given on `world_size` ranks: nccl-tests' alignment
    (a whole number of elements, per rank for the chunked collectives) moves a size, and sizes that align
    alike are one point. Stated by --dry-run and before a launch, never a silent narrowing."""
    from commbench.dtypes import get_dtype

    from commbench.measure.bench import repeat_notes

    notes = []
    for entry in sweep.entries:
        collective = get_collective(entry.collective)
        config = entry_configs(entry, backend="gloo")[0]   # its lists as the file gives them (named by their keys)
        notes += [f"run[{entry.index}] ({entry.name}): {note}" for note in repeat_notes(config, REPEAT_KEYS)]
        notes += one_rack_notes(sweep, entry, config, world_size)
        if not collective.takes_size:
            continue
        left_out = entry.subgroups.left_out(world_size) if entry.subgroups else None
        if left_out:
            notes.append(f"run[{entry.index}] ({entry.name}): {left_out.replace('--group-sizes', 'group_sizes', 1)}")
        try:
            group_sizes = entry.subgroups.sizes_for(world_size) if entry.subgroups else [world_size]  # aligned per group
        except CommbenchError as exc:   # before a launch plans: in the file's words, as plan_sweep says it
            raise entry_error(sweep, entry, world_size, exc) from None
        for dtype, ranks in ((d, g) for d in entry.dtypes for g in group_sizes):
            itemsize = get_dtype(dtype).itemsize
            moved = [(s, collective.count_for(s, itemsize, ranks)[1]) for s in entry.sizes_bytes]
            changed = [(s, a) for s, a in moved if s != a]
            if not changed:
                continue
            points = len(dict.fromkeys(a for _, a in moved))
            shown = ", ".join(f"{format_size(s)} -> {format_size(a)}" for s, a in changed[:4])
            notes.append(f"run[{entry.index}] ({entry.name}) {dtype} on {ranks} ranks: {len(moved)} size(s) give "
                         f"{points} point(s), aligned as nccl-tests aligns them: {shown}"
                         + (f" (+{len(changed) - 4} more)" if len(changed) > 4 else ""))
    return notes

