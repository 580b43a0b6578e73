"""Two separate cut-short launches of one sweep (its entries reordered, say, so their points are disjoint) concatenated
into one file read as one complete run: results/resumed.continued_run_ids took any later run of the same sweep
identity holding none of an earlier run's points for a `sweep --resume` of it, so `compare` passed the file (exit 0),
`report` said nothing was cut short, and with another host compare said 'run B resumes run A (sweep --resume)' of a
launch whose argv has no --resume (probe P3). A run now continues only the run its header says it resumed
(`resumes_run_id`, which `sweep --resume` records), or, in a header written before that field, where its argv holds
`--resume`."""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from commbench.results.records import RunHeader
from commbench.results.resumed import continued_run_ids, sweeps_cut_short
from tests.test_compare import header_for, record, write
from tests.test_compare_runs import _sweep_runs, run_cli

SIZES = (1024, 4096, 16384, 65536)


def _launch(run_id, sizes, seed, **header):
    rng = np.random.default_rng(seed)
    points = [record(size, 50 * np.exp(rng.normal(0, 0.01, 30)), run_id=run_id, point_key=f"p{size}") for size in sizes]
    first = dataclasses.replace(header_for(points[0]), sweep_identity="s1", planned_points=len(SIZES),
                                **{"argv": ["commbench", "sweep", "s.toml"], "resumes_run_id": "", **header})
    return [first, *points]


def test_two_launches_of_one_sweep_with_disjoint_points_stay_two_runs_cut_short(tmp_path):
    joined = _launch("a", SIZES[:2], 1) + _launch("b", SIZES[2:], 2)
    assert continued_run_ids(joined) == {}
    lines = sweeps_cut_short(joined)
    assert len(lines) == 2 and "(run a) holds 2 of the 4" in lines[0] and "(run b) holds 2 of the 4" in lines[1], lines
    base = write(tmp_path / "base.jsonl", _launch("base", SIZES, 3))
    result = run_cli(base, write(tmp_path / "joined.jsonl", joined), "--max-regression", "500%")
    assert result.exit_code == 1 and "cut short" in result.output, result.output
    # b resumed a run of its own file (not this one's a): still two runs here, and no 'b resumes a' note
    moved = _launch("a", SIZES[:2], 1) + _launch("b", SIZES[2:], 2, resumes_run_id="b0", hostnames=["other"] * 2)
    assert continued_run_ids(moved) == {}
    result = run_cli(base, write(tmp_path / "moved.jsonl", moved), "--max-regression", "500%")
    assert result.exit_code == 1 and "resumes run" not in result.output, result.output


def test_a_launch_whose_header_says_it_resumed_the_run_is_that_run():
    resumed = _launch("a", SIZES[:2], 1) + _launch("b", SIZES[2:], 2, resumes_run_id="a")
    assert continued_run_ids(resumed) == {"b": "a"} and sweeps_cut_short(resumed) == []
    # through a resume that died before its first point (a header, no measurement)
    died = _launch("d", SIZES, 5, resumes_run_id="a")[:1]
    chained = _launch("a", SIZES[:2], 1) + died + _launch("b", SIZES[2:], 2, resumes_run_id="d")
    assert continued_run_ids(chained) == {"b": "a"} and sweeps_cut_short(chained) == []


def test_headers_written_before_the_field_join_only_a_resume_by_its_argv():
    old = {"resumes_run_id": None}
    separate = _launch("a", SIZES[:2], 1, **old) + _launch("b", SIZES[2:], 2, **old)
    assert continued_run_ids(separate) == {} and len(sweeps_cut_short(separate)) == 2
    resumed = _launch("a", SIZES[:2], 1, **old) + _launch("b", SIZES[2:], 2, argv=["commbench", "sweep", "s.toml",
                                                                                    "--resume"], **old)
    assert continued_run_ids(resumed) == {"b": "a"} and sweeps_cut_short(resumed) == []


def test_sweep_resume_records_the_run_it_resumes(tmp_path):
    resumed = _sweep_runs(tmp_path, "resumed.jsonl", resume_after=2)
    headers = [row for row in map(json.loads, resumed.read_text().splitlines()) if row["record_type"] == "header"]
    assert [h["resumes_run_id"] for h in headers] == ["", headers[0]["run_id"]]
    again = _sweep_runs(tmp_path, "fresh.jsonl")
    assert [row["resumes_run_id"] for row in map(json.loads, again.read_text().splitlines())
            if row["record_type"] == "header"] == [""]
