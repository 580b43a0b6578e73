"""Where the next -N cycle of an nccl-tests table starts: the one rule for text logs and -J files.

nccl-tests measures, for each data type / op / root (-d, -o, -r), its banner's size sweep -N times (src/common.cu
TimeTest: `do { for (size = minbytes; size <= maxbytes; size = stepfactor > 1 ? size * stepfactor : size + stepbytes)
... } while (--repeat)`), one row per size. Within one sweep the printed size never falls: it is max(send, recv) bytes of
the test's GetCollByteCount, whose count rounds down (all_gather, reduce_scatter and alltoall align a rank's count down
to 16 bytes: src/all_gather.cu `base = (count/nranks) & ~(16/eltSize - 1)`; before v2.13 to a whole element), so the
sizes below ranks x 16 B each print the same `0 0` row, and a -i byte step below the alignment prints an aligned size
more than once. Such a row is its sweep's point again, not a cycle: a cycle starts where the sweep restarts, its size
falling, or where the sweep already printed every size its banner steps through (a sweep whose sizes all print alike).
Without a banner (a log cut to its table) the sweep's length is unknown: a size printed again starts a cycle (nccl-tests'
-N over one size, -b = -e), except the `0 0` rows, which only the alignment repeats within a sweep.
nccl-tests runs each data type / op / root's N sweeps before the next one's (src/common.cu at v2.19.6: the tests'
loops over types and ops call TimeTest, all_reduce.cu:572-576, whose `do { ... } while (--repeat)` at common.cu:934-943
holds the N cycles), so `-d all -N 2` prints float's two sweeps, then half's two: cycle k is every sweep's k-th pass
(each sweep counts its own), which makes cycle k one whole measurement of every point, as commbench's `bench -N` cycle
is (a run whose points compare judges against the other runs'); counted in file order, half's first pass joined
float's second cycle.
commbench's own --format nccl-tests text prints each point once a cycle, in its size list's order (its banner's step
may stand in for a list: results/nccl_tests_text.size_step): there a point the cycle already printed starts the next.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Cycles:
    """Which -N cycle each row of a table belongs to. `sizes`: how many sizes the banner's sweep steps through
    (nccl_tests.banner_sizes; None where it gives none); `ours`: commbench's own text, whose cycles print every point
    once each (one count for the table), where nccl-tests' sweeps each count their own passes."""

    sizes: int | None
    ours: bool = False
    last: dict[tuple, int] = field(default_factory=dict)       # sweep (type, op, root, point) -> its last size
    rows: dict[tuple, int] = field(default_factory=dict)       # the same -> its rows this pass
    printed: set[tuple] = field(default_factory=set)           # (sweep, leading columns) this cycle (ours)
    passes: dict[tuple, int] = field(default_factory=dict)     # sweep -> its pass now (nccl-tests': 0 = cycle 1)
    cycle: int = 0                                             # the cycle now (ours)

    def cycle_of(self, sweep: tuple, size: int, lead: tuple) -> tuple[int, bool]:
        """(the cycle, from 0, that a row of `sweep` printing `size` (its leading columns `lead`) belongs to, whether it
        starts a pass of its sweep again)."""
        if sweep not in self.last:
            restart = False
        elif self.ours:
            restart = (sweep, lead) in self.printed
        else:
            restart = size < self.last[sweep] or (self.sizes is not None and self.rows[sweep] >= self.sizes) or (
                self.sizes is None and size == self.last[sweep] and size > 0)
        if restart and self.ours:
            self.last, self.rows, self.printed, self.cycle = {}, {}, set(), self.cycle + 1
        elif restart:
            self.rows[sweep] = 0
            self.passes[sweep] = self.passes.get(sweep, 0) + 1
        self.last[sweep] = size
        self.rows[sweep] = self.rows.get(sweep, 0) + 1
        self.printed.add((sweep, lead))
        return (self.cycle if self.ours else self.passes.get(sweep, 0)), restart
