"""compare: fails a 30% slowdown and a newly failed or wrong point, passes an A/A pair (recorded gloo
sample sets, so deterministic), prints the noise per point, exit 2 on files with nothing in common.
Run-to-run noise (test_compare_runs.py): every appended run judged, missing points, history."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.results.compare import compare, median_interval, parse_threshold
from commbench.results.records import JsonlWriter, Measurement, RunHeader, headers, measurements, read_records

DATA = Path(__file__).parent / "data" / "compare"
A, B = DATA / "gloo_all_reduce_a.jsonl", DATA / "gloo_all_reduce_b.jsonl"  # two real 2-rank gloo runs, 60 iters


def record(size, samples_us, *, run_id="r", **kw):
    samples = np.asarray(samples_us, dtype=float)
    return Measurement(run_id=run_id, collective="all_reduce", backend="gloo", size_bytes=size, count=size // 4,
                       dtype="float32", op="sum", in_place=True, world_size=2, group_size=2, iters=len(samples),
                       warmup_iters=5, time_us_median=float(np.median(samples)), time_us_mean=float(samples.mean()),
                       time_us_min=float(samples.min()), time_us_max=float(samples.max()),
                       iter_times_us=[float(x) for x in samples], loop_time_us={"avg": float(samples.mean())},
                       # size / median, as the harness computes it (records.iter_records checks it on read)
                       algbw_gbps=size / float(np.median(samples)) / 1e3, busbw_gbps=size / float(np.median(samples)) / 1e3,
                       num_wrong=0, **kw)


def as_collective(m: Measurement, collective: str) -> Measurement:
    """`m` as a record of `collective`: its busbw at nccl-tests' factor for it and its count one rank's chunk where
    nccl-tests counts so (records.iter_records checks both on read)."""
    from commbench.nccl_tests_counts import CHUNKED_COLLECTIVES
    from commbench.results.importers.nccl_tests import NCCL_TESTS_BUS_FACTOR

    count = m.size_bytes // (4 * m.group_size) if collective in CHUNKED_COLLECTIVES else m.count
    return dataclasses.replace(m, collective=collective, count=count,
                               busbw_gbps=m.algbw_gbps * NCCL_TESTS_BUS_FACTOR[collective](m.group_size))


def header_for(m: Measurement) -> RunHeader:
    """The header a run's first record stands under, as bench and sweep write one (the same setup every run)."""
    return RunHeader(run_id=m.run_id, started_at="t", argv=[], commbench_version="0", python_version="3",
                     torch_version=None, nccl_version=None, cuda_version=None, cupy_version=None, backend=m.backend,
                     world_size=m.world_size, hostnames=["h"] * m.world_size, devices=["cpu"] * m.world_size,
                     nccl_env={}, launcher="local")


def write(path, records, *, with_headers=True):
    """A results file of `records`, each run under its header (the one given among `records`, else a made one;
    `with_headers` False: none, as a hand-made file)."""
    seen = set()
    with JsonlWriter(path) as writer:
        for r in records:
            if isinstance(r, RunHeader):  # a run's own header, given: kept
                seen.add(r.run_id)
            elif with_headers and r.run_id not in seen:
                seen.add(r.run_id)
                writer.write(header_for(r))
            writer.write(r)
    return str(path)


def scaled(path, factor, out, *, samples=True):
    """A copy of a results file with every time (and, with `samples`, every per-iteration sample) x factor."""
    rows = []
    for line in Path(path).read_text().splitlines():
        rec = json.loads(line)
        if rec["record_type"] == "measurement":
            for key in ("time_us_median", "time_us_mean", "time_us_min", "time_us_max"):
                rec[key] = rec[key] * factor
            rec["loop_time_us"] = {k: v * factor for k, v in rec["loop_time_us"].items()}
            rec["iter_times_us"] = [t * factor for t in rec["iter_times_us"]] if samples else []
            rec["algbw_gbps"], rec["busbw_gbps"] = rec["algbw_gbps"] / factor, rec["busbw_gbps"] / factor
        rows.append(json.dumps(rec))
    Path(out).write_text("\n".join(rows) + "\n")
    return str(out)


def run(base, new, *args):
    return CliRunner().invoke(app, ["compare", str(base), str(new), *args])


def test_a_real_a_a_pair_passes_and_prints_the_noise_per_point():
    result = run(A, B, "--max-regression", "10%")
    assert result.exit_code == 0, result.output
    # auto judges the fastest iteration (both files have 60 samples per point), says so, shows the median beside
    assert "pass" in result.output and result.output.count(" min ") >= 5 and "statistic judged: min" in result.output
    assert "median ratio" in result.output and "1.014" in result.output  # 64 B: the medians' ratio, not judged
    # the 64 B point's noise from both files' samples (one run each: the run shift is assumed, said so)
    # one run a side: q at the df of the pair's own scatter (1), whichever noise is larger (compare_judge._df)
    assert "-67.2%/+204.9% within run" in result.output and "run shift is not measured" in result.output
    assert "from this pair's points" in result.output
    median = run(A, B, "--statistic", "median")
    assert median.exit_code == 0 and "-81.7%/+445.2% within run" in median.output, median.output
    assert "statistic judged: median" in median.output and "median ratio" not in median.output


@pytest.mark.parametrize("with_samples", [True, False])
def test_a_30_percent_slowdown_fails(tmp_path, with_samples):
    new = scaled(A, 1.3, tmp_path / "slow.jsonl", samples=with_samples)
    result = run(A, new, "--max-regression", "10%")
    assert result.exit_code == 1, result.output
    result = compare(measurements(read_records([A])), measurements(read_records([new])), max_regression=0.1)
    assert all(p.ratio == pytest.approx(1.3) and p.verdict in ("REGRESSED", "slower (within noise)")
               for p in result.points)
    # the samples identical up to the factor: the whole collective's shift is resolved, points where
    # their own (autocorrelation-widened) noise allows
    assert result.regressed_collectives == ["all_reduce"] or not with_samples
    assert any(p.verdict == "REGRESSED" for p in result.points)


def test_a_newly_failed_or_wrong_point_fails(tmp_path):
    base = measurements(read_records([A]))
    failed = [dataclasses.replace(m, status="failed", error="timed out", time_us_median=None) if i == 1 else m
              for i, m in enumerate(base)]
    wrong = [dataclasses.replace(m, num_wrong=3) if i == 2 else m for i, m in enumerate(base)]
    for new, verdict in ((failed, "newly failed"), (wrong, "newly wrong")):
        result = run(A, write(tmp_path / f"{verdict}.jsonl", [*headers(read_records([A])), *new]))
        assert result.exit_code == 1 and verdict in result.output, result.output
        assert [p.verdict for p in compare(base, new, max_regression=0.1).regressions] == [verdict]


def test_noise_comes_from_the_samples_not_the_tail():
    rng = np.random.default_rng(0)
    quiet = 100 * np.exp(rng.normal(0, 0.01, 20))
    spiky = quiet.copy()
    spiky[3] = 50_000  # one huge outlier: the old (p99 - min) / median spread turned the gate off
    # two quiet baseline runs measure a small run-to-run noise, so the within-run interval decides (one run a side
    # of a 1-point file assumes the run-to-run noise instead: test_compare_tiny_sweep.py)
    base = [record(1024, quiet, run_id="a"), record(1024, quiet * 1.002, run_id="b")]
    result = compare(base, [record(1024, spiky * 1.3, run_id="n")], max_regression=0.1)
    assert len(result.regressions) == 1 and result.points[0].ratio_high < 1.4
    assert result.points[0].noise_source == "within run"
    noisy = 100 * np.exp(rng.normal(0, 0.6, 20))  # +25% inside this much noise is not a regression
    verdicts = [p.verdict for p in compare([record(1024, noisy)], [record(1024, noisy * 1.25)], max_regression=0.1).points]
    assert verdicts == ["slower (within noise)"]


def test_median_interval_uses_order_statistics():
    samples = np.arange(1, 21, dtype=float)  # n = 20: the 6th and 15th smallest (P = 95.9%)
    assert median_interval(samples) == (6.0, 15.0)
    assert median_interval(np.arange(1, 6, dtype=float)) == (1.0, 5.0)  # n < 6: min..max
    low, high = median_interval(np.arange(10_000, dtype=float))
    assert 4890 < low < 4910 and 5090 < high < 5110


def test_repeated_runs_give_run_to_run_noise_and_the_geomean():
    rng = np.random.default_rng(1)
    base = [record(1024, t * np.exp(rng.normal(0, 0.01, 20)), run_id=str(i)) for i, t in enumerate((100.0, 130.0))]
    new = [record(1024, 125 * np.exp(rng.normal(0, 0.01, 20))), record(4096, [1.0] * 20)]
    result = compare(base, new, max_regression=0.1)
    (point,) = result.points
    # x1.1 against BASE's geometric mean is inside the two base runs' spread: not a regression
    assert not point.regressed and point.ratio_low < 1.0 and point.noise_source == "run to run"
    assert point.base_us == pytest.approx(np.sqrt(100 * 130), rel=0.02)  # the base runs' geometric mean
    assert result.geomean_by_collective["all_reduce"] == pytest.approx(point.ratio)
    assert result.only_in_new == 1


def test_imported_records_compare_on_nccl_tests_time():
    samples = np.full(20, 10.0)
    ours = record(1024, samples)
    imported = dataclasses.replace(ours, time_us_median=None, time_us_mean=None, iter_times_us=[],
                                   loop_time_us={"avg": 10.0})
    (point,) = compare([imported], [ours], max_regression=0.1).points
    # no samples and one run a side of one point: the run-to-run noise is assumed (noise.ASSUMED_POINT_SD)
    assert point.statistic == "nccl-avg" and point.ratio == 1.0 and point.noise_text().endswith("run to run")
    slow = dataclasses.replace(imported, loop_time_us={"avg": 15.0})  # x1.5: inside the assumed noise
    (point,) = compare([imported], [slow], max_regression=0.1).points
    assert point.verdict == "slower (within noise)"
    slow = dataclasses.replace(imported, loop_time_us={"avg": 25.0})  # x2.5: beyond it
    (point,) = compare([imported], [slow], max_regression=0.1).points
    assert point.verdict == "REGRESSED"


def test_nothing_comparable_is_refused_not_passed(tmp_path):
    """nccl-tests logs run with different -a modes hold different statistics (avg vs rank0): no point can be
    judged, and the gate said 'pass: 2 point(s) compared' (and --json a NaN quantile). Now it refuses in one
    line, exit 2; a file with some points not comparable says how many were judged."""
    base = [dataclasses.replace(record(size, [10.0] * 5), time_us_median=None, time_us_mean=None, time_us_min=None,
                                time_us_max=None, iter_times_us=[], loop_time_us={"avg": 10.0}) for size in (1024, 4096)]
    new = [dataclasses.replace(r, loop_time_us={"rank0": 30.0}, algbw_gbps=r.algbw_gbps / 3, busbw_gbps=r.busbw_gbps / 3)
           for r in base]
    result = run(write(tmp_path / "b.jsonl", base), write(tmp_path / "n.jsonl", new))
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "no point has a time statistic both files hold" in result.output and "nccl-rank0" in result.output
    # NEW's own run (another run id: a record of BASE's own run in NEW is left out as BASE's, test_shared_with_base)
    mixed = run(write(tmp_path / "b2.jsonl", base), write(tmp_path / "n2.jsonl", [
        dataclasses.replace(base[0], run_id="n"), dataclasses.replace(new[1], run_id="n")]))
    assert mixed.exit_code == 0 and "pass: 1 point(s) in 1 run(s) compared (1 not comparable" in mixed.output


def test_user_errors_exit_2(tmp_path):
    base = write(tmp_path / "base.jsonl", [record(1024, [10.0] * 5)])
    other = write(tmp_path / "other.jsonl", [dataclasses.replace(record(1024, [10.0] * 5), collective="broadcast")])
    assert run(base, other).exit_code == 2
    assert run(base, base, "--max-regression", "lots").exit_code == 2
    assert run(base, base, "--statistic", "p50").exit_code == 2
    assert parse_threshold("10%") == pytest.approx(0.1) and parse_threshold("0.25") == 0.25
    assert parse_threshold("500%") == pytest.approx(5.0) and parse_threshold("0.999") == pytest.approx(0.999)
    for bare in ("5", "1", "1.5"):   # as a fraction 500%: a user typing 5 means 5%, so it is refused, not read as 500%
        with pytest.raises(CommbenchError, match="ambiguous"):
            parse_threshold(bare)


def test_the_threshold_is_printed_as_given_and_a_non_finite_one_is_invalid(tmp_path):
    """Found from outside: --max-regression 9.99% printed 'beyond 10%' and 1e-9 'beyond 0%' (rounded to whole
    percents); 'inf' was answered 'ambiguous ... would be inf%' rather than as an invalid value."""
    base = write(tmp_path / "base.jsonl", [record(1024, [10.0] * 5)])
    for given, said in (("9.99%", "9.99%"), ("1e-9", "1e-07%"), ("0.1", "10%")):
        result = run(base, base, "--max-regression", given, "--allow-same-run", "--allow-stale")
        assert f"none slower than {said} beyond the noise" in " ".join(result.output.split()), (given, result.output)
    for bad in ("inf", "-inf", "nan", "inf%"):
        result = run(base, base, "--max-regression", bad)
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, (bad, result.output)
        assert "is invalid: a fraction like 0.1 or a percentage like 10%" in result.output and "ambiguous" not in \
            result.output, (bad, result.output)


def test_a_slowdown_at_every_size_fails_as_a_collective_even_when_each_point_is_noisy(tmp_path):
    rng = np.random.default_rng(7)
    base = [record(size, 100 * np.exp(rng.normal(0, 0.5, 20))) for size in (1 << k for k in range(10, 22))]
    slow = [record(m.size_bytes, [t * 1.3 for t in m.iter_times_us]) for m in base]
    result = compare(base, slow, max_regression=0.1, statistic="median")  # each point's median too noisy alone
    assert result.regressed_collectives == ["all_reduce"]
    # no point stands out on its own: each is marked as part of its collective's slowdown
    assert len(result.regressions) == 12 and all(p.detail.startswith("with its collective: x1.30")
                                                 for p in result.regressions)
    assert result.geomean_interval_by_collective["all_reduce"][0] > 1.0
    cli = run(write(tmp_path / "b.jsonl", base), write(tmp_path / "n.jsonl", slow), "--statistic", "median")
    assert cli.exit_code == 1 and "slower as a whole" in cli.output
    same = compare(base, base, max_regression=0.1, statistic="median")
    assert same.regressed_collectives == [] and same.geomean_by_collective["all_reduce"] == 1.0


def test_help_describes_the_gate_the_readme_describes():
    """compare --help described the old gate (a point fails beyond the 95% interval of its per-iteration
    samples; NEW's repeated runs give the run-to-run noise) while the gate takes the larger of the run-to-run
    noise and the within-run interval, and measures the run shift from baseline runs only."""
    text = " ".join(CliRunner().invoke(app, ["compare", "--help"], env={"COLUMNS": "200"}).output.split())
    text = text.replace("│ ", "")
    assert "larger of the run-to-run noise and the within-run interval" in text, text
    assert "never from NEW" in text and "repeated runs appended to BASE or NEW give it" not in text
