"""`bench all_reduce -b 1K -e 64K` on gloo measured times that do not grow with size; `bench` ended "done" and the
user learnt only at `fit` (exit 2, "bandwidth undetermined") that the points determine no bandwidth. `bench` and
`sweep` now say it in their closing lines, from the points measured, by the test `fit` applies
(fit_records.bandwidth_undetermined), and only for this run's curves."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel.fit_readiness import undetermined_bandwidth_notes
from commbench.results.records import JsonlWriter, Measurement, RunHeader

SIZES = (1024, 8192, 65536, 524288)
FLAT_US = (20.0, 20.0, 20.0, 20.0)            # time does not grow with size: no bandwidth (fit keeps it out)
GROWING_US = (20.0, 24.0, 60.0, 340.0)        # 20 us + size / ~1.9 GB/s


def _run(path, run_id: str, times_us, collective: str = "all_reduce") -> None:
    with JsonlWriter(path) as writer:
        writer.write(RunHeader(run_id=run_id, started_at="t", argv=[], commbench_version="0", python_version="3",
                               torch_version="2", nccl_version=None, cuda_version=None, cupy_version=None,
                               backend="gloo", world_size=2, hostnames=["h", "h"], devices=["cpu", "cpu"],
                               nccl_env={}, launcher="local"))
        for size, time_us in zip(SIZES, times_us):
            writer.write(Measurement(run_id=run_id, collective=collective, backend="gloo", size_bytes=size,
                                     count=size // 4, dtype="float32", op="sum", in_place=True, world_size=2,
                                     group_size=2, group_layout="world", iters=20, warmup_iters=5,
                                     time_us_median=time_us))


def test_a_flat_curve_is_noted_as_fit_refuses_it_and_a_growing_one_is_not(tmp_path):
    flat, growing = tmp_path / "flat.jsonl", tmp_path / "growing.jsonl"
    _run(flat, "f", FLAT_US)
    _run(growing, "g", GROWING_US)
    notes = undetermined_bandwidth_notes(str(flat), larger="-e 16M")
    assert notes == ["all_reduce gloo n=2 world (1 domain) 1 KiB..512 KiB: time does not grow with size, so `fit` "
                     "keeps it latency-only (no bandwidth from these points); for a bandwidth, measure up to 16 MiB (-e 16M)"]
    # the same verdict, from `fit`, which keeps the curve latency-only (tests/test_fit_latency_only.py)
    kept = CliRunner().invoke(app, ["fit", str(flat), "-O", str(tmp_path / "f.json")])
    assert kept.exit_code == 0 and "bandwidth undetermined" in kept.output and "kept latency-only" in kept.output
    assert undetermined_bandwidth_notes(str(growing), larger="-e 16M") == []
    fitted = CliRunner().invoke(app, ["fit", str(growing), "-O", str(tmp_path / "g.json")])
    assert fitted.exit_code == 0, fitted.output


def test_the_runs_there_before_are_not_judged(tmp_path):
    path = tmp_path / "r.jsonl"
    _run(path, "old", FLAT_US)
    _run(path, "new", GROWING_US)
    assert undetermined_bandwidth_notes(str(path), larger="-e 16M", skip_runs={"old"}) == []
    assert len(undetermined_bandwidth_notes(str(path), larger="-e 16M", skip_runs={"new"})) == 1


def test_bench_closing_lines_say_a_curve_fit_cannot_use(tmp_path, monkeypatch):
    import commbench.cli.bench as bench_cli
    from commbench.measure.bench import BenchOutcome

    def measuring(times_us):
        def fake_run(config, backends, nproc, timeout_s):   # the ranks' records, as they write them
            _run(config.output_path, f"run{len(times_us)}{times_us[-1]:.0f}", times_us)
            return {0: BenchOutcome(num_points=len(SIZES), num_wrong=0, error=None)}
        return fake_run

    out = tmp_path / "r.jsonl"
    monkeypatch.setattr(bench_cli, "_run", measuring(FLAT_US))
    result = CliRunner().invoke(app, ["bench", "all_reduce", "--nproc", "2", "-b", "1K", "-e", "512K", "-f", "8",
                                      "--backend", "gloo", "-O", str(out)])
    assert result.exit_code == 0, result.output
    assert ("note: all_reduce gloo n=2 world (1 domain) 1 KiB..512 KiB: time does not grow with size, so `fit` "
            "keeps it latency-only (no bandwidth from these points); for a bandwidth, measure up to 16 MiB (-e 16M)") in " ".join(result.output.split())
    monkeypatch.setattr(bench_cli, "_run", measuring(GROWING_US))   # appended: the earlier flat run is not this one's
    again = CliRunner().invoke(app, ["bench", "all_reduce", "--nproc", "2", "-b", "1K", "-e", "512K", "-f", "8",
                                     "--backend", "gloo", "-O", str(out)])
    assert again.exit_code == 0, again.output
    assert "does not grow with size" not in again.output


def test_sweep_closing_lines_say_a_curve_fit_cannot_use(tmp_path, monkeypatch):
    import commbench.cli.sweep as sweep_cli
    from commbench.sweep.runner import SweepOutcome

    file = tmp_path / "small.toml"
    file.write_text('[sweep]\nname = "small"\nbackend = "gloo"\nnproc = 2\n\n[[run]]\ncollective = "all_reduce"\n'
                    'sizes = ["1K", "8K", "64K", "512K"]\n')

    def fake_run(job, spec, nproc, backend, go_on):   # the ranks' records, as they write them
        _run(job.output_path, "s", FLAT_US)
        return {0: SweepOutcome(num_planned=4, num_skipped=0, num_ok=4, num_failed=0, num_wrong=0, stopped=None)}, (0, 0)

    monkeypatch.setattr(sweep_cli, "run_with_fresh_ranks", fake_run)
    result = CliRunner().invoke(app, ["sweep", str(file), "-O", str(tmp_path / "s.jsonl")])
    assert result.exit_code == 0, result.output
    assert ("note: all_reduce gloo n=2 world (1 domain) 1 KiB..512 KiB: time does not grow with size, so `fit` "
            "keeps it latency-only (no bandwidth from these points); for a bandwidth, measure up to 16 MiB (sizes in the sweep file)"
            ) in " ".join(result.output.split())


def test_a_fitted_profile_missing_a_collective_says_how_to_measure_it(tmp_path):
    """The README's chain bench all_reduce -> fit -> plan --system fab.json stopped at plan with 'reduce_scatter is not
    covered' and nothing on what to do: the refusal now says what to measure and how to fit it in."""
    results, fab = tmp_path / "r.jsonl", tmp_path / "fab.json"
    _run(results, "g", GROWING_US)
    assert CliRunner().invoke(app, ["fit", str(results), "-O", str(fab)]).exit_code == 0
    result = CliRunner().invoke(app, ["predict", "--fabric", str(fab), "-c", "reduce_scatter", "-g", "2", "-b", "1M",
                                      "-e", "1M"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "measure reduce_scatter too, e.g. `commbench bench reduce_scatter -e 16M" in " ".join(result.output.split())
