"""Rows of a vectorised evaluation grouped by a few key columns, so that a term is computed once per group.

A search enumerates layouts in nested loops, so equal keys come in long runs: where the runs are few, the groups
are the runs (np.repeat spreads the per-group values back: no sort, no gather); otherwise the distinct keys
(np.unique, a sort). The same key may then head several groups: a group is computed once, not necessarily a key.
"""

from __future__ import annotations

import numpy as np

RUNS_PER_ROW = 1 / 16   # at most this many runs per row: runs; more: distinct keys


def _code(column: np.ndarray) -> tuple[np.ndarray, int]:
    """(a non-negative int code per row, ordered as the values, and the codes' range) of one key column: a bool
    itself, an integer (or integral float) column its offset from its least value, any other its rank among its
    distinct values."""
    if column.dtype.kind == "b":
        return column, 2
    if column.dtype.kind in "iuf":
        low, high = column.min(), column.max()
        # (false for nan and inf; a float column only where its values are integers an int64 holds)
        if column.dtype.kind in "iu" and int(high) - int(low) < 1 << 20:
            return column.astype(np.int64, copy=False) - int(low), int(high) - int(low) + 1
        if -(1 << 52) < low <= high < 1 << 52 and high - low < 1 << 20:
            as_int = column.astype(np.int64)
            if np.array_equal(as_int, column):
                return as_int - int(low), int(high) - int(low) + 1
    values, code = np.unique(column, return_inverse=True)
    return np.ravel(code), len(values)


class RowGroups:
    """`first[g]`: a row of group g; `expand(values)`: values per group -> values per row (the key columns' shape)."""

    def __init__(self, *columns) -> None:
        cols = [np.ravel(c) for c in np.broadcast_arrays(*(np.asarray(c) for c in columns))]
        self.shape = np.broadcast_shapes(*(np.shape(c) for c in columns))
        n = cols[0].size
        self._lengths = self._inverse = None
        if n == 0:
            self.first = np.zeros(0, dtype=np.int64)
            self._inverse = np.zeros(0, dtype=np.int64)
            return
        change = np.zeros(n - 1, dtype=bool)
        limit = max(n * RUNS_PER_ROW, 1)
        for c in cols:
            change |= c[1:] != c[:-1]
            if np.count_nonzero(change) + 1 > limit:   # too many runs already: the distinct keys
                break
        else:
            self.first = np.concatenate(([0], np.flatnonzero(change) + 1))
            self._lengths = np.diff(np.append(self.first, n))
            return
        key, radices = None, 1
        for c in cols:   # each column's code (its offset, or its rank among its distinct values) in one int key
            code, radix = _code(c)
            if radix == 1:
                continue
            if key is None:
                key, radices = code.astype(np.int64, copy=False), radix
                continue
            if radices * radix >= 1 << 62:   # the key would overflow: renumber its distinct values first (same order)
                values, key = np.unique(key, return_inverse=True)
                key, radices = np.ravel(key), len(values)
            key = key * radix + code
            radices *= radix
        if key is None:   # every column constant: one group
            key = np.zeros(n, dtype=np.int64)
        _, self.first, inverse = np.unique(key, return_index=True, return_inverse=True)
        self._inverse = np.ravel(inverse)

    def __len__(self) -> int:
        return len(self.first)

    def of(self, column) -> np.ndarray:
        """A key (or any per-row) column's value per group."""
        return np.ravel(np.broadcast_to(np.asarray(column), self.shape))[self.first]

    def expand(self, values) -> np.ndarray:
        values = np.asarray(values)
        out = np.repeat(values, self._lengths) if self._lengths is not None else values[self._inverse]
        return out.reshape(self.shape)

    def expand_each(self, table) -> np.ndarray:
        """Several columns of per-group values (k x groups) -> k x the key columns' shape, in one gather."""
        table = np.asarray(table)
        out = np.repeat(table, self._lengths, axis=1) if self._lengths is not None else table[:, self._inverse]
        return out.reshape((len(table),) + self.shape)

    def columns(self, arrays, names: tuple[str, ...]) -> GroupColumns:
        """`arrays`' (a LayoutArrays') `names` columns at each group's first row, for a term computed once per group:
        the groups' key columns must fix them (reading a column not named raises AttributeError)."""
        return GroupColumns({name: self.of(getattr(arrays, name)) for name in names}, len(self))


class GroupColumns:
    """Named columns, one value per group (RowGroups.columns); no other attribute."""

    def __init__(self, columns: dict[str, np.ndarray], size: int) -> None:
        self.__dict__.update(columns)
        self._size = size

    def __len__(self) -> int:
        return self._size

