"""Probe P3 finding 1: commbench's own `--format nccl-tests` text with a row removed imported with planned_points null
and no word of the loss (nccl-tests' own log of the same table plans its points from the banner, so a lost row reads
"holds N of M points"). Our banner cannot plan them (sizes below the alignment measured once, a step standing in for a
list of sizes), so the text states its run's planned_points under the banner and the import plans from that."""

from __future__ import annotations

import dataclasses

from collectives import get_collective
from collectives.base import PointSpec
from commbench.dtypes import get_dtype
from commbench.measure.bench import BenchConfig
from commbench.measure.harness import LoopOptions, measure_point
from commbench.results.importers.nccl_tests import parse_text
from commbench.results.provenance import collect_header
from commbench.results.records import headers, measurements
from tests.distributed import run_ranks
from tests.nccl_tests_inputs import bench_view_text

SIZES = (1024, 4096, 16384)


def _measure(backend):
    header = collect_header(backend, run_id="ours", argv=["test"], launcher="local")
    loop = LoopOptions(iters=2, warmup_iters=0)
    records = [measure_point(backend, backend.world, get_collective("all_gather"),
                             PointSpec(size_bytes=size, dtype=get_dtype("float32")), loop, run_id="ours")
               for size in SIZES]
    return dataclasses.replace(header, planned_points=len(records)), records


def _text(capsys, header, records) -> str:
    config = BenchConfig(collective="all_gather", sizes_bytes=SIZES, output_format="nccl-tests",
                         loop=LoopOptions(iters=2, warmup_iters=0))
    return bench_view_text(capsys, config, header, records)


def test_a_row_missing_from_our_own_text_is_a_point_lost(capsys):
    header, records = run_ranks(_measure, 3, timeout_s=120)[0]
    text = _text(capsys, header, records)
    assert "# planned points: 3 " in text
    (whole,) = headers(parse_text(text, "log.txt").records)
    assert whole.planned_points == 3 and any("3 held" in note and "not in the log" not in note
                                             for note in whole.notes), whole.notes
    lines = text.splitlines()
    rows = [i for i, line in enumerate(lines) if line[:12].strip().isdigit()]
    assert len(rows) == 3
    cut = "\n".join(lines[:rows[1]] + lines[rows[1] + 1:])   # the middle size's row lost
    imported = parse_text(cut, "log.txt")
    (header_read,) = headers(imported.records)
    assert len(measurements(imported.records)) == 2
    assert header_read.planned_points == 3   # was None: compare and report saw a whole run
    assert any("2 held, 1 not in the log" in note for note in header_read.notes), header_read.notes


def _old_text(banner_sizes: str, sizes: tuple[int, ...]) -> str:
    """commbench's text as written before its '# planned points:' line, a row per size in `sizes`."""
    return "\n".join([
        "# nccl-tests version commbench-0.1.0 nccl-headers=0 nccl-library=0",
        "# Collective test starting: all_gather_perf",
        f"# nThread 1 nGpus 1 {banner_sizes} warmup iters: 0 iters: 2 agg iters: 1 "
        "validation: 1 graph: 0 unalign: 0",
        "#", "# Using devices",
        *[f"#  Rank {r:2d} Group  0 Pid      0 on         vm device  0 [0000:00:00] cpu" for r in range(2)],
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   "
        "busbw  #wrong",
        *[f"{size:12d}  {size // 8:12d}     float    none      -1    20.00  {size / 20e3:6.2f}  {size / 40e3:6.2f}       0"
          "      N/A     N/A     N/A     N/A" for size in sizes],
        "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0.23 ", "#",
        "# Collective test concluded: all_gather_perf"])


def test_a_text_without_the_line_plans_from_its_banner_where_its_rows_lie_on_it():
    """Probe P3: commbench's texts written before the line imported a row deleted as a whole run (no plan at all);
    they plan from their banner's sweep as a real nccl-tests log does, where every row lies on that sweep."""
    banner = "minBytes 1024 maxBytes 16384 step: 4(factor)"
    (header,) = headers(parse_text(_old_text(banner, (1024, 16384)), "log.txt").records)   # the 4096 row deleted
    assert header.planned_points == 3 and any("2 held, 1 not in the log" in n for n in header.notes), header.notes
    (whole,) = headers(parse_text(_old_text(banner, (1024, 4096, 16384)), "log.txt").records)
    assert whole.planned_points == 3 and any("3 held" in n and "not in" not in n for n in whole.notes), whole.notes


def test_a_text_without_the_line_whose_step_stood_in_for_a_list_plans_nothing():
    """A list of sizes (1K, 4K, 4992 B) printed the step of its first two (3072 bytes): 4992 is not on the banner's
    sweep, which cannot plan the rows."""
    text = _old_text("minBytes 1024 maxBytes 4992 step: 3072(bytes)", (1024, 4096, 4992))
    imported = parse_text(text, "log.txt")
    (header,) = headers(imported.records)
    assert len(measurements(imported.records)) == 3 and header.planned_points is None
