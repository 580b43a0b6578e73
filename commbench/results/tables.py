"""Tables that fit the terminal: every rich table of commbench is built here.

A table is declared as columns (`Col`) and rows of strings in rich markup (escape values with
rich.markup.escape; cells are read as markup even on the markup-free stdout console). At print time
`fitted_table` sizes it for the console's width in this order, stopping as soon as it fits:
1. every column, headers on one line;
2. units move under the header name ("busbw (GB/s)" -> "busbw" over "(GB/s)"), then a word a line;
3. label columns wrap to no fewer than 30 characters (the first; 16 for later ones), dropping low-value
   columns (lowest `keep` first; keep=None: never dropped) until the rest fits;
4. label columns wrap further (folding words longer than their width); numeric cells never wrap or shrink.
A number is therefore never cut: when even that is too wide, the table's lines run past the console's
width (print_table does not crop them; the terminal wraps them).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

from rich.console import Console, ConsoleDimensions, Group
from rich.table import Table
from rich.text import Text

_MIN_LABEL = 8  # narrowest a wrapping label column gets (characters)


@dataclass(frozen=True, kw_only=True)
class Col:
    """One column: `numeric` cells are never wrapped or cut; `keep` ranks how much a column is worth when
    space is short (dropped lowest first; None: never dropped)."""

    name: str
    numeric: bool = True
    keep: int | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("Col.name must be a non-empty header")


def stdout_width(fallback: int) -> int:
    """COLUMNS when set, else the width of the terminal on stdout/stderr/stdin, else `fallback` (no terminal)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdecimal() and int(columns) > 0:
        return int(columns)
    for fd in (1, 2, 0):
        try:
            width = os.get_terminal_size(fd).columns
        except (OSError, ValueError):
            continue
        if width > 0:
            return width
    return fallback


class StdoutConsole(Console):
    """A console whose width is read when it prints (so COLUMNS and terminal resizes are honoured)."""

    def __init__(self, *, piped_width: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.piped_width = piped_width

    @property
    def size(self) -> ConsoleDimensions:
        return ConsoleDimensions(stdout_width(self.piped_width), super().size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)


def _cell_len(cell: str) -> int:
    return max((Text.from_markup(line).cell_len for line in cell.split("\n")), default=0)


def _header(name: str, split: int) -> str:
    """0: on one line; 1: the unit under the name; 2: a word a line."""
    if split == 2:
        return name.replace(" ", "\n")
    if split == 1 and " (" in name:
        head, _, unit = name.partition(" (")
        return f"{head}\n({unit}"
    return name


def _layout(cols: Sequence[Col], cell_widths: Sequence[int], word_widths: Sequence[int], kept: list[int], split: int,
            width: int, label_floor: int) -> tuple[dict[int, str], dict[int, int]] | None:
    """(headers, content widths) of the kept columns if they fit in `width` (labels shrunk as needed), else None.
    With split=2 headers go a word a line one column at a time, the one whose header overhangs its cells most first."""
    cells = {i: cell_widths[i] for i in kept}
    headers = {i: _header(cols[i].name, min(split, 1)) for i in kept}
    room = width - (3 * len(kept) + 1)  # padding 1 each side, one border between and at both edges
    labels = [i for i in kept if not cols[i].numeric]

    def fits() -> dict[int, int] | None:
        full = {i: max(_cell_len(headers[i]), cells[i]) for i in kept}
        fixed = sum(full[i] for i in kept if cols[i].numeric)
        if fixed + sum(full[i] for i in labels) <= room:
            return full
        # the first label column names the row and keeps `label_floor`; later ones (stages, notes) may go to 16
        # and no label column gets narrower than its longest word (up to 30), so "tokens=1024" is not folded
        floor = {i: min(full[i], max(label_floor if i == labels[0] else min(label_floor, 16), min(word_widths[i], 30),
                                     _cell_len(max(cols[i].name.split(), key=len)))) for i in labels}
        if fixed + sum(floor.values()) > room:
            return None
        widths = dict(full)
        while sum(widths[i] for i in labels) > room - fixed:  # shave the widest label column a character at a time
            widest = max((i for i in labels if widths[i] > floor[i]), key=lambda i: widths[i])
            widths[widest] -= 1
        return widths

    widths = fits()
    if split == 2:
        overhang = sorted((i for i in kept if _cell_len(headers[i]) > cells[i]),
                          key=lambda i: cells[i] - _cell_len(headers[i]))
        for i in overhang:
            if widths is not None:
                break
            headers[i] = _header(cols[i].name, 2)
            widths = fits()
    return None if widths is None else (headers, widths)


def fitted_table(title: str | None, cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int, *,
                 caption: str | None = None) -> Group:
    """`rows` laid out for `width` columns (see the module docstring); the title prints above, wrapped to `width`."""
    for row in rows:
        if len(row) != len(cols):
            raise ValueError(f"row has {len(row)} cells for {len(cols)} columns: {list(row)!r}")
    cell_widths = [max((_cell_len(row[i]) for row in rows), default=0) for i in range(len(cols))]  # measured once
    word_widths = [0 if col.numeric else max((len(word) for row in rows for word in Text.from_markup(row[i]).plain.split()),
                                             default=0) for i, col in enumerate(cols)]
    order = sorted({c.keep for c in cols if c.keep is not None})
    # labels whole with every column, then labels of >= 30 characters, then labels down to _MIN_LABEL
    attempts = [(split, None, 1 << 30) for split in (0, 1, 2)]
    attempts += [(split, level, floor) for floor in (30, _MIN_LABEL) for level in [None, *order] for split in (0, 1, 2)]
    chosen = None
    for split, level, floor in attempts:
        kept = [i for i, c in enumerate(cols) if c.keep is None or level is None or c.keep > level]
        laid = _layout(cols, cell_widths, word_widths, kept, split, width, floor)
        if laid is not None:
            chosen = (kept, *laid)
            break
    if chosen is None:  # too narrow even for the numbers alone: keep them whole, let the line run long
        kept = [i for i, c in enumerate(cols) if c.keep is None]
        headers = {i: _header(cols[i].name, 2) for i in kept}
        chosen = (kept, headers, {i: max(_cell_len(headers[i]), cell_widths[i]) for i in kept})
    kept, headers, widths = chosen
    # an explicit table width: rich would otherwise shrink every column, numbers too, to the console
    table = Table(expand=False, width=sum(widths.values()) + 3 * len(kept) + 1)
    for i in kept:
        col = cols[i]
        table.add_column(Text(headers[i]), justify="right" if col.numeric else "left", width=widths[i],
                         no_wrap=col.numeric, overflow="fold")
    for row in rows:  # cells are markup (our styles, values escaped): read as such on any console
        table.add_row(*(Text.from_markup(row[i]) for i in kept))
    parts = [Text(title, overflow="fold")] if title else []
    parts.append(table)
    dropped = [cols[i].name for i in range(len(cols)) if i not in kept]
    if dropped:
        parts.append(Text(f"(narrow terminal: {', '.join(dropped)} not shown; widen it or set COLUMNS)", style="dim"))
    if caption:
        parts.append(Text.from_markup(caption))
    return Group(*parts)


def print_table(console: Console, title: str | None, cols: Sequence[Col], rows: Sequence[Sequence[str]], *,
                caption: str | None = None) -> None:
    console.print(fitted_table(title, cols, rows, console.width, caption=caption), crop=False)
