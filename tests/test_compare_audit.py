"""compare audit: cases a CI gate meets that the other compare tests do not build (see each test)."""

from __future__ import annotations

import numpy as np

from commbench.results.compare import compare
from tests.test_compare import record

SIZES = tuple(1 << k for k in range(6, 18))  # 12 points


def _run(rng, prefix, iters, factor=1.0, sd=0.15):
    """One run: every point's per-iteration times drawn from one log-normal (sd `sd`), x `factor`."""
    return [record(size, (50 + size / 1000) * factor * np.exp(rng.normal(0, sd, iters)), run_id=prefix)
            for size in SIZES]


def test_the_fastest_iteration_is_compared_over_as_many_iterations_on_both_sides():
    """The gate judges the fastest iteration (auto: min): the fastest of 400 draws is ~15% below the fastest of
    20 from the same distribution (log sd 0.15). Unchanged code measured with -n 20 against a -n 400 baseline
    failed as a regression (x1.14), and a -n 400 run hid a 25% slowdown against a -n 20 baseline (x1.04). Now the tail is taken over the
    first n iterations of each record, n the fewest on any side, and said."""
    rng = np.random.default_rng(5)
    long, short = _run(rng, "long", 400), _run(rng, "short", 20)
    same = compare(long, short, max_regression=0.1, allow_fewer_iters=True)   # refused without it (compare_iters)
    assert same.passed, [(p.label, p.ratio, p.verdict) for p in same.regressions] + same.regressed_collectives
    assert set(same.trimmed.values()) == {20} and len(same.trimmed) == len(SIZES)
    slower = compare(_run(rng, "base", 20), _run(rng, "new", 400, factor=1.25), max_regression=0.1)
    assert not slower.passed and slower.regressed_collectives == ["all_reduce"]
    equal = compare(_run(rng, "a", 30), _run(rng, "b", 30), max_regression=0.1)
    assert equal.trimmed == {}


def test_a_point_that_failed_in_a_run_fails_even_beside_a_good_copy_of_it_in_that_run():
    """A run of NEW holding a point twice (its records appended twice, one copy failed or wrong) kept the first
    copy only: a good first copy hid the failure and the gate passed. The failed copy now decides."""
    import dataclasses

    rng = np.random.default_rng(1)
    base, new = _run(rng, "b", 30), _run(rng, "n", 30)
    failed = dataclasses.replace(new[3], status="failed", error="NCCL error: unhandled system error",
                                 time_us_median=None, time_us_mean=None, time_us_min=None, time_us_max=None,
                                 iter_times_us=[], loop_time_us={}, algbw_gbps=None, busbw_gbps=None, num_wrong=None)
    wrong = dataclasses.replace(new[5], num_wrong=3)
    result = compare(base, [*new, failed, wrong], max_regression=0.1)
    assert not result.passed
    assert {p.verdict for p in result.regressions} == {"newly failed", "newly wrong"}
    assert compare(base, [*new, *new], max_regression=0.1).passed  # good copies only: as before


def test_a_line_of_the_new_file_that_cannot_be_read_fails_the_gate_even_with_allow_missing(tmp_path):
    """A record the reader refuses (a NaN, zero or negative time; a status this version does not know) was
    skipped with a warning and its point counted as missing, which --allow-missing passed: a failed point could
    pass unseen. Now such a line fails the gate (exit 1) with or without --allow-missing, in the --json
    document too; a clean file still passes."""
    import json
    import pathlib
    import re

    from typer.testing import CliRunner

    from commbench.cli.app import app
    from tests.test_compare import write

    rng = np.random.default_rng(2)
    base = write(tmp_path / "b.jsonl", _run(rng, "b", 30))
    new = write(tmp_path / "n.jsonl", _run(rng, "n", 30))
    assert CliRunner().invoke(app, ["compare", base, new, "--allow-missing"]).exit_code == 0
    lines = pathlib.Path(new).read_text().splitlines()
    lines[4] = re.sub(r'"status": ?"ok"', '"status":"timeout"', lines[4])
    pathlib.Path(new).write_text("\n".join(lines) + "\n")
    for args in ((), ("--allow-missing",)):
        result = CliRunner().invoke(app, ["compare", base, new, *args])
        assert result.exit_code == 1 and "could not be read" in result.output, result.output
    result = CliRunner().invoke(app, ["compare", base, new, "--allow-missing", "--json"])
    assert result.exit_code == 1
    document = result.stdout[result.stdout.index("{"):result.stdout.rindex("}") + 1]
    assert json.loads(document)["passed"] is False


def test_compare_json_says_which_points_were_compared_over_fewer_iterations(tmp_path):
    """README: where a point was measured with different -n, the tail is taken over the first n iterations and
    'the output says so'; the table's statistic line did, the --json document (what a script reads) did not.
    Each point now carries iterations_compared (n, or null when every record was used whole)."""
    import json

    import jsonschema
    from typer.testing import CliRunner

    from commbench.cli.app import app
    from tests.test_compare import write
    from tests.test_json_output import schema

    rng = np.random.default_rng(7)
    base = write(tmp_path / "b.jsonl", _run(rng, "b", 400))
    new = write(tmp_path / "n.jsonl", _run(rng, "n", 20))
    same = write(tmp_path / "s.jsonl", _run(rng, "s", 400))
    for other, expected in ((new, {20}), (same, {None})):
        result = CliRunner().invoke(app, ["compare", base, other, "--json", "--allow-fewer-iters"])
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        jsonschema.validate(doc, schema("compare"), cls=jsonschema.Draft202012Validator)
        assert {p["iterations_compared"] for p in doc["points"]} == expected and len(doc["points"]) == len(SIZES)


def test_the_pass_line_counts_only_the_points_it_compared(tmp_path):
    """With --allow-missing, a base point the new file lacks was counted among the points 'compared' on the pass
    line CI logs show (5 of 5 with one missing). It counts the points both files hold and names the others."""
    from typer.testing import CliRunner

    from commbench.cli.app import app
    from tests.test_compare import write

    rng = np.random.default_rng(3)
    base_run, new_run = _run(rng, "b", 30), _run(rng, "n", 30)
    base = write(tmp_path / "b.jsonl", base_run)
    new = write(tmp_path / "n.jsonl", new_run[:-1])
    result = CliRunner().invoke(app, ["compare", base, new, "--allow-missing"])
    line = next(s for s in " ".join(result.output.split()).split("pass: ")[1:2])
    assert result.exit_code == 0, result.output
    assert line.startswith(f"{len(SIZES) - 1} point(s) in 1 run(s) compared (1 of the base's not in the new file")
    whole = CliRunner().invoke(app, ["compare", base, write(tmp_path / "w.jsonl", new_run)])
    assert f"pass: {len(SIZES)} point(s) in 1 run(s) compared," in " ".join(whole.output.split()), whole.output


def test_one_base_run_and_one_history_run_measure_the_run_shift(tmp_path):
    """--history with one run beside a BASE of one run was ignored (the shift comes from a set of two runs or more,
    and BASE and history were two sets of one), and the gate then said 'no --history'. Together they are two
    baseline runs: the noise line counts both, and an error names the history it had."""
    from typer.testing import CliRunner

    from commbench.cli.app import app
    from tests.test_compare import write

    rng = np.random.default_rng(4)
    base = write(tmp_path / "b.jsonl", _run(rng, "b", 30))
    history = tmp_path / "history"
    history.mkdir()
    write(history / "h.jsonl", _run(rng, "h", 30))
    same = CliRunner().invoke(app, ["compare", base, write(tmp_path / "n.jsonl", _run(rng, "n", 30)),
                                    "--history", str(history)])
    text = " ".join(same.output.split())
    assert same.exit_code == 0 and "noise: run-to-run from 2 runs (runs: base 1, new 1, history 1)" in text, text
    alone = CliRunner().invoke(app, ["compare", base, write(tmp_path / "n2.jsonl", _run(rng, "n2", 30))])
    assert "the run shift is not measured" in " ".join(alone.output.split())


def test_a_point_twice_in_one_run_with_different_timings_is_refused_in_either_order(tmp_path):
    """A hand-concatenated file held a 10x slower copy of one point in the same run: the first copy was judged, so
    the verdict flipped with the order of the lines. commbench measures a point once a run: two differing good
    copies are refused in one line naming the point (an identical copy is harmless and still read once)."""

    from typer.testing import CliRunner

    from commbench.cli.app import app
    from tests.test_compare import write

    rng = np.random.default_rng(6)
    base_run, new_run = _run(rng, "b", 30), _run(rng, "n", 30)
    base = write(tmp_path / "b.jsonl", base_run)
    slow = record(new_run[3].size_bytes, [t * 10 for t in new_run[3].iter_times_us], run_id=new_run[3].run_id)
    for name, records in (("after", [*new_run, slow]), ("before", [slow, *new_run])):
        result = CliRunner().invoke(app, ["compare", base, write(tmp_path / f"{name}.jsonl", records)])
        line = " ".join(result.output.split())
        assert result.exit_code == 2 and "holds all_reduce float32" in line and "twice with different" in line, line
    same = CliRunner().invoke(app, ["compare", base, write(tmp_path / "copy.jsonl", [*new_run, new_run[3]])])
    assert same.exit_code == 0, same.output


def test_every_baseline_run_counts_in_the_run_shift(tmp_path):
    """One BASE run and two --history runs measured the shift from the two history runs only (1 df): BASE's run,
    a set of one, was dropped, so three baseline runs were judged as two (probe PC: "run-to-run from 2 runs
    (runs: base 1, new 1, history 2)"). A side of one run joins the other: three runs, two shifts, and BASE's own
    offset from its history is part of the shift; two runs a side stay two sets (each centred on its own means)."""
    from typer.testing import CliRunner

    from commbench.cli.app import app
    from tests.test_compare import write

    rng = np.random.default_rng(6)
    base, new = _run(rng, "b", 30, factor=1.3, sd=0.02), _run(rng, "n", 30, factor=1.3, sd=0.02)
    history = _run(rng, "h0", 30, sd=0.02) + _run(rng, "h1", 30, sd=0.02)
    one_two = compare(base, new, max_regression=0.1, history=history).run_to_run
    assert (one_two.num_runs, one_two.num_shifts) == (3, 2)
    assert one_two.sigma_run > 0.05  # BASE's x1.3 against its history is a shift the two history runs do not show
    two_one = compare(base + _run(rng, "b2", 30, sd=0.02), new, max_regression=0.1, history=history[:len(SIZES)])
    assert (two_one.run_to_run.num_runs, two_one.run_to_run.num_shifts) == (3, 2)
    two_two = compare(base + _run(rng, "b2", 30, sd=0.02), new, max_regression=0.1, history=history).run_to_run
    assert (two_two.num_runs, two_two.num_shifts) == (4, 2)
    # a lone history run lacking a point BASE's runs share would shrink the block: the sets stay apart
    short = compare(base + _run(rng, "b2", 30, sd=0.02), new, max_regression=0.1,
                    history=history[1:len(SIZES)]).run_to_run
    assert (short.num_runs, short.num_shifts) == (2, 1)
    folder = tmp_path / "history"
    folder.mkdir()
    write(folder / "h0.jsonl", history[:len(SIZES)])
    write(folder / "h1.jsonl", history[len(SIZES):])
    shown = CliRunner().invoke(app, ["compare", write(tmp_path / "b.jsonl", base), write(tmp_path / "n.jsonl", new),
                                     "--history", str(folder)])
    text = " ".join(shown.output.split())
    assert "noise: run-to-run from 3 runs (runs: base 1, new 1, history 2)" in text and "2 measured" in text, text
