"""commbench's --format nccl-tests text (the bench view's banner, rows and footer) re-imports to the
same points, world size and nccl-tests time as its own records: `compare imported ours` shows no
difference, for every -a mode. Ranks are forked in-process (fast); the CLI path is in test_bench_cli."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from collectives import get_collective
from collectives.base import PointSpec
from commbench.dtypes import get_dtype
from commbench.measure.bench import BenchConfig
from commbench.measure.harness import LoopOptions, measure_point
from commbench.measure.view import BenchView
from commbench.results.compare import compare
from commbench.results.importers.nccl_tests import parse_text
from commbench.results.provenance import collect_header
from commbench.results.records import NCCL_TESTS_AVERAGE_MODES, headers, measurements
from tests.distributed import run_ranks
from tests.nccl_tests_inputs import bench_view_text

SIZES = (1024, 4096, 16384)


def _measure(backend, collective):
    header = collect_header(backend, run_id="ours", argv=["test"], launcher="local")
    loop = LoopOptions(iters=5, warmup_iters=1)
    records = [measure_point(backend, backend.world, get_collective(collective),
                             PointSpec(size_bytes=size, dtype=get_dtype("float32")), loop, run_id="ours")
               for size in SIZES]
    return header, records


@pytest.mark.parametrize("collective,average", [("all_gather", 1), ("all_reduce", 3), ("broadcast", 0)])
def test_own_nccl_tests_text_round_trips(capsys, collective, average):
    header, mine = run_ranks(_measure, 3, args=(collective,))[0]
    config = BenchConfig(collective=collective, sizes_bytes=SIZES, output_format="nccl-tests", average=average,
                         loop=LoopOptions(iters=5, warmup_iters=1))
    text = bench_view_text(capsys, config, header, mine)
    imported = parse_text(text, "log.txt")
    assert imported.problems == []
    (imported_header,) = headers(imported.records)
    assert imported_header.world_size == 3  # from the `#  Rank` lines
    theirs = measurements(imported.records)
    mode = NCCL_TESTS_AVERAGE_MODES[average]
    assert [m.size_bytes for m in theirs] == [m.size_bytes for m in mine]
    assert all(set(m.loop_time_us) == {mode} and m.collective == collective for m in theirs)
    # the text says the backend it ran (its version line's nccl-library=0: no NCCL, so gloo): it was read as NCCL
    # 0.0.0, and a gloo run imported so passed for an NCCL one
    assert mine[0].backend == "gloo" and all(m.backend == "gloo" for m in theirs)
    assert imported_header.backend == "gloo" and imported_header.nccl_version is None
    # an nccl-tests log after it in the same file is NCCL's again: each run's version line sets its backend
    real = (Path(__file__).parent / "data" / "nccl-tests" / "multi-collective-2.14.log").read_text()
    later = headers(parse_text(text + real, "both.txt").records)[1:]
    assert later and all(h.backend == "nccl" and h.nccl_version for h in later)
    comparison = compare(theirs, mine, max_regression=0.1)
    assert len(comparison.points) == len(mine) and comparison.only_in_base == comparison.only_in_new == 0
    for point in comparison.points:
        # never slower: the text only rounds. Where our samples barely vary (a noise interval narrower than the
        # text's rounding), a rounded-up base can read as "faster", which the ratio bound below keeps at rounding
        assert point.statistic == f"nccl-{mode}" and point.verdict in ("ok", "faster")
        # the text's rounding: nccl-tests prints 2, 1 or 0 decimals as the time grows past 1e4 and 1e5 µs
        half_step = 0.005 if point.base_us < 1e4 else 0.05 if point.base_us < 1e5 else 0.5
        assert point.ratio == pytest.approx(1.0, abs=1.2 * half_step / point.base_us + 1e-9)


def test_all_gather_chunks_are_trimmed_to_16_bytes_as_nccl_tests():
    all_gather = get_collective("all_gather")
    assert all_gather.count_for(1024, 4, 3) == (84, 1008)  # nccl-tests: 1008 B, not 1020 B
    assert all_gather.count_for(8, 4, 2) == (1, 8)  # below 16 B per rank: untrimmed (nccl-tests would run 0)
    assert get_collective("reduce_scatter").count_for(1000, 2, 4) == (120, 960)


def _measure_variants(backend):
    """all_reduce on the world and on pairs (contiguous), both placements; grad_reduce_scatter flat and
    hierarchical: points the nccl-tests columns alone cannot tell apart."""
    from commbench.measure.bench import GroupCache
    from commbench.measure.harness import GroupInfo
    from commbench.measure.subgroups import make_groups

    header = collect_header(backend, run_id="ours", argv=["test"], launcher="local")
    loop, f32, comms = LoopOptions(iters=2, warmup_iters=0), get_dtype("float32"), GroupCache(backend)
    all_reduce, all_gather, records = get_collective("all_reduce"), get_collective("all_gather"), []
    for groups, info in ((None, GroupInfo()), (make_groups(4, 2, "contiguous"), GroupInfo(layout="contiguous", num_groups=2))):
        for size in (1024, 4096):
            for in_place, out_of_place in ((False, True), (True, False)):
                spec = PointSpec(size_bytes=size, dtype=f32, in_place=in_place, out_of_place=out_of_place)
                records.append(measure_point(backend, comms.get(groups), all_reduce, spec, loop, run_id="ours", group=info))
    grad = []
    for algorithm in ("flat", "hierarchical"):
        spec = PointSpec(size_bytes=4096, dtype=f32, params={"algorithm": algorithm, "ranks_per_rack": 2})
        grad.append(measure_point(backend, backend.world, get_collective("grad_reduce_scatter"), spec, loop, run_id="ours"))
    pairs = make_groups(4, 2, "strided")
    gathers = [measure_point(backend, comms.get(pairs), all_gather, PointSpec(size_bytes=1024, dtype=f32), loop,
                             run_id="ours", group=GroupInfo(layout="strided", num_groups=2))]
    return header, records, grad, gathers


def _render(capsys, config, header, records, forms_per_size):
    capsys.readouterr()
    view = BenchView(config, header, len(records), forms_per_size=forms_per_size)
    for record in records:
        view.add(record)
    view.close()
    return capsys.readouterr().out


def test_sub_group_and_algorithm_points_round_trip_as_themselves(capsys):
    """Rows of pairs and of the whole world (or of two algorithms) print the same nccl-tests columns: a
    '# commbench point:' line before each kind says which, and the import reads it back. Without it the
    pairs were imported as 4-rank points, merged with the world's, and flat with hierarchical."""
    header, records, grad, gathers = run_ranks(_measure_variants, 4, timeout_s=120)[0]
    config = BenchConfig(collective="all_reduce", sizes_bytes=(1024, 4096), output_format="nccl-tests",
                         loop=LoopOptions(iters=2, warmup_iters=0))
    text = _render(capsys, config, header, records, forms_per_size=2)
    rows = [line for line in text.splitlines() if line[:12].strip().isdigit()]
    assert len(rows) == 4 and all("N/A" not in row for row in rows)  # both placements on one row, as nccl-tests
    theirs = measurements(parse_text(text, "log.txt").records)
    assert [(m.size_bytes, m.in_place, m.group_size, m.group_layout, m.num_groups) for m in theirs] == \
        [(m.size_bytes, m.in_place, m.group_size, m.group_layout, m.num_groups) for m in records]
    assert [m.busbw_gbps for m in theirs] == pytest.approx([m.busbw_gbps * m.time_us_median / m.loop_time_us["avg"]
                                                            for m in records], abs=0.006)
    config = dataclasses.replace(config, collective="grad_reduce_scatter", sizes_bytes=(4096,))
    theirs = measurements(parse_text(_render(capsys, config, header, grad, forms_per_size=1), "log.txt").records)
    assert [m.params.get("algorithm") for m in theirs] == ["flat", "hierarchical"]
    # all_gather's count is one rank's chunk: size = count x the GROUP's ranks, not the world's
    config = dataclasses.replace(config, collective="all_gather", sizes_bytes=(1024,))
    imported = parse_text(_render(capsys, config, header, gathers, forms_per_size=1), "log.txt")
    assert imported.problems == [] and [(m.size_bytes, m.group_size, m.group_layout)
                                        for m in measurements(imported.records)] == [(1024, 2, "strided")]
