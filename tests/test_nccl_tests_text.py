"""--format nccl-tests: the layout of nccl-tests 2.17 (src/util.cu format strings, rendered here with the
same printf formats), values right-aligned under their header labels as in the real logs in
tests/data/nccl-tests, getFloatStr's decimals, the footer over both placements; and a piped bench
prints each row before the next point starts, with a heartbeat while a point runs long."""

from __future__ import annotations

import dataclasses
import io
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

import numpy as np

from commbench.comm.launch import RankEnv
from commbench.measure.bench import BenchConfig, run_bench_rank
from commbench.measure.harness import LoopOptions
from commbench.results import nccl_tests_text as text
from commbench.measure.view import BenchView
from commbench.results.records import Measurement, RunHeader
from tests.distributed import free_port

DATA = Path(__file__).parent / "data" / "nccl-tests"
# nccl-tests 2.17 src/util.cu writeResultHeader / writeBenchmarkLinePreamble / writeBenchmarkLineBody
C_NAMES = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s"
C_UNITS = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s"
C_PREAMBLE = "%12li  %12li  %8s  %6s  %6s"
C_BODY = "  %7s  %6s  %6s  %6g"


def record(size, time_us, *, in_place, wrong=0, busbw=1.0, op="sum"):
    return Measurement(run_id="r", collective="all_reduce", backend="nccl", size_bytes=size, count=size // 4,
                       dtype="float32", op=op, in_place=in_place, world_size=8, group_size=8, iters=20,
                       warmup_iters=5, time_us_median=time_us, algbw_gbps=size / time_us / 1e3, busbw_gbps=busbw,
                       num_wrong=wrong, loop_time_us={"avg": time_us})


def test_header_and_rows_are_nccl_tests_printf_byte_for_byte():
    header = text.table_header()
    assert header[2] == C_NAMES % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                                   "time", "algbw", "busbw", "#wrong")
    assert header[3] == C_UNITS % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                                   "(GB/s)", "")
    oop, ip = record(1048576, 12345.6, in_place=False, busbw=1234.5), record(1048576, 3046.2, in_place=True, wrong=3)
    expected = (C_PREAMBLE % (1048576, 262144, "float", "sum", "%6i" % -1)
                + C_BODY % ("12345.6", "  0.08", "1234.5", 0) + C_BODY % ("3046.20", "  0.34", "  1.00", 3))
    assert text.row(oop, ip) == expected


def test_get_float_str_decimals():
    # 2 decimals while they fit the width, then 1, then 0, then exponent form (nccl-tests getFloatStr)
    assert [text.float_text(v, 7) for v in (12.61, 3046.2, 12345.6, 1234567.0, 123456789.0)] == \
        ["  12.61", "3046.20", "12345.6", "1234567", "1.2e+08"]
    assert [text.float_text(v, 6) for v in (0.0, 352.48, 1234.5, 12345.6)] == ["  0.00", "352.48", "1234.5", " 12346"]


def _label_ends(header_line: str) -> list[int]:
    """Where each header label ends (values are right-aligned to it)."""
    ends, inside = [], False
    for i, ch in enumerate(header_line + " "):
        if ch != " " and ch != "#" and not inside:
            inside = True
        elif ch == " " and inside:
            ends.append(i)
            inside = False
    return ends


def _field_ends(row: str) -> list[int]:
    return [i for i in range(1, len(row) + 1) if row[i - 1] != " " and (i == len(row) or row[i] == " ")]


def test_values_sit_under_their_labels_as_in_real_logs():
    ours = [text.row(record(s, t, in_place=False), record(s, t * 0.9, in_place=True), 1)
            for s, t in ((8, 12.61), (1 << 20, 24.86), (1 << 30, 3046.2), (1 << 33, 123456.0))]
    ours.append(text.row(record(64, 5.0, in_place=False), None, 1))  # a collective without in-place: N/A cells
    ends = _label_ends(text.table_header()[2])
    for row in ours:
        assert _field_ends(row) == ends, row
        fields = row.split()  # what `awk '{print $8}'` reads: busbw out-of-place, then in-place at $12
        assert len(fields) == 13 and fields[0].isdigit()
    # the real log (older nccl-tests: #wrong one column narrower) has the same columns up to busbw
    real = (DATA / "multi-collective-2.14.log").read_text().splitlines()
    real_header = next(line for line in real if "redop" in line)
    real_rows = [line for line in real if line[:12].strip().isdigit()]
    assert _label_ends(real_header)[:8] == ends[:8]
    assert all(_field_ends(line)[:8] == ends[:8] for line in real_rows)


def test_footer_averages_busbw_over_both_placements_and_counts_failed_cells():
    rows = [record(8, 10.0, in_place=False, busbw=1.0), record(8, 10.0, in_place=True, busbw=3.0, wrong=2)]
    assert text.footer(rows, "all_reduce") == ["# Out of bounds values : 1 FAILED", "# Avg bus bandwidth    : 2 ",
                                                "#", "# Collective test concluded: all_reduce_perf"]


def _header(world_size=2):
    return RunHeader(run_id="r", started_at="t", argv=[], commbench_version="0", python_version="3",
                     torch_version=None, nccl_version=None, cuda_version=None, cupy_version=None, backend="gloo",
                     world_size=world_size, hostnames=["h"] * world_size, devices=["cpu"] * world_size, nccl_env={},
                     launcher="local")


def test_banner_states_agg_iters_and_blocking_as_nccl_tests(capsys):
    # nccl-tests src/util.cu writeDeviceReport: "... iters: %d agg iters: %d validation: %d graph: %d", then
    # "# Blocking Enabled: wait and barrier after each inner iteration (-m) " when -z 1
    config = BenchConfig(collective="all_reduce", sizes_bytes=(64, 128), output_format="nccl-tests",
                         loop=LoopOptions(iters=3, warmup_iters=1, agg_iters=4, blocking=True))
    BenchView(config, _header(), 2).close()
    lines = capsys.readouterr().out.splitlines()
    banner = next(line for line in lines if line.startswith("# nThread"))
    assert " iters: 3 agg iters: 4 validation: 1 graph: 0" in banner
    assert "# Blocking Enabled: wait and barrier after each inner iteration (-m) " in lines
    BenchView(dataclasses.replace(config, loop=LoopOptions(iters=3, warmup_iters=1)), _header(), 2).close()
    lines = capsys.readouterr().out.splitlines()
    assert " agg iters: 1 " in next(line for line in lines if line.startswith("# nThread"))
    assert not any(line.startswith("# Blocking") for line in lines)


class _Lines(io.TextIOBase):
    """stdout for rank 0: keeps every line written, not a terminal."""

    def __init__(self):
        self.lines, self.partial = [], ""

    def write(self, s):
        self.partial += s
        *done, self.partial = self.partial.split("\n")
        self.lines += done
        return len(s)

    def isatty(self):
        return False


def _rank(rank, port, config, queue, slow_size):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import commbench.measure.bench as bench
    import commbench.measure.view as view

    view.HEARTBEAT_S = 0.1
    real = bench.measure_point
    seen = []
    out = _Lines()
    if rank == 0:
        sys.stdout = out

    def measured(backend, comm, collective, spec, loop, **kw):
        seen.append(len([line for line in out.lines if line[:12].strip().isdigit()]))  # rows printed so far
        if spec.size_bytes == slow_size:
            time.sleep(1.0)  # a long point: the heartbeat must speak
        return real(backend, comm, collective, spec, loop, **kw)

    bench.measure_point = measured
    env = RankEnv(rank=rank, world_size=2, local_rank=rank, launcher="single", master_addr="127.0.0.1", master_port=port)
    error = run_bench_rank(env, config).error
    sys.stdout = sys.__stdout__
    queue.put((rank, error, seen, out.lines))


def test_piped_bench_prints_each_row_before_the_next_point_and_a_heartbeat(tmp_path):
    for output_format, rows_per_point in (("table", 1), ("nccl-tests", 0.5)):
        config = BenchConfig(collective="all_reduce", sizes_bytes=(64, 256, 1024), backend="gloo", timeout_s=60,
                             output_path=str(tmp_path / f"{output_format}.jsonl"), output_format=output_format,
                             loop=LoopOptions(iters=2, warmup_iters=1))
        ctx = mp.get_context("fork")
        queue, port = ctx.Queue(), free_port()
        procs = [ctx.Process(target=_rank, args=(r, port, config, queue, 256), daemon=True) for r in range(2)]
        for proc in procs:
            proc.start()
        results = dict((r, rest) for r, *rest in (queue.get(timeout=120) for _ in range(2)))
        for proc in procs:
            proc.join(timeout=10)
        error, seen, lines = results[0]
        assert error is None
        assert seen == [int(i * rows_per_point) for i in range(len(seen))], (output_format, seen)  # row k before point k+1
        rows = [i for i, line in enumerate(lines) if line[:12].strip().isdigit()]
        beats = [i for i, line in enumerate(lines) if line.startswith("# still measuring 256")]
        assert len(rows) == 3 and beats and rows[0] < beats[0] < rows[1], lines
    assert np.all(np.diff(rows) > 0)


def _cycle(capsys, config, records, forms_per_size=2):
    """One -N cycle's view as rank 0 runs it: its text and what the next cycle continues from."""
    capsys.readouterr()
    view = BenchView(config, _header(8), len(records), forms_per_size=forms_per_size)
    for m in records:
        view.add(m)
    view.close(last=config.text_cycle.last)
    return capsys.readouterr().out, view.carried()


def test_run_cycles_print_one_banner_every_cycles_rows_and_one_footer_over_all(capsys):
    """nccl-tests -N (src/common.cu threadRunTests: the do/while over run_cycles inside one test) prints its
    banner and table header once, the rows of every cycle, and one footer over every cycle's cells; a cycle
    printed its own banner and footer (N footers, each averaging one cycle). A cycle that starts under another
    '# commbench point:' context than the last one ended under says so, and the import reads one run per cycle."""
    from commbench.results.importers.nccl_tests import parse_text
    from commbench.results.records import headers, measurements

    def pairs(m):
        return dataclasses.replace(m, group_size=2, group_layout="contiguous", num_groups=4)

    cycles = [[record(64, 10.0, in_place=False, busbw=1.0), record(64, 10.0, in_place=True, busbw=2.0, wrong=1),
               pairs(record(64, 8.0, in_place=False, busbw=3.0)), pairs(record(64, 8.0, in_place=True, busbw=4.0))],
              [record(64, 10.0, in_place=False, busbw=5.0), record(64, 10.0, in_place=True, busbw=6.0),
               pairs(record(64, 8.0, in_place=False, busbw=7.0)), pairs(record(64, 8.0, in_place=True, busbw=8.0))]]
    config = BenchConfig(collective="all_reduce", sizes_bytes=(64,), output_format="nccl-tests",
                         loop=LoopOptions(iters=20, warmup_iters=5), text_cycle=text.TextCycle(num_cycles=2))
    first, carried = _cycle(capsys, config, cycles[0])
    second, _ = _cycle(capsys, dataclasses.replace(config, text_cycle=carried.next_cycle()), cycles[1])
    lines = (first + second).splitlines()
    assert sum(line.startswith("# Collective test starting") for line in lines) == 1
    assert sum(line.startswith("# nThread") for line in lines) == 1
    assert sum(line.startswith("#       size") for line in lines) == 1
    assert not any(line.startswith("# Out of bounds") for line in first.splitlines())  # no footer mid-run
    # one footer, last: every cell of both cycles (8 busbw values, mean 4.5; one cell with wrong data)
    assert lines[-4:] == ["# Out of bounds values : 1 FAILED", "# Avg bus bandwidth    : 4.5 ", "#",
                          "# Collective test concluded: all_reduce_perf"]
    rows = [i for i, line in enumerate(lines) if line[:12].strip().isdigit()]
    assert len(rows) == 4 and rows[-1] == len(lines) - 5
    assert second.splitlines()[0] == text.POINT_PREFIX + "group_layout=world"  # cycle 1 ended under the pairs
    imported = parse_text(first + second, "log.txt")
    assert imported.problems == [] and len(headers(imported.records)) == 2  # one run per cycle, as our JSONL
    runs = {}
    for m in measurements(imported.records):
        runs.setdefault(m.run_id, []).append((m.in_place, m.group_size, m.group_layout,
                                              m.metrics["nccl_tests_printed_busbw_gbps"]))  # the cell's printed busbw
    assert list(runs.values()) == [[(False, 8, "world", 1.0), (True, 8, "world", 2.0), (False, 2, "contiguous", 3.0),
                                    (True, 2, "contiguous", 4.0)],
                                   [(False, 8, "world", 5.0), (True, 8, "world", 6.0), (False, 2, "contiguous", 7.0),
                                    (True, 2, "contiguous", 8.0)]]


def test_banner_states_graph_launches_and_their_iterations_as_nccl_tests(capsys):
    """-n 4 -G 5: nccl-tests' banner reads 'iters: 4 ... graph: 5' (src/util.cu writeDeviceReport prints iters
    and cudaGraphLaunches; 2.18 on end it with 'unalign: %d'); commbench's loop times the 20 replays of one
    iteration's graph, and the banner read 'iters: 20 ... graph: 1'. --cuda-graph alone is one launch."""
    loop = LoopOptions(iters=20, warmup_iters=1, cuda_graph=True)
    for graph_launches, loop_iters, expected in ((5, 20, " iters: 4 agg iters: 1 validation: 1 graph: 5 unalign: 0"),
                                                 (0, 4, " iters: 4 agg iters: 1 validation: 1 graph: 1 unalign: 0")):
        config = BenchConfig(collective="all_reduce", sizes_bytes=(64,), output_format="nccl-tests",
                             backend="cupy-nccl", graph_launches=graph_launches,
                             loop=dataclasses.replace(loop, iters=loop_iters))
        BenchView(config, _header(), 0).close()
        banner = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("# nThread"))
        assert banner.endswith(expected), banner


def test_moe_banner_states_its_tokens_and_layer_not_a_size_range(capsys):
    """moe_all_to_all is swept by --tokens, its sizes by tokens, hidden and top-k: nccl-tests' banner printed the
    -b/-e default range (minBytes 8 maxBytes 16777216 step: 2(factor)) it never used. It states what the table
    format's title does, and import still reads the banner (nThread ... iters)."""
    from commbench.results.importers.nccl_tests import _BANNER_RE

    config = BenchConfig(collective="moe_all_to_all", sizes_bytes=(8, 16, 32), output_format="nccl-tests",
                         params={"tokens_per_rank": [16, 32], "hidden": 64, "num_experts": None, "top_k": 2})
    BenchView(config, _header(), 0).close()
    banner = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("# nThread"))
    assert "minBytes" not in banner and "step:" not in banner, banner
    assert banner.startswith("# nThread 1 nGpus 1 tokens per rank: 16,32 (hidden 64, 64 experts, top-2, uniform "
                             "routing (seed 0), per-expert dispatch in bf16, combine in bf16; size: the busiest rank's "
                             "dispatch bytes) warmup iters: 5 iters: 20 "), banner
    assert _BANNER_RE.search(banner).groups() == ("1", "1", "5", "20")


def test_a_fractional_step_factor_is_the_banner_step_not_a_byte_step(tmp_path):
    # found from outside: -f 1.5 measured 1024, 1536, 2304, 3456 ... and the banner said 'step: 512(bytes)'; a parser
    # rebuilt the wrong sizes. nccl-tests prints step: %ld(factor) for -f (src/util.cu); its -f is an integer (strtol)
    import re
    import subprocess

    from commbench.results.importers.nccl_tests import _SIZES_RE, banner_sizes

    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    args = ["bench", "all_reduce", "--nproc", "2", "--backend", "gloo", "-n", "2", "-w", "0", "--format", "nccl-tests"]
    done = subprocess.run([sys.executable, "-m", "commbench", *args, "-b", "1K", "-e", "10K", "-f", "1.5",
                           "-O", str(tmp_path / "f.jsonl")], env=env, text=True, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "minBytes 1024 maxBytes 10240 step: 1.5(factor)" in done.stdout, done.stdout
    rows = sorted({int(m) for m in re.findall(r"^ +(\d+) +\d+ +float", done.stdout, re.M)})
    assert rows == [1024, 1536, 2304, 3456, 5184, 7776]
    sizes = _SIZES_RE.search(done.stdout)
    assert banner_sizes(int(sizes.group(1)), int(sizes.group(2)), float(sizes.group(3)), sizes.group(4)) == len(rows)
    assert text.step_number(2.0) == "2" and text.step_number(512) == "512"
    added = subprocess.run([sys.executable, "-m", "commbench", *args, "-b", "1K", "-e", "2K", "-i", "512",
                            "-O", str(tmp_path / "i.jsonl")], env=env, text=True, capture_output=True, timeout=120)
    assert "step: 512(bytes)" in added.stdout, added.stdout + added.stderr
