"""GPU-count sweeps inside one launch: run a collective on sub-groups of size 2, 4, 8, ... N.

All groups of one size run at once, as nccl-tests' NCCL_TESTS_SPLIT does (the harness times the
slowest rank of the whole world, so concurrent groups are timed together):
- `contiguous`: group i = ranks i*g .. i*g+g-1 (NCCL_TESTS_SPLIT="DIV g"): inside one rack when
  g <= ranks per rack and racks are consecutive rank ranges (block placement);
- `strided`: group i = ranks i, i+N/g, i+2N/g, ... (NCCL_TESTS_SPLIT="MOD N/g"): one rank per rack
  when g <= the number of racks, with block placement. Cyclic placement swaps the two; fit counts the
  racks a group's ranks fall in (costmodel/fit_records.racks_spanned_by_groups).
Each Measurement records group_size, group_layout and num_groups. This module also expands a
bench job's points by `--algorithm` lists and passes the rack topology to workloads that use it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

from commbench.errors import invalid
from commbench.repeats import unique_in_order
from commbench.limits import check_point_count
from commbench.measure.harness import GroupInfo
from commbench.comm.rank_groups import LAYOUTS, make_groups
from commbench.comm.topology import TopologySpec



@dataclass(frozen=True, kw_only=True)
class SubgroupSpec:
    """`sizes` None = powers of two from 2 up to N (and N itself)."""

    sizes: tuple[int, ...] | None = None
    layouts: tuple[str, ...] = ("contiguous",)

    def __post_init__(self) -> None:
        for layout in self.layouts:
            if layout not in LAYOUTS:
                raise invalid("--group-layout", layout, f"allowed: {', '.join(LAYOUTS)} (comma-separated)")
        if not self.layouts:
            raise invalid("--group-layout", "", f"allowed: {', '.join(LAYOUTS)}")
        for size in self.sizes or ():
            if size < 1:
                raise invalid("--group-sizes", size, "sizes must be >= 1")

    def sizes_for(self, world_size: int) -> list[int]:
        if self.sizes is None:
            sizes, g = [], 2
            while g <= world_size:
                if world_size % g == 0:
                    sizes.append(g)
                g *= 2
            return sizes + ([world_size] if world_size not in sizes else [])
        for size in self.sizes:
            if size > world_size:
                raise invalid("--group-sizes", size, f"must be <= the {world_size} ranks")
            if world_size % size:
                raise invalid("--group-sizes", size, f"must divide the {world_size} ranks (all groups of a size "
                                                     "run at once, so they must tile the world)")
        return unique_in_order(self.sizes)

    def left_out(self, world_size: int) -> str | None:
        """pow2 on a world that not every power of two divides: which sizes it leaves out and why, for the run's
        notes (never a silent narrowing); None when it leaves none out or the sizes were listed (refused then)."""
        if self.sizes is None:
            dropped, g = [], 2
            while g <= world_size:
                if world_size % g:
                    dropped.append(g)
                g *= 2
            if dropped:
                return (f"--group-sizes pow2 on {world_size} ranks: group size(s) {', '.join(map(str, dropped))} left "
                        f"out, they do not divide the {world_size} ranks (all groups of a size run at once, so they "
                        f"must tile the world); measured: {', '.join(map(str, self.sizes_for(world_size)))}")
        return None


def parse_group_sizes(text: str | Sequence[int] | None) -> tuple[int, ...] | None:
    """'pow2' (or None) = 2, 4, 8, ... N; else a comma list like '2,4,8' (or, from a sweep file, a list)."""
    if not isinstance(text, str) and text is not None:
        values = [text] if isinstance(text, int) else text
        if isinstance(text, bool) or not isinstance(values, (list, tuple)) or not values or \
                not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise invalid("--group-sizes", text, "a list of integers such as [2, 4, 8], or \"pow2\"")
        return tuple(values)
    if text is None or text.strip().lower() == "pow2":   # None: not given; a given "" is refused below
        return None
    try:
        return tuple(int(part) for part in text.split(","))   # '' and '2,' are refused: not integers
    except ValueError:
        raise invalid("--group-sizes", text, "a comma list of integers such as 2,4,8, or pow2") from None


def parse_layouts(text: str | Sequence[str]) -> tuple[str, ...]:
    """'contiguous,strided' (or, from a sweep file, a list of names)."""
    if isinstance(text, str):
        from commbench.repeats import comma_entries
        parts = comma_entries("--group-layout", text, "contiguous,strided")
    else:
        parts = text
    if not isinstance(parts, (list, tuple)) or not all(isinstance(p, str) for p in parts) or \
            (not isinstance(text, str) and not all(p.strip() for p in parts)):   # a list's "" names no layout
        raise invalid("--group-layout", text, f"allowed: {', '.join(LAYOUTS)} (comma-separated or a list)")
    layouts = tuple(part.strip() for part in parts if part.strip())
    if not layouts:   # a given '' or [] names no layout; only a layout left out is contiguous (rack_specs)
        raise invalid("--group-layout", text, f"name at least one layout: {', '.join(LAYOUTS)}")
    return layouts


def rack_specs(*, ranks_per_rack: int | None = None, preset: str | None = None, racks: str | None = None,
               nodes_per_rack: int | None = None, rack_nodes: str | None = None,
               group_sizes: str | Sequence[int] | None = None,
               group_layout: str | Sequence[str] | None = None,
               racks_option: str | None = None) -> tuple[TopologySpec, SubgroupSpec | None]:
    """The rack topology and sub-group sweep a job asks for (bench options and sweep entry keys alike);
    `racks_option`: the option that gave `racks`, as typed (TopologySpec.racks_option)."""
    topology = TopologySpec(ranks_per_rack=ranks_per_rack, preset=preset, racks=racks,
                            nodes_per_rack=nodes_per_rack, rack_nodes=rack_nodes, racks_option=racks_option)
    subgroups = None
    if group_sizes is not None or group_layout is not None:
        subgroups = SubgroupSpec(sizes=parse_group_sizes(group_sizes), layouts=parse_layouts(
            "contiguous" if group_layout is None else group_layout))   # only a layout left out is contiguous
    return topology, subgroups


def split_algorithms(text: str) -> list[str]:
    """'flat,hierarchical' -> ['flat', 'hierarchical'], each name once (a repeat is one point; the run's notes
    name it: measure.bench.repeat_notes)."""
    return unique_in_order(given_algorithms(text))


def given_algorithms(text: str) -> list[str]:
    """The algorithm names as given, repeats included (for the note that names them)."""
    from commbench.repeats import comma_entries
    return comma_entries("--algorithm", text, "flat,hierarchical")


def check_bench_options(config, collective, world_size: int) -> None:
    """Checks before ranks start: racks, sub-group sizes, algorithm names."""
    if config.topology is not None:
        config.topology.check_world(world_size)
    if config.subgroups is not None:
        for size in config.subgroups.sizes_for(world_size):
            for layout in config.subgroups.layouts:
                make_groups(world_size, size, layout)
    if "rs_impl" in config.params and "rs_impl" not in collective.param_names:
        raise invalid("--rs-impl", config.params["rs_impl"],
                      f"{collective.name} has no reduce-scatter implementation to choose (grad_reduce_scatter has)")
    collective.check_params(dict(config.params), config.backend)
    if "algorithm" in config.params:
        allowed = collective.algorithms
        if not allowed:
            raise invalid("--algorithm", config.params["algorithm"],
                          f"{collective.name} has no named algorithms (grad_reduce_scatter has)")
        for name in split_algorithms(config.params["algorithm"]):
            if name not in allowed:
                raise invalid("--algorithm", name, f"allowed: {', '.join(allowed)} (comma-separated)")
        if not split_algorithms(config.params["algorithm"]):
            raise invalid("--algorithm", config.params["algorithm"], "name at least one algorithm")


def expand_points(points: list, config, collective, world_size: int, topology=None) -> list:
    """Planned points with the topology in their params, one per algorithm, per sub-group layout."""
    if topology is not None and collective.uses_topology:
        points = [_with_params(p, topology.to_params()) for p in points]
    expanded = []
    for point in points:
        names = split_algorithms(point.spec.params.get("algorithm", ""))
        if len(names) <= 1:   # one name, given once or repeated ('flat,flat'): the point measures that name
            expanded.append(point if point.spec.params.get("algorithm") in (None, *names)
                            else _with_params(point, {"algorithm": names[0]}))
            continue
        expanded.extend(dataclasses.replace(_with_params(point, {"algorithm": a}), label=f"{point.label} {a}")
                        for a in names)
    if config.subgroups is None:
        return expanded
    sizes = config.subgroups.sizes_for(world_size)
    layouts = unique_in_order(config.subgroups.layouts)
    check_point_count(len(expanded) * len(sizes) * len(layouts), f"{collective.name} on sub-groups")
    grouped, seen = [], set()
    for size in sizes:
        for layout in layouts:
            groups = make_groups(world_size, size, layout)
            if groups in seen:  # strided == contiguous when g = N
                continue
            seen.add(groups)
            info = GroupInfo(layout=layout, num_groups=len(groups))
            grouped.extend(dataclasses.replace(p, groups=groups, group=info,
                                               label=f"{p.label} g={size} {layout}") for p in expanded)
    return grouped


def _with_params(point, extra: dict):
    spec = dataclasses.replace(point.spec, params={**point.spec.params, **extra})
    return dataclasses.replace(point, spec=spec)



def with_rack_options(config, *, ranks_per_rack: int | None, preset: str | None, racks: str | None,
                      nodes_per_rack: int | None, rack_nodes: str | None, group_sizes: str | None,
                      group_layout: str | None, algorithm: str | None, rs_impl: str | None,
                      racks_option: str | None = None):
    """The bench config with the topology / sub-group / algorithm options applied."""
    topology, subgroups = rack_specs(ranks_per_rack=ranks_per_rack, preset=preset, racks=racks,
                                     nodes_per_rack=nodes_per_rack, rack_nodes=rack_nodes,
                                     group_sizes=group_sizes, group_layout=group_layout, racks_option=racks_option)
    params = dict(config.params)
    if algorithm is not None:
        params["algorithm"] = algorithm
    if rs_impl is not None:
        params["rs_impl"] = rs_impl
    return dataclasses.replace(config, topology=topology, subgroups=subgroups, params=params)
