"""Probe P3 (session 46): one partial sweep file copied and resumed in two places: BASE and NEW share its first
launch's records (same run id, same measurement). compare judged them as NEW's (ratio 1.000) and passed; `fit A C2`
said NEW's continuation was cut short (it holds every point with the shared ones) and `report A C2` refused the pair
as "edited or concatenated by hand". And report's hint for a cut-short sweep beside a `bench` run named a --resume
that is refused."""

from __future__ import annotations

import dataclasses

import numpy as np
from typer.testing import CliRunner

from commbench.cli.app import app
from tests.test_compare import header_for, record, write

BASE_SIZES = (1024, 2048, 4096)
CONTINUED_SIZES = (8192, 16384, 32768, 65536)


def _sweep_header(m, run_id, *, started, resumes=None):
    return dataclasses.replace(header_for(dataclasses.replace(m, run_id=run_id)), started_at=started,
                               argv=["commbench", "sweep", "s.toml", "-O", "x.jsonl"] + ["--resume"] * bool(resumes),
                               sweep_identity="sweep0", planned_points=len(BASE_SIZES) + len(CONTINUED_SIZES),
                               resumes_run_id=resumes)


def _points(sizes, run_id, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return [record(size, scale * (50 + size / 500) * np.exp(rng.normal(0, 0.02, 30)), run_id=run_id)
            for size in sizes]


def _copied_and_resumed_twice(tmp_path, slower=1.0):
    """BASE: run p (3 points) resumed by run a; NEW: the same run p resumed by run c (a copy of the partial file)."""
    first = _points(BASE_SIZES, "p", 1)
    base = [_sweep_header(first[0], "p", started="2026-12-07T12:00:00+00:00"), *first,
            _sweep_header(first[0], "a", started="2026-12-07T12:10:00+00:00", resumes="p"),
            *_points(CONTINUED_SIZES, "a", 2)]
    new = [*base[:1 + len(first)],
           _sweep_header(first[0], "c", started="2026-12-07T12:20:00+00:00", resumes="p"),
           *_points(CONTINUED_SIZES, "c", 3, slower)]
    return write(tmp_path / "A.jsonl", base), write(tmp_path / "C.jsonl", new)


def test_records_new_shares_with_the_base_are_left_out_and_missing(tmp_path):
    base, new = _copied_and_resumed_twice(tmp_path)
    result = CliRunner().invoke(app, ["compare", str(base), str(new)])
    said = " ".join(result.output.split())
    assert result.exit_code == 1, said   # main: exit 0, "pass: 7 point(s)", three of them the base's own at 1.000
    assert "the base's own records (run p: 3 point(s)" in said and "this change never measured them" in said, said
    assert "3 point run(s) missing in the new file" in said, said
    allowed = CliRunner().invoke(app, ["compare", str(base), str(new), "--allow-missing"])
    said = " ".join(allowed.output.split())
    assert allowed.exit_code == 0 and "pass: 4 point(s)" in said, said
    # BASE against itself stays --allow-same-run's (its records are all the base's: nothing left out)
    same = CliRunner().invoke(app, ["compare", str(base), str(base), "--allow-same-run"])
    assert same.exit_code == 0 and "the base's own records" not in same.output, same.output


def test_fit_and_report_read_two_copies_resumed_apart_as_two_runs(tmp_path):
    base, new = _copied_and_resumed_twice(tmp_path)
    fitted = CliRunner().invoke(app, ["fit", str(base), str(new), "-O", str(tmp_path / "f.json")])
    said = " ".join(fitted.output.split())
    assert fitted.exit_code == 0, said
    assert "cut short" not in said, said   # main: "run c holds 4 of the 7 point(s) it plans: it was cut short"
    assert "run p was resumed twice: by run a and by run c" in said, said
    reported = CliRunner().invoke(app, ["report", str(base), str(new), "--out", str(tmp_path / "rep")])
    said = " ".join(reported.output.split())
    assert reported.exit_code == 0, said   # main: exit 2, "edited or concatenated by hand?"
    assert "run c continues run p as a does" in said and "cut short" not in said, said
    assert "(run c)" in said and "(run p)" in said, said


def test_a_cut_short_sweep_beside_a_bench_run_is_told_how_to_resume(tmp_path):
    # probe P3: report said "`commbench sweep ... --resume` into the same file measures them" of a file whose last
    # run is a `bench` run, and that resume is refused (a file holding another run): the hint now says what works
    from commbench.results.resumed import sweeps_cut_short

    first = _points(BASE_SIZES, "p", 1)
    bench = _points((4096,), "b", 6)
    records = [_sweep_header(first[0], "p", started="2026-12-07T12:00:00+00:00"), *first,
               dataclasses.replace(header_for(bench[0]), argv=["commbench", "bench", "all_reduce"]), *bench]
    said = " ".join(sweeps_cut_short(records))
    assert "holds 3 of the 7 point(s) it plans" in said and "into the same file measures them" not in said, said
    assert ("`commbench sweep ... --resume` refuses a file that also holds another run (`bench all_reduce`, run b): "
            "put this run's lines") in said, said
