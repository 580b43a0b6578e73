"""What rank 0 shows while a bench job runs: a live rich table with a progress bar, or nccl-tests text."""

from __future__ import annotations

import sys

from rich.console import Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from commbench.moe.params import DEFAULTS as MOE_DEFAULTS
from commbench.moe.presets import preset_params
from commbench.results.render import (measurement_table, nccl_tests_banner, nccl_tests_footer, nccl_tests_header,
                                      nccl_tests_row, run_title, stdout_console, styled)
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
        if self.format == "markdown":  # printed whole at the end, to paste (a progress line goes to stderr)
            self.intro, self.live = intro, None
            return
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
        params = config.params
        if "tokens_per_rank" in params:  # MoE: spell out what the defaults and the preset resolve to
            params = {**MOE_DEFAULTS, **(preset_params(params["preset"]) if params.get("preset") else {}),
                      **{k: v for k, v in params.items() if v is not None}}
        self.title = run_title(config.collective, header.world_size, params)
        self.progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                 TimeRemainingColumn(), console=self.console, transient=True)
        self.task = self.progress.add_task("measuring", total=num_points)
        self.live = Live(self._renderable(), console=self.console, refresh_per_second=4,
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
        if self.format == "markdown":
            return
        if self.format == "nccl-tests":
            self._print(nccl_tests_row(record, self.average))
            return
        self.progress.advance(self.task)
        self.live.update(self._renderable())  # fitted here, between points: never in the refresh thread while timing

    def _renderable(self) -> Group:
        """The table fitted to the terminal's width now, above the progress bar."""
        return Group(measurement_table(self.title, self.rows, self.console.width), self.progress)

    def close(self) -> None:
        if self.format == "markdown":
            from commbench.results.report import markdown_table
            avg = nccl_tests_footer(self.rows, self.average)[1].split(":", 1)[1].strip()
            lines = [f"**{self.intro}** (measured)", "", *markdown_table(self.rows), "",
                     f"Avg bus bandwidth: {avg} GB/s (nccl-tests' figure, measured)"]
            self._print("\n".join(lines))
            return
        if self.format == "nccl-tests":
            for line in nccl_tests_footer(self.rows, self.average):
                self._print(line)
            return
        self.progress.update(self.task, visible=False)
        self.live.stop()
        if not self.console.is_terminal:
            self.console.print()
        # nccl-tests' closing line, as its text mode prints it (busbw at nccl-tests' time, -a mode)
        self.console.print(nccl_tests_footer(self.rows, self.average)[1] + "(GB/s, measured)", highlight=False)
        wrong = sum(r.num_wrong or 0 for r in self.rows)
        if wrong:
            self.console.print(styled("[bold red]{} wrong element(s)[/]: the collective returned incorrect data", wrong))
