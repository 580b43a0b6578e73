"""Sub-groups of a launch's ranks by layout, as nccl-tests' NCCL_TESTS_SPLIT builds them: `contiguous` (group i =
ranks i*g .. i*g+g-1, "DIV g") and `strided` (group i = ranks i, i+N/g, i+2N/g, ..., "MOD N/g"). Measurement plans
its points with them (measure/subgroups) and the fit counts the racks a group's ranks fall in
(costmodel/fit_records.racks_spanned_by_groups), so both read one definition."""

from __future__ import annotations

from commbench.errors import invalid

LAYOUTS = ("contiguous", "strided")


def make_groups(world_size: int, size: int, layout: str) -> tuple[tuple[int, ...], ...]:
    """Every group of `size` ranks in `layout`; together they cover the world once."""
    if world_size % size:
        raise invalid("--group-sizes", size, f"must divide the {world_size} ranks")
    if layout == "contiguous":
        return tuple(tuple(range(start, start + size)) for start in range(0, world_size, size))
    if layout == "strided":
        stride = world_size // size
        return tuple(tuple(range(first, world_size, stride)) for first in range(stride))
    raise invalid("--group-layout", layout, f"allowed: {', '.join(LAYOUTS)}")
