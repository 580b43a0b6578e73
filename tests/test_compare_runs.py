"""compare with repeated runs: run-to-run noise (BASE's runs, --history) keeps an A/A pair with a
run-level shift from failing; every appended run of NEW is judged (a failed, wrong, time-less or 5x
slow run fails beside clean ones); one point x1.3 stands out of its runs; missing points fail unless
--allow-missing; records of another backend are refused in one line."""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import re

import numpy as np
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.compare import compare
from tests.test_compare import record, write

SIZES = tuple(1 << k for k in range(6, 18, 1))  # 12 points


def runs(rng, num_runs, *, prefix, shift_sd=0.0, point_sd=0.02, within_sd=0.02, shifts=None, factors=None):
    """`num_runs` synthetic runs: time = base(size) * exp(run shift + point scatter), 30 samples each."""
    out = []
    for r in range(num_runs):
        shift = shifts[r] if shifts is not None else rng.normal(0, shift_sd)
        for size in SIZES:
            center = (50 + size / 1000) * math.exp(shift + rng.normal(0, point_sd)) * (factors or {}).get(size, 1.0)
            out.append(record(size, center * np.exp(rng.normal(0, within_sd, 30)), run_id=f"{prefix}{r}"))
    return out


def run_cli(*args):
    return CliRunner().invoke(app, ["compare", *map(str, args)])


def test_a_run_level_shift_within_the_history_passes_and_without_history_fails(tmp_path):
    rng = np.random.default_rng(3)
    base = runs(rng, 1, prefix="b", shifts=[0.0])
    new = runs(rng, 1, prefix="n", shifts=[0.25])  # the whole run 28% slower: load, not the code
    alone = compare(base, new, max_regression=0.1)
    # no repeated run: the run shift is assumed from the pair's point scatter (~0.02), far below 0.25
    assert not alone.passed and not alone.run_to_run.shift_known and alone.run_to_run.scatter_from == "the pair"
    assert alone.regressed_collectives == ["all_reduce"]
    history = runs(rng, 10, prefix="h", shift_sd=0.2)
    judged = compare(base, new, max_regression=0.1, history=history)
    assert judged.passed, [(p.label, p.verdict, p.detail) for p in judged.regressions]
    assert judged.run_to_run.sigma_run > 0.1 and judged.run_to_run.sigma_pooled < 0.05
    hist = tmp_path / "history"
    hist.mkdir()
    for i in range(2):
        write(hist / f"run{i}.jsonl", history[i * len(SIZES) * 5:(i + 1) * len(SIZES) * 5])
    b, n = write(tmp_path / "b.jsonl", base), write(tmp_path / "n.jsonl", new)
    assert run_cli(b, n).exit_code == 1
    result = run_cli(b, n, "--history", hist)
    assert result.exit_code == 0 and "run shift sd" in result.output, result.output
    assert run_cli(b, n, "--history", tmp_path / "nowhere").exit_code == 2


def test_a_shift_beyond_the_history_fails_as_one_collective_effect():
    rng = np.random.default_rng(4)
    base, history = runs(rng, 1, prefix="b", shifts=[0.0]), runs(rng, 10, prefix="h", shift_sd=0.05)
    new = runs(rng, 1, prefix="n", shifts=[math.log(1.6)])
    result = compare(base, new, max_regression=0.1, history=history)
    assert result.regressed_collectives == ["all_reduce"]


def _three_each(seed, factors=None):
    rng = np.random.default_rng(seed)
    return (runs(rng, 3, prefix="b", shift_sd=0.1, point_sd=0.03),
            runs(rng, 3, prefix="n", shift_sd=0.1, point_sd=0.03, factors=factors))


def test_one_point_slower_in_three_runs_stands_out_and_an_a_a_pair_passes():
    base, same = _three_each(5)
    assert compare(base, same, max_regression=0.1).passed
    base, slow = _three_each(5, factors={SIZES[4]: 1.3})
    result = compare(base, slow, max_regression=0.1)
    assert [p.key[5] for p in result.regressions] == [SIZES[4]], [(p.label, p.verdict) for p in result.points]


def test_every_appended_run_is_judged():
    base, new = _three_each(6)
    second = [m for m in new if m.run_id == "n1"]
    for change, verdict in ((dict(status="failed", error="timed out", time_us_median=None), "newly failed"),
                            (dict(num_wrong=2), "newly wrong")):
        broken = [dataclasses.replace(m, **change) if m is second[3] else m for m in new]
        result = compare(base, broken, max_regression=0.1)
        assert [p.verdict for p in result.regressions] == [verdict] and "run 2/3" in result.regressions[0].detail
    slow = [dataclasses.replace(m, time_us_median=m.time_us_median * 5, iter_times_us=[t * 5 for t in m.iter_times_us])
            if m.run_id == "n2" else m for m in new]
    result = compare(base, slow, max_regression=0.1)
    assert not result.passed and (any(s.regressed and s.scope == "run 3/3" for s in result.shifts)
                                  or any("run 3/3" in p.detail for p in result.regressions))


def test_a_nan_time_in_an_appended_run_fails(tmp_path):
    """A record cannot hold a NaN time (Measurement validates it), so a file with one is refused when read:
    the gate never passes it."""
    base, new = _three_each(6)
    b, n = write(tmp_path / "b.jsonl", base), write(tmp_path / "n.jsonl", new)
    lines = pathlib.Path(n).read_text().splitlines()
    last = next(i for i in range(len(lines) - 1, -1, -1) if '"time_us_median"' in lines[i])
    lines[last] = re.sub(r'"time_us_median": ?[0-9.e+-]+', '"time_us_median": NaN', lines[last])
    pathlib.Path(n).write_text("\n".join(lines) + "\n")
    result = run_cli(b, n)
    assert result.exit_code != 0 and "time_us_median" in result.output, result.output


def test_missing_points_fail_unless_allowed_and_are_named(tmp_path):
    base, new = _three_each(7)
    stopped = [m for m in new if not (m.run_id == "n2" and m.size_bytes >= SIZES[-2])]
    b, n = write(tmp_path / "b.jsonl", base), write(tmp_path / "n.jsonl", stopped)
    failed = run_cli(b, n)
    # these runs have no header planning their points: what they lack is missing (not "never reached")
    assert failed.exit_code == 1 and "missing" in failed.output and "never reached" not in failed.output, failed.output
    allowed = run_cli(b, n, "--allow-missing")
    assert allowed.exit_code == 0 and "64 KiB" in allowed.output and "(run 3/3)" in allowed.output, allowed.output


def test_allow_missing_permits_a_gap_never_a_slowdown_at_that_point():
    """A point x2 slower in the runs that hold it, absent from one run of NEW, was judged 'missing' only,
    and --allow-missing then passed the gate."""
    base, new = _three_each(5, factors={SIZES[4]: 2.0})
    short = [m for m in new if not (m.run_id == "n2" and m.size_bytes == SIZES[4])]
    result = compare(base, short, max_regression=0.1, allow_missing=True)
    slow = [p for p in result.points if p.verdict == "REGRESSED"]
    assert not result.passed and len(slow) == 1 and "not in run" in slow[0].detail, [p.verdict for p in result.points]
    base, same = _three_each(5)   # the same gap without the slowdown: --allow-missing passes it
    gap = [m for m in same if not (m.run_id == "n2" and m.size_bytes == SIZES[4])]
    assert result.missing and compare(base, gap, max_regression=0.1, allow_missing=True).passed


def test_a_run_measured_without_the_data_check_fails_unless_allowed_and_is_named(tmp_path):
    """bench -c 0 records num_wrong None: never "wrong", but never verified either. Where BASE checked a
    point, a run of NEW that did not fails the gate (named), unless --allow-unchecked; BASE unchecked too
    (both -c 0) is no change."""
    base, new = _three_each(7)
    unchecked = [dataclasses.replace(m, num_wrong=None) if m.run_id == "n1" else m for m in new]
    b, n = write(tmp_path / "b.jsonl", base), write(tmp_path / "n.jsonl", unchecked)
    failed = run_cli(b, n)
    assert failed.exit_code == 1 and "without the data check" in failed.output, failed.output
    assert "--allow-unchecked" in failed.output and "64 B n=2 (run 2/3)" in failed.output, failed.output
    result = compare(base, unchecked, max_regression=0.1)
    assert not result.passed and len(result.unchecked) == len(SIZES) and not result.regressions
    allowed = run_cli(b, n, "--allow-unchecked")
    assert allowed.exit_code == 0 and "unchecked: allowed" in allowed.output, allowed.output
    doc = json.JSONDecoder().raw_decode(run_cli(b, n, "--json").stdout)[0]
    assert doc["passed"] is False and doc["unchecked"][0].endswith("(run 2/3)") and doc["allow_unchecked"] is False
    old_log = [dataclasses.replace(m, num_wrong=None, metrics={"max_abs_error": 2e-07}) if m.run_id == "n1" else m
               for m in new]  # nccl-tests' old "error" column: checked, imported without a #wrong count
    assert compare(base, old_log, max_regression=0.1).unchecked == []
    both = [dataclasses.replace(m, num_wrong=None) for m in base]
    assert compare(both, [dataclasses.replace(m, num_wrong=None) for m in new], max_regression=0.1).passed
    mixed = write(tmp_path / "mixed.jsonl", base + unchecked)   # checked and unchecked runs in one file
    assert run_cli(mixed, mixed, "--allow-same-run").exit_code == 0 and compare(base + unchecked, base + unchecked,
                                                            max_regression=0.1).unchecked == []


def test_a_file_of_runs_with_different_sizes_passes_against_itself_and_a_short_run_still_fails(tmp_path):
    """Appended runs need not measure the same sizes (bench -b 1K -e 4K, then -b 8K -e 16K, into one file):
    compared with itself nothing is missing; a copy whose second run lost a size is still caught."""
    rng = np.random.default_rng(11)
    first = [m for m in runs(rng, 1, prefix="a") if m.size_bytes <= SIZES[5]]
    second = [m for m in runs(rng, 1, prefix="b") if m.size_bytes > SIZES[5]]
    both = write(tmp_path / "both.jsonl", first + second)
    same = run_cli(both, both, "--allow-same-run")
    assert same.exit_code == 0 and "missing" not in same.output and "pass" in same.output, same.output
    assert "[bold red]" not in same.output
    short = write(tmp_path / "short.jsonl", first + [m for m in second if m.size_bytes != SIZES[-1]])
    failed = run_cli(both, short, "--allow-same-run")   # a copy of BASE less a point: no new run, refused without it
    assert failed.exit_code == 1 and "missing" in failed.output and "[bold red]" not in failed.output, failed.output
    assert "128 KiB" in failed.output, failed.output


def _sweep_runs(tmp_path, name, *, resume_after=None):
    """A real 2-rank gloo sweep (4 sizes) into `name`; `resume_after`: the run killed after that many points
    (the rest of the file cut off), then `sweep --resume` measures the others as a second run id."""
    from commbench.sweep import SweepJob, parse_sweep, run_sweep_on_backend
    from tests.distributed import run_ranks

    spec = parse_sweep({"defaults": {"iters": 3, "warmup_iters": 1, "timeout_s": 20.0},
                        "run": [{"collective": "all_reduce", "sizes": ["1K", "2K", "4K", "8K"]}]}, "t.toml")
    out = tmp_path / name
    run_ranks(run_sweep_on_backend, 2, args=(SweepJob(sweep=spec, backend="gloo", output_path=str(out),
                                                      show_progress=False),))
    if resume_after is not None:
        out.write_text("".join(out.read_text().splitlines(keepends=True)[:1 + resume_after]))
        run_ranks(run_sweep_on_backend, 2, args=(SweepJob(sweep=spec, backend="gloo", output_path=str(out),
                                                          resume=True, show_progress=False),))
    return out


def test_a_resumed_sweep_is_one_run_and_two_separate_partial_runs_still_miss_points(tmp_path):
    """BASE: two complete runs of a sweep. NEW: one run killed after 2 points and resumed (`sweep --resume`
    writes a second run id holding only the rest): one logical run of the sweep, nothing missing. Two
    separate partial runs of the same sweep (appended from two files) still lack points: missing."""
    base = tmp_path / "base.jsonl"
    base.write_text(_sweep_runs(tmp_path, "b1.jsonl").read_text() + _sweep_runs(tmp_path, "b2.jsonl").read_text())
    resumed = _sweep_runs(tmp_path, "resumed.jsonl", resume_after=2)
    assert len({json.loads(line)["run_id"] for line in resumed.read_text().splitlines()}) == 2
    # The times are real gloo measurements (x20 apart on a loaded machine): what is judged here is the
    # missing points, not the timings (the gate's timing verdicts have their own tests above).
    passed = json.JSONDecoder().raw_decode(run_cli(base, resumed, "--max-regression", "900%", "--json").stdout)[0]
    assert passed["missing"] == [] and not any(p["verdict"] == "missing" for p in passed["points"]), passed
    partial = tmp_path / "partial.jsonl"
    lines = [_sweep_runs(tmp_path, f"p{i}.jsonl").read_text().splitlines(keepends=True) for i in (1, 2)]
    partial.write_text("".join(lines[0][:1 + 2] + lines[1][:1 + 3]))
    failed = run_cli(base, partial, "--max-regression", "900%")
    # each was cut short: the points it planned and never reached are named "not reached" (--allow-cut-short)
    assert failed.exit_code == 1 and "never reached" in failed.output, failed.output
    said = " ".join(failed.output.split())   # joined across the terminal's wrapping
    assert "4 KiB n=2 (run 1/2)" in said and "8 KiB n=2 (run 2/2)" in said, failed.output


def test_a_sweep_resumed_on_other_hosts_is_one_run_and_the_user_is_told(tmp_path):
    """`sweep --resume` on another node: compare still counts the continuation as the run it resumes (nothing
    missing), and says so in a note naming both runs and what differs (report draws it as a curve of its own)."""
    resumed = _sweep_runs(tmp_path, "resumed.jsonl", resume_after=2)
    same = run_cli(resumed, resumed, "--max-regression", "900%", "--allow-same-run")
    assert "another setup" not in same.output, same.output
    lines = [json.loads(line) for line in resumed.read_text().splitlines()]
    headers = [row for row in lines if row["record_type"] == "header"]
    assert len(headers) == 2
    headers[1]["hostnames"] = ["node-b"] * len(headers[1]["hostnames"])
    moved = tmp_path / "moved.jsonl"   # the file as a resume on node-b writes it (not beside the unedited file:
    moved.write_text("".join(json.dumps(row) + "\n" for row in lines))   # one run id, two headers is refused)
    result = run_cli(moved, moved, "--max-regression", "900%", "--allow-same-run", "--json")
    assert json.JSONDecoder().raw_decode(result.stdout)[0]["missing"] == [], result.output
    note = " ".join(run_cli(moved, moved, "--max-regression", "900%", "--allow-same-run").output.split())   # wrapped at 80 columns
    assert f"run {headers[1]['run_id']} resumes run {headers[0]['run_id']}" in note and "node-b" in note, note


def test_another_backend_is_refused_in_one_line(tmp_path):
    base, new = _three_each(8)
    b = write(tmp_path / "b.jsonl", base)
    n = write(tmp_path / "n.jsonl", [dataclasses.replace(m, backend="nccl") for m in new])
    result = run_cli(b, n)
    assert result.exit_code == 2 and "backend" in result.output and '"gloo" vs "nccl"' in result.output, result.output
    assert "Traceback" not in result.output


def test_p10_statistic_and_autocorrelated_samples_widen_the_within_run_noise():
    from commbench.results.noise import within_run_sd

    rng = np.random.default_rng(9)
    independent = 100 * np.exp(rng.normal(0, 0.1, 200))
    drifting = 100 * np.exp(np.cumsum(rng.normal(0, 0.03, 200)) * 0.5 + rng.normal(0, 0.02, 200))
    assert within_run_sd(drifting, "median") > within_run_sd(np.sort(drifting)[rng.permutation(200)], "median")
    assert within_run_sd(independent, "p10") is not None
    base, new = _three_each(10)
    result = compare(base, new, max_regression=0.1, statistic="p10")
    assert {p.statistic for p in result.points} == {"p10"} and result.passed
    assert run_cli("x", "y", "--statistic", "p50").exit_code == 2


def test_an_interval_a_few_points_leave_astronomically_wide_is_printed_in_significant_digits():
    from commbench.cli.compare import _interval
    assert _interval(0.951, 1.0523) == "0.951..1.052"
    assert _interval(3.8e-21, 2.606e20) == "3.8e-21..2.61e+20"   # was 0.000..260616122026578837504.000
    assert _interval(None, None) == "-"


def test_a_partial_run_appended_after_a_complete_stale_one_is_missing_points():
    """NEW = an earlier complete run left in the output file + this run, which crashed half-way (bench -O appends):
    every point was in 'one run of NEW, as many as BASE', so nothing was missing and the gate passed a crashed run.
    A run of NEW lacking a point every run of BASE holds now misses it; the same file against itself still passes."""
    rng = np.random.default_rng(8)
    base, stale, fresh = runs(rng, 1, prefix="b"), runs(rng, 1, prefix="s"), runs(rng, 1, prefix="f")
    new = stale + fresh[:5]
    result = compare(base, new, max_regression=0.1)
    assert not result.passed and len(result.missing) == len(SIZES) - 5
    assert all(text.endswith("(run 2/2)") for text in result.missing), result.missing
    assert compare(base, new, max_regression=0.1, allow_missing=True).passed
    assert compare(new, new, max_regression=0.1).passed
    assert compare(base, stale + fresh, max_regression=0.1).passed


def _small_sweep(rng, run_id, factors):
    """A 5-point sweep (all_reduce at 3 sizes, all_gather at 2), 20 samples a point, times x factors[collective]."""
    out = []
    for collective, sizes in (("all_reduce", (1024, 8192, 65536)), ("all_gather", (4096, 65536))):
        for size in sizes:
            center = 250.0 * factors.get((collective, size), factors.get(collective, 1.0))
            m = record(size, center * np.exp(rng.normal(0, 0.03, 20)), run_id=run_id)
            out.append(dataclasses.replace(m, collective=collective, op=None if collective == "all_gather" else "sum"))
    return out


def test_one_run_a_side_of_a_small_sweep_does_not_fail_on_what_three_points_cannot_measure():
    """Found from outside: 37 of 72 ordered pairs of unchanged 5-point gloo sweeps failed without --history. The
    points' run-to-run scatter then comes from the pair's three all_reduce points (df 1), which can read far below
    its truth; a 2-point collective's run-level step (x1.25: gloo runs differ so) was judged on its within-run
    intervals alone. Repeated baseline runs that show the points steady still catch the same step (x1.25 here)."""
    rng = np.random.default_rng(11)
    base = _small_sweep(rng, "b", {})
    new = _small_sweep(rng, "n", {("all_reduce", 8192): 1.01, ("all_reduce", 65536): 0.99, "all_gather": 1.25})
    alone = compare(base, new, max_regression=0.1)
    assert alone.run_to_run.scatter_from == "the pair" and alone.run_to_run.df <= 2
    assert alone.passed, [(p.label, p.verdict, p.detail) for p in alone.regressions]
    history = [m for r in range(4) for m in _small_sweep(rng, f"h{r}", {})]
    judged = compare(base, new, max_regression=0.1, history=history)
    assert judged.run_to_run.shift_known and not judged.passed and "all_gather" in judged.regressed_collectives
