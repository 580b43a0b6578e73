"""Probe P3: commbench's own `--format nccl-tests` text printed a FAILED point as an all-N/A cell, which `import
nccl-tests` skips as a cell never measured: the failure became a point 'not reached', and `compare` against the
import passed where `compare` against the JSONL failed. A failed cell now prints its time and bandwidths as nan (as
nccl-tests prints a time it has no valid value for), which the import keeps as a failed point."""

from __future__ import annotations

import dataclasses

from commbench.measure.bench import BenchConfig
from commbench.measure.harness import LoopOptions
from commbench.results import nccl_tests_text as text
from commbench.results.importers.nccl_tests import parse_text
from commbench.results.records import measurements
from tests.distributed import run_ranks
from tests.nccl_tests_inputs import bench_view_text
from tests.test_nccl_tests_text_plan import SIZES, _measure


def _failed(m):
    return dataclasses.replace(m, status="failed", error="RuntimeError: rank 1 was killed", time_us_median=None,
                               time_us_mean=None, time_us_min=None, time_us_max=None, time_us_p99=None,
                               iter_times_us=None, loop_time_us={}, algbw_gbps=None, busbw_gbps=None, num_wrong=None)


def test_a_failed_point_is_failed_after_export_and_import(capsys):
    header, records = run_ranks(_measure, 3, timeout_s=120)[0]
    records = [*records[:-1], _failed(records[-1])]
    config = BenchConfig(collective="all_gather", sizes_bytes=SIZES, output_format="nccl-tests",
                         loop=LoopOptions(iters=2, warmup_iters=0))
    exported = bench_view_text(capsys, config, header, records)
    sizes = [m.size_bytes for m in records]   # aligned as nccl-tests aligns them on 3 ranks
    last = [line for line in exported.splitlines() if line[:12].strip() == str(sizes[-1])]
    assert len(last) == 1 and last[0].split()[5:9] == ["nan", "nan", "nan", "N/A"], exported
    imported = measurements(parse_text(exported, "log.txt").records)
    by_size = {m.size_bytes: m for m in imported if not m.in_place}
    assert by_size[sizes[-1]].status == "failed", imported   # was absent: 'not reached', no failure
    assert [by_size[s].status for s in sizes[:-1]] == ["ok", "ok"]


def test_a_cell_never_measured_stays_n_a():
    m = _failed(text_record())
    assert text._cell(None, 1) == text._ABSENT and text._cell(dataclasses.replace(m, status="skipped"), 1) == text._ABSENT
    assert text._cell(m, 1) == text._FAILED


def text_record():
    from tests.test_nccl_tests_text import record

    return record(1024, 10.0, in_place=False)
