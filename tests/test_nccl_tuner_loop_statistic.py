"""nccl-tuner on imported nccl-tests logs: an import holds nccl-tests' time only (loop time / iterations averaged over
ranks, loop_time_us['avg']: nccl-tests src/common.cu at v2.19.6:772,783), so `--statistic mean` (and the default
median) left every point out, "left out 44 points without a mean time", with no word of what the imports hold
(probe EN: logs/p.jsonl, r.jsonl). Now `--statistic nccl-avg` (compare's name for it) ranks by that time, and the
refusal names it. A point's noise for it comes from its per-iteration samples (a mean over the same iterations), else
from its max over that time; with neither (a text log without -I) it is unknown and the point never makes a rule."""

from __future__ import annotations

import dataclasses
import math

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.comm.nccl_tuning import TuningCombo
from commbench.results.nccl_tuner import points_from_records, record_noise_rel, record_time_us
from commbench.results.records import read_records
from tests.nccl_tests_inputs import text_log
from tests.test_nccl_tuner import _record

RING_LL = TuningCombo(algo="ring", proto="ll")


def _imported(tmp_path) -> str:
    log, out = tmp_path / "all_reduce_perf.log", tmp_path / "imported.jsonl"
    log.write_text(text_log())
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "-O", str(out)])
    assert result.exit_code == 0, result.output
    return str(out)


def test_a_statistic_imports_do_not_hold_is_refused_naming_the_one_they_hold(tmp_path):
    path = _imported(tmp_path)
    result = CliRunner().invoke(app, ["nccl-tuner", path, "--statistic", "mean", "-O", str(tmp_path / "c.conf")])
    assert result.exit_code == 2
    assert "without a mean time: they hold nccl-tests' time only" in result.output
    assert "rank them by --statistic nccl-avg" in " ".join(result.output.split())


def test_imports_rank_by_nccl_tests_time(tmp_path):
    path = _imported(tmp_path)
    points, notes = points_from_records(read_records([path]), "nccl-avg")
    assert len(points) == 6 and not any("without" in n for n in notes)
    assert sorted({p.time_us for p in points})[:2] == [26.45, 26.99]   # the log's time column, as printed
    assert all(p.noise_rel == math.inf for p in points)   # one number per point, no -I: noise unknown, no rule
    conf = tmp_path / "c.conf"
    result = CliRunner().invoke(app, ["nccl-tuner", path, "--statistic", "nccl-avg", "-O", str(conf)])
    assert result.exit_code == 0, result.output
    assert "NCCL default kept" in conf.read_text()


def test_nccl_tests_time_takes_its_noise_from_the_samples_else_the_max():
    record = dataclasses.replace(_record("a", 1024, RING_LL, 10.0), loop_time_us={"avg": 10.2},
                                 iter_times_us=[10.0, 10.4] * 10)
    assert record_time_us(record, "nccl-avg") == 10.2 and record_time_us(record, "nccl-rank0") is None
    assert record_noise_rel(record, "nccl-avg") == pytest.approx(record_noise_rel(record, "mean"))
    bare = dataclasses.replace(record, iter_times_us=[], time_us_p99=None, time_us_max=12.24)
    assert record_noise_rel(bare, "nccl-avg") == pytest.approx(0.2)   # (max - time) / time, as median's p99 spread
    assert record_noise_rel(dataclasses.replace(bare, time_us_max=None), "nccl-avg") == math.inf
