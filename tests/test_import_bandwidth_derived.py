"""An imported nccl-tests log stored the printed 2-decimal algbw/busbw (probe Q finding 3): 0.0134 GB/s became 0.01
and every point printed 0.00 vanished from report's busbw plot (log axis). Now algbw = size / time and busbw = algbw x
the test's factor (nccl-tests src/<test>.cu GetBw; a sub-group's size where commbench's point line names one), the
printed values kept in metrics as a cross-check, a note where they disagree beyond the print rounding."""

from __future__ import annotations

import pytest

from commbench.results.importers.nccl_tests import parse_text
from commbench.results.records import Measurement


def _log(collective: str, ranks: int, rows: list[str], point: str = "") -> str:
    lines = ["# nccl-tests version commbench-0.1.0 nccl-headers=0 nccl-library=0",
             f"# Collective test starting: {collective}_perf",
             "# nThread 1 nGpus 1 minBytes 1024 maxBytes 65536 step: 8(factor) warmup iters: 1 iters: 5 agg iters: 1 "
             "validation: 1 graph: 0 unalign: 0", "#", "# Using devices"]
    lines += [f"#  Rank {r:2d} Group  0 Pid      0 on         vm device  0 [0000:00:00] cpu (x86_64)"
              for r in range(ranks)]
    lines += ["#", "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   "
              "algbw   busbw  #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  "
              "(GB/s)       "]
    lines += ([f"# commbench point: {point}"] if point else []) + rows
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0.00252247 ", "#",
              f"# Collective test concluded: {collective}_perf"]
    return "\n".join(lines) + "\n"


def _points(text: str) -> list[Measurement]:
    result = parse_text(text, "log.txt")
    assert result.problems == [], result.problems
    return [m for m in result.records if isinstance(m, Measurement)]


# commbench's own --format nccl-tests rows (bench all_gather --nproc 4 -b 1K -e 64K -f 8 on gloo)
GATHER_ROWS = [
    "        1024            64     float    none      -1  2708.83    0.00    0.00       0  3446.40    0.00    0.00       0",
    "        8192           512     float    none      -1  4415.14    0.00    0.00       0  9707.74    0.00    0.00       0",
    "       65536          4096     float    none      -1  9404.28    0.01    0.01       0  6662.50    0.01    0.01       0"]


def test_bandwidths_come_from_size_and_time_not_the_printed_two_decimals():
    points = _points(_log("all_gather", 4, GATHER_ROWS))
    assert len(points) == 6
    for m in points:
        time_us = m.loop_time_us["avg"]
        assert m.algbw_gbps == pytest.approx(m.size_bytes / time_us / 1e3)
        assert m.busbw_gbps == pytest.approx(m.algbw_gbps * 3 / 4) and m.busbw_gbps > 0   # none is 0.00
        assert m.metrics["nccl_tests_printed_busbw_gbps"] in (0.0, 0.01)   # the printed value, beside it
        assert not any("print rounding" in note for note in m.notes), m.notes   # the printed ones agree
    small = next(m for m in points if m.size_bytes == 1024 and not m.in_place)
    assert small.busbw_gbps == pytest.approx(0.000284, rel=1e-2)   # 1024 B / 2708.83 us x 3/4


def test_a_sub_group_point_uses_its_group_size_and_a_wrong_world_is_noted():
    # 1 MiB in 10 us: algbw 104.86 GB/s; all_reduce busbw x 2(n-1)/n: 1.0 on groups of 2, 1.5 on the world of 4
    world = "     1048576        262144     float     sum      -1    10.00  104.86  157.29       0    10.00  104.86  157.29       0"
    group = "     1048576        262144     float     sum      -1    10.00  104.86  104.86       0    10.00  104.86  104.86       0"
    w = _points(_log("all_reduce", 4, [world]))[0]
    assert w.busbw_gbps == pytest.approx(1048576 / 10e3 * 1.5) and not any("print rounding" in n for n in w.notes)
    g = _points(_log("all_reduce", 4, [group], point="group_size=2 group_layout=contiguous num_groups=2"))[0]
    assert g.group_size == 2 and g.busbw_gbps == pytest.approx(1048576 / 10e3)
    # the world's busbw printed beside a 2-rank log: the log's numbers say 4 ranks, the record's factor 2
    two = _points(_log("all_reduce", 2, [world]))[0]
    assert two.busbw_gbps == pytest.approx(1048576 / 10e3) and two.metrics["nccl_tests_printed_busbw_gbps"] == 157.29
    assert any("printed busbw 157.29" in note and "print rounding" in note for note in two.notes), two.notes


def test_moe_all_to_all_keeps_its_printed_bandwidths_and_says_so():
    row = ("       16384          8192  bfloat16    none      -1  2803.94    0.01    0.01       0      N/A     N/A     "
           "N/A     N/A")
    (m,) = _points(_log("moe_all_to_all", 2, [row]))
    assert m.algbw_gbps == 0.01 and m.busbw_gbps == 0.01   # the round trip's bytes, not the size: not derivable
    assert any("as printed" in note for note in m.notes), m.notes


def test_a_json_file_and_its_text_log_are_still_one_run():
    """The printed bandwidths kept in metrics differ between a -J file (full digits) and its text log (2 decimals):
    compare's same-run check leaves them out, as it leaves out the bandwidths themselves."""
    import json
    from pathlib import Path

    from commbench.results.compare import runs_of_base
    from commbench.results.importers.nccl_tests import parse_json

    data = json.loads((Path(__file__).parent / "data" / "nccl-tests" / "sendrecv.json").read_text())
    rows = []
    for row in data["results"]:
        cells = [row[k] for k in ("out_of_place", "in_place")]
        rows.append(f"{row['size']:12d}  {row['count']:12d}  {row['type']:>8}  {row['redop']:>6}  {-1:6d}" + "".join(
            f"  {c['time']:7.2f}  {c['alg_bw']:6.2f}  {c['bus_bw']:6.2f}  "
            + ("   N/A" if c["nwrong"] is None else f"{c['nwrong']:6g}") for c in cells))
    text = _log("sendrecv", 2, rows).replace("commbench-0.1.0 nccl-headers=0 nccl-library=0",
                                             "2.17.4 nccl-headers=22703 nccl-library=22703").replace(
        "warmup iters: 1 iters: 5", "warmup iters: 5 iters: 20")
    from_json = [m for m in parse_json(data, "sendrecv.json").records if isinstance(m, Measurement)]
    from_text = _points(text)
    assert len(from_json) == len(from_text) == 4
    assert from_json[0].metrics != from_text[0].metrics   # the printed digits differ
    assert "printed rounding" in next(iter(runs_of_base(from_json, from_text).values()))


def test_the_importers_factor_table_is_the_collectives_own():
    """The importer holds nccl-tests' busbw factors itself (results may not import collectives); they are the ones
    commbench's collectives measure with, for every collective both know, at several rank counts."""
    from collectives import get_collective
    from commbench.results.importers.nccl_tests import DERIVED_BANDWIDTH, bus_factor

    for name in DERIVED_BANDWIDTH - {"gather", "scatter"}:
        for n in (2, 3, 4, 8, 72):
            assert bus_factor(name, n) == pytest.approx(get_collective(name).busbw_factor(n)), (name, n)
