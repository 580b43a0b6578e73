"""What rank 0 shows while a bench job runs: a live rich table with a progress bar on a terminal;
without one (Slurm, CI logs, a pipe), or with --format nccl-tests, nccl-tests' text: one row per size
once its placements are measured, flushed, and a heartbeat line while a point runs past HEARTBEAT_S.

With --format nccl-tests a -N cycle after the first continues the first's text (no banner, no table
header) and only the last prints the footer, over every cycle's cells (config.text_cycle). A run
stopped by a signal prints no half row and no footer: the launcher ends the text with
nccl_tests_text.stopped_line."""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time

from rich.console import Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from collectives import get_collective
from commbench.moe.params import DEFAULT_TOKENS_PER_RANK as MOE_DEFAULT_TOKENS, DEFAULTS as MOE_DEFAULTS
from commbench.moe.presets import preset_params
from commbench.results import nccl_tests_text as text
from commbench.results.records import NCCL_TESTS_AVERAGE_MODES, Measurement, RunHeader
from commbench.results.render import (dropped_line, is_moe, measured_label, measurement_table, moe_markdown_table, moe_setup,
                                      run_title, stdout_console, styled)

HEARTBEAT_S = float(os.environ.get("COMMBENCH_HEARTBEAT_S", "30"))  # the env var is for tests


class Heartbeat:
    """Prints '# still measuring <point>: <s> s' every `period_s` while one point runs (a daemon thread
    that sleeps between beats: it takes no time from the timed loop)."""

    def __init__(self, emit, period_s: float) -> None:
        self.emit, self.period_s = emit, period_s
        self.label: str | None = None
        self.started = 0.0
        self.wake = threading.Event()
        self.stopped = False
        self.thread = threading.Thread(target=self._run, name="commbench-heartbeat", daemon=True)
        self.thread.start()

    def point(self, label: str | None) -> None:
        self.label, self.started = label, time.monotonic()
        self.wake.set()

    def _run(self) -> None:
        while not self.stopped:
            label, started = self.label, self.started
            if label is None:
                self.wake.wait()
                self.wake.clear()
                continue
            elapsed = time.monotonic() - started
            beats = int(elapsed // self.period_s)
            next_beat = started + (beats + 1) * self.period_s
            if self.wake.wait(max(0.0, next_beat - time.monotonic())):
                self.wake.clear()
                continue
            if self.label == label and self.started == started and not self.stopped:
                self.emit(f"# still measuring {label}: {time.monotonic() - started:.0f} s")

    def stop(self) -> None:
        self.stopped = True
        self.wake.set()


class BenchView:
    def __init__(self, config, header: RunHeader, num_points: int, *, forms_per_size: int = 1) -> None:
        self.format = config.output_format
        self.average = config.average
        self.collective = config.collective
        self.cycle: text.TextCycle = config.text_cycle if self.format == "nccl-tests" else text.TextCycle()
        self.rows: list[Measurement] = []
        self.pending: list[Measurement] = []  # one size's placements until its row is complete
        self.context = self.cycle.context  # the '# commbench point:' line the rows printed last stand under
        self.forms_per_size = forms_per_size
        self.console = stdout_console()
        self.lock = threading.Lock()
        self.text_rows = self.format == "nccl-tests" or (self.format != "markdown" and not self.console.is_terminal)
        # record notes already on the screen: the header's (printed below, but for markdown) and, for a -N cycle of
        # nccl-tests' text, those an earlier cycle printed
        self.shown_notes = dict.fromkeys([*self.cycle.notes, *(header.notes if self.format != "markdown" else ())])
        self.form = measured_form(config)
        hosts = sorted(set(header.hostnames))
        intro = (f"commbench {header.commbench_version}: {config.collective} on {header.backend}, "
                 + (f"{self.form}, " if self.form else "") + f"{header.world_size} rank(s) on {len(hosts)} host(s) ({', '.join(hosts[:4])}"
                 f"{'...' if len(hosts) > 4 else ''}), devices: {header.devices[0]}")
        # what every figure of this run is: measured, on commbench emulate's fabric where the header says so
        self.what = measured_label(header.emulated)
        if header.emulated:  # the text `commbench import nccl-tests` reads back into the header (results/emulated.py)
            from commbench.results.emulated import fabric_text

            intro += f"; {fabric_text(header.emulated)}"
        self.live = None
        self.heartbeat = Heartbeat(self._print, HEARTBEAT_S) if self.text_rows else None
        if self.format == "markdown":  # printed whole at the end, to paste
            for note in header.notes:   # the run's notes (a --tokens value given twice...) on stderr, as `done` is
                sys.stderr.write(f"note: {note}\n")
            sys.stderr.flush()
            self.intro = intro
            self.title = run_title(config.collective, header.world_size, moe_resolved(config.params), self.what,
                                   self.form)
            return
        if self.format == "nccl-tests":
            if not self.cycle.first:  # -N: this cycle's rows continue the table the first cycle started
                return
            self._print(f"# {intro}")
            sizes = config.sizes_bytes or (0,)
            low, high = config.size_bounds or (min(sizes), max(sizes))
            iters, launches = banner_iters(config)
            for line in text.banner(header, config.collective, min_bytes=low, max_bytes=high,
                                    step=config.size_step or text.size_step(config.sizes_bytes), iters=iters,
                                    warmup_iters=config.loop.warmup_iters, check=config.loop.check,
                                    graph_launches=launches, commbench_version=header.commbench_version,
                                    agg_iters=config.loop.agg_iters, blocking=config.loop.blocking,
                                    swept=moe_swept(config.params)):
                self._print(line)
            if header.planned_points is not None:
                self._print(text.planned_line(header.planned_points))
            for note in header.notes:
                self._print(f"# note: {note}")
            self._print_algbw_note(config)
            self._print(self._time_line(config))
            for line in text.table_header():
                self._print(line)
            return
        self.console.print(intro, highlight=False)
        for note in header.notes:
            self.console.print(styled("[yellow]note:[/] {}", note), highlight=False)
        self.console.print(f"results → {config.output_path}", highlight=False)
        self.title = run_title(config.collective, header.world_size, moe_resolved(config.params), self.what, self.form)
        if self.text_rows:  # no terminal: nccl-tests' rows as points finish, the table at the end
            self._print_algbw_note(config)
            self._print(self._time_line(config, table_after=True))
            for line in text.table_header():
                self._print(line)
            return
        self.progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                 TimeRemainingColumn(), console=self.console, transient=True)
        self.task = self.progress.add_task("measuring", total=num_points)
        self.live = Live(self._renderable(), console=self.console, refresh_per_second=4,
                         transient=False)
        self.live.start()

    def _print(self, line: str) -> None:
        with self.lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def starting(self, label: str) -> None:
        if self.heartbeat:
            self.heartbeat.point(label)
        if self.live:
            self.progress.update(self.task, description=f"measuring {label}")

    def add(self, record: Measurement) -> None:
        self.rows.append(record)
        if self.heartbeat:
            self.heartbeat.point(None)
        if self.format == "markdown":
            return
        if self.text_rows:
            self.pending.append(record)
            if len(self.pending) >= self.forms_per_size:
                self._flush_row()
            return
        self.progress.advance(self.task)
        self.live.update(self._renderable())  # fitted here, between points: never in the refresh thread while timing

    def _print_algbw_note(self, config) -> None:
        """Above nccl-tests' rows: what their algbw counts where it is not size / time (Collective.algbw_note)."""
        note = get_collective(config.collective).algbw_note
        if note:
            self._print(f"# note: {note}")

    @staticmethod
    def _time_line(config, table_after: bool = False) -> str:
        """What the streamed rows' time is (nccl-tests' statistic, not the median the tables lead with)."""
        mode = NCCL_TESTS_AVERAGE_MODES[config.average]
        median = ("the table at the end gives the per-iteration median beside it" if table_after else
                  "the per-iteration median is time_us_median in the JSONL")
        return (f"# time: nccl-tests' time, the timed loop's time / iters, {mode} over ranks (-a {config.average}); "
                f"algbw/busbw from it; {median}.")

    def _flush_row(self) -> None:
        if self.pending:
            out_of_place = next((m for m in self.pending if not m.in_place), None)
            in_place = next((m for m in self.pending if m.in_place), None)
            context = text.point_context(self.pending[0])
            if context != self.context:
                self._print(text.POINT_PREFIX + (context or "group_layout=world"))
                self.context = context
            if self.format == "nccl-tests":  # before the first row it concerns: a '#' line the import skips
                for note in self.new_notes(self.pending):
                    self._print(f"# note: {note}")
            if (dropped := dropped_line(self.pending[0])):   # an MoE row with a capacity: what it did not send
                self._print(f"# {dropped}")
            self._print(text.row(out_of_place, in_place, self.average))
            self.pending = []

    def new_notes(self, records) -> list[str]:
        """The notes of `records` (an out-of-place all_reduce's time includes a copy; gloo's reduce_scatter is a
        full all-reduce) not yet shown, each once, marked shown."""
        fresh = [note for note in dict.fromkeys(n for m in records for n in m.notes) if note not in self.shown_notes]
        self.shown_notes.update(dict.fromkeys(fresh))
        return fresh

    def _renderable(self) -> Group:
        """The table fitted to the terminal's width now, above the progress bar."""
        return Group(measurement_table(self.title, self.rows, self.console.width), self.progress)

    def carried(self) -> text.TextCycle:
        """What the next -N cycle's text continues from: this cycle's cells added to the footer's counts, the
        context its last row stands under."""
        return dataclasses.replace(self.cycle.with_cells(self.rows, self.average), context=self.context,
                                   notes=tuple(self.shown_notes))

    def close(self, *, stopped: bool = False, last: bool = True) -> None:
        """End the view. `stopped`: the run was stopped by a signal: a size measured only in part is not
        printed and nccl-tests' footer is not either (nothing concluded; the launcher ends the text).
        `last`: no -N cycle follows (nccl-tests prints its footer once, after the last cycle)."""
        if self.heartbeat:
            self.heartbeat.stop()
        footer = text.footer(self.rows, self.collective, self.average, self.cycle)
        if self.format == "markdown":
            from commbench.results.report import markdown_table
            avg = footer[1].split(":", 1)[1].strip()
            if self.rows and all(is_moe(m) for m in self.rows):   # the MoE layer measured and its own columns
                table = [self.title, "", *moe_markdown_table(self.rows)]
            else:
                table = markdown_table(self.rows)
            notes = [f"Note: {note}" for note in self.new_notes(self.rows)]   # as `report` writes a curve's notes
            lines = [f"**{self.intro}** ({self.what})", "", *table, "", *notes, *([""] if notes else []),
                     f"Avg bus bandwidth: {avg} GB/s ({self.what}; {text.footer_statistic(self.average)})"]
            self._print("\n".join(lines))
            return
        if self.text_rows and not stopped:
            self._flush_row()
        if self.format == "nccl-tests":
            if last and not stopped:
                for line in footer:
                    self._print(line)
            return
        if self.live:
            self.progress.update(self.task, visible=False)
            self.live.stop()
        else:
            self.console.print(measurement_table(self.title, self.rows, self.console.width))
        for note in self.new_notes(self.rows):
            self.console.print(styled("[yellow]note:[/] {}", note), highlight=False)
        if not self.console.is_terminal:
            self.console.print()
        # nccl-tests' closing line, as its text mode prints it (busbw at nccl-tests' time, -a mode), saying so: the
        # table's busbw column is at the median
        self.console.print(footer[1] + f"(GB/s, {self.what}; {text.footer_statistic(self.average)})", highlight=False)
        wrong = sum(r.num_wrong or 0 for r in self.rows)
        if wrong:
            self.console.print(styled("[bold red]{} wrong element(s)[/]: the collective returned incorrect data", wrong))


def measured_form(config) -> str:
    """'in-place' or 'out-of-place': the one form a job of a collective with both measures (all_reduce, broadcast
    and reduce in place unless --out-of-place; reduce_scatter and all_gather out of place unless --in-place); ''
    where the collective has one form, or where nccl-tests' format measures both (its columns name them)."""
    mode = get_collective(config.collective).in_place_mode
    if mode == "never" or config.output_format == "nccl-tests":
        return ""
    if mode == "both":
        return "out-of-place" if config.out_of_place and not config.in_place else "in-place"
    return "in-place" if config.in_place else "out-of-place"


def moe_resolved(params: dict) -> dict:
    """A bench job's params, for MoE spelled out as the defaults and the preset resolve them (the rest as given)."""
    if "tokens_per_rank" not in params:
        return params
    return {**MOE_DEFAULTS, **(preset_params(params["preset"]) if params.get("preset") else {}),
            **{k: v for k, v in params.items() if v is not None}}


def moe_swept(params: dict) -> str | None:
    """What an MoE job measures, for nccl-tests' banner in place of the size range it does not use (the table
    format's title says the same): its tokens per rank and MoE layer, and what a row's size is; None otherwise."""
    if "tokens_per_rank" not in params:
        return None
    tokens = params.get("tokens_per_rank") or MOE_DEFAULT_TOKENS
    tokens = [tokens] if isinstance(tokens, int) else tokens
    return (f"tokens per rank: {','.join(str(t) for t in tokens)} ({moe_setup(moe_resolved(params))}; size: the "
            "busiest rank's dispatch bytes)")


def banner_iters(config) -> tuple[int, int]:
    """(iters, graph launches) as nccl-tests' banner states them: -G N times N launches of the -n iterations,
    which commbench's loop runs as n x N replays (config.loop.iters); --cuda-graph alone is one launch."""
    launches = config.graph_launches or int(config.loop.cuda_graph)
    if config.graph_launches:
        return config.loop.iters // config.graph_launches, launches
    return config.loop.iters, launches
