"""What rank 0 shows during a sweep: a rich progress bar (done/total, current point, ETA) on a
terminal; one line per finished point otherwise (CI logs)."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from commbench.results.records import Measurement
from commbench.results.render import dropped_line, measured_label, stdout_console, styled


def point_summary(record: Measurement, what: str = "measured") -> Text:
    if record.status != "ok":
        return styled("[red]failed[/]: {}", record.error)
    wrong = styled(", [bold red]{} wrong[/]", record.num_wrong) if record.num_wrong else ""
    dropped = dropped_line(record)   # an MoE point with an expert capacity: what it did not send
    return Text.assemble(f"{record.time_us_median:.1f} µs (median, {what}), busbw {record.busbw_gbps:.3f} GB/s"
                         + (f", {dropped}" if dropped else ""), wrong)


class SweepView:
    def __init__(self, *, title: str, num_points: int, num_skipped: int, output_path: str,
                 console: Console | None = None, emulated: bool = False) -> None:
        self.console = console or stdout_console()
        self.what = measured_label(emulated)  # commbench emulate's runs say so
        title += " (EMULATED fabric)" if emulated else ""
        self.num_points = num_points
        self.done = 0
        self.console.print(f"{title}: {num_points} point(s) to measure"
                           + (f", {num_skipped} already in {output_path} (skipped)" if num_skipped else "")
                           + f"; records → {output_path}", highlight=False)
        self.progress = None
        if self.console.is_terminal:
            self.progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                     console=self.console, transient=True)
            self.task = self.progress.add_task("starting", total=num_points)
            self.progress.start()

    def starting(self, label: str) -> None:
        if self.progress:
            self.progress.update(self.task, description=label)

    def finished(self, label: str, record: Measurement) -> None:
        self.done += 1
        line = Text.assemble(f"[{self.done}/{self.num_points}] {label}: ", point_summary(record, self.what))
        if self.progress:
            self.progress.advance(self.task)
            if record.status != "ok":
                self.progress.console.print(line, highlight=False)
        else:
            self.console.print(line, highlight=False, soft_wrap=True)

    def close(self) -> None:
        if self.progress:
            self.progress.stop()
