"""What rank 0 shows while a bench job runs: a live rich table with a progress bar, or nccl-tests text."""

from __future__ import annotations

import sys

from rich.console import Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from collectives import get_collective
from commbench.results.render import (styled, add_measurement_row, measurement_table, nccl_tests_banner, nccl_tests_footer,
                                      nccl_tests_header,
                                      nccl_tests_row, stdout_console)
from commbench.results.records import Measurement, RunHeader


class BenchView:
    def __init__(self, config, header: RunHeader, num_points: int) -> None:
        self.format = config.output_format
        self.average = config.average
        self.rows: list[Measurement] = []
        self.console = stdout_console()
        hosts = sorted(set(header.hostnames))
        intro = (f"commbench {header.commbench_version}: {config.collective} on {header.backend}, "
                 f"{header.world_size} rank(s) on {len(hosts)} host(s) ({', '.join(hosts[:4])}"
                 f"{'...' if len(hosts) > 4 else ''}), devices: {header.devices[0]}")
        if header.emulated:
            rate = header.emulated.get("scale_out_rate_bits_per_s")
            intro += (f"; EMULATED fabric: {header.emulated.get('num_racks')} racks joined at "
                      f"{rate / 1e9:g} Gbit/s" if rate else "; EMULATED fabric")
        if self.format == "nccl-tests":
            self._print(f"# {intro}")
            for line in nccl_tests_banner(header, config.collective, sizes_bytes=config.sizes_bytes, iters=config.loop.iters,
                                          warmup_iters=config.loop.warmup_iters, check=config.loop.check,
                                          cuda_graph=config.loop.cuda_graph, average=config.average):
                self._print(line)
            for note in header.notes:
                self._print(f"# note: {note}")
            for line in nccl_tests_header(config.in_place):
                self._print(line)
            self.live = None
            return
        self.console.print(intro, highlight=False)
        for note in header.notes:
            self.console.print(styled("[yellow]note:[/] {}", note), highlight=False)
        self.console.print(f"results → {config.output_path}", highlight=False)
        self.staged = get_collective(config.collective).multi_stage
        self.table = measurement_table(f"{config.collective} (measured, {header.world_size} ranks)", staged=self.staged)
        self.progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                 TimeRemainingColumn(), console=self.console, transient=True)
        self.task = self.progress.add_task("measuring", total=num_points)
        self.live = Live(Group(self.table, self.progress), console=self.console, refresh_per_second=4,
                         transient=False)
        self.live.start()

    def _print(self, line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def starting(self, label: str) -> None:
        if self.live:
            self.progress.update(self.task, description=f"measuring {label}")

    def add(self, record: Measurement) -> None:
        self.rows.append(record)
        if self.format == "nccl-tests":
            self._print(nccl_tests_row(record, self.average))
            return
        add_measurement_row(self.table, record, staged=self.staged)
        self.progress.advance(self.task)

    def close(self) -> None:
        if self.format == "nccl-tests":
            for line in nccl_tests_footer(self.rows, self.average):
                self._print(line)
            return
        self.progress.update(self.task, visible=False)
        self.live.stop()
        if not self.console.is_terminal:
            self.console.print()
        wrong = sum(r.num_wrong or 0 for r in self.rows)
        if wrong:
            self.console.print(styled("[bold red]{} wrong element(s)[/]: the collective returned incorrect data", wrong))
