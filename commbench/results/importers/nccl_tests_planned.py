"""The points an imported nccl-tests run planned, from its banner's size sweep, for every run (a footer or none).

nccl-tests measures, for each data type / op / root (-d, -o, -r), every size of its banner's sweep ("minBytes %ld
maxBytes %ld step: %ld(%s)"), -N times (src/common.cu TimeTest: `do { for (size = minbytes; size <= maxbytes; size =
stepfactor > 1 ? size * stepfactor : size + stepbytes) ... } while (--repeat)`), one row per size with an out-of-place
and an in-place cell. A table whose rows are fewer than that lacks sizes, whatever its footer says: a row lost to
another rank's NCCL_DEBUG output written into it, a line cut by the launcher. A run's header then plans the points it
holds plus the missing ones, as a bench run's plans what it set out to measure, so compare ("holds N of M points"),
fit and report see the gap.

The rows of one table are counted together, not run by run: a combination's missing rows are what its row count lacks
of a whole number of sweeps. nccl-tests prints a size below its alignment as the same row again (all_gather's count
rounds down to 16 bytes per rank: src/all_gather.cu AllGatherGetCollByteCount, so `-b 8` on 8 ranks prints several
`0 0` rows): such a row counts as one of the sweep's sizes, its point held once (the importer keeps its first row:
nccl_tests_cycles), and the note says how many rows repeated a point.

commbench's own `--format nccl-tests` text states its run's planned_points under the banner (nccl_tests_text.
planned_line): its sizes are aligned and measured once each, its step may stand in for a list of sizes, so the banner's
sweep does not count its rows; a table under that line plans each run's points from it (TableCount.stated). A text
written before that line plans from its banner's sweep as commbench aligned it, where every row lies on it
(nccl_tests.ours_banner_sizes); one whose rows do not (a step standing in for a list of sizes) plans nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

STOPPED_NOTE = "stopped during its rows: "
AT_LEAST_NOTE = " (at least: types, ops or roots it never reached are not counted)"


def stated_note(planned: int, held: int, stopped: bool) -> str:
    """What a header's planned_points taken from commbench's own text (its 'planned points:' line) says."""
    missing = planned - held
    return ((STOPPED_NOTE if stopped else "") + f"planned_points {planned} as commbench's text states (its run's "
            f"header's): {held} held" + (f", {missing} not in the log (a row missing, cut or not parsed)" if missing
                                         else ""))


def planned_note(planned: int, held: int, sizes: int, per_row: int, stopped: bool, repeated: int = 0) -> str:
    """What a header's banner-derived planned_points says: whence, how many points the log lacks, and how many rows
    printed a point its sweep had printed (`repeated`: sizes below nccl-tests' alignment)."""
    missing = planned - held
    return ((STOPPED_NOTE if stopped else "") +
            f"planned_points {planned} from the banner's {sizes} size(s) per data type/op/root, {per_row} record(s) a "
            f"row: {held} held" + (f", {missing} not in the log (a row missing, cut or not parsed)" if missing else "")
            + (AT_LEAST_NOTE if stopped else "")
            + (f"; {repeated} row(s) repeat a point of their sweep (sizes below nccl-tests' alignment print alike: "
               "src/all_gather.cu, reduce_scatter.cu, alltoall.cu): one point each, its first row kept, not an -N "
               "cycle" if repeated else ""))


@dataclass
class TableCount:
    """The rows of one nccl-tests table (a banner's sweep, until its footer or the next table) as they are imported.
    `sizes`: the sizes its banner's sweep measures (nccl_tests.banner_sizes), None where the banner gives none."""

    sizes: int | None
    runs: list[str] = field(default_factory=list)                  # its runs (-N cycles), in order
    points: dict[str, set] = field(default_factory=dict)           # run id -> the distinct points it holds
    rows: dict[tuple, int] = field(default_factory=dict)           # (type, op, root, point line) -> rows imported
    last_run: dict[tuple, str] = field(default_factory=dict)       # the same -> the run its last row went to
    cells: list[tuple[str, int]] = field(default_factory=list)     # (run id, records) per row imported
    repeated: dict[str, int] = field(default_factory=dict)         # run id -> rows repeating a point it held
    rows_held: int = 0
    row_points: set = field(default_factory=set)                  # (size_bytes, dtype, ranks) of every record imported

    def holds(self, run_id: str, points: list[tuple]) -> bool:
        """Whether `run_id` already holds every one of a row's `points` (the row prints its sweep's point again)."""
        return run_id in self.points and self.points[run_id].issuperset(points)

    def add_row(self, run_id: str, combination: tuple, points: list[tuple], repeat: bool = False) -> None:
        """One imported row of `run_id`: its data type/op/root (and commbench point line), its records' points;
        `repeat`: its points were held already (holds)."""
        if repeat:
            self.repeated[run_id] = self.repeated.get(run_id, 0) + 1
        if run_id not in self.points:
            self.runs.append(run_id)
            self.points[run_id] = set()
        self.points[run_id].update(points)
        self.rows[combination] = self.rows.get(combination, 0) + 1
        self.last_run[combination] = run_id
        self.cells.append((run_id, len(points)))

    def planned(self, stopped: bool) -> dict[str, tuple[int, str]]:
        """run id -> (planned_points, note) for each of the table's runs: the distinct points it holds, plus, on the
        run that holds a combination's last row, the rows that combination lacks of a whole number of sweeps, and the
        cells a row holds fewer of than the table's fullest row (a run stopped between a row's out-of-place and
        in-place cells); `stopped`: the run of the last row imported was (under -d all -N, cycle 1 of a later type
        comes after the last cycle's run of an earlier one: nccl_tests_cycles). {} where the banner gives no sizes."""
        if not self.sizes or not self.runs:
            return {}
        per_row = max(n for _, n in self.cells)
        missing = dict.fromkeys(self.runs, 0)
        for combination, rows in self.rows.items():
            missing[self.last_run[combination]] += (math.ceil(rows / self.sizes) * self.sizes - rows) * per_row
        for run_id, n in self.cells:
            missing[run_id] += per_row - n
        return {run_id: (len(self.points[run_id]) + missing[run_id],
                         planned_note(len(self.points[run_id]) + missing[run_id], len(self.points[run_id]), self.sizes,
                                      per_row, stopped and run_id == self.cells[-1][0], self.repeated.get(run_id, 0)))
                for run_id in self.runs}

    def stated(self, planned_points: int, stopped: bool) -> dict[str, tuple[int, str]]:
        """run id -> (planned_points, note) for each of the table's runs (-N cycles) where commbench's text states
        what each of its runs planned (never fewer than a run holds); `stopped` as in planned."""
        return {run_id: (max(planned_points, len(self.points[run_id])),
                         stated_note(max(planned_points, len(self.points[run_id])), len(self.points[run_id]),
                                     stopped and run_id == self.cells[-1][0]))
                for run_id in self.runs}
