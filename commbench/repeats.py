"""Values a list option gives more than once (`--tokens 64,64`, `--algorithm flat,flat`, `group_sizes = [2, 2]`).

A bench or sweep job measures each point once: its list options are taken in order, each value once, where the
points are expanded (moe.params.sweep_params, measure.subgroups.expand_points / SubgroupSpec.sizes_for), and the
run's header notes the values dropped (measure.bench.repeat_notes), never a silent narrowing. A run that recorded a
point twice is refused by report and compare (results: "holds ... twice with different measurements").
"""

from __future__ import annotations

from typing import Hashable, Iterable, TypeVar

from commbench.errors import invalid

T = TypeVar("T", bound=Hashable)


def unique_in_order(values: Iterable[T]) -> list[T]:
    """`values` in order, each once (the first occurrence kept)."""
    return list(dict.fromkeys(values))


def repeated(values: Iterable[T]) -> list[T]:
    """The values given more than once, each named once, in the order of their first repeat."""
    seen: set = set()
    again: dict = {}
    for value in values:
        if value in seen:
            again.setdefault(value, None)
        seen.add(value)
    return list(again)


def repeat_note(option: str, values: Iterable[T]) -> str | None:
    """One line for a run's notes naming the values of `option` given more than once; None when none were."""
    again = repeated(values)
    if not again:
        return None
    return (f"{option} lists {', '.join(map(str, again))} more than once: each point is measured once (the "
            "repeats were dropped)")


def comma_entries(option: str, text: str, example: str) -> list[str]:
    """A comma-list option's entries as given (stripped; repeats kept for repeat_note). An empty entry ('a,,b', 'a,')
    is refused in one line, never dropped: a value lost in typing would shrink the job unsaid; '' alone is []."""
    parts = [part.strip() for part in str(text).split(",")]
    if parts == [""]:
        return []
    if "" in parts:
        raise invalid(option, text, f"an empty entry (entry {parts.index('') + 1}); allowed: a comma-separated list, "
                                    f"e.g. {example}")
    return parts
