"""import nccl-tests: a result row with another rank's NCCL_DEBUG text written into it (mpirun/srun interleave every
rank's output) was skipped before the row test with no word, --strict exited 0, and a log with its footer planned no
point count, so compare and report took the narrowed file for the whole sweep. Such a row is now an unparsed line
(counted, named; --strict exits 1), and every run's header plans its banner's sweep (minBytes .. maxBytes by the step:
src/common.cu TimeTest), so a missing size is seen ("holds N of M points") whatever the footer says."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.importers.nccl_tests import parse_text
from commbench.results.records import Measurement, RunHeader

BANNER = ("# nThread 1 nGpus 1 minBytes 1024 maxBytes 8192 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
          "validation: 1 graph: 0")
HEADER = ["#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
          "busbw #wrong",
          "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  "
          "(GB/s)       "]
RANKS = [f"#  Rank  {r} Group  0 Pid  4123{r} on    node-a device  {r} [0x18] NVIDIA H100 80GB HBM3" for r in range(4)]
FOOTER = ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.2 ", "#"]


def _row(size: int, dtype_bytes: int = 4, time_us: float = 10.5) -> str:
    return (f"{size:12d}  {size // dtype_bytes:12d}     float     sum      -1  {time_us:7.2f}    0.10    0.15      0  "
            f"{time_us:7.2f}    0.10    0.15      0")


def _log(rows: list[str], banner: str = BANNER) -> str:
    return "\n".join([banner, "#", "# Using devices", *RANKS, "#", *HEADER, *rows, *FOOTER]) + "\n"


def _planned(result) -> list[tuple[int | None, int]]:
    return [(h.planned_points, sum(1 for m in result.records if isinstance(m, Measurement) and m.run_id == h.run_id))
            for h in result.records if isinstance(h, RunHeader)]


def test_a_row_carrying_nccl_log_text_is_an_unparsed_line_and_strict_fails(tmp_path):
    garbled = "        4096          1024     float    node-a:41233:41300 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via P2P"
    rows = [_row(1024), _row(2048), garbled, _row(8192)]
    result = parse_text(_log(rows), "all_reduce_perf.log")
    assert [(line, why) for _, line, _, why in result.problems] == [(13, result.problems[0][3])]
    assert "NCCL log text" in result.problems[0][3] and "NCCL INFO" in result.problems[0][3]
    assert _planned(result) == [(8, 6)]   # 4 sizes x 2 cells planned, the garbled row's 2 missing
    log = tmp_path / "all_reduce_perf.log"
    log.write_text(_log(rows))
    out = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "-O", str(tmp_path / "r.jsonl"), "--strict"])
    assert out.exit_code == 1 and "1 line(s) not parsed" in out.output and ":13:" in out.output, out.output
    # NCCL's own lines between rows stay what they are: not nccl-tests', skipped, not problems
    info = "node-a:41233:41300 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via P2P/CUMEM"
    clean = parse_text(_log([_row(1024), info, _row(2048), _row(4096), _row(8192)]), "all_reduce_perf.log")
    assert clean.problems == [] and _planned(clean) == [(8, 8)]


def test_a_log_with_its_footer_missing_a_size_plans_the_banners_sweep_and_compare_sees_it(tmp_path):
    whole, gap = tmp_path / "whole.log", tmp_path / "gap.log"
    whole.write_text(_log([_row(s) for s in (1024, 2048, 4096, 8192)]))
    gap.write_text(_log([_row(s) for s in (1024, 2048, 8192)]))   # the 4096 B row is not in the log, the footer is
    runner = CliRunner()
    for log in (whole, gap):
        out = runner.invoke(app, ["import", "nccl-tests", str(log), "-O", str(log.with_suffix(".jsonl")),
                                  "--collective", "all_reduce"])
        assert out.exit_code == 0, out.output
    assert _planned(parse_text(gap.read_text(), "gap.log", "all_reduce")) == [(8, 6)]
    gate = runner.invoke(app, ["compare", str(whole.with_suffix(".jsonl")), str(gap.with_suffix(".jsonl")),
                               "--allow-missing"])
    assert gate.exit_code == 1 and "holds 6 of the 8 point(s)" in gate.output, gate.output
    same = runner.invoke(app, ["compare", str(whole.with_suffix(".jsonl")), str(whole.with_suffix(".jsonl")),
                               "--allow-same-run"])
    assert same.exit_code == 0, same.output


def test_sizes_nccl_tests_prints_twice_below_its_alignment_are_not_missing_sizes():
    """all_gather on 8 ranks with -b 8: the sizes below 16 B a rank print as `0 0` rows (src/all_gather.cu
    AllGatherGetCollByteCount aligns each rank's count down to 16 bytes): one run holding the 0 B point once (its first
    row: tests/test_import_repeated_small_rows.py); the table still holds one row per size of its sweep: the run plans
    what it holds."""
    banner = BANNER.replace("nGpus 1 minBytes 1024 maxBytes 8192", "nGpus 8 minBytes 8 maxBytes 256")
    zero = "           0             0     float    none      -1     0.19    0.00    0.00      0     0.17    0.00    0.00      0"
    rows = [zero] * 4 + [f"{s:12d}  {s // 32:12d}     float    none      -1    11.54    0.01    0.01      0    11.25    "
                         "0.01    0.01      0" for s in (128, 256)]
    result = parse_text("\n".join([banner, *HEADER, *rows, *FOOTER]), "all_gather_perf.log")
    assert result.problems == [] and all(planned == held for planned, held in _planned(result)), _planned(result)
    cut = parse_text("\n".join([banner, *HEADER, *rows[:5], *FOOTER]), "all_gather_perf.log")   # 256 B lost
    assert _planned(cut)[-1][0] - _planned(cut)[-1][1] == 2, _planned(cut)


def test_a_stopped_cycle_is_warned_at_the_line_its_own_rows_start():
    """-N 2 (src/common.cu TimeTest: the sizes loop run twice, rows one after another), killed during cycle 2: the
    'stopped during it' warning pointed at cycle 1's first row; it names the line where the stopped cycle starts."""
    sizes = (1024, 2048, 4096, 8192)
    log = "\n".join([BANNER, "#", "# Using devices", *RANKS, "#", *HEADER, *[_row(s) for s in sizes],
                     *[_row(s) for s in sizes[:2]]]) + "\n"
    result = parse_text(log, "all_reduce_perf.log")
    assert result.stopped == [("all_reduce_perf.log", 15)], result.stopped   # cycle 2's first row: 11 + 4
    assert _planned(result) == [(8, 8), (8, 4)]
