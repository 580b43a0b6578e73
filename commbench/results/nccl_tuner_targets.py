"""Which tuner plugin a config is written for, and why its choices switch back with size.

* `commbench` (default): commbench's own plugin (commbench/tuner_plugin) leaves NCCL alone where no
  rule matches, so sizes without a winner stay uncovered; NCCL's own channel count is written as 0,
  which NCCL's example plugin also leaves to NCCL -- no rule of this file runs a collective on one
  channel with either plugin.
* `example-plugin`: NCCL's example plugin (plugins/tuner/example/plugin.c) sets `*nChannels = 1` before
  matching and NCCL keeps any non-zero count (src/enqueue.cc), so every call WITHOUT a matching rule runs
  on one channel. Here every measured (collective, scale) is covered from 0 bytes to SIZE_MAX_BYTES with
  measured, explicit channel counts (0 -- NCCL's own count, which the example plugin passes on: it keeps 1
  for -1 only -- at the sizes where NCCL lowered the measured count: results.nccl_channels): where NCCL's default was kept, the fastest measured combination
  with a channel count is written as a fill-in (Cell.filled), and refused in one line where it was measured slower
  than NCCL's default beyond the noise (no file for that plugin keeps the default there), and sizes below the
  smallest (above the largest) measured one take its choice. A size with no such measurement is refused (`--nccl-channels`).
  That plugin walks its rules in file order and applies the first that matches AND whose pair NCCL left in the
  call's cost table (an entry of NCCL_ALGO_PROTO_IGNORE, -1, is skipped and later rules are tried; with none left
  the call keeps its one channel). NCCL keeps only ring LL/Simple, and tree LL/Simple for all-reduce, in every
  call's table (comm.nccl_tuning.never_left_out): it leaves LL128 out of a whole communicator where its defaults
  turn LL128 off (no NVLink between the GPUs, ...: src/graph/tuning.cc), and NVLS, CollNet and PAT out per call
  (PER_CALL_ALGORITHMS). So each rule naming any other pair is followed by a FALLBACK rule for the same sizes
  (Cell.fallback, `add_fallbacks`): the fastest combination measured (predicted) there of a pair NCCL never leaves
  out, with its channel count; refused in one line where none was. Where NCCL leaves LL128 out of the communicator,
  NCCL's default measured here ran without it, so a FALLBACK measured slower than it is said (a note): on such a
  system that file is slower than no config at those sizes.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from commbench.comm.nccl_tuning import TuningCombo, never_left_out
from commbench.errors import CommbenchError
from commbench.results.nccl_tuner import Cell, TunedPoint, expressible
from commbench.units import format_size

TARGETS = ("commbench", "example-plugin")
# The first NCCL release that loads each target's plugin, and why no earlier one does. commbench's plugin exports
# tuner interface v4, v5 and v6 (commbench/tuner_plugin/commbench_tuner.c); NCCL loads v4 from 2.24 (v2.24.3-1
# src/misc/tuner.cc:216), while 2.19-2.20 look for ncclTunerPlugin_v1, 2.21 for _v2, 2.22-2.23 for _v3 and _v2
# (src/include/nccl_tuner.h, src/misc/tuner.cc:201-206) and 2.18 loads no tuner. NCCL's example plugin, built from
# v2.30.3-1 or later (older ones crash: results.nccl_tuner_file), exports v6 and v5 only (plugins/tuner/example/
# plugin.c:504, 513 at v2.30.7-1); NCCL loads v5 from 2.28 (v2.28.3-1 src/plugin/tuner.cc:72), 2.24-2.27 v4 at most.
LOADED_FROM = {"commbench": ((2, 24), "commbench's tuner plugin", "it exports tuner interface v4-v6, NCCL 2.19-2.23 "
                             "look for v1-v3 only and older NCCL for no tuner, src/misc/tuner.cc"),
               "example-plugin": ((2, 28), "NCCL's example tuner plugin (built from v2.30.3-1 or later)",
                                  "it exports tuner interface v5 and v6, NCCL 2.27 and older load v4 at most, "
                                  "src/plugin/tuner.cc")}
# numPipeOps a rule names. Every point is one collective per NCCL call of its size: numPipeOps 1. In a group
# (ncclGroupStart/End) NCCL asks the tuner once for the collectives of one function, op and type within 4x of
# each other's size, with their summed bytes and numPipeOps = ceil(collectives in the group / the
# communicator's channels) (src/enqueue.cc ncclPrepareTasks: nTasksPerChannel; NVIDIA/nccl v2.24.3-1 to
# v2.30.7-1, 73cf1122), and its model amortises their latency there (src/graph/tuning.cc ncclTopoGetAlgoTime):
# a regime never measured, so commbench's plugin leaves numPipeOps > 1 to NCCL. A group of up to nChannels
# collectives still arrives as numPipeOps 1 with the summed bytes: no column tells it from one call
# (GROUP_LINES say so in the file). NCCL's example plugin would run such calls on one channel without a
# rule: -1 (any) for it.
RULE_PIPE_OPS = {"commbench": 1, "example-plugin": -1}
SIZE_MAX_BYTES = 2**64 - 1  # size_t max: the plugin parses bounds with strtoull
PROTOCOL_ORDER = {"ll": 0, "ll128": 1, "simple": 2}  # NCCL's protocols from latency- to bandwidth-bound

MEASURE_CHANNELS = ("measure with explicit channel counts, e.g. commbench bench all_reduce --nccl-algo ring,tree "
                    "--nccl-proto ll,ll128,simple --nccl-channels 8,16,32")
NO_CHANNEL_COUNT = ("--for example-plugin: no measurement names an algorithm, a protocol and a channel count, so every "
                    f"rule would leave NCCL's example plugin on one channel: {MEASURE_CHANNELS}")


# Algorithms NCCL may leave out of one call's cost table (NCCL_ALGO_PROTO_IGNORE) on a communicator that allows them
# (NVIDIA/nccl v2.30.7-1 src/enqueue.cc updateCollCostTable and ncclPrepareTasks): CollNet direct/chain without
# CollNet support; NVLS and NVLS tree where ncclNvlsSupported (src/include/device.h) refuses the call's type and op
# (int8, uint8, fp8, prod, avg, min/max on fp32/fp64, ...) or NVLS is off; NVLS across nodes without CollNet; PAT for
# reduce_scatter with avg/pre-multiplied sum. NCCL also leaves out LL128 (per communicator) and tree outside all-reduce
# (always): which pairs it never leaves out is comm.nccl_tuning.never_left_out.
PER_CALL_ALGORITHMS = frozenset({"collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"})
# commbench's collective names by the plugin's (results.nccl_tuner.PLUGIN_COLLECTIVES)
_COLLECTIVE_OF = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
                  "broadcast": "broadcast", "reduce": "reduce"}


def always_in_table(collective: str, combo: TuningCombo) -> bool:
    """Whether NCCL keeps `combo`'s pair in every call's cost table of this (plugin) collective under its defaults
    (comm.nccl_tuning.never_left_out): NCCL's example plugin never skips a rule naming it."""
    return never_left_out(_COLLECTIVE_OF[collective], combo.algo, combo.proto)


def why_left_out(collective: str, combo: TuningCombo) -> str:
    """Why NCCL may leave `combo`'s pair out of a call (always_in_table is False), in a few words."""
    if combo.algo in PER_CALL_ALGORITHMS:
        return ("per call: types/ops NVLS cannot reduce, no CollNet, NVLS across nodes, PAT with avg (src/enqueue.cc "
                "updateCollCostTable)")
    if combo.algo == "tree" and collective != "allreduce":
        return "always: NCCL has tree for all-reduce only (src/graph/tuning.cc)"
    return ("per communicator where NCCL's defaults turn LL128 off: GPUs without NVLink between them, a NIC beyond "
            "PXB/PXN, mixed or < sm70 GPUs (src/graph/tuning.cc ncclTopoTuneModel)")


def _scale(cell) -> str:
    return f"{cell.collective} nNodes={cell.nodes} nRanks={cell.ranks}"


def _by_size(points: Iterable[TunedPoint]) -> dict[tuple, dict]:
    """(collective, nodes, ranks, size) -> combination -> its point as nccl-tuner judges it over repeats, dtypes and
    ways (results.nccl_tuner.against_a_rule: NCCL's default at its fastest, a combination at its slowest)."""
    from commbench.results.nccl_tuner import against_a_rule

    table: dict[tuple, dict] = {}
    for p in points:
        same = table.setdefault((p.collective, p.nodes, p.ranks, p.size_bytes), {})
        same[p.combo] = against_a_rule(same.get(p.combo), p)
    return table


# Why a fill-in is no winner (Cell.fill_in_reason, said in its comment and by the command)
WITHIN_NOISE = "within the noise of NCCL's default there"
BELOW_MIN_GAIN = "faster by less than --min-gain"
NOT_BESIDE_DEFAULT = "NCCL's default not measured in each dtype and way it was"
NO_DEFAULT = "NCCL's default not measured there"
PREDICTED_FILL_IN = "predicted, no NCCL default"
NCCL_PICK_FILL_IN = "NCCL's own pick by its own model here"   # workflows.nccl_tuner.follow_nccl_picks


def _refuse_slower_fill_in(cell: Cell, fill_in: TunedPoint, default: TunedPoint) -> None:
    """CommbenchError (one line) where the fill-in a kept cell would get was measured slower than NCCL's default by
    more than the noise of their ratio (results.nccl_tuner.ratio_noise): the rule would force it, and without a rule
    the example plugin runs the call on one channel -- no file for that plugin keeps NCCL's default there."""
    from commbench.results.nccl_tuner import ratio_noise

    slowdown = fill_in.time_us / default.time_us
    if slowdown - 1.0 > ratio_noise(fill_in, default):
        raise CommbenchError(
            f"--for example-plugin: {_scale(cell)} at {format_size(cell.size_bytes)}: no combination beat NCCL's default "
            f"and the fastest with a channel count ({fill_in.combo.label}, {fill_in.time_us:.1f} us) is {slowdown:.2f}x "
            f"slower than it ({default.time_us:.1f} us), beyond the noise; NCCL's example plugin cannot keep NCCL's "
            f"default there (no rule = one channel), so no file is written: measure more channel counts there, or "
            "write for commbench's plugin (leave --for out)")


def _fill_in(cell: Cell, by_pair: dict, min_gain: float) -> tuple[TuningCombo, float | None, str]:
    """(the fill-in of a kept cell, its speed-up over NCCL's default, why it is no winner), judged as the winner step
    judges (results.nccl_tuner: judged_table's points, one verdict per (dtype, way) against its own default): the
    combination that came closest to winning -- the highest worst-pair speed-up -- or, where none was measured in
    each judged pair, the fastest at its slowest. Refused (_refuse_slower_fill_in) where it was slower than NCCL's
    default beyond the noise in any pair."""
    from commbench.results.nccl_tuner import best_of, fastest_at_its_slowest, judged_pairs, pair_verdicts

    judged, combos = judged_pairs(by_pair)
    if judged and combos:
        verdicts = pair_verdicts(by_pair, judged, combos, min_gain)
        combo = best_of(verdicts)
        lost = [v for v in verdicts[combo] if not v[2]]
        reason = WITHIN_NOISE if not lost or any(v[0] - 1.0 <= v[1] for v in lost) else BELOW_MIN_GAIN
    else:
        combo = fastest_at_its_slowest(by_pair)
        if combo is None:
            raise CommbenchError(f"--for example-plugin: {_scale(cell)} at {format_size(cell.size_bytes)} has no "
                                 "measurement with an algorithm, a protocol and a channel count, so NCCL's example "
                                 f"plugin would run it on one channel: {MEASURE_CHANNELS}")
        reason = PREDICTED_FILL_IN if cell.predicted else NOT_BESIDE_DEFAULT if judged else NO_DEFAULT
        judged = [d for d in judged if combo in by_pair[d]]
    for d in judged:
        _refuse_slower_fill_in(cell, by_pair[d][combo], by_pair[d][TuningCombo()])
    speedup = min((by_pair[d][TuningCombo()].time_us / by_pair[d][combo].time_us for d in judged), default=None)
    return combo, speedup, reason


def cover_for_example_plugin(cells: list[Cell], points: list[TunedPoint],
                             min_gain: float = 0.0) -> tuple[list[Cell], list[str]]:
    """Every cell of a (collective, scale) with measurements naming a channel count given such a choice, the
    first of each scale down to 0 and the last up to SIZE_MAX_BYTES; CommbenchError (one line, naming --nccl-channels) where such a
    scale has a size without one. Scales with none at all get no rule (and a note: not covered). A kept cell's
    fill-in is judged as the winner step judged it (_fill_in; `min_gain`: the --min-gain it used)."""
    from commbench.results.nccl_tuner import judged_table

    table, _ = judged_table(points)
    capable = {(p.collective, p.nodes, p.ranks) for p in points if expressible(p.combo)}
    if cells and not capable:
        raise CommbenchError(NO_CHANNEL_COUNT)
    notes = [f"{scale[0]} nNodes={scale[1]} nRanks={scale[2]}: not covered, no measurement names a channel count"
             for scale in dict.fromkeys((c.collective, c.nodes, c.ranks) for c in cells) if scale not in capable]
    covered: list[Cell] = []
    for index, cell in enumerate(cells):
        if (cell.collective, cell.nodes, cell.ranks) not in capable:
            covered.append(cell)
            continue
        if cell.choice is not None and cell.choice.channels is None:
            raise CommbenchError(f"--for example-plugin: {_scale(cell)} at {format_size(cell.size_bytes)} was chosen "
                                 f"without a channel count ({cell.choice.label}): {MEASURE_CHANNELS}")
        if cell.choice is None:
            by_pair = table.get((cell.collective, cell.nodes, cell.ranks, cell.reg_buff), {}).get(cell.size_bytes, {})
            combo, speedup, reason = _fill_in(cell, by_pair, min_gain)
            cell = dataclasses.replace(cell, choice=combo, filled=True, speedup=speedup, fill_in_reason=reason)
        scale = (cell.collective, cell.nodes, cell.ranks)
        if index == 0 or (cells[index - 1].collective, cells[index - 1].nodes, cells[index - 1].ranks) != scale:
            cell = dataclasses.replace(cell, min_bytes=0)
        if index + 1 == len(cells) or (cells[index + 1].collective, cells[index + 1].nodes, cells[index + 1].ranks) != scale:
            cell = dataclasses.replace(cell, max_bytes=SIZE_MAX_BYTES)
        covered.append(cell)
    return covered, notes


def add_fallbacks(cells: list[Cell], points: list[TunedPoint]) -> tuple[list[Cell], list[str]]:
    """Each cell whose choice names a pair NCCL may leave out of a call (not always_in_table: LL128, NVLS, CollNet,
    PAT, tree outside all-reduce) with a Cell.fallback for NCCL's example plugin: of the combinations at its size
    naming a pair NCCL never leaves out and a channel count, the fastest (its slowest point there: dtypes, runs).
    That plugin otherwise keeps one channel for such calls; CommbenchError (one line) where no such combination was
    measured (predicted) at that size. Notes: per (scale, pair) left out per communicator (LL128), the sizes where
    the fallback was measured slower than NCCL's default beyond the noise -- where NCCL leaves that pair out of the
    communicator, NCCL's default measured here ran without it, so there the file is slower than no config."""
    by_size: dict[tuple, dict[TuningCombo, list[TunedPoint]]] = {}
    for p in points:
        by_size.setdefault((p.collective, p.nodes, p.ranks, p.size_bytes), {}).setdefault(p.combo, []).append(p)
    out = []
    slower: dict[tuple, list[tuple[int, float]]] = {}
    for cell in cells:
        if cell.choice is None or always_in_table(cell.collective, cell.choice):
            out.append(cell)
            continue
        options = by_size.get((cell.collective, cell.nodes, cell.ranks, cell.size_bytes), {})
        allowed = sorted(((max(p.time_us for p in same), combo.label, combo, same) for combo, same in options.items()
                          if expressible(combo) and always_in_table(cell.collective, combo)), key=lambda o: o[:2])
        pair = f"{cell.choice.algo}/{cell.choice.proto}"
        if not allowed:
            raise CommbenchError(
                f"--for example-plugin: {_scale(cell)} at {format_size(cell.size_bytes)} chooses {pair}, which NCCL "
                f"may leave out of a call ({why_left_out(cell.collective, cell.choice)}), and NCCL's example plugin "
                "then keeps ONE channel unless a later rule names a pair NCCL never leaves out (ring LL/Simple, tree "
                f"LL/Simple for all-reduce), but none with a channel count was "
                f"{'predicted' if cell.predicted else 'measured'} there to write one: {MEASURE_CHANNELS}")
        _, _, combo, same = allowed[0]
        out.append(dataclasses.replace(cell, fallback=combo,
                                       fallback_run_ids=tuple(dict.fromkeys(p.run_id for p in same if p.run_id))))
        if cell.choice.algo not in PER_CALL_ALGORITHMS and not cell.predicted:
            slowdown = _slower_than_default(options, combo)
            if slowdown is not None:
                slower.setdefault((_scale(cell), pair, combo.label), []).append((cell.size_bytes, slowdown))
    notes = [f"{scale}: FALLBACK {fallback} (for {pair}) up to {max(f for _, f in sizes):.2f}x slower than NCCL's "
             f"default beyond noise at {_sizes_text([size for size, _ in sizes])}: where NCCL turns LL128 off (no "
             "NVLink, ...) this file is slower than no config there; on such a system write for commbench's plugin"
             for (scale, pair, fallback), sizes in slower.items()]
    return out, notes


def _sizes_text(sizes: list[int]) -> str:
    if len(sizes) == 1:
        return format_size(sizes[0])
    return f"{len(sizes)} sizes {format_size(sizes[0])}..{format_size(sizes[-1])}"


def _slower_than_default(options: dict[TuningCombo, list[TunedPoint]], combo: TuningCombo) -> float | None:
    """How much slower `combo` was than NCCL's default at one size, judged as a fill-in is (each (dtype, way) against
    its own default: the default at its fastest, the combination at its slowest; beyond the noise of their ratio),
    the worst such factor; None where it was not slower beyond the noise in any, or NCCL's default was not measured."""
    from commbench.results.nccl_tuner import ratio_noise

    worst = None
    for fallback in options.get(combo, []):
        for default in options.get(TuningCombo(), []):
            if (default.dtype, default.way) != (fallback.dtype, fallback.way):
                continue
            factor = fallback.time_us / default.time_us
            if factor - 1.0 > ratio_noise(fallback, default) and (worst is None or factor > worst):
                worst = factor
    return worst


def switch_backs(cells: list[Cell], points: list[TunedPoint], statistic: str) -> list[str]:
    """Per (collective, scale), sizes where the choice goes back: an algorithm chosen again after another one,
    or a protocol earlier in LL -> LL128 -> Simple within one algorithm; each with the times that made it."""
    table = _by_size(points)
    notes: list[str] = []
    previous: Cell | None = None
    seen: list[str] = []
    for cell in cells:
        if previous is not None and (previous.collective, previous.nodes, previous.ranks) != (
                cell.collective, cell.nodes, cell.ranks):
            previous, seen = None, []
        if cell.choice is None:
            continue
        now = cell.choice
        if previous is not None and previous.choice != now:
            before = previous.choice
            back_algo = now.algo != before.algo and now.algo in seen
            back_proto = now.algo == before.algo and PROTOCOL_ORDER[now.proto] < PROTOCOL_ORDER[before.proto]
            if back_algo or back_proto:
                options = table.get((cell.collective, cell.nodes, cell.ranks, cell.size_bytes), {})
                mine, theirs = options.get(now), options.get(before)
                kind = "predicted" if cell.predicted else f"measured {statistic}"
                times = (f"{kind} {mine.time_us:.1f} us vs {theirs.time_us:.1f} us" if mine and theirs
                         else f"{before.label} was not {'predicted' if cell.predicted else 'measured'} there")
                notes.append(f"{_scale(cell)}: {now.label} again at {format_size(cell.size_bytes)} after "
                             f"{before.label} up to {format_size(previous.size_bytes)}: {times} at "
                             f"{format_size(cell.size_bytes)}")
        if now.algo not in seen:
            seen.append(now.algo)
        previous = cell
    return notes


def loadable_version(target: str, version: str | None) -> tuple[int, int] | None:
    """The (major, minor) of the results' NCCL `version`; None where the headers give none (or none readable).
    CommbenchError (one line, naming the version and the range) where the target's plugin would not load under it
    (LOADED_FROM): the file would do nothing."""
    import re

    found = re.match(r"(\d+)\.(\d+)", (version or "").strip())
    if not found:
        return None
    release = (int(found.group(1)), int(found.group(2)))
    first, plugin, why = LOADED_FROM[target]
    if release < first:
        if target == "example-plugin" and release >= LOADED_FROM["commbench"][0]:
            remedy = "write the file for commbench's plugin (leave --for out), which it loads"
        else:
            remedy = f"measure with NCCL {first[0]}.{first[1]} or later"
        raise CommbenchError(f"the results were measured with NCCL {version}, and {plugin} loads under NCCL "
                             f"{first[0]}.{first[1]} or later only ({why}), so NCCL {version} would not load it and "
                             f"the file would do nothing: {remedy}")
    return release

