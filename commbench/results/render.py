"""Rendering Measurements for people: a rich table, and nccl-tests' classic fixed-width text.

Everything here reads records; nothing parses our own output.
"""

from __future__ import annotations

import sys
from typing import Iterable

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from commbench.results.records import NCCL_TESTS_AVERAGE_MODES, Measurement, RunHeader
from commbench.units import format_size

def stdout_console(piped_width: int = 160) -> Console:
    """The console for tables on stdout: the terminal's width, or `piped_width` when output is piped
    or captured (rich would otherwise assume 80 columns and cut numbers).

    Markup is off: strings print as they are (sweep names, gloo's "[/__w/pytorch/...]" errors);
    our own colours go through `styled`."""
    return Console(markup=False) if sys.stdout.isatty() else Console(width=piped_width, markup=False)


def styled(template: str, *values: object) -> Text:
    """Rich markup in our own `template` only; each `{}` gets a value inserted literally (escaped),
    e.g. styled("[green]done[/]: {}", summary)."""
    return Text.from_markup(template.format(*(escape(str(value)) for value in values)))


_NCCL_TYPE = {"float32": "float", "float16": "half", "float64": "double", "bfloat16": "bfloat16",
              "int8": "int8", "uint8": "uint8", "int32": "int32", "int64": "int64"}


_NCCL_TEST_NAME = {"all_to_all": "alltoall"}  # nccl-tests' binary names where they differ from ours
_LEFT = ("point", "type", "redop", "stages (median µs)")


def measurement_table(title: str, *, staged: bool = False) -> Table:
    """Columns of a measured sweep; `staged` adds the per-stage medians (MoE, hierarchical RS)."""
    table = Table(title=title, title_justify="left")
    names = ["point", "size", "count", "type", "redop", "median (µs)", "p99|max (µs)", "nccl-avg (µs)", "algbw (GB/s)",
             "busbw (GB/s)"]
    names += ["stages (median µs)"] if staged else []
    for name in names + ["#wrong"]:
        table.add_column(name, justify="left" if name in _LEFT else "right", no_wrap=True)
    return table


def stages_text(m: Measurement) -> str:
    return " · ".join(f"{name} {us:.0f}" if us >= 100 else f"{name} {us:.1f}" for name, us in m.stages_us_median.items())


def record_label(m: Measurement) -> str:
    """What identifies a point to a person: its size (or MoE tokens), algorithm and sub-group layout."""
    tokens = m.params.get("tokens_per_rank")
    parts = [f"{tokens} tok/rank" if tokens is not None else format_size(m.size_bytes)]
    if m.params.get("algorithm"):
        parts.append(str(m.params["algorithm"]))
    if m.group_layout != "world":
        parts.append(f"g={m.group_size} {m.group_layout}")
    return " ".join(parts)


def add_measurement_row(table: Table, m: Measurement, *, staged: bool = False) -> None:
    extra = [stages_text(m)] if staged else []
    label = record_label(m)
    if m.status != "ok":
        table.add_row(label, format_size(m.size_bytes), "-", m.dtype, m.op or "-", styled("[red]failed[/]"), "", "", "", "",
                      *([""] if staged else []), Text((m.error or "")[:60], style="red"))
        return
    wrong = "-" if m.num_wrong is None else (Text(str(m.num_wrong), style="bold red") if m.num_wrong else "0")
    table.add_row(label, format_size(m.size_bytes), str(m.count), m.dtype, m.op or "-", _us(m.time_us_median),
                  tail_text(m), _us(m.loop_time_us.get("avg")), f"{m.algbw_gbps:.3f}", f"{m.busbw_gbps:.3f}", *extra, wrong)


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def tail_text(m: Measurement) -> str:
    """The slow tail by name: p99 when there were enough iterations for one, else the max."""
    if m.time_us_p99 is not None:
        return f"p99 {m.time_us_p99:.2f}"
    return "-" if m.time_us_max is None else f"max {m.time_us_max:.2f}"


def nccl_tests_banner(header: RunHeader, collective: str, *, sizes_bytes: tuple[int, ...], iters: int, warmup_iters: int,
                      check: bool, cuda_graph: bool, average: int) -> list[str]:
    """nccl-tests' banner (src/common.cu run()): one process per rank, so nThread 1 nGpus 1 and one
    `#  Rank` line per rank (what a reader counts for the world size); warmup iters before iters."""
    sizes = sorted(sizes_bytes)
    step = "1(factor)"
    if len(sizes) > 1:
        ratio = sizes[1] / sizes[0]
        step = f"{ratio:g}(factor)" if ratio == int(ratio) and ratio > 1 else f"{sizes[1] - sizes[0]}(bytes)"
    mode = NCCL_TESTS_AVERAGE_MODES[average]
    lines = [f"# Collective test starting: {_NCCL_TEST_NAME.get(collective, collective)}_perf",
             f"# nThread 1 nGpus 1 minBytes {sizes[0]} maxBytes {sizes[-1]} step: {step} warmup iters: {warmup_iters} "
             f"iters: {iters} agg iters: 1 validation: {int(check)} graph: {int(cuda_graph)}",
             "#", "# Using devices"]
    for rank, (host, device) in enumerate(zip(header.hostnames, header.devices)):
        lines.append(f"#  Rank {rank:2d} Group  0 Pid {0:6d} on {host:>10} device {0:2d} [0x00] {device}")
    lines += ["#", f"# time: nccl-tests' time, the timed loop's time / iters, {mode} over ranks (-a {average}); "
                   "algbw/busbw from it. The per-iteration median is time_us_median in the JSONL.", "#"]
    return lines


def nccl_tests_header(in_place: bool) -> list[str]:
    """Column header of nccl-tests' *_perf output (out-of-place group, then in-place group)."""
    del in_place
    return [
        "#                                                              out-of-place                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ",
    ]


def nccl_tests_row(m: Measurement, average: int = 1) -> str:
    """One row in nccl-tests' layout, with nccl-tests' time (loop time / iters, reduced over ranks as
    -a `average`) and the bandwidths from it. One placement per run: the other group reads N/A."""
    root = m.params.get("root", -1)
    head = f"{m.size_bytes:>12} {m.count:>13} {_NCCL_TYPE.get(m.dtype, m.dtype):>9} {m.op or 'none':>7} {root:>7}"
    absent = f"{'N/A':>8} {'N/A':>7} {'N/A':>7} {'N/A':>6}"
    time_us = m.loop_time_us.get(NCCL_TESTS_AVERAGE_MODES[average])
    if m.status != "ok" or not time_us:
        measured = absent
    else:
        wrong = "N/A" if m.num_wrong is None else str(m.num_wrong)
        # algbw scales inversely with the time: the record's algbw is at its median
        scale = (m.time_us_median / time_us) if m.time_us_median else 1.0
        measured = f"{time_us:>8.2f} {m.algbw_gbps * scale:>7.2f} {m.busbw_gbps * scale:>7.2f} {wrong:>6}"
    return f"{head}  {absent}  {measured}" if m.in_place else f"{head}  {measured}  {absent}"


def nccl_tests_footer(rows: Iterable[Measurement], average: int = 1) -> list[str]:
    ok = [m for m in rows if m.status == "ok"]
    wrong = sum(m.num_wrong or 0 for m in ok)
    mode = NCCL_TESTS_AVERAGE_MODES[average]
    busbw = [m.busbw_gbps * ((m.time_us_median / m.loop_time_us[mode]) if m.time_us_median else 1.0)
             for m in ok if m.loop_time_us.get(mode)]
    avg = sum(busbw) / len(busbw) if busbw else 0.0
    return [f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}",
            f"# Avg bus bandwidth    : {avg:g} ", "#"]
