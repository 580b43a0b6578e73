"""Strings from users and libraries print as they are: rich markup never parses them (item 2 of issue 17)."""

from __future__ import annotations

import io

from rich.console import Console
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.records import Measurement
from commbench.results.render import stdout_console, styled
from commbench.sweep.view import SweepView

GLOO_ERROR = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
              "Timed out waiting 3000ms for recv operation to complete")


def failed_record(error: str) -> Measurement:
    return Measurement(run_id="r", collective="all_reduce", backend="gloo", size_bytes=8, count=0, dtype="float32",
                       op="sum", in_place=False, world_size=2, group_size=2, iters=5, warmup_iters=1,
                       status="failed", error=error)


def terminal_console(buffer: io.StringIO) -> Console:
    console = stdout_console()
    return Console(file=buffer, force_terminal=True, width=200, markup=console._markup)


def test_sweep_live_view_prints_a_markup_like_error_and_label():
    buffer = io.StringIO()
    view = SweepView(title="sweep [/red] x", num_points=2, num_skipped=0, output_path="o.jsonl",
                     console=terminal_console(buffer))
    assert view.progress is not None  # the live progress bar is on
    view.starting("tp [/red] pairs 8 B")
    view.finished("tp [/red] pairs 8 B", failed_record(GLOO_ERROR))
    view.close()
    text = buffer.getvalue()
    assert "[/__w/pytorch/pytorch/third_party/gloo" in text and "tp [/red] pairs 8 B" in text
    assert "sweep [/red] x" in text


def test_styled_keeps_values_literal():
    assert styled("[green]done[/]: {}", "[/red] [bold]x").plain == "done: [/red] [bold]x"


def test_sweep_dry_run_with_a_markup_like_entry_name(tmp_path):
    sweep = tmp_path / "m.toml"
    sweep.write_text('[sweep]\nname = "x [/b]"\ndescription = "[/i] desc"\n[[run]]\nname = "tp [/red] pairs"\n'
                     'collective = "all_reduce"\nsizes = [8]\n')
    result = CliRunner().invoke(app, ["sweep", str(sweep), "--dry-run", "--world-size", "2"])
    assert result.exit_code == 0, result.output
    assert "tp [/red] pairs" in result.output and "[/i] desc" in result.output


def test_error_lines_print_markup_like_values_literally(tmp_path):
    result = CliRunner().invoke(app, ["bench", "all_reduce", "--dtype", "[/red]"])
    assert result.exit_code == 2
    assert "[/red]" in result.output and "Traceback" not in result.output


def test_bench_table_shows_a_failed_point_with_a_markup_like_error():
    from commbench.results.render import add_measurement_row, measurement_table

    buffer = io.StringIO()
    table = measurement_table("all_reduce (measured, 2 ranks)", staged=False)
    add_measurement_row(table, failed_record(GLOO_ERROR))
    terminal_console(buffer).print(table)
    assert "[/__w/pytorch" in buffer.getvalue()
