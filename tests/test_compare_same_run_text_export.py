"""commbench's own JSONL of a run and the import of that run's `--format nccl-tests` text are one run: the gate
passed such a pair with every ratio 1.000 (probe Q finding 1), as _same_within_print_rounding gave up wherever one
side had per-iteration times. Now the pair is compared at the text's precision and refused without
--allow-same-run; two separate runs (one's JSONL, the other's text) are still judged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.compare import runs_of_base
from commbench.results.print_rounding import printed_half_unit_us
from commbench.results.records import from_dict

runner = CliRunner()
BENCH = ["bench", "all_gather", "--nproc", "2", "-b", "1K", "-e", "8K", "-f", "8", "-n", "5", "-w", "1",
         "--timeout", "60", "--format", "nccl-tests"]


def _run(tmp_path, name):
    """(native JSONL, imported text) of one real run."""
    native, log, imported = (tmp_path / f"{name}.jsonl", tmp_path / f"{name}.log", tmp_path / f"{name}i.jsonl")
    root = str(Path(__file__).parent.parent)
    bench = subprocess.run([sys.executable, "-m", "commbench", *BENCH, "-O", str(native)], capture_output=True,
                           text=True, timeout=150, cwd=root, env={**os.environ, "PYTHONPATH": root})
    assert bench.returncode == 0, bench.stdout + bench.stderr
    log.write_text(bench.stdout)
    done = runner.invoke(app, ["import", "nccl-tests", str(log), "-O", str(imported)])
    assert done.exit_code == 0, done.output
    return native, imported


def _records(path):
    return [from_dict(r) for r in map(json.loads, path.read_text().splitlines()) if r["record_type"] == "measurement"]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runs")
    return _run(tmp, "a"), _run(tmp, "b")


def test_a_run_and_the_import_of_its_own_text_are_one_run(two_runs):
    (native, imported), _ = two_runs
    assert any(m.iter_times_us for m in _records(native)) and not any(m.iter_times_us for m in _records(imported))
    assert "printed rounding" in next(iter(runs_of_base(_records(native), _records(imported)).values()))
    assert "printed rounding" in next(iter(runs_of_base(_records(imported), _records(native)).values()))
    for base, new in ((native, imported), (imported, native)):
        refused = runner.invoke(app, ["compare", str(base), str(new)])
        assert refused.exit_code == 2 and "holds no run of its own" in refused.output, refused.output
        assert runner.invoke(app, ["compare", str(base), str(new), "--allow-same-run"]).exit_code != 2


def test_a_separate_run_is_not_taken_for_the_same_one(two_runs):
    (native_a, imported_a), (native_b, imported_b) = two_runs
    for base, new in ((native_a, imported_b), (imported_b, native_a), (native_b, imported_a), (imported_a, imported_b)):
        assert runs_of_base(_records(base), _records(new)) == {}, (base.name, new.name)
        judged = runner.invoke(app, ["compare", str(base), str(new)])
        assert "holds no run of its own" not in judged.output, judged.output


def test_a_point_that_differs_by_more_than_half_a_printed_digit_is_another_run(two_runs):
    import dataclasses

    (native, imported), _ = two_runs
    records = _records(imported)
    first = records[0]
    moved = {k: v + 2 * printed_half_unit_us(v) for k, v in first.loop_time_us.items()}
    changed = [dataclasses.replace(first, loop_time_us=moved), *records[1:]]
    assert runs_of_base(_records(native), changed) == {}


def test_half_a_printed_digit_in_the_exponent_form():
    """getFloatStr prints 7 wide: from 1e7 us "%.1e", two significant digits."""
    assert printed_half_unit_us(12_345_678.0) == pytest.approx(0.5e6, rel=0.01)
    assert printed_half_unit_us(99.0) == pytest.approx(0.005, rel=0.01)


def test_a_point_the_run_failed_is_no_row_of_its_text_and_it_is_still_one_run(two_runs):
    """nccl-tests' text prints a failed point's cells N/A, and import keeps no record of it."""
    import dataclasses

    (native, imported), (other, _) = two_runs
    records = _records(native)
    failed = dataclasses.replace(records[0], status="failed", error="timed out", time_us_median=None,
                                 time_us_mean=None, time_us_min=None, time_us_max=None, time_us_p99=None,
                                 iter_times_us=[], loop_time_us={}, algbw_gbps=None, busbw_gbps=None, num_wrong=None)
    key = (failed.size_bytes, failed.in_place)
    text = [m for m in _records(imported) if (m.size_bytes, m.in_place) != key]
    assert "printed rounding" in next(iter(runs_of_base([failed, *records[1:]], text).values()))
    # a point the text lacks that the run measured is another matter: not the same run
    assert runs_of_base(records, text) == {}
    assert runs_of_base([failed, *_records(other)[1:]], text) == {}
