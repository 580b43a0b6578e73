"""A BASE cut short (its header plans more points than it holds) or with an unreadable line narrowed the gate
without a word: NEW's points beyond BASE's cut were "only in NEW (not judged)", so a x10 regression there passed
(exit 0). compare now refuses such a BASE (exit 2, one line) unless --allow-cut-short, which judges on the points
BASE holds and says so in the pass line and in --json (base_incomplete)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from tests.test_compare import as_collective, header_for, record, write
from tests.test_compare_runs import run_cli

SIZES = (1024, 4096, 16384, 65536)
# all_reduce's points first, then all_gather's: a BASE cut after the first half holds no all_gather point
POINTS = [("all_reduce", size) for size in SIZES] + [("all_gather", size) for size in SIZES]


def _run(run_id, points, seed, *, slower=1.0, planned=len(POINTS)):
    """A sweep's run of `points` (all_gather's `slower` times slower), its header planning `planned` points."""
    rng = np.random.default_rng(seed)
    records = [as_collective(record(size, 50 * (slower if name == "all_gather" else 1)
                                    * np.exp(rng.normal(0, 0.01, 30)), run_id=run_id), name)
               for name, size in points]
    header = dataclasses.replace(header_for(records[0]), sweep_identity="s1", planned_points=planned,
                                 argv=["commbench", "sweep", "s.toml"])
    return [header, *records]


def _new(tmp_path):
    return write(tmp_path / "new.jsonl", _run("n", POINTS, 9, slower=10.0))


def _base(run_id, points, seed, planned=len(POINTS)):
    return _run(run_id, points, seed, planned=planned)


def test_a_base_cut_short_is_refused_in_one_line_and_allowed_only_when_said(tmp_path):
    base = write(tmp_path / "base.jsonl", _base("b", POINTS[:4], 1))
    new = _new(tmp_path)
    whole = run_cli(write(tmp_path / "whole.jsonl", _base("w", POINTS, 1)), new)
    assert whole.exit_code == 1, whole.output   # the x10 is seen against a whole BASE
    result = run_cli(base, new)
    assert result.exit_code == 2, result.output
    line = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert len(line) == 1 and "base file" in line[0] and "cut short" in line[0] and "--allow-cut-short" in line[0]
    allowed = run_cli(base, new, "--allow-cut-short")
    assert allowed.exit_code == 0, allowed.output
    assert "the base is cut short or has unreadable lines" in " ".join(allowed.output.split())
    document = json.loads(run_cli(base, new, "--allow-cut-short", "--json").stdout)
    assert document["passed"] and len(document["base_incomplete"]) == 1
    assert "cut short" in document["base_incomplete"][0]


def test_a_base_with_a_torn_line_is_refused(tmp_path):
    path = tmp_path / "base.jsonl"
    write(path, _base("b", POINTS, 2, planned=None))   # no plan recorded: only the torn line tells
    with open(path, "a") as f:
        f.write('{"record_type": "measurement", "run_id": "b", "collec')
    result = run_cli(str(path), _new(tmp_path), "--max-regression", "5%")
    assert result.exit_code == 2 and "unreadable line" in result.output, result.output
    document = json.loads(run_cli(str(path), _new(tmp_path), "--allow-cut-short", "--json").stdout)
    assert any("unreadable" in x for x in document["base_incomplete"])


def test_a_resume_stopped_before_its_first_point_is_judged_as_part_of_the_run_it_continues(tmp_path):
    """Probe AC F6: a `sweep --resume` interrupted before its first point leaves a header and no measurement, with the
    sweep's identity. README: a run that continues an earlier run of its file (the same sweep identity, none of that
    run's points) counts as that run; compare called it a run of its own with every point of BASE missing, so
    --allow-cut-short did not judge the points the cut run holds (--allow-missing was needed too)."""
    base = write(tmp_path / "base.jsonl", _base("b", POINTS, 1))
    cut = _run("n", POINTS[:4], 9)
    stopped = dataclasses.replace(cut[0], run_id="resumed")   # its header only: stopped before its first point
    new = write(tmp_path / "new.jsonl", cut + [stopped])
    refused = run_cli(base, new)
    assert refused.exit_code == 1 and "cut short" in refused.output, refused.output
    assert "no measurement" not in refused.output, refused.output
    allowed = run_cli(base, new, "--allow-cut-short")
    assert allowed.exit_code == 0, allowed.output
    document = json.loads(run_cli(base, new, "--allow-cut-short", "--json").stdout)
    assert document["passed"] and document["empty_runs"] == [] and len(document["cut_short"]) == 1
    # a launch of another sweep, or a bench run, that stopped before its first point is still a run of its own
    other = write(tmp_path / "other.jsonl", cut + [dataclasses.replace(stopped, sweep_identity="s2")])
    assert "no measurement" in run_cli(base, other, "--allow-cut-short").output
