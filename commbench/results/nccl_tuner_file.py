"""The files `commbench nccl-tuner` writes: NCCL's example tuner-plugin CSV, and the measurement CSV
that NVIDIA's scripts/optimize_config.py reads.

Plugin file (NVIDIA/nccl plugins/tuner/example/plugin.c, loadConfig): a line is read with
fgets into 256 bytes; a line starting with '#' or empty is skipped; the rest is split on ',' (runs of
commas collapse, so no field may be empty) with blanks trimmed; 8 to 10 fields make a rule, any
other count is dropped silently; unknown names fall back silently (collective -> allreduce,
algorithm -> ring, protocol -> simple). So: exactly 10 fields, names from the vocabularies, every
line (comments too) well under 255 characters, '\\n' line ends.
"""

from __future__ import annotations

import csv
import io
import math

from commbench.results.nccl_tuner import Cell, Rule, TunedPoint, expressible
from commbench.units import format_size

MAX_LINE_CHARS = 200  # the plugins read 255 bytes a line (fgets); a longer comment would spill into a rule
PLUGIN_FIELDS = "collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff"
# NVIDIA/nccl's config-file example plugin of v2.27.5-1 to v2.29.7-1 (ext-tuner/example, then plugins/tuner/example)
# indexes the cost table NCCL passes as `collCostTable[algo][proto]` on a float**, while NCCL (src/enqueue.cc, every
# release) passes its flat float[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] cast to float**: the first matching rule
# reads two floats as a pointer and crashes. Commit 14bf4df7 ("Add tuner v6 API with getChunkSize callback"), first in
# v2.30.3-1, casts to float (*)[NCCL_NUM_PROTOCOLS]; that plugin exports tuner v6 and v5, which NCCL 2.28+ loads
# (NCCL 2.27 loads v4 at most: src/plugin/tuner.cc). One line each, under MAX_LINE_CHARS.
EXAMPLE_PLUGIN_BUILD_TAG = "v2.30.3-1"
EXAMPLE_PLUGIN_BUILD_LINES = (
    f"build that plugin from NCCL {EXAMPLE_PLUGIN_BUILD_TAG} or later (commit 14bf4df7): the one of v2.27.5-1 to "
    "v2.29.7-1 crashes NCCL on the first matching rule (it reads NCCL's cost table as an array of pointers)",
    "the 2.30 build loads under NCCL 2.28 and 2.29 too (tuner v5); under NCCL 2.27 none works with this file: write "
    "it for commbench's plugin (no --for) and load that (--build-plugin)",
)
TARGET_LINES = {
    "commbench": (
        "for commbench's tuner plugin: commbench nccl-tuner --build-plugin DIR, then "
        "NCCL_TUNER_PLUGIN=DIR/libnccl-tuner-commbench.so NCCL_TUNER_CONFIG_FILE=<this file>",
        "where no rule matches, or NCCL does not allow a rule's algorithm/protocol for a call, NCCL decides "
        "(channel count and algorithm); channels 0 = NCCL's own count",
        "NOT for NCCL's example plugin as written: it runs every call without a rule (other sizes, collectives, "
        "scales) on ONE channel; write with --for example-plugin for it"),
    "example-plugin": (
        "for NCCL's example tuner plugin: it sets nChannels=1 before matching and NCCL keeps it, so each collective "
        "and scale below is covered from 0 bytes up, with channels N or 0 (NCCL's count), never -1",
        "sizes below the smallest (above the largest) measured one take its choice; calls of collectives or scales not listed below still run on "
        "ONE channel with that plugin",
        "if NCCL leaves a rule's pair out of a call (LL128 where its defaults turn it off: no NVLink, ...; NVLS for "
        "types/ops it cannot reduce, CollNet, PAT), the plugin tries later rules:",
        "a FALLBACK rule for its sizes follows all other rules, naming ring LL/Simple or tree LL/Simple (all-reduce), "
        "which NCCL never leaves out unless NCCL_ALGO/NCCL_PROTO exclude them",
        "predicted rules: FALLBACKs name NCCL's own next picks in its order (its own model), down to one of those",
        *EXAMPLE_PLUGIN_BUILD_LINES),
}
# Why group calls are left to NCCL (results.nccl_tuner_targets.RULE_PIPE_OPS; NVIDIA/nccl src/enqueue.cc
# ncclPrepareTasks, v2.30.7-1): one line each, under MAX_LINE_CHARS.
GROUP_LINES = {
    "commbench": (
        "numPipeOps 1: each point was one call; a group (ncclGroupStart/End) of more collectives than channels "
        "reaches the tuner as one call of the summed bytes, numPipeOps > 1: never measured, NCCL decides",
        "a group of up to nChannels collectives arrives as numPipeOps 1 with the summed bytes (src/enqueue.cc): "
        "no column tells it from one call, so it may take the rule of that size"),
    "example-plugin": (
        "numPipeOps -1 (any): the example plugin runs a call without a rule on one channel, so a group (one tuner "
        "call of the summed bytes) takes the rule of that sum, measured as one call only",),
}
# Why a rule measured with N channels says 0 at small sizes (results.nccl_channels; NVIDIA/nccl src/enqueue.cc
# topoGetAlgoInfo and ncclGetAlgoInfo, v2.24.3-1 to v2.30.7-1): one line each, under MAX_LINE_CHARS.
CHANNEL_LINES = (
    "channels N: measured as the communicator's count (NCCL_MIN/MAX_NCHANNELS=N), which NCCL lowers for calls under "
    "N x threads x threshold bytes (src/enqueue.cc); a tuner's count is not lowered",
    "so below that size (largest threads and threshold NCCL could use) a rule says channels 0: NCCL lowers its own "
    "count there as in the measurement; from it up, N (docs/nccl-tuner.md)",
)
OPTIMIZE_CONFIG_FIELDS = ("collective", "size_bytes", "algorithm", "protocol", "channels", "nodes", "ranks", "pipeOps",
                          "regBuff", "cost_metric", "bandwidth_gbps", "latency_us")


# NCCL's regBuff (src/enqueue.cc, v2.24.3-1 to v2.30.7-1): (registered send and receive buffers) || (CUDA-graph capture
# && NCCL_GRAPH_REGISTER): commbench measures regBuff 1 under graph capture only
REGISTERED_LINES = (
    "regBuff 1 rules come from CUDA-graph points; NCCL also passes regBuff 1 for eager calls on registered buffers",
    "(ncclCommRegister, ncclMemAlloc, a registering memory pool: src/enqueue.cc), never measured here: drop those",
    "rules if your job registers buffers outside CUDA graphs",
)


# NVIDIA/nccl ext-tuner/example/plugin.c (v2.28.3-1, v2.29.2-1), plugins/tuner/example/plugin.c (v2.30.7-1): pluginInit
# rewrites three of NCCL's model constants for every communicator (docs/nccl-tuner.md)
EXAMPLE_PLUGIN_CONSTANTS_LINES = (
    "NCCL's example plugin (NCCL >= 2.28) also sets 3 of NCCL's model constants in pluginInit: perChMaxTreeBws and",
    "perChMaxRingLL128Bws [Blackwell][> 2 nodes] = 15, 20 GB/s, hwLatencies[NET][NVLS][Simple] = 24 us: calls NCCL",
    "still decides (no rule, an IGNOREd pair) use that changed model, not the NCCL default measured here")


def comment_pieces(text: str) -> list[str]:
    """`text` in pieces that each fit one comment line (comment), cut between words: a warning the file must carry
    whole (a profile older than its results), not cut short with '...'."""
    import textwrap

    room = MAX_LINE_CHARS - len("# ")
    for width in (room, room // 2, room // 4):   # characters; a line of wide ones (4 bytes each at most) narrower
        pieces = textwrap.wrap(" ".join(text.split()), width=width)
        if all(len(piece.encode()) <= room for piece in pieces):
            break
    return pieces


def comment(text: str) -> str:
    """One comment line of at most MAX_LINE_CHARS bytes in UTF-8: the example plugin's fgets counts bytes, and a
    path of 80 CJK characters made a 158-character, 318-byte line whose rest it read as a line of its own."""
    line = "# " + " ".join(text.split())
    if len(line.encode()) <= MAX_LINE_CHARS:
        return line
    cut = line.encode()[:MAX_LINE_CHARS - 3].decode("utf-8", errors="ignore")   # never half a character
    return cut + "..."


def _speedups(values: tuple[float, ...]) -> str:
    low, high = min(values), max(values)
    return f"{low:.2f}x" if abs(high - low) < 0.005 else f"{low:.2f}x-{high:.2f}x"


def _origin(rule_or_cell) -> str:
    if rule_or_cell.predicted:
        return "PREDICTED (cost model)"
    runs = ",".join(rule_or_cell.run_ids[:4]) + ("..." if len(rule_or_cell.run_ids) > 4 else "")
    return f"measured, run {runs}" if runs else "measured"


def rule_comment(rule: Rule, statistic: str) -> str:
    sizes = rule.sizes_bytes
    where = format_size(sizes[0]) if len(sizes) == 1 else f"{format_size(sizes[0])}..{format_size(sizes[-1])}"
    scale = f"{rule.collective} nodes={rule.nodes} ranks={rule.ranks} [{rule.min_bytes}-{rule.max_bytes}]"
    speedups = [s for s in rule.speedups if s is not None]
    if rule.fallback_for:
        # NCCL's example plugin reaches it only for calls NCCL left the pair of the rule above it out of
        what = ("NCCL's own next pick by its own model" if rule.predicted
                else "the fastest ring/tree LL/Simple pair with channels")
        return comment(f"{scale}: FALLBACK at {where} for calls NCCL leaves {rule.fallback_for} out of: {what}; "
                       f"{_origin(rule)}")
    from commbench.results.nccl_tuner_targets import NCCL_PICK_FILL_IN

    if rule.filled and rule.fill_in_reasons and all(r == NCCL_PICK_FILL_IN for r in rule.fill_in_reasons):
        # workflows.nccl_tuner.follow_nccl_picks: where the predicted choice is slower by NCCL's own model
        return comment(f"{scale}: FILL-IN, NCCL's own pick by its own model at these sizes (the choice predicted "
                       f"nearby is slower here by it) with channels; {_origin(rule)}")
    if rule.filled:
        versus = f", {_speedups(tuple(speedups))}" if speedups else ""
        # the example plugin runs a call it has no rule for on 1 channel: the fastest with a channel count stands in
        why = "".join(f"; {reason}" for reason in rule.fill_in_reasons)   # before the rest: a long line is cut
        return comment(f"{scale}: FILL-IN at {where}, no winner (none beat NCCL default{versus}{why}): the fastest "
                       f"with channels; {_origin(rule)}")
    if rule.predicted:
        lead = f", leads the next by {_speedups(tuple(speedups))}" if speedups else ""
        return comment(f"{scale}: fastest predicted pair at {where}{lead}; {_origin(rule)}")
    if not speedups:
        return comment(f"{scale}: fastest predicted curve at {where}; {_origin(rule)}")
    return comment(f"{scale}: {_speedups(tuple(speedups))} faster than NCCL default ({statistic}) at {where}; "
                   f"{_origin(rule)}")


def lowered_comment(rule: Rule) -> str:
    return comment(f"channels 0 (NCCL's own, lowered by size): measured with {rule.lowered_channels} channels, which "
                   f"NCCL may lower below {rule.lowered_below_bytes} B (src/enqueue.cc); a count here would force "
                   f"{rule.lowered_channels}")


def kept_comment(cell: Cell, statistic: str) -> str:
    scale = f"{cell.collective} nodes={cell.nodes} ranks={cell.ranks} [{cell.min_bytes}-{cell.max_bytes}]"
    if cell.best is None:
        why = "no combination naming an algorithm and a protocol is left here (none measured, or left out: see above)"
    elif cell.dropped_reason:
        why = cell.dropped_reason
    elif cell.predicted:
        why = (f"best {cell.best.label} leads the next by {cell.speedup:.2f}x, within the cost model's "
               f"{100 * cell.noise_rel:g}% error")
    elif cell.within_run_spread:
        why = (f"best {cell.best.label} is {cell.speedup:.2f}x ({statistic}), within NCCL default's "
               f"{100 * cell.default_spread:.1f}% run-to-run spread (--allow-run-spread keeps it)")
    elif cell.speedup is None and cell.default_failed:
        why = ("NCCL default FAILED at this size (its record failed or gave wrong data): nothing shows "
               f"{cell.best.label} beats it")
    elif cell.speedup is None and cell.unpaired_reason:   # NCCL's default was measured: not in the same pairs
        why = cell.unpaired_reason
    elif cell.speedup is None:
        why = "NCCL default was not measured at this size (in each dtype and way a combination was)"
    elif cell.speedup < 1.0:   # the fastest combination measured lost to NCCL's own choice
        why = f"best {cell.best.label} was slower than NCCL's default ({cell.speedup:.2f}x, {statistic})"
    else:
        why = (f"best {cell.best.label} is {cell.speedup:.2f}x ({statistic}), "
               + (f"within noise {100 * cell.noise_rel:.1f}% or below --min-gain" if math.isfinite(cell.noise_rel)
                  else "noise unknown (one iteration or fewer than 6, or no samples nor p99)"))
    return comment(f"{scale}: NCCL default kept at {format_size(cell.size_bytes)}: {why}; {_origin(cell)}")


def plugin_config_text(rules: list[Rule], cells: list[Cell], *, intro: list[str], statistic: str,
                       target: str = "commbench", switch_backs: list[str] = ()) -> str:
    """The plugin's CSV: comments first (target plugin, where each rule came from), then one rule a line."""
    lines = [comment(text) for text in intro]
    lines += [comment(text) for text in TARGET_LINES[target]]
    lines += [comment(text) for text in GROUP_LINES[target]]
    lines.append(comment(f"format: {PLUGIN_FIELDS} (-1 = any)"))
    predicted = bool(cells) and all(cell.predicted for cell in cells)
    lines.append(comment(f"sizes between {'predicted' if predicted else 'measured'} points go to the nearer one "
                         "(midpoint)" + (("; next to a size where NCCL's default was kept" + (
                             "" if predicted else " or the rule's combination lost or failed")
                             + ", below the smallest and above the largest: NCCL") if target == "commbench" else "")))
    if target == "example-plugin":
        scales = list(dict.fromkeys(f"{r.collective}/{r.nodes}/{r.ranks}" for r in rules))
        lines.append(comment(f"covered (collective/nNodes/nRanks): {', '.join(scales) or 'none'}"))
        lines += [comment(text) for text in EXAMPLE_PLUGIN_CONSTANTS_LINES]
    most = max((max(rule.channels, rule.lowered_channels) for rule in rules), default=0)
    if most > 0:
        lines += [comment(text) for text in CHANNEL_LINES]
        lines.append(comment(f"a rule's count is capped by the communicator's, and a 0 below such a size matches the "
                             f"measurement only from as many: if NCCL creates fewer than {most} (NCCL_DEBUG=INFO), "
                             "fewer than measured"))
        lines.append(comment(f"NCCL_MIN_NCHANNELS={most} would give it {most} but changes NCCL's default for EVERY "
                             "call without a rule (other sizes, scales),"))
        lines.append(comment("which was measured without it: set it only after a new tuner-on vs tuner-off "
                             "measurement under it"))
    if any(rule.reg_buff == 1 for rule in rules):
        lines += [comment(text) for text in REGISTERED_LINES]
    for note in switch_backs:
        lines.append(comment(f"switches back: {note}"))
    for cell in cells:
        if cell.choice is None:
            lines.append(kept_comment(cell, statistic))
    body = []
    for rule in rules:
        body.append(rule_comment(rule, statistic))
        if rule.lowered_channels:
            body.append(lowered_comment(rule))
        if rule.nvls_channels:
            body.append(comment(f"channels 0 (NCCL's NVLS count, nvlsChannels): measured with NCCL_MIN/MAX_NCHANNELS="
                                f"{rule.nvls_channels}, which {rule.algo} does not run on here (src/enqueue.cc, "
                                f"src/transport/nvls.cc); a count here would cap it at {rule.nvls_channels}"))
        if rule.collnet_channels:
            body.append(comment(f"channels 0 (NCCL's CollNet count): measured with NCCL_MIN/MAX_NCHANNELS="
                                f"{rule.collnet_channels}; NCCL runs a tuner's CollNet count uncapped (src/enqueue.cc): "
                                f"as measured where NCCL creates {rule.collnet_channels} channels"))
        body.append(",".join(rule.csv_fields()))
    if not rules:
        lines.append(comment("no rule: NCCL keeps its own choice at every size (the lines above say why)"))
    text = "\n".join([*lines, *body]) + "\n"
    assert all(len(line.encode()) < 255 for line in text.splitlines())
    assert all(rule.channels != -1 for rule in rules)  # -1 is one channel with NCCL's example plugin
    return text


def optimize_config_csv(cells: list[Cell], rules: list[Rule], points: list[TunedPoint]) -> str:
    """Rows in the input format of NVIDIA's scripts/optimize_config.py (plugins/tuner/example/scripts, v2.30.7-1):
    one per size where a combination beat NCCL's default (a cell with a choice; `rules`: the rules written from
    those cells for commbench's plugin), that combination only. The script writes, per size range, a rule for the
    fastest row it was given and has no way to say "NCCL's default" (it copies names, and the plugins read an
    unknown name as ring/simple), so a row of a combination that lost, or of any combination where NCCL's
    default was kept, would become a rule slower than NCCL: those are left out. Each row names what was measured:
    the rule's channels there (0, NCCL's own count, where NCCL lowered the measured count: results.nccl_channels),
    its numPipeOps (1: one call) and the regBuff measured. latency_us and cost_metric: the combination's slowest
    time at that size over the dtypes and ways measured (the chosen statistic); bandwidth_gbps: size / that time
    (GB = 1e9 B)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(OPTIMIZE_CONFIG_FIELDS)
    for cell in cells:
        if cell.choice is None or cell.filled:
            continue
        scale = (cell.collective, cell.nodes, cell.ranks)
        rule = next((r for r in rules if (r.collective, r.nodes, r.ranks) == scale and r.reg_buff in (-1, cell.reg_buff)
                     and r.min_bytes <= cell.size_bytes <= r.max_bytes and not r.filled), None)
        times = [p.time_us for p in points if (p.collective, p.nodes, p.ranks) == scale and p.combo == cell.choice
                 and p.size_bytes == cell.size_bytes and p.reg_buff == cell.reg_buff]
        if rule is None or not times:
            continue
        time_us = max(times)
        writer.writerow([cell.collective, cell.size_bytes, rule.algo, rule.proto, rule.channels, cell.nodes,
                         cell.ranks, rule.pipe_ops, cell.reg_buff, f"{time_us:.3f}",
                         f"{cell.size_bytes / time_us / 1e3:.4f}", f"{time_us:.3f}"])
    return out.getvalue()
