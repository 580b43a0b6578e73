"""Probe P3: the readers checked algbw = size / time but not busbw: a record whose busbw_gbps was edited (all_reduce
on 2 ranks: factor 1), or whose MoE figures were (dispatch_busbw_gbps, the round trip's algbw), was printed by `report`
as measured, and a record whose world_size is not its run header's (4 in a 2-rank run) was drawn as its own n=4 curve.
Every reader now refuses such a line, as it refuses an algbw that is not size / time (record_checks)."""

from __future__ import annotations

import dataclasses

import numpy as np
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.records import Measurement, iter_records
from tests.test_compare import header_for, record, write


def _read(path):
    bad: list = []
    kept = list(iter_records(path, on_bad_line=lambda n, why: bad.append((n, why))))
    return kept, bad


def _points(n=2):
    rng = np.random.default_rng(1)
    points = [record(size, 50 * np.exp(rng.normal(0, 0.01, 30)), run_id="r") for size in (1024, 4096, 16384)]
    factor = 2 * (n - 1) / n
    return [dataclasses.replace(p, world_size=n, group_size=n, busbw_gbps=p.algbw_gbps * factor) for p in points]


def test_an_edited_busbw_is_refused_by_every_reader(tmp_path):
    points = _points()
    path = write(tmp_path / "r.jsonl", [header_for(points[0]), points[0],
                                        dataclasses.replace(points[1], busbw_gbps=points[1].busbw_gbps * 2), points[2]])
    kept, bad = _read(path)
    assert len(kept) == 3 and [n for n, _ in bad] == [3], bad
    assert "busbw_gbps=" in bad[0][1] and "x 1 (all_reduce on 2 ranks)" in bad[0][1], bad
    result = CliRunner().invoke(app, ["report", path, "--out", str(tmp_path / "rep")])
    said = " ".join(result.output.split())
    assert "skipped line 3 of" in said and "busbw_gbps=" in said and "Traceback" not in result.output, said
    # nccl-tests' factor on 4 ranks (2(n-1)/n = 1.5) is read as it is
    four = _points(4)
    kept, bad = _read(write(tmp_path / "four.jsonl", [header_for(four[0]), *four]))
    assert len(kept) == 4 and bad == []


def test_a_record_of_another_world_size_than_its_header_is_refused(tmp_path):
    points = _points()
    path = write(tmp_path / "ws.jsonl", [header_for(points[0]), points[0],
                                         dataclasses.replace(points[1], world_size=4)])
    kept, bad = _read(path)
    assert len(kept) == 2 and len(bad) == 1 and "world_size=4 but its run r's header says 2 ranks" in bad[0][1], bad


def test_a_record_before_its_header_is_checked_against_it(tmp_path):
    # session 45: the check read the header only once it was read, so records above it (two files concatenated
    # header-last, or edited) passed unchecked; they are checked as they are below it, and kept in file order
    points = _points()
    path = write(tmp_path / "late.jsonl", [points[0], dataclasses.replace(points[1], world_size=4), points[2],
                                           header_for(points[0])], with_headers=False)
    kept, bad = _read(path)
    assert [n for n, _ in bad] == [2] and "world_size=4 but its run r's header says 2 ranks" in bad[0][1], bad
    assert [type(r).__name__ for r in kept] == ["Measurement", "Measurement", "RunHeader"], kept
    assert [r.size_bytes for r in kept[:2]] == [points[0].size_bytes, points[2].size_bytes]
    # a run whose header never comes is read as before (unchecked: no header to check against), in file order
    other = dataclasses.replace(points[2], run_id="q", world_size=4, group_size=4, busbw_gbps=points[2].algbw_gbps * 1.5)
    kept, bad = _read(write(tmp_path / "headerless.jsonl", [header_for(points[0]), other, points[0], points[1]],
                           with_headers=False))
    assert bad == [] and [getattr(r, "run_id", None) for r in kept] == ["r", "q", "r", "r"], kept


def _moe(**metrics) -> Measurement:
    size, combine, time_us = 8704, 8704, 600.0
    dispatch_us, combine_us = 150.0, 170.0
    algbw = (size + combine) / time_us / 1e3
    own = {"round_trip_bytes_max": size + combine, "combine_bytes_max": combine, "dispatch_us": dispatch_us,
           "combine_us": combine_us, "round_trip_us": dispatch_us + combine_us,
           "dispatch_algbw_gbps": size / dispatch_us / 1e3, "dispatch_busbw_gbps": size / dispatch_us / 1e3 * 0.5,
           "combine_algbw_gbps": combine / combine_us / 1e3, "combine_busbw_gbps": combine / combine_us / 1e3 * 0.5}
    return Measurement(run_id="r", collective="moe_all_to_all", backend="gloo", size_bytes=size, count=size // 2,
                       dtype="bfloat16", op=None, in_place=False, world_size=2, group_size=2, iters=4, warmup_iters=1,
                       time_us_median=time_us, algbw_gbps=algbw, busbw_gbps=algbw * 0.5, num_wrong=0,
                       metrics={**own, **metrics})


def test_edited_moe_figures_are_refused(tmp_path):
    whole = _moe()
    rows = [header_for(whole), whole, _moe(dispatch_busbw_gbps=whole.metrics["dispatch_busbw_gbps"] * 3),
            dataclasses.replace(whole, algbw_gbps=whole.algbw_gbps * 2, busbw_gbps=whole.busbw_gbps * 2),
            _moe(round_trip_us=1.0)]
    kept, bad = _read(write(tmp_path / "moe.jsonl", rows))
    assert len(kept) == 2 and [n for n, _ in bad] == [3, 4, 5], bad
    assert "metrics.dispatch_busbw_gbps=" in bad[0][1] and "algbw_gbps=" in bad[1][1] and "round_trip_us" in bad[2][1]
