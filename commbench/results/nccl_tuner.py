"""Per-size winners of the NCCL tuning axes, turned into rules for NCCL's example tuner plugin.

Input: points keyed by (collective, nodes, ranks, size, combination) with a time and a noise
estimate, measured (from results files) or predicted (from a cost model). For each collective and
scale:
  * a combination wins a size if it is the fastest by the chosen statistic AND beats NCCL's default
    at that size by more than the noise of their ratio (the two points' 95% half-widths added in
    quadrature, in log time, widened for picking the fastest of the combinations tried there:
    `beats`, `selection_widening`) and by more than `min_gain`; otherwise NCCL's default is kept
    there (no rule: NCCL decides). The plugin matches bytes, not dtypes: where several dtypes were
    measured at a size, the winner must beat NCCL's default in each (compared within its dtype);
  * only combinations that name an algorithm and a protocol can win (the plugin's rule has no "any"
    for them: plugin.c parseAlgorithm/parseProtocol fall back to ring/simple); NCCL's own channel
    count is written as 0 (NCCL_OWN_CHANNELS), and for NCCL's example plugin only explicit counts
    win (`expressible`; results.nccl_tuner_targets);
  * sizes between measured points go to the nearer one: measured sizes s_0 < ... < s_n own the cells
    [s_0, m_0], [m_0+1, m_1], ..., [m_{n-1}+1, s_n] with m_i = floor((s_i + s_{i+1}) / 2) -- the
    midpoint rule of NVIDIA's scripts/optimize_config.py -- so the cells cover s_0..s_n without gaps;
    sizes below s_0 and above s_n were not measured and are left to NCCL (NCCL's example plugin, which
    runs an uncovered call on one channel, gets the nearest cell stretched to 0 and to SIZE_MAX:
    results.nccl_tuner_targets); for commbench's plugin a winner's cell stops at its measured size on
    the side of a size where NCCL's default was kept, or where its own combination was slower than NCCL's
    default, failed or was not measured (`hold_to_measured`): nothing says the winner still beats NCCL
    towards a size where it did not;
  * adjacent cells with the same winner merge into one rule;
  * a rule with a channel count N says 0 (NCCL's own count) at the sizes where NCCL may have lowered the N
    channels it was measured with (results.nccl_channels: src/enqueue.cc topoGetAlgoInfo lowers the
    communicator's count for small calls, a tuner's count is not lowered), so it forces no count never measured.
The plugin's matching (plugins/tuner/example/plugin.c, pluginGetCollInfo) is first match wins with
inclusive bounds (nBytes >= min && nBytes <= max), skipping a rule whose pair NCCL left out of the call;
rules here always name nNodes/nRanks and never overlap within one collective and scale, except the FALLBACK
rules written for that plugin after all others (Cell.fallback, results.nccl_tuner_targets.add_fallbacks),
which it reaches only where NCCL left out the pair of the rule before them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from commbench.comm.nccl_tuning import DEFAULT, NCCL_MAX_CHANNELS, TuningCombo, combo_from_params, nccl_has
from commbench.errors import CommbenchError
from commbench.results.records import AGG_GROUPED, AGG_UNGROUPED

# commbench collective -> the plugin's collective_type (plugin.c parseCollType)
PLUGIN_COLLECTIVES = {"broadcast": "broadcast", "reduce": "reduce", "all_gather": "allgather",
                      "reduce_scatter": "reducescatter", "all_reduce": "allreduce"}
# nccl-tests' time (loop time / iterations, reduced over ranks by its -a mode: src/common.cu at v2.19.6:772,783), as
# records.TIME_STATISTICS names it: the one time an nccl-tests import holds (loop_time_us), and commbench's own points
# hold beside their per-iteration statistics (measure/harness.py time_statistics)
LOOP_STATISTICS = ("nccl-avg", "nccl-rank0", "nccl-min", "nccl-max")
STATISTICS = ("median", "mean", "min", "max", "p99", *LOOP_STATISTICS)
# The channels a rule names to keep NCCL's own count: NCCL keeps its count when the tuner leaves nChannels
# at 0 (src/enqueue.cc: `nMaxChannels == 0 ? info->nMaxChannels : nMaxChannels`), and NCCL's example
# plugin copies any value but -1 into nChannels -- its -1 leaves the 1 it set first: one channel.
NCCL_OWN_CHANNELS = 0


@dataclass(frozen=True, kw_only=True)
class TunedPoint:
    """One (collective, scale, size, combination) with its time; measured unless `predicted`."""

    collective: str  # the plugin's name (allreduce, ...)
    nodes: int
    ranks: int
    size_bytes: int
    combo: TuningCombo
    time_us: float
    noise_rel: float = 0.0  # relative half-width of time_us's 95% interval (0.03 = 3 %); inf: unknown
    run_id: str = ""
    predicted: bool = False
    dtype: str = ""  # compared within a dtype only (the plugin cannot tell dtypes apart: all must agree)
    reg_buff: int = 0  # NCCL's regBuff for these calls: 1 under CUDA-graph capture (buffers registered)
    way: str = ""  # how it was measured besides the combination (measured_way): compared within one way only
    op: str = ""  # the reduction op measured (sum, ...): said in the file, as the plugin cannot tell ops apart

    def __post_init__(self) -> None:
        if self.collective not in PLUGIN_COLLECTIVES.values():
            raise ValueError(f"collective={self.collective!r} is invalid: allowed {', '.join(PLUGIN_COLLECTIVES.values())}")
        if self.time_us <= 0 or self.noise_rel < 0 or self.size_bytes < 0:
            raise ValueError(f"time_us={self.time_us}, noise_rel={self.noise_rel}, size_bytes={self.size_bytes}: "
                             "time must be > 0, noise and size >= 0")


@dataclass(frozen=True, kw_only=True)
class Cell:
    """The sizes [min_bytes, max_bytes] that follow one measured size, and what was chosen there."""

    collective: str
    nodes: int
    ranks: int
    min_bytes: int
    max_bytes: int
    size_bytes: int
    choice: TuningCombo | None  # None: NCCL's default kept
    speedup: float | None  # default time / best time (best of the expressible combinations)
    noise_rel: float
    best: TuningCombo | None
    run_ids: tuple[str, ...] = ()
    predicted: bool = False
    filled: bool = False  # choice written only so NCCL's example plugin does not run the size on one channel
    reg_buff: int = 0  # the regBuff regime measured (a scale of its own: NCCL chooses and runs otherwise)
    # the combinations measured ok at this size and not slower than NCCL's default in any (dtype, way) judged: a
    # neighbour's winner may stretch towards this size only if it is one of them (hold_to_measured); None: not
    # judged (predicted cells have no NCCL default)
    not_slower: frozenset | None = None
    # NCCL's default measured more than once here: the largest run-to-run spread (slowest / fastest - 1) over the
    # (dtype, way) pairs judged; 0.0 for a single measurement (repeat_spread_notes)
    default_spread: float = 0.0
    # the best beat NCCL's default by less than default_spread: NCCL's default kept (choose_cells; allow_run_spread
    # keeps the rule)
    within_run_spread: bool = False
    # NCCL's default was measured at this size and failed (or gave wrong data) in every record of it: not "not
    # measured" (failed_default_sizes, with_failed_defaults)
    default_failed: bool = False
    # NCCL's example plugin only: where `choice` names a pair NCCL may leave out of a call's cost table (LL128, NVLS,
    # ...: not results.nccl_tuner_targets.always_in_table), the combination a second rule for these sizes names, which
    # that plugin tries next (first match whose entry is not IGNORE wins); the runs it was measured in
    fallback: TuningCombo | None = None
    fallback_run_ids: tuple[str, ...] = ()
    # predicted cells only (workflows.nccl_tuner.follow_nccl_picks): the FALLBACKs after `fallback`, in NCCL's own order
    # of its pairs, tried in turn where the call left `fallback` out too, down to a pair NCCL never leaves out
    fallbacks_after: tuple[TuningCombo, ...] = ()
    # a fill-in (filled): why its choice is no winner, as judged (results.nccl_tuner_targets._fill_in)
    fill_in_reason: str = ""
    # a predicted choice dropped because NCCL's own model rates it slower than NCCL's own pick (workflows.nccl_tuner.
    # drop_slower_than_nccl): why NCCL's default is kept here
    dropped_reason: str = ""
    # no combination judged though NCCL's default was measured at this size: which side lacks which (dtype, way) pair
    # (unpaired_reason); "" where NCCL's default was not measured in any
    unpaired_reason: str = ""


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One line of the plugin's CSV: colltype,minbytes,maxbytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff."""

    collective: str
    min_bytes: int
    max_bytes: int
    algo: str
    proto: str
    channels: int  # 0: NCCL's own count (NCCL keeps its count for a tuner's 0; -1 is never written)
    nodes: int
    ranks: int
    pipe_ops: int = -1
    reg_buff: int = -1
    sizes_bytes: tuple[int, ...] = ()
    speedups: tuple[float, ...] = ()
    run_ids: tuple[str, ...] = ()
    predicted: bool = False
    filled: bool = False
    # channels 0 written for a measured count: NCCL may have lowered lowered_channels below lowered_below_bytes while
    # it was measured, so the rule leaves the count to NCCL there (results.nccl_channels)
    lowered_channels: int = 0
    lowered_below_bytes: int = 0
    nvls_channels: int = 0  # channels 0 written for a measured N that NVLS does not run on (nvlsChannels instead)
    # channels 0 written for a CollNet rule measured with N: NCCL schedules a tuner's CollNet count uncapped by the
    # channels it set up, so commbench's plugin drops a CollNet count (results.nccl_channels)
    collnet_channels: int = 0
    # "nvls/simple": this rule stands in for a rule of that pair above it over the same sizes, for the calls NCCL
    # does not allow that pair (Cell.fallback; NCCL's example plugin then tries later rules)
    fallback_for: str = ""
    fill_in_reasons: tuple[str, ...] = ()   # a fill-in's: why its cells' choice is no winner (Cell.fill_in_reason)

    def __post_init__(self) -> None:
        if not 0 <= self.min_bytes <= self.max_bytes:
            raise ValueError(f"min_bytes={self.min_bytes}, max_bytes={self.max_bytes}: need 0 <= min <= max")

    def csv_fields(self) -> list[str]:
        return [self.collective, str(self.min_bytes), str(self.max_bytes), self.algo, self.proto, str(self.channels),
                str(self.nodes), str(self.ranks), str(self.pipe_ops), str(self.reg_buff)]


def expressible(combo: TuningCombo, *, any_channels: bool = False) -> bool:
    """Whether the plugin forces exactly this combination: it needs an algorithm and a protocol, and a
    channel count -- plugin.c sets *nChannels = 1 before matching and keeps it for channels -1, and NCCL
    (src/enqueue.cc: `nMaxChannels == 0 ? info->nMaxChannels : nMaxChannels`) then runs on one channel.
    `any_channels` admits NCCL's own count (written as NCCL_OWN_CHANNELS, which no plugin turns into one)."""
    return combo.algo is not None and combo.proto is not None and (any_channels or combo.channels is not None)


def cell_bounds(sizes_bytes: list[int]) -> list[tuple[int, int]]:
    """[lo, hi] per sorted distinct measured size: midpoint rule, min..max (nothing beyond what was measured),
    no gaps, no overlaps."""
    bounds = []
    for i, size in enumerate(sizes_bytes):
        lo = size if i == 0 else bounds[-1][1] + 1
        hi = size if i == len(sizes_bytes) - 1 else (size + sizes_bytes[i + 1]) // 2
        bounds.append((lo, hi))
    return bounds


def ratio_noise(a: TunedPoint, b: TunedPoint) -> float:
    """Relative half-width of the 95% interval of a.time / b.time: the two points' half-widths in log time added
    in quadrature (independent runs: each combination runs in its own processes); inf where one is unknown."""
    if not (math.isfinite(a.noise_rel) and math.isfinite(b.noise_rel)):
        return math.inf
    return math.expm1(math.hypot(math.log1p(a.noise_rel), math.log1p(b.noise_rel)))


def selection_widening(tried: int) -> float:
    """How much wider (in log time) a ratio's noise is taken when its combination is the fastest of `tried` at one
    size: the one-sided Bonferroni bound z(1 - 0.025 / tried) / z(0.975). The fastest of K combinations that are
    all as fast as NCCL's default beats it by chance far more often than one combination tested alone (the minimum
    of K noisy times is biased low); over K tests each at 0.025 / K, the chance that ANY of them passes is at most
    0.025, as for the one test of a single combination. 1.0 for one combination; 1.53 for 18 (3 x 3 x 2)."""
    from commbench.results.noise import Z95, normal_quantile

    if tried <= 1:
        return 1.0
    return normal_quantile(1.0 - 0.025 / tried) / Z95


def beats(best: TunedPoint, baseline: TunedPoint, min_gain: float, tried: int = 1) -> tuple[float, float, bool]:
    """(speed-up over the baseline, the ratio's noise, whether it is beyond both the noise and min_gain); `tried`:
    the combinations `best` was picked from at its size, whose selection widens the noise (selection_widening)."""
    speedup, noise = baseline.time_us / best.time_us, ratio_noise(baseline, best)
    if math.isfinite(noise):
        noise = math.expm1(math.log1p(noise) * selection_widening(tried))
    return speedup, noise, speedup - 1.0 > max(noise, min_gain)


def against_a_rule(kept: TunedPoint | None, new: TunedPoint) -> TunedPoint:
    """Of two measurements of one point, the one least favourable to a rule: NCCL's default at its fastest, a
    combination at its slowest. Repeats that differ show run-to-run noise the within-run noise leaves out; the
    latest one (file order) counting would let a slow run of the default make a rule."""
    if kept is None:
        return new
    faster = new if new.time_us < kept.time_us else kept
    slower = kept if faster is new else new
    return faster if new.combo.is_default else slower


JudgedTable = dict[tuple, dict[int, dict[tuple, dict[TuningCombo, TunedPoint]]]]


def judged_table(points: Iterable[TunedPoint]) -> tuple[JudgedTable, dict[tuple, list[float]]]:
    """(collective, nodes, ranks, regBuff) -> size -> (dtype, way) -> combination -> the point every step judges it
    by (the winner, the fill-in, the kept-default comments): of repeated points the one least favourable to a rule
    (against_a_rule: NCCL's default at its fastest, a combination at its slowest), whatever the file order; and
    NCCL's default's times per (scale, size, dtype, way), repeats too (repeat_spread_notes)."""
    table: JudgedTable = {}
    default_times: dict[tuple, list[float]] = {}
    for p in points:
        key = (p.collective, p.nodes, p.ranks, p.reg_buff)
        same = table.setdefault(key, {}).setdefault(p.size_bytes, {}).setdefault((p.dtype, p.way), {})
        same[p.combo] = against_a_rule(same.get(p.combo), p)
        if p.combo.is_default:
            default_times.setdefault((key, p.size_bytes, p.dtype, p.way), []).append(p.time_us)
    return table, default_times


def judged_pairs(by_pair: dict[tuple, dict[TuningCombo, TunedPoint]], *, need_baseline: bool = True,
                 any_channels: bool = False) -> tuple[list[tuple], list[TuningCombo]]:
    """At one size (judged_table's (dtype, way) -> combination -> point): the (dtype, way) pairs judged (those with
    NCCL's default measured; all of them without a baseline) and the combinations that may win there: expressible,
    measured in every judged pair, and (with a baseline) only in ways where NCCL's default was measured too."""
    judged = [d for d in sorted(by_pair) if TuningCombo() in by_pair[d]] if need_baseline else sorted(by_pair)
    combos = {c for d in judged for c in by_pair[d] if expressible(c, any_channels=any_channels)}
    combos = [c for c in combos if all(c in by_pair[d] for d in judged)
              and (not need_baseline or all(TuningCombo() in way for way in by_pair.values() if c in way))]
    return judged, combos


def pair_verdicts(by_pair: dict, judged: list[tuple], combos: list[TuningCombo],
                  min_gain: float) -> dict[TuningCombo, list[tuple[float, float, bool]]]:
    """Each combination's `beats` verdict against NCCL's default in each judged (dtype, way) pair, its noise widened
    for the len(combos) tried there."""
    return {c: [beats(by_pair[d][c], by_pair[d][TuningCombo()], min_gain, len(combos)) for d in judged] for c in combos}


def best_of(verdicts: dict[TuningCombo, list[tuple[float, float, bool]]]) -> TuningCombo:
    """The combination with the highest worst-pair speed-up (ties: the label)."""
    return max(verdicts, key=lambda c: (min(v[0] for v in verdicts[c]), c.label))


def slowest_time_us(by_pair: dict, combo: TuningCombo, pairs: Iterable[tuple] | None = None) -> float:
    """A combination's time at one size over the (dtype, way) pairs (all where it was measured): its slowest."""
    return max(by_pair[d][combo].time_us for d in (by_pair if pairs is None else pairs) if combo in by_pair[d])


def fastest_at_its_slowest(by_pair: dict, *, any_channels: bool = False) -> TuningCombo | None:
    """Of the expressible combinations measured at one size, the one whose slowest point there is the fastest."""
    found = {c for way in by_pair.values() for c in way if expressible(c, any_channels=any_channels)}
    return min(found, key=lambda c: (slowest_time_us(by_pair, c), c.label), default=None)


def unpaired_reason(by_pair: dict, judged: list[tuple], combo: TuningCombo) -> str:
    """Why `combo` is judged nowhere at a size where NCCL's default was measured (judged_pairs): the (dtype, way)
    pairs NCCL's default was measured in and it was not, and those it was measured in and NCCL's default was not."""
    dtypes, ways = {d for d, _ in by_pair}, {w for _, w in by_pair}

    def named(pairs: list[tuple]) -> str:   # what tells the pairs apart here (a tuner comment line is short)
        return ", ".join(way if len(dtypes) == 1 else dtype if len(ways) == 1 else f"{dtype} {way}"
                         for dtype, way in pairs)

    lacks = [d for d in judged if combo not in by_pair[d]]
    default_lacks = [d for d in sorted(by_pair) if combo in by_pair[d] and TuningCombo() not in by_pair[d]]
    parts = ([f"{combo.label} not measured in {named(lacks)}, where NCCL default was"] if lacks else []) + (
        [f"NCCL default not measured in {named(default_lacks)}, where {combo.label} was"] if default_lacks else [])
    return "; ".join(parts)


def choose_cells(points: Iterable[TunedPoint], *, min_gain: float = 0.0, need_baseline: bool = True,
                 any_channels: bool = False, predicted_margin: float = 0.0,
                 allow_run_spread: bool = False) -> list[Cell]:
    """One Cell per (collective, nodes, ranks, regBuff regime, measured size); of repeated points of one
    combination, dtype, way of measuring and size the one least favourable to a rule counts (against_a_rule).
    Per size the (dtype, way) pairs with NCCL's default measured are judged, each against its own default: the
    best combination (the highest worst-pair speed-up, measured in each of them) wins where it beats the default
    in every one; a combination also measured in a pair without NCCL's default wins nowhere at that size (the
    plugin would apply it to those calls too, and nothing shows it beats NCCL there).
    `need_baseline=False` (predicted curves: the model has no "NCCL default"): the fastest wins where it leads
    every other combination by more than `predicted_margin` (the model's error: within it NCCL's own model may
    rightly pick another, so NCCL decides; the lead is the cell's speedup, its noise the margin).
    A winner whose gain is smaller than NCCL's default's own run-to-run spread at that size (measured more than
    once: max / min - 1) is no winner unless `allow_run_spread`: a whole run shifting that much (clocks, load,
    placement) may be all the 'win' is, and a config must never make NCCL slower than no config."""
    table, default_times = judged_table(points)
    cells = []
    for (collective, nodes, ranks, reg_buff), by_size in sorted(table.items()):
        sizes = sorted(by_size)
        for (lo, hi), size in zip(cell_bounds(sizes), sizes):
            by_dtype = by_size[size]
            judged, combos = judged_pairs(by_dtype, need_baseline=need_baseline, any_channels=any_channels)
            choice, speedup, noise, best, used, unpaired = None, None, 0.0, None, [], ""
            if judged and combos and need_baseline:
                verdicts = pair_verdicts(by_dtype, judged, combos, min_gain)
                best = best_of(verdicts)
                worst = min(verdicts[best], key=lambda v: v[0])
                speedup, noise = worst[0], max(v[1] for v in verdicts[best])
                if all(v[2] for v in verdicts[best]):
                    choice = best
                used = [by_dtype[d][c] for d in judged for c in (TuningCombo(), best)]
            elif combos and not need_baseline:
                def slowest(c):
                    return slowest_time_us(by_dtype, c, judged)

                best, *others = sorted(combos, key=lambda c: (slowest(c), c.label))
                used = [by_dtype[d][best] for d in judged]
                lead = min((slowest(c) / slowest(best) for c in others), default=math.inf)
                if lead - 1.0 > predicted_margin:
                    choice = best
                if others:
                    speedup, noise = lead, predicted_margin
            elif not combos and need_baseline:
                used = [by_dtype[d][TuningCombo()] for d in judged]
                if any(c != TuningCombo() for way in by_dtype.values() for c in way):
                    # measured without NCCL's default beside it: nothing shows one beats NCCL here (no speed-up)
                    best = fastest_at_its_slowest(by_dtype, any_channels=any_channels)
                    unpaired = unpaired_reason(by_dtype, judged, best) if judged and best is not None else ""
            run_ids = tuple(dict.fromkeys(p.run_id for p in used if p.run_id))
            not_slower = None
            if need_baseline:   # a failed (or wrong) point is no point here: its combination is not among them
                not_slower = frozenset(c for c in combos if judged and all(
                    by_dtype[d][c].time_us <= by_dtype[d][TuningCombo()].time_us for d in judged))
            spreads = [max(t) / min(t) - 1.0 for d in judged if need_baseline
                       for t in [default_times.get(((collective, nodes, ranks, reg_buff), size, *d), [])] if t]
            within_spread = (choice is not None and need_baseline and speedup is not None
                             and max(spreads, default=0.0) > speedup - 1.0)
            if within_spread and not allow_run_spread:
                choice = None
            cells.append(Cell(collective=collective, nodes=nodes, ranks=ranks, min_bytes=lo, max_bytes=hi,
                              size_bytes=size, choice=choice, speedup=speedup, noise_rel=noise, best=best,
                              run_ids=run_ids, reg_buff=reg_buff, not_slower=not_slower,
                              default_spread=max(spreads, default=0.0), unpaired_reason=unpaired,
                              within_run_spread=within_spread,
                              predicted=any(p.predicted for d in by_dtype.values() for p in d.values())))
    return cells


ALLOW_RUN_SPREAD_OPTION = "--allow-run-spread"


def repeat_spread_notes(cells: list[Cell]) -> list[str]:
    """A note per cell whose best beat NCCL's default by less than that default, measured more than once, differs
    run to run (Cell.within_run_spread): the runs' noise bounds each one's own samples only, and a shift of a whole
    run (clocks, load, placement) as large as the gain may be all the 'win' is. By default NCCL's default is kept
    there and the note names the option that keeps the rule; with it, the rule stands and the note says maybe noise.
    Fill-ins (Cell.filled: written for NCCL's example plugin where no combination won) claim no gain: no note."""
    from commbench.units import format_size

    notes = []
    for c in cells:
        if not c.within_run_spread or c.filled:
            continue
        where = (f"{c.collective} nNodes={c.nodes} nRanks={c.ranks} at {format_size(c.size_bytes)}: NCCL's default "
                 f"varies {100 * c.default_spread:.1f}% run to run, more than {c.best.label}'s {c.speedup:.2f}x gain")
        notes.append(f"{where}: maybe noise, NCCL default kept ({ALLOW_RUN_SPREAD_OPTION} keeps the rule)"
                     if c.choice is None else f"{where}: maybe noise, rule kept as {ALLOW_RUN_SPREAD_OPTION} asks")
    return notes


# Neighbouring measured sizes further apart than this: a rule stops at its measured size towards the other one
# (hold_to_measured). Inside 8x NCCL's own choice moves through at most one or two switches of protocol or
# algorithm (LL -> LL128 -> Simple -> NVLS/tree over 1 KiB..1 GiB in NCCL's model); across 1 KiB..1 GiB (10^6)
# it passes through all of them, and a midpoint rule would force one pair over sizes never measured.
MAX_SPAN_RATIO = 8


def far_apart_notes(cells: list[Cell]) -> list[str]:
    """A note per pair of neighbouring measured sizes (one collective and scale) more than MAX_SPAN_RATIO apart."""
    from commbench.units import format_size

    notes = []
    for a, b in zip(cells, cells[1:]):
        if (a.collective, a.nodes, a.ranks, a.reg_buff) == (b.collective, b.nodes, b.ranks, b.reg_buff) \
                and b.size_bytes > MAX_SPAN_RATIO * a.size_bytes:
            notes.append(f"{a.collective} nNodes={a.nodes} nRanks={a.ranks}: measured sizes {format_size(a.size_bytes)} "
                         f"and {format_size(b.size_bytes)} are {b.size_bytes / max(a.size_bytes, 1):.0f}x apart (more than "
                         f"{MAX_SPAN_RATIO}x), never measured in between")
    return notes


def hold_to_measured(cells: list[Cell]) -> list[Cell]:
    """A winner's cell ends at its measured size on the side of a neighbour where NCCL's default was kept (or
    not measured), or of a measured size more than MAX_SPAN_RATIO away (whatever won there); that gap joins the
    kept cell or has no rule, so NCCL decides there (commbench's plugin). Towards a
    neighbouring winner the midpoint stands only where the winner's own combination was measured there and was
    not slower than NCCL's default (Cell.not_slower); where it was slower, failed or was not measured ok there,
    its cell ends at its own size too and the gap up to the neighbour's cell has no rule (NCCL decides): nothing
    says the combination still beats NCCL towards a size where it lost. Cells only shrink here."""
    import dataclasses

    held = list(cells)
    for i, cell in enumerate(cells):
        scale = (cell.collective, cell.nodes, cell.ranks, cell.reg_buff)
        if cell.choice is None:
            continue
        for j, side in ((i - 1, "lo"), (i + 1, "hi")):
            if not 0 <= j < len(cells):
                continue
            other = cells[j]
            if (other.collective, other.nodes, other.ranks, other.reg_buff) != scale:
                continue
            kept = other.choice is None
            small, large = sorted((cell.size_bytes, other.size_bytes))
            far = large > MAX_SPAN_RATIO * small   # no measurement says who wins in between: NCCL decides there
            if not kept and not far and (other.choice == cell.choice or other.not_slower is None
                                         or cell.choice in other.not_slower):
                continue
            if side == "lo" and held[i].min_bytes < cell.size_bytes:
                if kept:
                    held[j] = dataclasses.replace(held[j], max_bytes=cell.size_bytes - 1)
                held[i] = dataclasses.replace(held[i], min_bytes=cell.size_bytes)
            elif side == "hi" and held[i].max_bytes > cell.size_bytes:
                if kept:
                    held[j] = dataclasses.replace(held[j], min_bytes=cell.size_bytes + 1)
                held[i] = dataclasses.replace(held[i], max_bytes=cell.size_bytes)
    return held


def merge_rules(cells: list[Cell], *, pipe_ops: int = -1, name_reg_buff: bool = False,
                fallbacks: bool = False, level: int = 1) -> list[Rule]:
    """Adjacent cells of one collective and scale with the same choice become one rule; `pipe_ops`: the
    numPipeOps every rule names (-1 = any; results.nccl_tuner_targets.RULE_PIPE_OPS); `name_reg_buff`: rules
    name the regBuff their cells were measured with (else -1, any). `fallbacks`: the rules of the cells'
    Cell.fallback instead (cells without one get none), each saying which pair(s) it stands in for; `level` 2, 3, ...:
    those of Cell.fallbacks_after, the FALLBACK tried after level - 1 of them."""
    rules: list[Rule] = []
    previous: tuple | None = None   # (scale, choice, stands in for) of the last cell
    for cell in cells:
        chain = (cell.fallback, *cell.fallbacks_after) if fallbacks and cell.fallback is not None else ()
        choice = (chain[level - 1] if len(chain) >= level else None) if fallbacks else cell.choice
        stands_for = ", ".join(f"{c.algo}/{c.proto}" for c in (cell.choice, *chain[:level - 1])) \
            if fallbacks and choice is not None else ""
        run_ids = cell.fallback_run_ids if fallbacks else cell.run_ids
        speedup = None if fallbacks else cell.speedup
        filled = cell.filled and not fallbacks
        scale = (cell.collective, cell.nodes, cell.ranks, cell.reg_buff)
        if choice is not None and previous == (scale, choice, stands_for) and rules \
                and rules[-1].max_bytes + 1 == cell.min_bytes and rules[-1].filled == filled:
            last = rules[-1]
            rules[-1] = Rule(**{**last.__dict__, "max_bytes": cell.max_bytes,
                                "sizes_bytes": (*last.sizes_bytes, cell.size_bytes),
                                "speedups": (*last.speedups, speedup),
                                "run_ids": tuple(dict.fromkeys((*last.run_ids, *run_ids))),
                                "fill_in_reasons": tuple(dict.fromkeys(
                                    (*last.fill_in_reasons, *((cell.fill_in_reason,) if filled else ()))))})
        elif choice is not None:
            rules.append(Rule(collective=cell.collective, min_bytes=cell.min_bytes, max_bytes=cell.max_bytes,
                              algo=choice.algo, proto=choice.proto,
                              channels=NCCL_OWN_CHANNELS if choice.channels is None else choice.channels,
                              nodes=cell.nodes, ranks=cell.ranks, pipe_ops=pipe_ops,
                              reg_buff=cell.reg_buff if name_reg_buff else -1, sizes_bytes=(cell.size_bytes,),
                              speedups=(speedup,), run_ids=run_ids, predicted=cell.predicted,
                              filled=filled, fallback_for=stands_for,
                              fill_in_reasons=(cell.fill_in_reason,) if filled and cell.fill_in_reason else ()))
        previous = (scale, choice, stands_for)
    return rules


def record_time_us(record, statistic: str) -> float | None:
    """The chosen statistic of a Measurement (None when absent; p99 needs >= 100 iterations)."""
    if statistic not in STATISTICS:
        raise ValueError(f"statistic={statistic!r} is invalid: allowed {', '.join(STATISTICS)}")
    if statistic in LOOP_STATISTICS:
        return (getattr(record, "loop_time_us", None) or {}).get(statistic[len("nccl-"):])
    return getattr(record, f"time_us_{statistic}", None)


def held_statistics(record) -> list[str]:
    """The --statistic values a record holds a time for (an nccl-tests import: its -a mode's nccl-*)."""
    return [statistic for statistic in STATISTICS if record_time_us(record, statistic)]


# The fewest iterations with a 95% interval of the median: the order-statistic interval (min, max) of n samples
# covers the median with 1 - 2 x 2^-n (Hollander & Wolfe, ch. 3): 93.75% at n = 5, 96.9% at n = 6
# (noise.median_interval falls back to (min, max) below that, zero for equal samples).
MIN_ITERS_FOR_NOISE = 6


def record_noise_rel(record, statistic: str = "median") -> float:
    """Relative noise of a point's statistic: the half-width of its 95% interval from the record's
    per-iteration samples (nccl_tuner_noise.tuner_point_sd: median, mean, min; stricter than the compare
    gate's noise.within_run_sd for autocorrelated samples and for the min), over the statistic; without samples (older files) the spread from the
    median to the p99 (or max) over the median, conservatively. Unknown -- fewer than MIN_ITERS_FOR_NOISE
    iterations (-n 1: its max is its median; 3 equal ones: a (min, max) of zero width), or neither samples
    nor a p99 or max -- is infinite: such a point never makes a rule."""
    from commbench.results.nccl_tuner_noise import tuner_point_sd
    from commbench.results.noise import Z95

    value = record_time_us(record, statistic)
    samples = getattr(record, "iter_times_us", None) or []
    if (len(samples) if samples else record.iters) < MIN_ITERS_FOR_NOISE:
        return math.inf
    if value and len(samples) >= 2 and statistic in ("median", "mean", "min", *LOOP_STATISTICS):
        # nccl-tests' time is a mean over the timed iterations (its loop time / iterations): its noise is the mean's
        # of the same iterations' samples (each the slowest rank's; an average over ranks varies no more)
        sd = tuner_point_sd(samples, "mean" if statistic in LOOP_STATISTICS else statistic)
        if sd is not None:
            return math.expm1(Z95 * sd)  # inf where too few effective samples
    median = value if statistic in LOOP_STATISTICS else record.time_us_median
    tail = record.time_us_p99 if record.time_us_p99 is not None else getattr(record, "time_us_max", None)
    if not median or tail is None:
        return math.inf
    return max(0.0, (tail - median) / median)


def graph_registered(params: dict, nccl_env: dict) -> int:
    """NCCL's regBuff for a point's calls: 1 where they were captured in a CUDA graph (params.cuda_graph) and
    NCCL_GRAPH_REGISTER is not 0 (NCCL registers graph buffers by default: src/enqueue.cc), else 0 (commbench
    registers no buffer otherwise). NCCL passes 1 for eager calls on registered buffers too (ncclCommRegister,
    ncclMemAlloc): the file says its regBuff-1 rules were measured under graphs only (REGISTERED_LINES)."""
    return int(bool(params.get("cuda_graph")) and str(nccl_env.get("NCCL_GRAPH_REGISTER", "1")).strip() != "0")


def forced_by_environment(combo: TuningCombo, nccl_env: dict) -> bool:
    """Whether a point's run did not leave NCCL its own choice where the record says it did: a tuning variable
    inherited from the environment on an axis the combination leaves to NCCL (a plain bench with NCCL_ALGO
    exported), or a tuner plugin loaded (NCCL_TUNER_PLUGIN: the plugin chose). A combination's own overrides
    (sweep.combos sets them in its processes' environment) are what it says."""
    if nccl_env.get("NCCL_TUNER_PLUGIN"):
        return True
    axes = (("NCCL_ALGO", combo.algo), ("NCCL_PROTO", combo.proto), ("NCCL_MIN_NCHANNELS", combo.channels),
            ("NCCL_MAX_NCHANNELS", combo.channels))
    return any(nccl_env.get(key) and value is None for key, value in axes)


def contradicts_environment(combo: TuningCombo, nccl_env: dict) -> bool:
    """Whether a point's run set one of the combination's own axes to another value than the record names
    (NCCL_ALGO=Tree beside a ring record, NCCL_MIN_NCHANNELS=8 beside 16): it ran what its header says, and a
    rule would force what was not measured. NCCL reads the names in any case (src/graph/tuning.cc parseList:
    strcasecmp); a list ("Ring,Tree") is not the one name a combination sets, so it contradicts too."""
    return any(key in nccl_env and str(nccl_env[key]).strip().lower() != value.lower()
               for key, value in combo.env().items())


# Measurement params that are not how it was measured: the tuning axes (the combination itself)
_NOT_WAY_PARAMS = ("nccl_algo", "nccl_proto", "nccl_channels")


def measured_way(record) -> str:
    """How a point was measured besides its combination, size and dtype: the backend (torch-nccl pays a framework
    overhead cupy-nccl does not), the op, in place or not, and the workload's params (cuda_graph: replays without
    launch cost, blocking, root, ...). A combination is compared with NCCL's default measured the same way only:
    across ways the gain would be the measurement's, not the combination's."""
    params = ",".join(f"{key}={record.params[key]}" for key in sorted(record.params) if key not in _NOT_WAY_PARAMS)
    return (f"{record.backend} op={record.op} {'in-place' if record.in_place else 'out-of-place'}"
            + (f" {params}" if params else ""))


def record_combo(record) -> TuningCombo:
    """The combination a record was measured under; CommbenchError in one line (the run, the point, the field,
    its value and what is allowed) where its params name none: an unknown name, or a channel count that is not an
    integer NCCL can hold (1..NCCL_MAX_CHANNELS) would be a traceback, or a rule the plugins drop or misread."""
    where = f"results of run {record.run_id}, {record.collective} at {record.size_bytes} B"
    channels = record.params.get("nccl_channels", DEFAULT)
    if channels != DEFAULT and (type(channels) is not int or not 1 <= channels <= NCCL_MAX_CHANNELS):
        raise CommbenchError(f"{where}: params.nccl_channels={channels!r} is invalid: allowed {DEFAULT!r} or an "
                             f"integer from 1 to {NCCL_MAX_CHANNELS} (NCCL's MAXCHANNELS)")
    try:
        return combo_from_params(record.params)
    except ValueError as error:  # TuningCombo: "algo='x' is invalid: allowed ..."
        field = "nccl_algo" if str(error).startswith("algo=") else "nccl_proto"
        raise CommbenchError(f"{where}: params.{field}={record.params.get(field)!r} is invalid: "
                             f"{str(error).split(': ', 1)[-1]}") from None


def _by_file(combo: TuningCombo, header, judge) -> str:
    """' in FILE (KEY=VALUE, ...)' where `judge` finds the run's settings at fault only with its NCCL configuration
    files' (comm.nccl_conf: NCCL reads them as variables the environment leaves unset), else ''."""
    if judge(combo, header.nccl_env or {}):
        return ""
    from commbench.comm.nccl_conf import from_files

    origin = from_files(header.nccl_env or {}, header.nccl_conf)
    settings = header.nccl_settings()
    files = dict.fromkeys(origin.values())
    return "".join(f" in {path} ({', '.join(f'{key}={settings[key]}' for key, where in origin.items() if where == path)})"
                   for path in files)


NCCL_BACKENDS = ("nccl", "cupy-nccl")   # comm/backends.py BACKEND_NAMES less gloo


def failed_default_sizes(records: list) -> set[tuple[str, int, int, int]]:
    """(plugin collective, nodes, ranks, size) where an NCCL-default record of a whole communicator failed or gave
    wrong data (points_from_records leaves such records out, so the cell there reads as the default not measured)."""
    from commbench.results.nccl_nodes import header_node_count
    from commbench.results.records import Measurement, RunHeader

    nodes_of = {r.run_id: header_node_count(r)[0] for r in records if isinstance(r, RunHeader)}
    return {(PLUGIN_COLLECTIVES[r.collective], nodes_of[r.run_id], r.group_size, r.size_bytes) for r in records
            if isinstance(r, Measurement) and r.backend in NCCL_BACKENDS and r.collective in PLUGIN_COLLECTIVES
            and r.run_id in nodes_of and r.num_groups == 1 and r.group_size == r.world_size
            and (r.status != "ok" or r.num_wrong) and record_combo(r).is_default}


def with_failed_defaults(cells: list[Cell], failed: set[tuple[str, int, int, int]]) -> list[Cell]:
    """`cells` with default_failed set where NCCL's default was not measured ok and a record of it failed."""
    import dataclasses

    return [dataclasses.replace(c, default_failed=True) if c.speedup is None and not c.predicted
            and (c.collective, c.nodes, c.ranks, c.size_bytes) in failed else c for c in cells]


def check_p99_estimable(records: list) -> None:
    """--statistic p99 only where every point it would rank ran MIN_ITERS_FOR_P99 iterations or more: commbench
    records a p99 from 100 on (records.py), below that the 99th percentile is (nearly) the max, so a p99 a file holds
    for fewer (hand-edited, another tool's) is not one. Refused in one line, as compare refuses a --statistic some
    points lack (compare.check_present), rather than rules from some cells and silence on the others."""
    from commbench.results.records import MIN_ITERS_FOR_P99

    def samples(r) -> int:
        return len(r.iter_times_us) if r.iter_times_us else (r.iters or 0)

    short = [r for r in records if samples(r) < MIN_ITERS_FOR_P99]
    if short:
        first = short[0]
        raise CommbenchError(
            f"--statistic=p99 is invalid for these results: {len(short)} point(s) ran fewer than {MIN_ITERS_FOR_P99} "
            f"iterations (first {first.collective} {first.size_bytes} B of run {first.run_id}: -n {samples(first)}), "
            f"and p99 is recorded from {MIN_ITERS_FOR_P99} iterations on (below that it is the max); measure with "
            f"-n {MIN_ITERS_FOR_P99} or more, or rank by another --statistic (median, mean, min, max)")


def points_from_records(records: list, statistic: str = "median") -> tuple[list[TunedPoint], list[str]]:
    """TunedPoints from the ok whole-world records (no wrong data) of plugin-supported collectives, with notes on
    what was left out. nodes = nNodes as NCCL counts it (results.nccl_nodes: NVLink domains on multi-node
    NVLink systems, hosts elsewhere, from the run's header); ranks = the group size. A combination that gave
    wrong data at any size of a collective and scale is left out there altogether (the fault is in its
    algorithm/protocol path, not in one size; NCCL's default, which changes path with size, loses only its
    wrong points), and a combination's points measured without the data check
    (-c 0: #wrong unknown) are left out: only NCCL's default may go unchecked, no rule ever forces it. Points of a
    pair NCCL does not have for the collective (comm.nccl_tuning.nccl_has: tree on all-gather, NVLS with LL) are left
    out too: NCCL ran another pair (ring, NCCL 2.18-2.23) or failed, whatever the record names."""
    from commbench.results.nccl_nodes import header_node_count, unknown_node_count
    from commbench.results.nccl_tuner_samples import equal_sample_counts
    from commbench.results.records import TIME_STATISTICS, Measurement, RunHeader

    counted = {r.run_id: header_node_count(r) for r in records if isinstance(r, RunHeader)}
    unknown_nodes = {r.run_id: why for r in records if isinstance(r, RunHeader) and (why := unknown_node_count(r))}
    # a setting from NCCL's configuration files counts as the same variable exported (RunHeader.nccl_settings)
    env_of = {r.run_id: r.nccl_settings() for r in records if isinstance(r, RunHeader)}
    headers_of = {r.run_id: r for r in records if isinstance(r, RunHeader)}
    nodes_of = {run_id: count for run_id, (count, _, _) in counted.items()}

    def whole_world(r) -> bool:
        return r.num_groups == 1 and r.group_size == r.world_size

    def scale_combo(r) -> tuple:
        return PLUGIN_COLLECTIVES[r.collective], nodes_of[r.run_id], r.group_size, record_combo(r)

    # NCCL's default takes another path per size, so only its wrong points go; a combination's path is fixed
    wrong = {scale_combo(r) for r in records if isinstance(r, Measurement) and r.collective in PLUGIN_COLLECTIVES
             and r.status == "ok" and r.num_wrong and whole_world(r) and r.run_id in nodes_of
             and not record_combo(r).is_default}
    points, left_out, eligible = [], {}, []
    for r in records:
        if not isinstance(r, Measurement):
            continue
        why = None
        if r.backend not in NCCL_BACKENDS:   # gloo's times say nothing of NCCL's algorithms and protocols
            why = f"{r.backend} points (not NCCL: a tuner config chooses among NCCL's algorithms and protocols)"
        elif r.collective not in PLUGIN_COLLECTIVES:
            why = f"{r.collective}: not a collective the plugin tunes"
        elif r.status != "ok":
            why = f"{r.status} points"
        elif r.size_bytes <= 0:   # a hand-edited line wrote the rule 'allreduce,0,0,...' (probe EQ)
            why = "points of size 0 (no bytes moved, which fit leaves out too): no rule can stand on them"
        elif r.num_wrong:
            why = "points with wrong data (#wrong > 0)"
        elif not nccl_has(r.collective, (combo := record_combo(r)).algo, combo.proto):
            why = (f"{combo.algo}/{combo.proto or '*'} points of {r.collective}: NCCL has no such pair for it "
                   "(src/graph/tuning.cc), so NCCL 2.18-2.23 ran ring in its place and 2.24+ fail the call: the "
                   "record names what did not run")
        elif not whole_world(r):
            why = "sub-group points (the plugin matches whole communicators by nodes and ranks)"
        elif r.run_id not in nodes_of:
            why = "points without their run header"
        elif r.run_id in unknown_nodes:
            why = f"points of runs on {unknown_nodes[r.run_id]}"
        elif forced_by_environment(record_combo(r), env_of[r.run_id]):
            why = ("points with an NCCL-default axis forced by the environment (NCCL_ALGO, NCCL_PROTO, "
                   "NCCL_*_NCHANNELS or NCCL_TUNER_PLUGIN set)" + _by_file(record_combo(r), headers_of[r.run_id],
                                                                             forced_by_environment)
                   + ": not NCCL's own choice")
        elif contradicts_environment(record_combo(r), env_of[r.run_id]):
            why = ("points whose run's NCCL_ALGO, NCCL_PROTO or NCCL_*_NCHANNELS contradict the combination their "
                   "record names" + _by_file(record_combo(r), headers_of[r.run_id], contradicts_environment)
                   + " (it ran what the environment says)")
        elif scale_combo(r) in wrong:
            why = "points of a combination that gave wrong data at another size of that collective and scale"
        elif r.params.get("device_impl"):
            why = ("points of nccl-tests' device-API kernels (-D N > 0: its own demonstration kernels over symmetric "
                   "memory, src/common.cu startColl, not ncclAllReduce and the others): no NCCL algorithm or "
                   "protocol chose them")
        elif r.params.get(AGG_GROUPED, 1) != 1 or r.params.get(AGG_UNGROUPED, 1) != 1:
            why = ("points of aggregated iterations (-m N: per-operation times of N calls, commbench's back to back, "
                   "nccl-tests' grouped, and NCCL tunes a group as one call of N x the size with numPipeOps "
                   "ceil(N / channels), src/enqueue.cc ncclPrepareTasks: not the one call of the size a rule names)")
        elif r.num_wrong is None and not record_combo(r).is_default:
            why = "points of a combination measured without the data check (-c 0): a rule needs checked data"
        if why:
            left_out[why] = left_out.get(why, 0) + 1
        else:
            eligible.append(r)
    if statistic == "p99":
        check_p99_estimable(eligible)
    # min/max/p99 over as many iterations within each cell (the min of 500 beats the min of 20 by chance alone)
    eligible, sample_notes = equal_sample_counts(eligible, statistic, lambda r: (
        PLUGIN_COLLECTIVES[r.collective], nodes_of[r.run_id], r.group_size, r.size_bytes))
    for r in eligible:
        time_us = record_time_us(r, statistic)
        if not time_us:
            why = f"points without a {statistic} time"
            if (held := [h for h in held_statistics(r) if h in LOOP_STATISTICS]):   # an nccl-tests import
                why = (f"points without a {statistic} time: they hold nccl-tests' time only "
                       f"({TIME_STATISTICS[held[0]].split(': ', 1)[-1]}; loop_time_us, as an nccl-tests import does): "
                       f"rank them by --statistic {held[0]}")
            left_out[why] = left_out.get(why, 0) + 1
            continue
        combo = record_combo(r)
        points.append(TunedPoint(collective=PLUGIN_COLLECTIVES[r.collective], nodes=nodes_of[r.run_id],
                                 ranks=r.group_size, size_bytes=r.size_bytes, combo=combo, time_us=time_us,
                                 noise_rel=record_noise_rel(r, statistic), run_id=r.run_id, dtype=r.dtype,
                                 reg_buff=graph_registered(r.params, env_of[r.run_id]), way=measured_way(r),
                                 op=r.op or ""))
    notes = [f"left out {n} {why}" for why, n in left_out.items()] + sample_notes
    used = {p.run_id for p in points}
    notes += [f"nNodes = {kind}: {why}" for kind, why in dict.fromkeys(
        (kind, why) for run_id, (_, kind, why) in counted.items() if run_id in used)]
    dtypes = sorted({p.dtype for p in points})
    if len(dtypes) > 1:
        notes.append(f"several dtypes ({', '.join(dtypes)}): the plugin matches bytes only, so a rule needs its "
                     "combination to beat NCCL's default in each dtype measured at that size")
    ways = sorted({p.way for p in points})
    if len(ways) > 1:
        notes.append(f"measured {len(ways)} ways ({'; '.join(ways)}): each combination is compared with NCCL's default "
                     "measured the same way, and a rule needs a win in each way measured at that size")
    if len({p.reg_buff for p in points}) > 1:
        notes.append("points with and without CUDA-graph capture (regBuff 1 and 0 to NCCL): rules for each apart")
    return points, notes
