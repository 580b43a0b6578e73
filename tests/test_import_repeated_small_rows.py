"""import nccl-tests: an all_gather / reduce_scatter / alltoall log whose -b is below ranks x 16 B prints several
identical smallest-size rows (src/all_gather.cu: a rank's count aligned down to 16 bytes, so 8, 16, 32 and 64 B on 8
ranks all print `0 0`), and a -i step below the alignment prints each aligned size more than once. The importer took
each repeated row for the start of an -N cycle: one log became several runs, the import warned that a run 'repeats run
... already in' the fresh file, and compare claimed a run-to-run noise it never measured ('from 7 runs') and charged
8x the tests. A cycle is now where the size sweep restarts (src/common.cu TimeTest: `do { for (size = minbytes; ...)
} while (--repeat)`): the size falls, or the sweep already printed every size of its banner; a row repeating a point
of its sweep is that point again, its first row kept (a failed or wrong repeat kept beside it)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.importers.nccl_tests import import_file, parse_text
from commbench.results.records import Measurement, RunHeader

HEADER = ["#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   "
          "busbw  #wrong",
          "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  "
          "(GB/s)"]
RANKS = [f"#  Rank {r:2d} Group  0 Pid   4123 on     node-a device {r:2d} [0000:{r + 16:02x}:00] NVIDIA H100 80GB HBM3"
         for r in range(8)]
FOOTER = ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.2 ", "#"]


def _row(size: int, time_us: float, wrong: int = 0) -> str:
    algbw = size / time_us / 1e3
    cell = f"  {time_us:7.2f}  {algbw:6.2f}  {algbw * 7 / 8:6.2f}  {wrong:6d}"
    return f"{size:12d}  {size // 32:12d}     float    none      -1{cell}{cell}"


def _log(sizes: list[int], *, low: int = 8, high: int = 1 << 20, step: str = "2(factor)", cycles: int = 1,
         scale: float = 1.0, wrong_at: int | None = None) -> str:
    """An 8-rank all_gather -b `low` -e `high`: sizes printed as nccl-tests aligns them, `cycles` times (-N)."""
    rows = []
    for cycle in range(cycles):
        rows += [_row(s, (0.2 if s == 0 else 10 + s / 200e3) * scale * (1 + 0.01 * (i + cycle)),
                      1 if i == wrong_at else 0) for i, s in enumerate(sizes)]
    banner = (f"# nThread 1 nGpus 8 minBytes {low} maxBytes {high} step: {step} warmup iters: 5 iters: 20 agg iters: 1 "
              "validation: 1 graph: 0 unalign: 0")
    return "\n".join(["# nccl-tests version 2.17.6 nccl-headers=22703 nccl-library=22703",
                      "# Collective test starting: all_gather_perf", banner, "#", "# Using devices", *RANKS, "#",
                      *HEADER, *rows, *FOOTER]) + "\n"


def _aligned(size: int, ranks: int = 8) -> int:
    """The size nccl-tests prints for `size` bytes of float: a rank's count aligned down to 16 bytes (4 floats)."""
    return ((size // 4 // ranks) & ~3) * 4 * ranks


FACTOR_SIZES = [_aligned(8 << i) for i in range(18)]   # 8 B .. 1 MiB: 0 0 0 0 128 256 ...


def _runs(result) -> list[list[Measurement]]:
    headers = [r for r in result.records if isinstance(r, RunHeader)]
    return [[m for m in result.records if isinstance(m, Measurement) and m.run_id == h.run_id] for h in headers]


def test_rows_below_the_alignment_are_one_run_holding_each_point_once():
    assert FACTOR_SIZES[:5] == [0, 0, 0, 0, 128]
    result = parse_text(_log(FACTOR_SIZES), "all_gather_perf.log")
    runs = _runs(result)
    assert result.problems == [] and len(runs) == 1
    points = [(m.size_bytes, m.in_place) for m in runs[0]]
    assert len(points) == len(set(points)) == 2 * 15   # 0 B once, then 128 B .. 1 MiB
    zero = [m for m in runs[0] if m.size_bytes == 0 and not m.in_place]
    assert [m.loop_time_us["avg"] for m in zero] == [0.2]   # the first of the four 0 B rows
    header = next(r for r in result.records if isinstance(r, RunHeader))
    assert header.planned_points == 30 and "3 row(s) repeat" in header.notes[-1], header.notes


def test_a_byte_step_below_the_alignment_is_one_run():
    """-b 1K -e 2K -i 64 on 8 ranks: 17 sizes, each aligned size printed twice (was 9 runs)."""
    sizes = [_aligned(1024 + 64 * i) for i in range(17)]
    assert len(set(sizes)) == 9
    result = parse_text(_log(sizes, low=1024, high=2048, step="64(bytes)"), "all_gather_perf.log")
    assert result.problems == [] and [len(run) for run in _runs(result)] == [18]


def test_run_cycles_still_split_where_the_sweep_restarts():
    """-N 3: every cycle's rows after one another, each starting again at 0 B: three runs of the same points; a
    sweep of one printed size (-b 8 -e 64, all `0 0`) splits by the banner's count of sizes."""
    result = parse_text(_log(FACTOR_SIZES, cycles=3), "all_gather_perf.log")
    assert [len(run) for run in _runs(result)] == [30, 30, 30]
    tiny = parse_text(_log([0] * 4, high=64, cycles=2), "all_gather_perf.log")
    assert [len(run) for run in _runs(tiny)] == [2, 2]


def test_a_wrong_repeat_is_kept_beside_the_first():
    """The first 0 B row checks out, a repeat of it has wrong data: the failure is never hidden behind a good copy."""
    result = parse_text(_log(FACTOR_SIZES, wrong_at=2), "all_gather_perf.log")
    run, = _runs(result)
    assert sorted(m.num_wrong for m in run if m.size_bytes == 0) == [0, 0, 1, 1]


def test_json_rows_below_the_alignment_are_one_run(tmp_path):
    lines = _log(FACTOR_SIZES).splitlines()
    rows = [line.split() for line in lines if line[:12].strip().isdigit()]
    data = {"args": ["./build/all_gather_perf", "-b", "8", "-e", "1M", "-g", "8"],
            "config": {"nthreads": 1, "ngpus": 8, "minimum_bytes": 8, "maximum_bytes": 1 << 20, "step_factor": 2,
                       "warmup_iters": 5, "iterations": 20},
            "devices": [{"hostname": "node-a", "device_info": "NVIDIA H100 80GB HBM3"}],
            "results": [{"size": r[0], "count": r[1], "type": r[2], "redop": r[3], "root": r[4],
                         "out_of_place": {"time": float(r[5]), "alg_bw": float(r[6]), "bus_bw": float(r[7]),
                                          "nwrong": r[8]},
                         "in_place": {"time": float(r[9]), "alg_bw": float(r[10]), "bus_bw": float(r[11]),
                                      "nwrong": r[12]}} for r in rows],
            "out_of_bounds": 0, "average_bus_bandwidth": 1.2}
    path = tmp_path / "all_gather_perf.json"
    path.write_text(json.dumps(data))
    result = import_file(str(path))
    assert result.problems == [] and [len(run) for run in _runs(result)] == [30]


def test_compare_of_two_such_logs_measures_no_run_to_run_noise(tmp_path):
    runner = CliRunner()
    outs = []
    for name, scale in (("a", 1.0), ("b", 1.02)):
        log = tmp_path / f"all_gather_perf-{name}.log"
        log.write_text(_log(FACTOR_SIZES, scale=scale))
        outs.append(tmp_path / f"{name}.jsonl")
        out = runner.invoke(app, ["import", "nccl-tests", str(log), "-O", str(outs[-1])])
        assert out.exit_code == 0 and "repeats run" not in out.output, out.output
    gate = runner.invoke(app, ["compare", *map(str, outs), "--max-regression", "10%"])
    assert "runs: base 1, new 1" in gate.output and "not measured" in gate.output, gate.output
