"""Small nccl-tests outputs built inline for the importer's tests: a 2.19.6 text log (banner, two `#  Rank` lines,
rows, footer) and a -J JSON file (JSON_FILE_VERSION 3), in the layouts src/util.cu writes."""

from __future__ import annotations

import json

ROWS = ("     1048576        262144     float     sum      -1    26.99   38.85   38.85       0    26.45   39.64   39.64       0",
        "     4194304       1048576     float     sum      -1    47.96   87.45   87.45       0    47.00   89.24   89.24       0",
        "    16777216       4194304     float     sum      -1   131.85  127.25  127.25       0   129.21  129.84  129.84       0")


def text_log(rows=ROWS, *, footer: str | None = "# Out of bounds values : 0 OK", banner_tail: str = "unalign: 0",
             extra_banner_lines: tuple[str, ...] = (), hosts=("node-a", "node-a")) -> str:
    """A 2-rank all_reduce_perf log of nccl-tests 2.19.6 (sizes 1M..16M x4); `footer` None: the run stopped."""
    lines = ["# nccl-tests version 2.19.6 nccl-headers=22804 nccl-library=22804",
             "# Collective test starting: all_reduce_perf",
             "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 16777216 step: 4(factor) warmup iters: 5 iters: 20 "
             f"agg iters: 1 validation: 1 graph: 0 {banner_tail}", *extra_banner_lines,
             "#", "# Using devices"]
    lines += [f"#  Rank {r:2d} Group  0 Pid   {1000 + r} on     {host} device  {r} [0000:18:00] NVIDIA H100 80GB HBM3"
              for r, host in enumerate(hosts)]
    lines += ["#", "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   "
              "algbw   busbw  #wrong ",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  "
              "(GB/s)        ", *rows]
    if footer is not None:
        lines += [footer, "# Avg bus bandwidth    : 85.3 ", "#"]
    return "\n".join(lines) + "\n"


def json_file(results=None, *, closed: bool = True, devices=None, ngpus: int = 1, blocking: bool = False,
              extra_args: tuple[str, ...] = ()) -> str:
    """A -J file of an all_reduce_perf run (2 ranks, 1M..16M x4 unless `results` given); `closed` False: without
    the keys jsonOutputFinalize writes after a run that completed (out_of_bounds, average_bus_bandwidth,
    end_time), as a run that failed mid-way leaves it."""
    def cell(time):
        return {"time": time, "alg_bw": 38.85, "bus_bw": 38.85, "nwrong": 0.0}
    if results is None:
        results = [{"size": size, "count": size // 4, "type": "float", "redop": "sum", "root": "    -1",
                    "out_of_place": cell(20.0 * k + 10), "in_place": cell(20.0 * k + 9)}
                   for k, size in enumerate((1 << 20, 1 << 22, 1 << 24))]
    devices = devices or [{"rank": r, "group": 0, "pid": 100 + r, "hostname": "node-a", "device": r,
                           "device_hex": "0000:18:00", "device_info": "NVIDIA H100 80GB HBM3"} for r in range(2)]
    data = {"version": 3, "start_time": "2026-12-01 10:00:00",
            "args": ["all_reduce_perf", "-b", "1M", "-e", "16M", "-f", "4", "-J", "o.json", *extra_args], "env": [],
            "nccl_version": 22804,
            "config": {"nthreads": 1, "ngpus": ngpus, "minimum_bytes": 1 << 20, "maximum_bytes": 1 << 24,
                       "step_factor": 4, "warmup_iters": 5, "iterations": 20, "aggregated_iterations": 1,
                       "validation": 1, "graph": 0, "blocking_collectives": "true" if blocking else "false",
                       "devices": devices},
            "results": results}
    if closed:
        data.update({"out_of_bounds": {"count": 0, "okay": "true"},
                     "average_bus_bandwidth": {"bandwidth": 85.3, "okay": "unchecked"}, "end_time": "2026-12-01 10:01:00"})
    return json.dumps(data)


def v211_log(errors=("2e-07", "2e-07", "2e-07"), *, footer: str | None = "# Out of bounds values : 0 OK") -> str:
    """A 2-rank all_reduce_perf log in nccl-tests 2.11.0's layout (no version line, no root column, `error` = the
    max deviation, "%5.0le", in both cells of a row)."""
    lines = ["# nThread 1 nGpus 1 minBytes 1048576 maxBytes 16777216 step: 4(factor) warmup iters: 5 iters: 20 "
             "validation: 1 ", "#", "# Using devices",
             "#   Rank  0 Pid   1000 on     node-a device  0 [0x18] NVIDIA H100 80GB HBM3",
             "#   Rank  1 Pid   1001 on     node-a device  1 [0x19] NVIDIA H100 80GB HBM3", "#",
             "#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error",
             "#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"]
    for k, (size, error) in enumerate(zip((1 << 20, 1 << 22, 1 << 24), errors)):
        lines.append(f"{size:12d}  {size // 4:12d}     float     sum  {20.0 * k + 10:7.2f}   38.85   38.85  {error}  "
                     f"{20.0 * k + 9:7.2f}   39.64   39.64  {error}")
    if footer is not None:
        lines += [footer, "# Avg bus bandwidth    : 85.3 ", "#"]
    return "\n".join(lines) + "\n"


def bench_view_text(capsys, config, header, records) -> str:
    """The --format nccl-tests text rank 0's BenchView prints for `records` under `config` (capsys cleared first)."""
    from commbench.measure.view import BenchView

    capsys.readouterr()
    view = BenchView(config, header, len(records))
    for record in records:
        view.add(record)
    view.close()
    return capsys.readouterr().out
