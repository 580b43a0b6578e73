"""nccl-tests' classic text output, byte for byte in layout, rendered from our records.

Format strings as nccl-tests 2.17 prints them (src/util.cu: writeBenchmarkLinePreamble, getFloatStr,
writeBenchmarkLineBody, writeResultHeader, writeResultFooter; the banner: src/util.cu writeDeviceReport, its
parameter line with 2.18's trailing "unalign: %d"):
- row: "%12li  %12li  %8s  %6s  %6s" (size, count, type, redop, root as "%6i"), then per placement,
  out-of-place first, "  %7s  %6s  %6s  %6g" (time, algbw, busbw, #wrong) or "  %7s  %6s  %6s    N/A"
  without a data check; numbers by getFloatStr: "%.2f" while it fits the width, else "%.1f", "%.0f",
  then "%.1e" (width 7) / "%.0e". A placement the collective has not (or not measured) prints N/A in
  every column, aligned; a failed one prints its time and bandwidths as nan (a time nccl-tests has no valid value
  for), #wrong N/A, so an import keeps it failed.
- footer: "# Out of bounds values : %d %s" (cells with #wrong > 0), "# Avg bus bandwidth    : %g "
  (the mean busbw over every measured cell, out-of-place and in-place: bw[0] / bw_count[0]), "#",
  "# Collective test concluded: %s".
- -N cycles (src/common.cu threadRunTests: the do/while over run_cycles inside one test): the banner and the
  table header once, every cycle's rows one after another, one footer at the end over every cycle's cells
  (errors[0] and bw[0] / bw_count[0] accumulate across cycles). commbench runs each cycle as its own launch,
  so a cycle's view continues the text of the ones before it (TextCycle).
Times are nccl-tests' time (loop time / iters, reduced over ranks by -a); algbw/busbw from it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from commbench.results.records import NCCL_TESTS_AVERAGE_MODES, Measurement, RunHeader

NCCL_TYPE = {"float32": "float", "float16": "half", "float64": "double", "bfloat16": "bfloat16",
             "int8": "int8", "uint8": "uint8", "int32": "int32", "int64": "int64"}
NCCL_TEST_NAME = {"all_to_all": "alltoall"}  # nccl-tests' binary names where they differ from ours
_ABSENT = f"  {'N/A':>7}  {'N/A':>6}  {'N/A':>6}  {'N/A':>6}"
# a failed point's cell: the time (and the bandwidths from it) nan, as nccl-tests prints a time it has no valid value
# for (getFloatStr of a NaN), which `import nccl-tests` reads back as a failed point; an all-N/A cell reads as a point
# never reached (a cut-short run's), so a failure exported and imported again passed `compare` as not measured
_FAILED = f"  {'nan':>7}  {'nan':>6}  {'nan':>6}  {'N/A':>6}"


def program_name(collective: str) -> str:
    return f"{NCCL_TEST_NAME.get(collective, collective)}_perf"


def float_text(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: as many decimals as `width` allows (2, 1, 0), else exponent form."""
    power, bound = 0, 1
    while value >= bound:
        power += 1
        bound *= 10
    if power < width - 2:
        return f"{value:{width}.2f}"
    if power < width - 1:
        return f"{value:{width}.1f}"
    if power < width + 1:
        return f"{value:{width}.0f}"
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


def nccl_version_code(version: str | None) -> int:
    """'2.25.3' -> 22503 (NCCL_VERSION_CODE for >= 2.9), 0 when unknown."""
    try:
        major, minor, patch = (int(part) for part in str(version).split(".")[:3])
    except (TypeError, ValueError):
        return 0
    return major * 10000 + minor * 100 + patch


def banner(header: RunHeader, collective: str, *, min_bytes: int, max_bytes: int, step: tuple[int, str],
           iters: int, warmup_iters: int, check: bool, graph_launches: int, commbench_version: str,
           agg_iters: int = 1, blocking: bool = False, swept: str | None = None) -> list[str]:
    """The lines nccl-tests prints before its table: version, test name, parameters, devices (one
    process per rank: nThread 1 nGpus 1, one `#  Rank` line per rank). The version names commbench
    (we are not nccl-tests); nccl-library is the NCCL the ranks ran, 0 without NCCL. `iters` is -n and
    `graph_launches` -G as nccl-tests prints them (iters: n, graph: N launches of the n-iteration graph,
    0 without graphs), whatever the loop runs to time them; commbench never offsets buffers: unalign: 0.
    `swept`: what a workload swept by its own parameters measures (moe_all_to_all: its tokens per rank and MoE
    layer), printed where a size sweep's minBytes/maxBytes/step would stand (it has no size range)."""
    sizes = swept if swept is not None else \
        f"minBytes {min_bytes} maxBytes {max_bytes} step: {step_number(step[0])}({step[1]})"
    lines = [f"# nccl-tests version commbench-{commbench_version} nccl-headers=0 "
             f"nccl-library={nccl_version_code(header.nccl_version)}",
             f"# Collective test starting: {program_name(collective)}",
             f"# nThread 1 nGpus 1 {sizes} warmup iters: "
             f"{warmup_iters} iters: {iters} agg iters: {agg_iters} validation: {int(check)} graph: {graph_launches} "
             "unalign: 0",
             *(["# Blocking Enabled: wait and barrier after each inner iteration (-m) "] if blocking else []),
             "#", "# Using devices"]
    for rank, (host, device) in enumerate(zip(header.hostnames, header.devices)):
        lines.append(f"#  Rank {rank:2d} Group {0:2d} Pid {0:6d} on {host:>10} device {0:2d} [0000:00:00] {device}")
    return lines


def table_header(time_name: str = "time") -> list[str]:
    blank = ("",) * 5
    return [
        "#",
        "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          " % blank,
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s" % (
            "size", "count", "type", "redop", "root", time_name, "algbw", "busbw", "#wrong", time_name, "algbw",
            "busbw", "#wrong"),
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s" % (
            "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""),
    ]


def cell_numbers(m: Measurement, average: int) -> tuple[float, float, float] | None:
    """(time µs, algbw, busbw) nccl-tests would print for a record: its time for -a `average` and the
    bandwidths scaled from the median's to that time; None when not measured."""
    time_us = m.loop_time_us.get(NCCL_TESTS_AVERAGE_MODES[average]) if m.status == "ok" else None
    if not time_us or m.algbw_gbps is None or m.busbw_gbps is None:
        return None
    scale = (m.time_us_median / time_us) if m.time_us_median else 1.0
    return time_us, m.algbw_gbps * scale, m.busbw_gbps * scale


def _cell(m: Measurement | None, average: int) -> str:
    numbers = cell_numbers(m, average) if m is not None else None
    if numbers is None:
        return _FAILED if m is not None and m.status == "failed" else _ABSENT
    time_us, algbw, busbw = numbers
    body = f"  {float_text(time_us, 7)}  {float_text(algbw, 6)}  {float_text(busbw, 6)}"
    return body + ("    N/A" if m.num_wrong is None else f"  {float(m.num_wrong):6g}")


def row(out_of_place: Measurement | None, in_place: Measurement | None, average: int = 1) -> str:
    """One size's row: the out-of-place cell, then the in-place one (N/A where not measured)."""
    first = out_of_place or in_place
    assert first is not None
    root = int(first.params.get("root", -1))
    op = first.op or "none"
    head = "%12d  %12d  %8s  %6s  %6s" % (first.size_bytes, first.count, NCCL_TYPE.get(first.dtype, first.dtype),
                                          op, "%6d" % root)
    return head + _cell(out_of_place, average) + _cell(in_place, average)


# moe_all_to_all params a row's point line states (the banner states the MoE layer: hidden, experts, top-k, routing,
# dispatch mode and dtypes, preset, capacity): its tokens per rank, the routing seed, the expert-TP copies, the exact
# capacity factor (the banner's is %g), a routing trace's rows, whether they were recycled and its file's digest
# (their types: the point line's format, written by point_value_text and read back on import by point_value)
MOE_POINT_TYPES = {"tokens_per_rank": int, "seed": int, "expert_tp": int, "capacity_factor": float, "trace_rows": int,
                   "trace_recycled": bool, "trace_sha256": str}
MOE_POINT_KEYS = tuple(MOE_POINT_TYPES)
# moe_all_to_all metrics a row's point line states, in bytes (its algbw counts round_trip_bytes_max, not the size:
# collectives/moe_all_to_all.py), so an import derives algbw = round_trip_bytes_max / time exactly rather than keep the
# 2-decimal printed one; the combine bytes are the rest of the round trip (the size is the dispatch bytes)
MOE_POINT_METRICS = ("combine_bytes_max", "round_trip_bytes_max")
UNKNOWN = "unknown"   # a point value the text states in no form point_value reads (never a default)
POINT_PREFIX = "# commbench point: "  # before rows the nccl-tests columns cannot tell apart (read back on import)


def point_context(m: Measurement) -> str:
    """What a row's point is beyond nccl-tests' columns: its sub-groups (group_size, group_layout,
    num_groups) when not the whole world, its algorithm, and an MoE point's MOE_POINT_KEYS and MOE_POINT_METRICS;
    "" for a plain whole-world point."""
    parts = []
    if m.group_size != m.world_size or m.group_layout != "world":
        parts += [f"group_size={m.group_size}", f"group_layout={m.group_layout}", f"num_groups={m.num_groups}"]
    if m.params.get("algorithm"):
        parts.append(f"algorithm={m.params['algorithm']}")
    for key in MOE_POINT_KEYS:   # an MoE row's own parameters, beyond what the banner states for the whole run
        if key in m.params:
            parts.append(f"{key}={point_value_text(m.params[key])}")
    for key in MOE_POINT_METRICS:   # the bytes its algbw counts (an integer: exact)
        if isinstance(m.metrics.get(key), int) and not isinstance(m.metrics[key], bool):
            parts.append(f"{key}={m.metrics[key]}")
    return " ".join(parts)


def point_value_text(value) -> str:
    """A point line's value as point_value reads it back: a bool true / false, a float's repr (exact: the banner's
    capacity factor is %g), any other value as str."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def point_value(key: str, text: str):
    """A MOE_POINT_KEYS value read back from a point line (point_value_text's inverse), as the JSONL holds it; UNKNOWN
    for text it does not read (never a default: an unreadable trace_recycled is not False). The quoted 'true' /
    'false' commbench d27ed70..4097490 wrote for a bool (its repr taken of the whole value) reads as the bool meant."""
    if key == "seed" and text == "None":   # a trace's replay: no seed (moe/params.MoeParams.as_params)
        return None
    if MOE_POINT_TYPES.get(key) is bool:
        return {"true": True, "false": False, "'true'": True, "'false'": False}.get(text, UNKNOWN)
    if MOE_POINT_TYPES.get(key) is str:   # trace_sha256: hex digits
        return text if text and all(c in "0123456789abcdef" for c in text) else UNKNOWN
    try:
        return float(text) if MOE_POINT_TYPES.get(key) is float else int(text)
    except ValueError:
        return UNKNOWN


@dataclass(frozen=True, kw_only=True)
class TextCycle:
    """Where one -N cycle's nccl-tests text stands in the whole run's (it travels to the ranks in BenchConfig):
    which cycle of how many, and the footer's counts over the cycles printed before it (nccl-tests' errors[0],
    bw[0] and bw_count[0]), and the '# commbench point:' context their last row stands under."""

    cycle: int = 0
    num_cycles: int = 1
    num_error_cells: int = 0
    busbw_sum_gbps: float = 0.0
    num_busbw_cells: int = 0
    context: str = ""
    notes: tuple[str, ...] = ()  # the record notes printed so far ('# note:' lines), each printed once
    launch: str = ""   # an id the -N launch's cycles share (their headers' run_cycles.launch)

    def __post_init__(self) -> None:
        assert 0 <= self.cycle < self.num_cycles, (self.cycle, self.num_cycles)

    @property
    def first(self) -> bool:
        return self.cycle == 0

    @property
    def last(self) -> bool:
        return self.cycle == self.num_cycles - 1

    def with_cells(self, records: Iterable[Measurement], average: int = 1) -> "TextCycle":
        """The counts once `records` (the cells printed, both placements) are added."""
        cells = list(records)
        busbw = [numbers[2] for numbers in (cell_numbers(m, average) for m in cells) if numbers is not None]
        return replace(self, num_error_cells=self.num_error_cells + sum(1 for m in cells if m.num_wrong),
                       busbw_sum_gbps=self.busbw_sum_gbps + sum(busbw), num_busbw_cells=self.num_busbw_cells + len(busbw))

    def next_cycle(self) -> "TextCycle":
        return replace(self, cycle=self.cycle + 1)


def footer(records: Iterable[Measurement], collective: str, average: int = 1,
           before: TextCycle = TextCycle()) -> list[str]:
    """nccl-tests' footer over `records` and the cells of the cycles `before` them."""
    totals = before.with_cells(records, average)
    avg = totals.busbw_sum_gbps / totals.num_busbw_cells if totals.num_busbw_cells else 0.0
    errors = totals.num_error_cells
    return [f"# Out of bounds values : {errors} {'FAILED' if errors else 'OK'}",
            f"# Avg bus bandwidth    : {avg:g} ", "#", f"# Collective test concluded: {program_name(collective)}"]


def footer_statistic(average: int = 1) -> str:
    """What the footer's average busbw is computed from, for the formats that show it beside a table whose busbw
    column is at each point's median time (table, markdown): nccl-tests' figure, at its -a time."""
    return (f"nccl-tests' figure: busbw at the timed loop's time / iters, {NCCL_TESTS_AVERAGE_MODES[average]} over "
            f"ranks (-a {average}); the busbw column is at the median time")


PLANNED_PREFIX = "# planned points: "  # commbench's text: its run's planned_points (read back on import)


def planned_line(planned_points: int) -> str:
    """The comment under the banner stating the points its run planned (RunHeader.planned_points: one -N cycle's), so
    an import of the text says where a row is missing: the banner's sweep does not count them (sizes below nccl-tests'
    alignment measured once, sub-groups, a list of sizes its step stands in for)."""
    return (f"{PLANNED_PREFIX}{planned_points} (commbench: the points this run set out to measure, every row's cells "
            "together; a row missing below is a point lost)")


def stopped_line(reason: str) -> str:
    """The comment that ends the text of a run stopped before its footer: rows above it are whole sizes (a size
    whose in-place cell was not measured is left out, its out-of-place record is in the JSONL), and no footer
    follows (nccl-tests prints none for a run that did not conclude)."""
    return f"# stopped, no footer: {reason}; every row above is complete (a size cut short is only in the JSONL)"


def step_number(value: float) -> str:
    """The banner's step: an integer as nccl-tests' %ld prints it; a fractional -f factor (nccl-tests reads -f with
    strtol and has none) as given, 1.5, never a byte step the run did not use."""
    return str(int(value)) if float(value).is_integer() else f"{float(value):g}"


def size_step(sizes_bytes: Sequence[int]) -> tuple[int, str]:
    """nccl-tests' "step: %ld(%s)" from the sizes: the factor when they grow by one, else the bytes."""
    sizes = sorted(sizes_bytes)
    if len(sizes) < 2:
        return 1, "factor"
    ratio = sizes[1] / sizes[0]
    if ratio == int(ratio) and ratio > 1 and all(b == a * ratio for a, b in zip(sizes, sizes[1:])):
        return int(ratio), "factor"
    return sizes[1] - sizes[0], "bytes"
