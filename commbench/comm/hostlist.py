"""Slurm's hostlist expressions (SLURM_JOB_NODELIST, SLURM_STEP_NODELIST), expanded lazily.

The syntax Slurm, pdsh and Flux share (LLNL hostlist; Flux RFC 29; python-hostlist): a comma-separated list of
host expressions at the top level; each expression is literal text with any number of bracket groups, each group a
comma-separated list of numbers `7` or ranges `01-08`, so `rack[1-2]-gpu[01-08],login1` is rack1-gpu01 ..
rack2-gpu08 then login1. A range's hosts are zero-padded to the digits of its low bound (`[01-10]`: 01 .. 10) and
its high bound is not below its low. Several groups in one expression expand to every combination, here the
leftmost group outermost; the first host, all a launch takes (MASTER_ADDR), is the first value of every group in
any such order.
"""

from __future__ import annotations

import itertools
import re
from typing import Iterator

from commbench.errors import CommbenchError

_ITEM = re.compile(r"(\d+)(?:-(\d+))?")


def _problem(text: str, why: str) -> CommbenchError:
    return CommbenchError(f"Slurm node list {text!r} cannot be parsed: {why} (allowed: Slurm's hostlist syntax, "
                          "e.g. node[01-04,07]-ib,login1); set MASTER_ADDR explicitly")


def _split_top(text: str) -> list[str]:
    """The top-level comma-separated expressions (commas inside brackets stay with their group)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            if depth:
                raise _problem(text, f"'[' inside a bracket group at character {i + 1}")
            depth = 1
        elif char == "]":
            if not depth:
                raise _problem(text, f"']' without '[' at character {i + 1}")
            depth = 0
        elif char == "," and not depth:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise _problem(text, "a '[' is never closed")
    parts.append(text[start:])
    if any(not p for p in parts):
        raise _problem(text, "an empty host name between commas")
    return parts


def _group_values(text: str, group: str) -> list[tuple[int, int, int]]:
    """(low, high, width) per item of one bracket group's `1,3-5,07-09`."""
    values = []
    for item in group.split(","):
        match = _ITEM.fullmatch(item)
        if not match:
            raise _problem(text, f"[{group}] holds {item!r}; allowed: numbers and ranges such as 1,3-5,07-09")
        low, high = match.group(1), match.group(2) or match.group(1)
        if int(high) < int(low):
            raise _problem(text, f"range {item} runs backwards")
        values.append((int(low), int(high), len(low)))
    return values


def _expression(text: str, expr: str) -> Iterator[str]:
    """Hosts of one top-level expression: literal pieces and groups, every combination, the leftmost outermost
    (generated as needed: the first host does not build the rest)."""
    pieces = re.split(r"\[([^\]]*)\]", expr)   # literal, group, literal, group, ..., literal
    literals, groups = pieces[0::2], [_group_values(text, g) for g in pieces[1::2]]

    def combos(index: int) -> Iterator[tuple[str, ...]]:
        if index == len(groups):
            yield ()
            return
        for low, high, width in groups[index]:
            for number in range(low, high + 1):
                for rest in combos(index + 1):
                    yield (f"{number:0{width}d}", *rest)

    for combo in combos(0):
        yield "".join(itertools.chain.from_iterable(zip(literals, combo))) + literals[-1]


def expand_hostlist(text: str) -> Iterator[str]:
    """Every host of a Slurm hostlist expression, in its order; the whole expression is checked before the first."""
    text = text.strip()
    if not text:
        raise _problem(text, "it is empty")
    expressions = _split_top(text)
    for expr in expressions:   # check every group before yielding (a bad tail is named, not ignored)
        for group in re.findall(r"\[([^\]]*)\]", expr):
            _group_values(text, group)
    for expr in expressions:
        yield from _expression(text, expr)


def first_host(text: str) -> str:
    """The first host of a Slurm hostlist: 'node[1-2]-ib' -> 'node1-ib', 'rack[1-2]-gpu[01-08]' -> 'rack1-gpu01'."""
    return next(expand_hostlist(text))
