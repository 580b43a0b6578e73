"""nccl-tests -d all -N 2: every data type's cycles before the next type's (src/common.cu at v2.19.6: the type loop of
all_reduce.cu:572-576 calls TimeTest, whose `do { ... } while (--repeat)` at common.cu:934-943 runs the N cycles). The
import split the rows in file order into 3 runs: [float cycle 1], [float cycle 2 + half cycle 1], [half cycle 2]
(found from outside, imp/K_dall_N2.log); cycle k is now one run holding every type's k-th pass, text and -J alike."""

from __future__ import annotations

import json

from commbench.results.importers.nccl_tests import import_file
from commbench.results.records import Measurement, RunHeader

SIZES = (8, 16, 32, 64, 128)
BYTES = {"float": 4, "half": 2}
TIME_US = {("float", 0): 10.0, ("float", 1): 10.5, ("half", 0): 13.0, ("half", 1): 13.5}   # (type, cycle) at 8 B


def _rows() -> list[tuple[int, str, float]]:
    """(size, type, out-of-place time) in nccl-tests' order: type by type, each type's 2 cycles one after another."""
    return [(size, kind, TIME_US[kind, cycle] + i) for kind in ("float", "half") for cycle in (0, 1)
            for i, size in enumerate(SIZES)]


def _log() -> str:
    lines = ["# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803",
             "# Collective test starting: all_reduce_perf",
             "# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
             "validation: 1 graph: 0 unalign: 0", "#", "# Using devices"]
    lines += [f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on      nodeA device {r:2d} [0000:{0x18 + r:02x}:00] "
              "NVIDIA H100 80GB HBM3" for r in range(4)]
    lines += ["#", "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   "
              "algbw   busbw  #wrong", "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
              "             (us)  (GB/s)  (GB/s)"]
    for size, kind, time_us in _rows():
        lines.append(f"{size:12d}  {size // BYTES[kind]:12d}  {kind:>8}     sum      -1  {time_us:7.2f}    0.00    0.00"
                     f"       0  {time_us + 0.2:7.2f}    0.00    0.00       0")
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0.005", "#",
              "# Collective test concluded: all_reduce_perf"]
    return "\n".join(lines) + "\n"


def _json() -> dict:
    results = [{"size": size, "count": size // BYTES[kind], "type": kind, "redop": "sum", "root": "    -1",
                "out_of_place": {"time": time_us, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": 0.0},
                "in_place": {"time": time_us + 0.2, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": 0.0}}
               for size, kind, time_us in _rows()]
    return {"version": 3, "start_time": "2026-12-01 10:00:00", "nccl_version": 22803,
            "args": ["./build/all_reduce_perf", "-b", "8", "-e", "128", "-f", "2", "-d", "all", "-N", "2"], "env": [],
            "config": {"nthreads": 1, "ngpus": 1, "minimum_bytes": 8, "maximum_bytes": 128, "step_factor": 2,
                       "warmup_iters": 5, "iterations": 20, "aggregated_iterations": 1, "validation": 1, "graph": 0,
                       "devices": [{"rank": r, "hostname": "nodeA", "device_info": "NVIDIA H100 80GB HBM3"}
                                   for r in range(4)]},
            "results": results, "out_of_bounds": {"count": 0, "okay": True}}


def _cycles(path) -> list[dict[str, list[float]]]:
    """Per run (file order of headers): {dtype: its out-of-place 8 B times}, and that every run holds every point."""
    result = import_file(str(path))
    assert result.problems == []
    headers = [r for r in result.records if isinstance(r, RunHeader)]
    points = [r for r in result.records if isinstance(r, Measurement)]
    runs = []
    for header in headers:
        mine = [p for p in points if p.run_id == header.run_id]
        assert sorted((p.dtype, p.size_bytes, p.in_place) for p in mine) == sorted(
            (dtype, size, in_place) for dtype in ("float16", "float32") for size in SIZES for in_place in (False, True))
        runs.append({dtype: [p.loop_time_us["avg"] for p in mine if p.dtype == dtype and p.size_bytes == 8
                             and not p.in_place] for dtype in ("float32", "float16")})
    return runs


def test_dall_n2_text_log_imports_one_run_per_cycle_holding_every_type(tmp_path):
    log = tmp_path / "all_reduce_perf.log"
    log.write_text(_log())
    assert _cycles(log) == [{"float32": [10.0], "float16": [13.0]}, {"float32": [10.5], "float16": [13.5]}]


def test_dall_n2_json_imports_one_run_per_cycle_holding_every_type(tmp_path):
    path = tmp_path / "all_reduce_perf.json"
    path.write_text(json.dumps(_json()))
    assert _cycles(path) == [{"float32": [10.0], "float16": [13.0]}, {"float32": [10.5], "float16": [13.5]}]
