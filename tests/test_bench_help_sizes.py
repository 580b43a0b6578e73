"""`bench --help` says what a size means per collective and how algbw / busbw are computed (probe P3, finding 1: the
help said nothing of it; a nccl-tests user could not tell from it whether -b is the total or the per-rank size). It
says what README's 'algbw = size / median time' paragraph says, in short."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app


def test_bench_help_states_the_size_convention_and_the_bandwidth_formulas():
    output = CliRunner().invoke(app, ["bench", "--help"], env={"COLUMNS": "300"}).output
    help_text = " ".join(output.replace("│", " ").split())
    for said in ("A size (-b/-e) means what nccl-tests means: the full output for all_gather, the full input for "
                 "reduce_scatter, the send buffer for all_to_all",
                 "algbw = size / time",
                 "all_reduce 2(n-1)/n, reduce_scatter / all_gather / all_to_all (n-1)/n, "
                 "sendrecv / broadcast / reduce 1",
                 "GB = 1e9 B"):
        assert said in help_text, said
