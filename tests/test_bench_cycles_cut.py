"""bench -N 3 cut at a cycle boundary (probe H, F7): each cycle's header planned only its own points, so a file
holding cycles 1-2 of 3 passed compare and report named nothing. Each cycle's header now records run_cycles (the
launch id its cycles share, this cycle, how many), and the cycles a launch lacks are cut short."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.records import read_records
from commbench.results.resumed import sweeps_cut_short

runner = CliRunner()


def test_a_bench_cut_between_cycles_is_cut_short(tmp_path):
    out = tmp_path / "n3.jsonl"
    result = runner.invoke(app, ["bench", "all_reduce", "--nproc", "1", "-b", "8", "-e", "64", "-f", "8", "-n", "2",
                                 "-w", "1", "-N", "3", "-O", str(out)])
    assert result.exit_code == 0, result.output
    lines = out.read_text().splitlines()
    headers = [json.loads(line) for line in lines if json.loads(line)["record_type"] == "header"]
    cycles = [h["run_cycles"] for h in headers]
    assert [c["cycle"] for c in cycles] == [1, 2, 3] and {c["cycles"] for c in cycles} == {3}
    assert len({c["launch"] for c in cycles}) == 1 and cycles[0]["launch"]
    assert sweeps_cut_short(read_records([str(out)])) == []   # whole: nothing said
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:len(lines) * 2 // 3]) + "\n")   # cycles 1 and 2 of 3, each whole
    said = sweeps_cut_short(read_records([str(cut)]))
    assert len(said) == 1 and "plans 3 cycle(s)" in said[0] and "cycle(s) 3 ran" in said[0], said
    base = tmp_path / "base.jsonl"
    assert runner.invoke(app, ["bench", "all_reduce", "--nproc", "1", "-b", "8", "-e", "64", "-f", "8", "-n", "2",
                               "-w", "1", "-O", str(base)]).exit_code == 0
    # BASE measured after NEW here, for brevity: --allow-stale (compare refuses a NEW older than BASE without it)
    compared = runner.invoke(app, ["compare", str(base), str(cut), "--allow-stale"])
    assert compared.exit_code == 1 and "cut short" in compared.output, compared.output


def test_older_cycle_headers_stay_readable(tmp_path):
    out = tmp_path / "old.jsonl"
    assert runner.invoke(app, ["bench", "all_reduce", "--nproc", "1", "-b", "8", "-e", "8", "-n", "2", "-w", "1",
                               "-N", "2", "-O", str(out)]).exit_code == 0
    old = [json.loads(line) for line in out.read_text().splitlines()]
    for record in old:
        record.pop("run_cycles", None)   # a file written before run_cycles
    out.write_text("".join(json.dumps(r) + "\n" for r in old[:2]))
    assert sweeps_cut_short(read_records([str(out)])) == []
    assert runner.invoke(app, ["report", str(out), "-O", str(tmp_path / "rep")]).exit_code == 0
