"""A complete run and a cut-short run of one sweep appended into one file (two separate launches, not a resume: they
share the points both reached) are two runs, each held to its own plan. results/resumed._planned_groups pooled every
launch of a sweep identity and counted the union of their points, so the pair read as "every point held": the cut
run was not said cut short, compare named BASE's points "not planned" and --allow-missing passed it."""

from __future__ import annotations

import dataclasses

import numpy as np

from commbench.results.records import RunHeader
from commbench.results.resumed import runs_holding_their_plan, sweeps_cut_short
from tests.test_compare import header_for, record, write
from tests.test_compare_runs import run_cli

SIZES = (1024, 4096, 16384, 65536)


def _run(run_id, sizes, seed):
    rng = np.random.default_rng(seed)
    points = [record(size, 50 * np.exp(rng.normal(0, 0.01, 30)), run_id=run_id, point_key=f"p{size}") for size in sizes]
    header = dataclasses.replace(header_for(points[0]), sweep_identity="s1", planned_points=len(SIZES),
                                 argv=["commbench", "sweep", "s.toml"])
    return [header, *points]


def test_a_complete_run_and_a_cut_short_run_of_one_sweep_are_two_runs(tmp_path):
    records = _run("whole", SIZES, 1) + _run("cut", SIZES[:2], 2)
    lines = sweeps_cut_short(records)
    assert len(lines) == 1 and "(run cut) holds 2 of the 4 point(s)" in lines[0], lines
    assert set(runs_holding_their_plan(records)) == {"whole"}
    base = write(tmp_path / "base.jsonl", _run("b", SIZES, 3))
    new = write(tmp_path / "new.jsonl", records)
    result = run_cli(base, new, "--allow-missing", "--max-regression", "500%")
    assert result.exit_code == 1 and "cut short" in result.output and "not planned" not in result.output, result.output


def test_a_resumed_sweep_stays_one_run_and_a_launch_without_records_plans_nothing_of_its_own():
    resumed = _run("first", SIZES[:2], 4) + [dataclasses.replace(r, run_id="again", resumes_run_id="first")
                                             if isinstance(r, RunHeader) else dataclasses.replace(r, run_id="again")
                                             for r in _run("x", SIZES[2:], 5)]
    assert sweeps_cut_short(resumed) == [] and set(runs_holding_their_plan(resumed)) == {"first", "again"}
    died = _run("died", SIZES, 6)[:1] + _run("whole", SIZES, 7)
    assert sweeps_cut_short(died) == [] and set(runs_holding_their_plan(died)) == {"whole"}
    assert len(sweeps_cut_short(_run("died", SIZES, 6)[:1])) == 1


def test_points_written_before_their_header_count_for_its_run(tmp_path):
    # probe DK hb/hdr_last.jsonl: every measurement line before the header lines: "3 runs cut short, holds 0 of the
    # 8 points" although all were there (_planned_groups counted a point only after its run's header)
    runs = [_run(f"r{i}", SIZES, 10 + i) for i in range(2)]
    headers_last = [r for run in runs for r in run[1:]] + [run[0] for run in runs]
    assert sweeps_cut_short(headers_last) == [] and set(runs_holding_their_plan(headers_last)) == {"r0", "r1"}
    base = write(tmp_path / "base.jsonl", [r for run in runs for r in run])
    new = write(tmp_path / "new.jsonl", headers_last)
    result = run_cli(base, new, "--allow-same-run", "--max-regression", "500%")
    assert "cut short" not in result.output, result.output
