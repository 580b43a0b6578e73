"""Rendering Measurements for people: a rich table (nccl-tests' classic text: nccl_tests_text.py).

Everything here reads records; nothing parses our own output.
"""

from __future__ import annotations

from typing import Callable, Sequence

from rich.console import Group
from rich.markup import escape
from rich.text import Text

from commbench.results.records import Measurement
from commbench.results.tables import Col, StdoutConsole, fitted_table
from commbench.units import format_size

def stdout_console(piped_width: int = 200) -> StdoutConsole:
    """The console for tables on stdout, as wide as COLUMNS, else the terminal, else `piped_width` when no
    terminal is attached (CI logs); tables are fitted to that width when printed (commbench.results.tables).

    Markup is off: strings print as they are (sweep names, gloo's "[/__w/pytorch/...]" errors);
    our own colours go through `styled` (and table cells, which commbench.results.tables reads as markup
    with every value escaped)."""
    return StdoutConsole(piped_width=piped_width, markup=False)


def styled(template: str, *values: object) -> Text:
    """Rich markup in our own `template` only; each `{}` gets a value inserted literally (escaped),
    e.g. styled("[green]done[/]: {}", summary)."""
    return Text.from_markup(template.format(*(escape(str(value)) for value in values)))




def stages_text(m: Measurement) -> str:
    return " · ".join(f"{name} {us:.0f}" if us >= 100 else f"{name} {us:.1f}" for name, us in m.stages_us_median.items())


def point_extra(m: Measurement) -> str:
    """What tells points of the same size apart: algorithm and sub-group layout ("" for a plain point)."""
    parts = [str(m.params["algorithm"])] if m.params.get("algorithm") else []
    if m.group_layout != "world":
        parts.append(f"g={m.group_size} {m.group_layout}")
    return " ".join(parts)


def record_label(m: Measurement) -> str:
    """What identifies a point to a person: its size (or MoE tokens), algorithm and sub-group layout."""
    tokens = m.params.get("tokens_per_rank")
    size = f"{tokens} tok/rank" if tokens is not None else format_size(m.size_bytes)
    return " ".join(part for part in (size, point_extra(m)) if part)


def is_moe(m: Measurement) -> bool:
    return m.params.get("tokens_per_rank") is not None


def moe_setup(params: dict) -> str:
    """The MoE layer a run measured, as a title fragment: what a preset switched on is spelled out."""
    if not params or params.get("hidden") is None:
        return ""
    text = (f"hidden {params['hidden']}, {params.get('num_experts')} experts, top-{params.get('top_k')}, "
            f"{params.get('routing')} routing{routing_seed(params)}, {params.get('dispatch_mode')} dispatch in "
            f"{params.get('dispatch_dtype')}, "
            f"combine in {params.get('combine_dtype')}")
    if params.get("capacity_factor") is not None:  # Megatron's drop-and-pad MoE; dropless goes unsaid, as before
        text += (f", capacity factor {params['capacity_factor']:g} ("
                 + ("padded to capacity" if params.get("pad_to_capacity") else "tokens over capacity dropped") + ")")
    return f"preset {params['preset']}: {text}" if params.get("preset") else text


def routing_seed(params: dict) -> str:
    """' (seed N)' where the routing draws from the seed (every routing but a trace's replay, moe/routing.route): runs
    of seed 0 and seed 1 had the same title though their sizes differed (probe PE); '' for a trace or no seed."""
    seed = params.get("seed")
    if seed is None or str(params.get("routing")).startswith("trace:"):
        return ""
    return f" (seed {seed})"


def measured_label(emulated) -> str:
    """What a run's figures are: measured, on commbench emulate's fabric where its header says so."""
    return "measured on an EMULATED fabric" if emulated else "measured"


def run_title(collective: str, world_size: int, params: dict, what: str = "measured", form: str = "") -> str:
    """'all_reduce (measured, 2 ranks, out-of-place)': `form` names the placement where the collective has two."""
    setup = moe_setup(params)
    return f"{collective} ({what}, {world_size} ranks{', ' + form if form else ''})" + (f"; {setup}" if setup else "")


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _wrong(m: Measurement) -> str:
    if m.status != "ok":
        return "[red]failed[/]"
    return "-" if m.num_wrong is None else (f"[bold red]{m.num_wrong}[/]" if m.num_wrong else "0")


def _plain_columns(records: Sequence[Measurement]) -> list[tuple[Col, Callable[[Measurement], str]]]:
    columns: list[tuple[Col, Callable[[Measurement], str]]] = []
    if any(point_extra(m) for m in records):
        columns.append((Col(name="point", numeric=False), lambda m: escape(point_extra(m))))
    columns += [(Col(name="size"), lambda m: format_size(m.size_bytes)),
                (Col(name="count", keep=1), lambda m: str(m.count)),
                (Col(name="type", numeric=False, keep=2), lambda m: escape(m.dtype))]
    if any(m.op for m in records):
        columns.append((Col(name="redop", numeric=False, keep=3), lambda m: escape(m.op or "-")))
    columns += [(Col(name="median (µs)"), lambda m: _num(m.time_us_median, ".2f")),
                (Col(name="p99|max (µs)", keep=4), tail_text),
                (Col(name="nccl-avg (µs)", keep=3), lambda m: _us(m.loop_time_us.get("avg"))),
                (Col(name="algbw (GB/s)", keep=5), lambda m: _num(m.algbw_gbps, ".3f")),
                (Col(name="busbw (GB/s)"), lambda m: _num(m.busbw_gbps, ".3f"))]
    if any(m.stages_us_median for m in records):
        columns.append((Col(name="stages (median µs)", numeric=False, keep=6), lambda m: escape(stages_text(m))))  # intra vs inter: kept longest
    return columns


def _metric(m: Measurement, key: str, fmt: str) -> str:
    value = m.metrics.get(key)
    return "-" if value is None else format(float(value), fmt)


def _received(m: Measurement) -> str:
    top, mean = m.metrics.get("tokens_received_max"), m.metrics.get("tokens_received_mean")
    return "-" if top is None or mean is None else f"{int(top)}/{float(mean):.0f}"


def dropped_text(m: Measurement) -> str:
    """The token copies an MoE point's expert capacity dropped (not sent) and their share of those routed, '35
    (27.3%)'; '' for a point without a capacity (dropless: nothing dropped). Every printed MoE row shows it beside
    its figures (tables, nccl-tests text, sweep progress): its size and imbalance are what is left after the drops."""
    dropped, fraction = m.metrics.get("dropped_tokens"), m.metrics.get("drop_fraction")
    if dropped is None:
        return ""
    return f"{int(dropped)} ({float(fraction):.1%})" if fraction is not None else str(int(dropped))


def dropped_line(m: Measurement) -> str:
    """dropped_text as a phrase of its own (nccl-tests text, sweep progress): 'dropped 35 token copies (27.3%) over
    expert capacity 16, not sent'; '' for a point without a capacity."""
    text = dropped_text(m)
    if not text:
        return ""
    count, _, share = text.partition(" ")
    capacity = m.metrics.get("capacity_tokens")
    return (f"dropped {count} token copies{' ' + share if share else ''} over expert capacity"
            + (f" {capacity}" if capacity is not None else "") + ", not sent")


def _moe_columns(records: Sequence[Measurement]) -> list[tuple[Col, Callable[[Measurement], str]]]:
    """MoE all-to-all: what MoE users read (imbalance, tokens received, dispatch and combine apart) and, where a
    point has an expert capacity, the token copies it dropped (dropped_text)."""
    columns: list[tuple[Col, Callable[[Measurement], str]]] = []
    if any(point_extra(m) for m in records):
        columns.append((Col(name="point", numeric=False), lambda m: escape(point_extra(m))))
    dropped = ([(Col(name="dropped tok (%)"), lambda m: dropped_text(m) or "-")]
               if any(dropped_text(m) for m in records) else [])
    return columns + [
        (Col(name="tok/rank"), lambda m: str(m.params["tokens_per_rank"])),
        (Col(name="size", keep=3), lambda m: format_size(m.size_bytes)),
        *dropped,
        (Col(name="imbalance"), lambda m: _metric(m, "imbalance_rank", ".2f")),
        (Col(name="recv tok max/mean", keep=4), _received),
        (Col(name="median (µs)"), lambda m: _num(m.time_us_median, ".1f")),
        (Col(name="p99|max (µs)", keep=2), tail_text),
        (Col(name="dispatch busbw (GB/s)"), lambda m: _metric(m, "dispatch_busbw_gbps", ".3f")),
        (Col(name="combine busbw (GB/s)"), lambda m: _metric(m, "combine_busbw_gbps", ".3f")),
        (Col(name="round-trip busbw (GB/s)", keep=1), lambda m: _num(m.busbw_gbps, ".3f")),
    ]


def _cells(m: Measurement, columns) -> list[str]:
    """A record's cells: a failed point shows only what names it (point, size, tokens per rank) and #wrong."""
    return [cell(m) if (m.status == "ok" or col.name in ("point", "size", "tok/rank", "#wrong")) else ""
            for col, cell in columns]


def moe_markdown_table(records: Sequence[Measurement]) -> list[str]:
    """MoE all-to-all points as a markdown table with the columns of the terminal's (_moe_columns): `bench
    --format markdown` printed the plain collectives' size/time columns, without tokens per rank, imbalance or
    dispatch and combine apart."""
    def pipe_safe(text: str) -> str:   # "p99|max" would end a markdown cell
        return text.replace("|", "\\|")

    columns = _moe_columns(records)
    lines = ["| " + " | ".join(pipe_safe(col.name) for col, _ in columns) + " | #wrong |",
             "|" + "---:|" * (len(columns) + 1)]
    for m in records:
        cells = _cells(m, columns)
        wrong = "failed" if m.status != "ok" else ("-" if m.num_wrong is None else str(m.num_wrong))
        lines.append("| " + " | ".join(pipe_safe(c) for c in cells + [wrong]) + " |")
    failed = [f"failed {record_label(m)}: {m.error or 'no error recorded'}" for m in records if m.status != "ok"]
    return lines + ([""] + failed if failed else [])


def measurement_table(title: str | None, records: Sequence[Measurement], width: int) -> Group:
    """The measured points of one collective, fitted to `width`: plain collectives as nccl-tests' columns
    (without the ones that say nothing: point when it repeats size, redop where there is none); MoE
    all-to-all by tokens per rank with imbalance and dispatch/combine bandwidth apart. Errors of failed
    points print under the table."""
    columns = _moe_columns(records) if records and all(is_moe(m) for m in records) else _plain_columns(records)
    columns.append((Col(name="#wrong"), _wrong))
    rows = [_cells(m, columns) for m in records]
    failed = [f"[red]failed[/] {escape(record_label(m))}: {escape(m.error or 'no error recorded')}"
              for m in records if m.status != "ok"]
    return fitted_table(title, [col for col, _ in columns], rows, width, caption="\n".join(failed) or None)


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def tail_text(m: Measurement) -> str:
    """The slow tail by name: p99 when there were enough iterations for one, else the max."""
    if m.time_us_p99 is not None:
        return f"p99 {m.time_us_p99:.2f}"
    return "-" if m.time_us_max is None else f"max {m.time_us_max:.2f}"
