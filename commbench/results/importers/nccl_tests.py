"""Read nccl-tests output into commbench records, so models can be fitted from existing logs.

Text tables (src/util.cu's writeResultHeader / writeBenchmarkLine*), in every layout seen in logs:
- with and without the `root` column (it arrived with the rooted tests in nccl-tests 2.x);
- `error` (older: max abs error, a float such as 0e+00) or `#wrong` (newer: wrong elements);
- `time`, per-iteration columns (i_min i_max i_p99 i_cv%), a trailing timestamp; a `cputime` table (-C 1)
  is refused in one line (CPUTIME_REFUSAL), its rows skipped; so is nccl-tests 1.x's (V1_REFUSAL: time in ms);
- `N/A` cells (#wrong without -c, in-place of tests that have none) and rows with only one placement;
- the banner (`# nThread ... iters: ...`, `# nccl-tests version ...`), `# Using devices` + `#  Rank`
  lines (a process's block cut at nccl-tests' 2048-character cap: the world from the banner, nccl_tests_devices),
  `NCCL INFO`/`NCCL WARN` lines interleaved (NCCL's "NCCL_X set by environment to V" / "NCCL_X set to V"
  become the run header's nccl_env, as a -J file's env), launcher command lines, footers;
- several collectives in one log: a run starts at `# Collective test starting: X_perf` (newer) or at
  a command line naming `X_perf` (older), or takes the file name / the --collective given;
- -N cycles: one banner, each data type/op/root's cycles one after another (src/common.cu TimeTest); where its size
  sweep restarts (nccl_tests_cycles: its size falls, or it printed every size of its banner) its next pass starts, and
  cycle k's run holds every sweep's k-th pass, as commbench's own -N results hold one run per cycle; a row repeating
  its sweep's point (sizes below nccl-tests' alignment print alike) is that point again, its first row kept.
And the `-J` JSON file (JSON_FILE_VERSION 2: config, devices, results[].out_of_place / in_place).

nccl-tests' `time` is the timed loop's time / iters, reduced over ranks by its -a mode (average by
default; `-a N` on a command line in the log, or commbench's own `(-a N)` comment, says otherwise): it
is stored as Measurement.loop_time_us[mode], never as the per-iteration median (which nccl-tests does
not report), so compare and fits know which statistic they hold. Before nccl-tests 2.10.0 there was no -a and
the time is rank 0's (AVERAGE_SINCE): a run of several timing processes/threads from such a version (its printed
version, or --nccl-tests-version) is stored as loop_time_us['rank0']; one of unknown version is noted and warned. Lines that are none of the above
are returned as problems with their line number, never dropped silently.

The collective comes from `X_perf` in the log or the file name; a name that is not a known nccl-tests
test (`old_all_reduce_perf.log`) is refused: pass --collective.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from commbench import __version__
from commbench.comm.backends import BACKEND_NAMES
from commbench.errors import CommbenchError
from commbench.results.importers.nccl_tests_flags import (BLOCKING_UNKNOWN, BLOCKING_UNKNOWN_NOTE, blocking_from_banner,
                                                         blocking_from_json, kernel_params)
from commbench.results.importers.moe_banner import moe_params, parse_moe_banner
from commbench.results.importers.nccl_tests_cycles import Cycles
from commbench.results.importers.nccl_tests_devices import CUT_MARK, DeviceList
from commbench.results.importers.nccl_tests_planned import TableCount
from commbench.results.importers import nccl_tests_per_iter as per_iter
from commbench.results.nccl_tests_text import MOE_POINT_KEYS, MOE_POINT_METRICS, PLANNED_PREFIX
from commbench.results.print_rounding import printed_bandwidth_slack_gbps, printed_half_unit_gbps
from commbench.results.records import (AGG_GROUPED, AGG_UNGROUPED, IMPORTED_LAUNCHER, NCCL_TESTS_AVERAGE_MODES,
                                       Measurement, Record, RunHeader, new_run_id)

COLLECTIVE_NAMES = {"all_reduce": "all_reduce", "reduce_scatter": "reduce_scatter", "all_gather": "all_gather",
                    "alltoall": "all_to_all", "sendrecv": "sendrecv", "broadcast": "broadcast", "reduce": "reduce",
                    "gather": "gather", "scatter": "scatter", "hypercube": "hypercube", "alltoallv": "all_to_all_v",
                    # commbench's own workloads, as its --format nccl-tests output names them
                    "moe_all_to_all": "moe_all_to_all", "grad_reduce_scatter": "grad_reduce_scatter"}
DTYPE_NAMES = {"float": "float32", "half": "float16", "double": "float64", "bfloat16": "bfloat16", "int8": "int8",
               "uint8": "uint8", "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
               "f8e4m3": "float8_e4m3", "f8e5m2": "float8_e5m2"}
NCCL_TYPE_BYTES = {"float": 4, "half": 2, "double": 8, "bfloat16": 2, "int8": 1, "uint8": 1, "int32": 4, "uint32": 4,
                   "int64": 8, "uint64": 8, "f8e4m3": 1, "f8e5m2": 1}
# nccl-tests prints size = max(send, recv) bytes and count = the collective's count argument (src/common.cu,
# writeBenchmarkLinePreamble; each src/<test>.cu's GetCollByteCount): one rank's chunk where the buffer holds one
# per rank, the whole buffer for the others.
PER_RANK_COUNT = frozenset({"all_gather", "reduce_scatter", "all_to_all", "gather", "scatter", "hypercube"})
WHOLE_COUNT = frozenset({"all_reduce", "broadcast", "reduce", "sendrecv"})
# Tests that print their -o op in the redop column though they reduce nothing (src/sendrecv.cu SendRecvRunTest
# passes run_opnames[j] to TimeTest): their points carry no op, as commbench's own records of them.
PRINTS_UNUSED_OP = frozenset({"sendrecv"})
POINT_LINE = "commbench point:"  # commbench's --format nccl-tests (results/nccl_tests_text.py POINT_PREFIX)
POINT_KEYS = ("group_size", "group_layout", "num_groups", "algorithm", *MOE_POINT_KEYS, *MOE_POINT_METRICS)
TIME_NOTE = "imported from nccl-tests: time is nccl-tests' loop time / iters over ranks (loop_time_us), not a median"
# -C 1 (src/common.cu BenchTime: cputimeSec is taken before completeColl, on the printing rank alone, and algbw/busbw
# still come from deltaSec): the column is the host time to enqueue the loop, not the collective's time.
# nccl-tests 1.x (tag v1.0.0, 2018; src/<test>.cu print_header, src/common.cu BenchTime): columns 'bytes N type op
# [root] time algbw busbw res', time in ms ("%7.3f" of seconds x 1e3), its banner and footer lines without '#'.
V1_REFUSAL = ("nccl-tests 1.x table (columns 'bytes N ... res', time in ms, before v2.0.0): not read, its rows are "
              "skipped; rerun with nccl-tests 2.x")
# A time cell nccl-tests printed as nan: the point ran and gave no valid time, a
# failed point kept as one (status failed, no time), never dropped: a dropped point reads as missing, which
# compare --allow-missing permits, where a failed one fails the gate
NAN_TIME = "nccl-tests printed no valid time for this point: time"
# nccl-tests before 2.13 printed, per point, the max deviation from the expected result (`error`, "%5.0le") and
# counted a failed check where it exceeds DeltaMaxValue(type) x (nranks - 1) (src/common.cu CheckData, v2.9.0-v2.11.0),
# the count only in the footer ("# Out of bounds values : N FAILED"). A printed error beyond that bound (strictly:
# one significant digit, so the true value is beyond it too) is a failed check: num_wrong 1, at least one element
# wrong (how many, nccl-tests < 2.13 does not print); integer types' bound is 1e-200: any error.
DELTA_MAX = {"half": 1e-2, "bfloat16": 1e-2, "float": 1e-5, "double": 1e-12, "int8": 1e-200, "uint8": 1e-200,
             "int32": 1e-200, "uint32": 1e-200, "int64": 1e-200, "uint64": 1e-200}
OLD_CHECK_NOTE = ("nccl-tests < 2.13 data check failed: max error {error:g} beyond its bound {bound:g} (DeltaMaxValue x "
                  "(nranks - 1), src/common.cu CheckData); num_wrong 1 stands for at least one wrong element (the "
                  "count is not printed)")
FOOTER_CHECK_NOTE = ("nccl-tests' footer says '# Out of bounds values : {count} FAILED' and no row's printed error "
                     "tells which point: each point of the run with a nonzero max error is taken as wrong (num_wrong "
                     "1: at least one element)")
_OUT_OF_BOUNDS_RE = re.compile(r"Out of bounds values\s*:\s*(\d+)\s+FAILED")
# nccl-tests' bitwise repeatability check (-B N, "Add collective bitwise repeatability checks", nccl-tests commit
# 3a3f1e8: src/common.cu, src/util.cu): a "#bitdiff" column per placement, "%8g" of the bits that differ between
# the repeats and the reference run, and the footer "# Bitwise mismatches : %d FAILED|OK"
_BITWISE_RE = re.compile(r"Bitwise mismatches\s*:\s*(\d+)\s+FAILED")
# NCCL_TESTS_MIN_BW set: "# Avg bus bandwidth : %g FAILED" where the average busbw is below 0.9 x it (src/util.cu
# writeResultFooter; nccl-tests then exits with testNumResults)
_AVG_BW_FAILED_RE = re.compile(r"Avg bus bandwidth\s*:\s*(\S+)\s+FAILED")
BITDIFF_ERROR = ("nccl-tests' bitwise repeatability check FAILED: {bits:g} bit(s) differ between repeats of the "
                 "collective (#bitdiff, -B)")
BITWISE_FOOTER_ERROR = ("nccl-tests' footer says '# Bitwise mismatches : {count} FAILED' and no row's #bitdiff said "
                        "which point: every point of the run taken as failed")
AVG_BW_FOOTER_ERROR = ("nccl-tests' footer says '# Avg bus bandwidth : {bw} FAILED' (below 0.9 x NCCL_TESTS_MIN_BW): "
                       "the run failed nccl-tests' own bandwidth check; every point of it taken as failed")
FOOTER_LINES = ("Out of bounds values", "Avg bus bandwidth")  # what nccl-tests prints after a run's last row
STOPPED_RUN = ("the run whose rows start here stopped during it (no footer, '# Out of bounds values' / '# Avg bus "
               "bandwidth', after its rows: an NCCL failure, a kill or a time limit): the sizes it had still to "
               "measure are not in the records")
STOPPED_JSON_RUN = ("the -J file has no out_of_bounds / average_bus_bandwidth / end_time keys, which nccl-tests writes "
                    "after a run's last size: its (last) run stopped during it (an NCCL failure, a kill, a time "
                    "limit): the sizes it had still to measure are not in the records")
V1_BARE_LINES = ("nThread ", "Out of bounds values", "Avg bus bandwidth", "Swap Comms Enabled", "Blocking Enabled",
                 "Parallel Init Enabled")
CPUTIME_REFUSAL = ("time column is cputime (nccl-tests -C 1: host time to launch the loop, taken before the GPU "
                   "finishes and on one rank; algbw/busbw come from the real time): its rows are not imported, "
                   "rerun without -C")
# Before nccl-tests 2.10.0 the time column is rank 0's, never an average: BenchTime (src/common.cu at tag v2.9.0) divides
# each thread's own loop time by iters, and PRINT (src/common.h: `if (is_main_thread)`, process 0's thread 0) prints
# that thread's deltaSec with the algbw/busbw computed from it. -a/--average (default 1 = the average over ranks) arrived
# in v2.10.0 (src/common.cu, commit 1dfc76e "Added new option to report average iteration time"). The printed layout
# is the same in 2.9 and 2.10, so only a version says which it is: the log's `# nccl-tests version` line (printed since
# v2.17.4), --nccl-tests-version, or a column or flag those versions lack (-a; #wrong, since v2.13.0).
AVERAGE_SINCE = (2, 10, 0)
RANK0_TIME_NOTE = ("nccl-tests < 2.10.0: time (and algbw/busbw) is rank 0's (process 0, thread 0) loop time / iters, "
                   "not an average over ranks (src/common.cu at v2.9.0; -a arrived in v2.10.0): stored as "
                   "loop_time_us['rank0']")
UNKNOWN_VERSION_NOTE = ("nccl-tests version unknown (the log prints none): if it is before 2.10.0 the time is rank 0's, "
                        "not the average over its {} ranks' timing threads; pass --nccl-tests-version to record which")
# The release that brought -a (AVERAGE_SINCE, 2.10.0 exactly), built with MPI: -a 1 sums one time per process
# (MPI_Allreduce over MPI_COMM_WORLD) and divides the sum by nProcs x nThreads x nGpus (src/common.cu at v2.10.0,
# BenchTime); v2.10.1 averages over every rank. With N GPUs or threads per process the printed time is then 1/N of the
# average and algbw/busbw N x high; a build without MPI prints the process's own time. The log says neither, so the
# rows are kept as printed, noted and warned.
AVERAGE_2_10_0_NOTE = ("nccl-tests 2.10.0: built with MPI, its -a 1 time is the per-process sum divided by nProcs x "
                       "nThreads x nGpus (src/common.cu at v2.10.0; fixed in v2.10.1), so with {n} GPUs/threads per "
                       "process it reads {n}x low and algbw/busbw {n}x high; kept as printed (a build without MPI is "
                       "right)")
# NCCL's own log lines (NCCL_DEBUG=INFO/WARN: "host:pid:tid [dev] NCCL INFO ...", src/debug.cc ncclDebugLog), which
# other ranks of an mpirun/srun job print into the same output, at any point of a line nccl-tests is writing
NCCL_LOG_RE = re.compile(r"NCCL (?:INFO|WARN)\b")
# The NCCL_* settings NCCL says it read, in its INFO lines (NCCL_DEBUG=INFO): "<NAME> set by environment to <v>"
# (src/misc/param.cc ncclLoadParam, with a '.' after integers; src/graph/paths.cc, tuning.cc, init.cc, socket.cc,
# ...) and "<NAME> set to <v>" (src/misc/socket.cc NCCL_SOCKET_IFNAME, src/transport/net_ib/init.cc NCCL_IB_HCA,
# src/bootstrap.cc NCCL_OOB_NET_IFNAME): a text log's counterpart of a -J file's "env"
NCCL_ENV_LOG_RE = re.compile(r"NCCL INFO (NCCL_[A-Z0-9_]+) set (?:by environment )?to (\S+)")
# The process an NCCL log line is from: its "host:pid:tid [dev] NCCL INFO" prefix (src/debug.cc ncclDebugLog at v2.27.7-1:
# lines 352 and 365; a timestamp or a launcher's tag may come before it), as nccl-tests' '#  Rank ... Pid P on HOST'
# lines name a run's processes (nccl_tests_devices.DeviceList.processes)
NCCL_LINE_PROCESS_RE = re.compile(r"([^\s:]+):(\d+):\d+ \[\d+\] NCCL INFO")
# NCCL's own version line, printed once per process at its first communicator (nccl src/init.cc showVersion:
# VERSION_STRING "NCCL version <major>.<minor>.<patch><suffix>+cuda<major>.<minor>"): an INFO line at NCCL_DEBUG=INFO,
# bare at NCCL_DEBUG=WARN or VERSION (src/debug.cc adds no "host:pid:tid" at NCCL_LOG_VERSION; a "[%F %T] " timestamp
# where NCCL_DEBUG_TIMESTAMP_LEVELS names VERSION). Logs before nccl-tests 2.17.4 name their NCCL nowhere else.
NCCL_VERSION_INFO_RE = re.compile(r"NCCL INFO NCCL version (\d+\.\d+\.\d+)")
NCCL_VERSION_BARE_RE = re.compile(r"(?:\[[^\]]*\]\s*)?NCCL version (\d+\.\d+\.\d+)\S*")
ROW_WITH_NCCL_LOG = ("the row carries NCCL log text (another rank's NCCL_DEBUG output written into it): its cells are "
                     "not read; the point is missing from the records")
_PERF_RE = re.compile(r"\b([a-z_]+?)_perf(?:_mpi)?\b")
_AVERAGE_RE = re.compile(r"(?:^|\s|\()(?:-a|--average)[ =]?([0-3])\b")
_BANNER_RE = re.compile(r"nThread (\d+) nGpus (\d+).*?warmup iters: (\d+) iters: (\d+)")
# the same banner's size sweep (src/common.cu: "minBytes %ld maxBytes %ld step: %ld(%s)", factor or bytes)
_SIZES_RE = re.compile(r"minBytes (\d+) maxBytes (\d+) step: (\d+(?:\.\d+)?)\((factor|bytes)\)")  # commbench: 1.5(factor)
# the same banner's -m and -G (src/util.cu: "agg iters: %d validation: %d graph: %d"), absent from old logs
_AGG_RE = re.compile(r"\bagg iters: (\d+)")
_ITER_SKIP_RE = re.compile(r"summary skips first (\d+) iterations")
_GRAPH_RE = re.compile(r"\bgraph: (\d+)")
# what a launcher puts before each line it forwards: `mpirun --tag-output` ("[1,0]<stdout>:"; Open MPI's job, rank)
# and `srun -l` ("0: ", the task number right-aligned); nccl-tests' own lines never start with either
_LAUNCHER_PREFIX_RE = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+: )")
_UNALIGN_RE = re.compile(r"\bunalign: (\d+)")
# commbench's own terminal intro above its --format nccl-tests banner (measure/view.py): "commbench 0.1.0: all_reduce on
# gloo, 2 rank(s) ..."
_COMMBENCH_INTRO_RE = re.compile(r"commbench \S+: \S+ on ([a-z-]+),")
# the racks commbench's text states above its intro (comm/topology.py Topology.describe): "topology: 2 rack(s) x 1
# rank(s) per scale-up domain (from COMMBENCH_RANKS_PER_RACK (commbench emulate)): 0;1" (at most 4 racks shown)
_PLANNED_RE = re.compile(PLANNED_PREFIX.lstrip("# ") + r"(\d+)\b")  # commbench's text (nccl_tests_text.planned_line)
_TOPOLOGY_RE = re.compile(r"topology: (\d+) rack\(s\) (?:x (\d+) rank\(s\)|of \S+ rank\(s\)) per scale-up domain "
                          r"\(from (.*)\): (\S+)$")
# `commbench emulate`'s own lines around the command's output (cli/emulate.py), kept by a `| tee`: known, not data
_EMULATE_LINE_RE = re.compile(r"^(?:emulated fabric: \d+ rack\(s\) x \d+ rank\(s\); |rack \d+ uplink \(measured veth "
                              r"counters\): )")
_VERSION_RE = re.compile(r"nccl-tests version (\S+).*?nccl-library=(\d+)")


@dataclass
class ImportResult:
    records: list[Record] = field(default_factory=list)
    problems: list[tuple[str, int, str, str]] = field(default_factory=list)  # (source, line, text, reason)
    # (source, first row line[, why]): a run with no footer (why: STOPPED_RUN unless given, as for a -J file)
    stopped: list[tuple] = field(default_factory=list)
    # run id -> (planned_points, note) for every run whose banner says what it planned (nccl_tests_planned.TableCount;
    # commbench's own --format nccl-tests text: its stopped runs only, its banner's step may not be its sizes')
    planned: dict[str, tuple[int, str]] = field(default_factory=dict)
    # run id -> note for a run whose footer says its data check FAILED where no row said which point (with_failed_check)
    failed_checks: dict[str, str] = field(default_factory=dict)
    # run id -> error for a run nccl-tests' footer failed as a whole (its bandwidth check, a bitwise mismatch no row
    # placed): every point of it failed (with_failed_check)
    failed_runs: dict[str, str] = field(default_factory=dict)
    ranks_per_rack: int | None = None   # --ranks-per-rack: the scale-up domain, where hosts are not (log_topology)
    # (source, the collective the log names) where --collective named another: the log's own name was used
    collective_ignored: list[tuple[str, str]] = field(default_factory=list)


HOST_DOMAINS = "nccl-tests log host names: a host per scale-up domain"


def log_topology(hosts: list[str], world: int, ranks_per_rack: int | None, printed: str | None = None) -> dict | None:
    """The run's scale-up domains as a header records them (comm/topology.py Topology.to_dict): --ranks-per-rack
    where given, else those commbench's own text states (`printed`, its '# topology:' line: printed_topology), else a
    domain per host where the '#  Rank ... on HOST' lines (or -J's hostnames) name one per rank
    on several hosts, as a commbench launch without NVLink fabric information groups ranks; None on one host. Without
    it a 16-rank log over two 8-GPU hosts was fitted as one NVLink domain of 16 (its IB curve then stood for NVLink,
    8x off). A multi-node NVLink rack (GB200/GB300 NVL72: hosts of 4 GPUs share one domain) needs --ranks-per-rack."""
    from commbench.comm.topology import Topology, TopologySpec, declared_conflict, from_ranks_per_rack

    if ranks_per_rack is not None:
        if ranks_per_rack < 1 or world % ranks_per_rack:
            raise CommbenchError(f"--ranks-per-rack={ranks_per_rack} is invalid for a log of {world} ranks: a whole "
                                 f"number >= 1 that divides {world}")
        topology = from_ranks_per_rack(world, ranks_per_rack)
        problem = declared_conflict(TopologySpec(ranks_per_rack=ranks_per_rack), topology, hosts,
                                    allowed="a --ranks-per-rack whose racks keep each host of the log whole, or none "
                                            "(a domain per host)")
        if problem is not None:
            raise CommbenchError(problem)
        return topology.to_dict()
    if printed is not None and (stated := printed_topology(printed, world)) is not None:
        return stated
    if len(hosts) != world or len(set(hosts)) < 2 or "unknown" in hosts:
        return None
    racks = tuple(tuple(r for r, h in enumerate(hosts) if h == host) for host in dict.fromkeys(hosts))
    return Topology(racks=racks, source=HOST_DOMAINS).to_dict()


def printed_topology(line: str, world: int) -> dict | None:
    """The racks a '# topology:' line of commbench's text states, as its run's header recorded them; None where the
    line does not say them for `world` ranks (a list cut after 4 racks that are not contiguous ones of the stated
    size: the rest is unknown)."""
    from commbench.comm.topology import Topology, from_ranks_per_rack

    match = _TOPOLOGY_RE.search(line)
    if match is None:
        return None
    num_racks, per_rack, source, listed = int(match.group(1)), match.group(2), match.group(3), match.group(4)
    cut = ";..." in listed
    try:
        racks = []
        for span in listed.split(";...")[0].split(";"):
            low, dash, high = span.partition("-")
            racks.append(tuple(range(int(low), int(high) + 1)) if dash else tuple(int(r) for r in span.split(",")))
        if not cut:
            topology = Topology(racks=tuple(racks), source=source)
        else:
            topology = from_ranks_per_rack(world, int(per_rack), source=source) if per_rack else None
            if topology is None or list(topology.racks[:len(racks)]) != racks:
                return None
    except (ValueError, CommbenchError):
        return None
    if topology.world_size != world or topology.num_racks != num_racks:
        return None
    return topology.to_dict()


def collective_name(perf_name: str) -> str | None:
    """commbench's name for an nccl-tests test name (`all_reduce`, `alltoall`, ...); a prefix such as
    `old_all_reduce` is stripped to the longest known name it ends with; None when nothing matches."""
    if perf_name in COLLECTIVE_NAMES:
        return COLLECTIVE_NAMES[perf_name]
    known = [name for name in COLLECTIVE_NAMES if perf_name.endswith("_" + name)]
    return COLLECTIVE_NAMES[max(known, key=len)] if known else None


def tests_version(text: str) -> tuple[int, ...] | None:
    """nccl-tests' version as numbers ("2.9.0", "v2.10.1" -> (2, 9, 0), (2, 10, 1)); None if it is not one."""
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    return tuple(int(g or 0) for g in match.groups()) if match else None


def parse_tests_version(text: str | None) -> tuple[int, ...] | None:
    """--nccl-tests-version, checked: None when not given, else its numbers, or one line naming it."""
    if text is None:
        return None
    version = tests_version(text)
    if version is None:
        raise CommbenchError(f"--nccl-tests-version={text!r} is invalid: an nccl-tests release such as 2.9.0 or v2.13.4 "
                             "(the tag the log's binaries were built from)")
    return version


def nccl_version(code: int | str | None) -> str | None:
    if code is None:
        return None
    value = int(code)
    if value >= 10000:
        return f"{value // 10000}.{value % 10000 // 100}.{value % 100}"
    return f"{value // 1000}.{value % 1000 // 100}.{value % 100}"


def _header(run_id: str, *, source: str, world: int, hosts: list[str], devices: list[str], argv: list[str],
            version: str | None, started: str = "", nccl_env: dict | None = None, notes: list[str] = (),
            backend: str = "nccl", ranks_per_rack: int | None = None, intro: str | None = None,
            topology_line: str | None = None) -> RunHeader:
    """`intro`, `topology_line`: commbench's own text's intro line and '# topology:' line above the run (the
    emulated fabric and the racks its JSONL header records)."""
    bound = None if started else file_mtime(source)
    if bound:
        notes = [*notes, f"start time unknown (the log prints none): started no later than {bound}, the log file's "
                         "mtime at import"]
    return RunHeader(run_id=run_id, started_at=started, started_no_later_than=bound, argv=argv,
                     commbench_version=__version__,
                     python_version=sys.version.split()[0], torch_version=None, nccl_version=version,
                     cuda_version=None, cupy_version=None, backend=backend, world_size=world, hostnames=hosts,
                     devices=devices, nccl_env=dict(nccl_env or {}), launcher=IMPORTED_LAUNCHER,
                     topology=log_topology(hosts, world, ranks_per_rack, topology_line),
                     emulated=intro_emulated(intro, world),
                     notes=[f"imported from nccl-tests output {source}", *notes])


def file_mtime(path: str) -> str | None:
    """A log file's modification time, UTC ISO 8601 (the latest its run can have started); None where `path` is no
    file here (a test's made-up source name)."""
    try:
        seconds = os.stat(path).st_mtime
    except (OSError, TypeError, ValueError):
        return None
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat(timespec="seconds")


def intro_emulated(intro: str | None, world: int) -> dict | None:
    """The emulated fabric commbench's intro line names (results/emulated.py fabric_text), as its header recorded
    it; where the line says EMULATED in a form not read here, that text (never a real fabric); None otherwise."""
    from commbench.results.emulated import from_text

    if not intro or "EMULATED" not in intro:
        return None
    return from_text(intro, world) or {"description": intro[intro.index("EMULATED"):].strip()}


def loop_params(agg_iters: int, graph_launches: int, blocking, unalign: int = 0, *, grouped: bool = True) -> dict:
    """nccl-tests' -m, -G and -z as a commbench record's params hold them (measure/harness.py: cuda_graph, blocking):
    an imported -m 4 point read as one call of its size, and nccl-tuner made rules from it (src/common.cu: -m groups
    the calls in ncclGroupStart/End; the time is per call): params.agg_iters above 1 (records.AGG_GROUPED), or, for
    commbench's own --format nccl-tests text (`grouped` False: its -m runs separate calls back to back),
    params.agg_iters_ungrouped as commbench's own records (records.AGG_UNGROUPED), so neither matches the other. -u N (`unalign: N` in a text
    banner; the -J file does not record it) offsets the buffers by N elements: params.unalign where N > 0. Text logs
    say -z in a `# Blocking Enabled: ...` line after the banner (src/util.cu writeDeviceReport) whose wording names
    the mode, -J files in config.blocking_collectives (a bool, whichever -z mode) and their args: params.blocking is
    True for -z 1, 2 or 3 for the others, 'unknown' where the file cannot say (nccl_tests_flags), so compare refuses
    such a run beside an ordinary one or one of another mode (their points do not match)."""
    return {**({(AGG_GROUPED if grouped else AGG_UNGROUPED): agg_iters} if agg_iters > 1 else {}),
            **({"cuda_graph": True} if graph_launches > 0 else {}),
            **({"blocking": blocking} if blocking else {}), **({"unalign": unalign} if unalign > 0 else {})}


# nccl-tests' bandwidths (src/<test>.cu GetBw): algbw = size / time for these tests (size the printed column: count x
# type bytes, x nranks where count is one rank's chunk), busbw = algbw x the test's factor on n ranks: all_reduce
# 2(n-1)/n; all_gather, reduce_scatter, alltoall, gather, scatter (n-1)/n; broadcast, reduce, sendrecv 1. The importer
# reads nccl-tests' output, so it holds nccl-tests' table (results may not import collectives: tests/test_layering.py;
# tests/test_import_bandwidth_derived.py holds it to collectives/*.py busbw_factor). Not here: hypercube (algbw from
# (n-1) chunks), alltoallv, and commbench's moe_all_to_all (algbw from the round trip's bytes, not the size) and
# grad_reduce_scatter (its factor follows its params): their printed values are kept.
NCCL_TESTS_BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
                         "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
                         "gather": lambda n: (n - 1) / n, "scatter": lambda n: (n - 1) / n,
                         "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0, "sendrecv": lambda n: 1.0}
DERIVED_BANDWIDTH = frozenset(NCCL_TESTS_BUS_FACTOR)
# commbench's moe_all_to_all: algbw = round_trip_bytes_max / time, busbw = algbw x (n-1)/n
# (collectives/moe_all_to_all.py algbw_note, busbw_factor), derived where its text's point line states those bytes
ROUND_TRIP_BUS_FACTOR = {"moe_all_to_all": lambda n: (n - 1) / n}
PRINTED_BW_NOTE = ("algbw/busbw as printed (to 2 decimals): {collective}'s algbw does not follow from size and time "
                   "alone")
BW_MISMATCH_NOTE = ("printed {name} {printed:g} GB/s is not {bytes} / time x factor ({derived:.4g} GB/s at {ranks} "
                    "ranks) "
                    "within its print rounding: the world size read from the log may be wrong; the record keeps the "
                    "derived value, the printed one is metrics.nccl_tests_printed_{name}_gbps")


def bus_factor(collective: str, ranks: int) -> float:
    """nccl-tests' busbw / algbw for one of DERIVED_BANDWIDTH on `ranks` ranks."""
    return NCCL_TESTS_BUS_FACTOR[collective](ranks)


def derived_bandwidths(collective: str, size: int, time_us: float, ranks: int, algbw: float | None,
                       busbw: float | None, metrics: dict) -> tuple[float | None, float | None, list[str]]:
    """(algbw, busbw, notes) of an imported point: for DERIVED_BANDWIDTH from size and nccl-tests' time as nccl-tests
    computes them (algbw = size / time, GB = 1e9 B; busbw = algbw x bus_factor), not the printed 2-decimal values
    (0.0134 GB/s printed 0.01, every latency-size point 0.00); the printed ones go to metrics
    (nccl_tests_printed_algbw_gbps / _busbw_gbps) as a cross-check, a note where they disagree beyond the rounding of
    the time and of the bandwidth. commbench's moe_all_to_all from round_trip_bytes_max where its text's point line
    states it (ROUND_TRIP_BUS_FACTOR). Other tests: the printed values and a note."""
    round_trip = metrics.get("round_trip_bytes_max") if collective in ROUND_TRIP_BUS_FACTOR else None
    derivable = collective in DERIVED_BANDWIDTH or round_trip is not None
    if not derivable or not (time_us > 0) or ranks < 1 or not math.isfinite(time_us):
        return algbw, busbw, ([PRINTED_BW_NOTE.format(collective=collective)] if not derivable else [])
    derived_alg = (size if round_trip is None else round_trip) / (time_us * 1e-6) / 1e9
    factor = bus_factor(collective, ranks) if round_trip is None else ROUND_TRIP_BUS_FACTOR[collective](ranks)
    derived = {"algbw": derived_alg, "busbw": derived_alg * factor}
    notes = []
    for name, printed in (("algbw", algbw), ("busbw", busbw)):
        key = f"nccl_tests_printed_{name}_gbps"
        rescaled = key in metrics   # nccl-tests < 2.9's algbw, already kept there (old_algbw)
        if printed is not None and not (math.isfinite(printed) and printed >= 0):   # no nccl-tests output: garbage
            raise ValueError(f"{name}_gbps={printed!r} is invalid: a finite bandwidth >= 0 as printed, or N/A")
        metrics.setdefault(key, printed)
        if printed is None or rescaled:
            continue
        slack = printed_bandwidth_slack_gbps(printed, derived[name], time_us)
        if abs(printed - derived[name]) > slack:
            notes.append(BW_MISMATCH_NOTE.format(name=name, printed=printed, derived=derived[name], ranks=ranks,
                                                 bytes="size" if round_trip is None else "round_trip_bytes_max"))
    return derived["algbw"], derived["busbw"], notes


def round_trip_metrics(point: dict[str, str]) -> dict[str, int]:
    """moe_all_to_all's MOE_POINT_METRICS its text's point line states (commbench's text after 0.1.0 fix-F5; {} for an
    older one, whose printed algbw is kept); a value that is no whole number of bytes >= 0 is left out."""
    return {key: int(point[key]) for key in MOE_POINT_METRICS if point.get(key, "").isdigit()}


def _measurement(run_id: str, collective: str, *, size: int, count: int, dtype: str, redop: str, root: int | None,
                 in_place: bool, world: int, iters: int, warmup: int, time_us: float, algbw: float, busbw: float,
                 num_wrong: int | None, metrics: dict, average: str = "avg", point: dict | None = None,
                 notes: Iterable[str] = (), backend: str = "nccl", loop: dict | None = None,
                 ranks: int | None = None, workload: dict | None = None) -> Measurement:
    """`ranks`: the ranks busbw's factor counts (a sub-group's where commbench's point line names one; the world).
    `workload`: a workload's own params (moe_all_to_all's, from its banner and point line: moe_banner.moe_params)."""
    point = point or {}
    params = {**({} if root is None or root < 0 else {"root": root}), **(loop or {}), **(workload or {})}
    timed = not (isinstance(time_us, float) and math.isnan(time_us))
    if not timed:   # nccl-tests printed no time it measured (nan: util.cu jsonDouble / "%7s" of a NaN): a failed point
        # (a negative, zero or infinite time is no nccl-tests output: the record's own check refuses the row)
        algbw = busbw = num_wrong = None
    else:
        metrics = dict(metrics)
        ranks = ranks or int(point.get("group_size", world))
        algbw, busbw, bw_notes = derived_bandwidths(collective, size, time_us, ranks, algbw, busbw, metrics)
        notes = [*notes, *bw_notes]
    return Measurement(run_id=run_id, collective=collective, backend=backend, size_bytes=size, count=count,
                       dtype=DTYPE_NAMES.get(dtype, dtype),
                       op=None if redop in ("none", "") or collective in PRINTS_UNUSED_OP else redop,
                       in_place=in_place, world_size=world, group_size=int(point.get("group_size", world)),
                       group_layout=point.get("group_layout", "world"), num_groups=int(point.get("num_groups", 1)),
                       iters=iters, warmup_iters=warmup, loop_time_us={average: time_us} if timed else {},
                       algbw_gbps=algbw, busbw_gbps=busbw, num_wrong=num_wrong,
                       **({} if timed else {"status": "failed", "error": f"{NAN_TIME} {time_us!r}"}),
                       params={**params, **({"algorithm": point["algorithm"]} if "algorithm" in point else {})},
                       metrics=metrics, notes=[TIME_NOTE, *notes])


class _TextRun:
    """State while reading one text log."""

    def __init__(self, source: str, collective: str | None, given_version: tuple[int, ...] | None = None) -> None:
        self.source, self.default = source, collective
        self.given: str | None = None   # --collective, where given: said ignored where the log names another (named)
        self.named: set[str] = set()    # collectives the log's own lines name that --collective did not
        self.given_version = given_version  # --nccl-tests-version
        self.collective = collective
        self.columns: list[str] | None = None
        self.refused: str | None = None  # why the current table's rows are skipped (said once, at its header)
        self.iters = self.warmup = 0
        self.loop: dict = {}   # the banner's -m / -G as commbench records them (loop_params)
        self.threads_gpus = 1
        self.banner = False  # a '# nThread N nGpus M' banner was read (threads_gpus is its, not the default)
        self.device_list = DeviceList()  # the '#  Rank' lines (nccl_tests_devices: where nccl-tests cut them)
        self._ranks: tuple | None = None  # (what they were read from, (hosts, devices, notes)): ranks()
        self.nccl_env: dict[str, str] = {}  # the NCCL_* settings the process's NCCL INFO lines said (NCCL_ENV_LOG_RE)
        # the NCCL_* settings of the NCCL INFO lines read since the last run header was written, by the process (host,
        # pid) each names: each rank of an mpirun/srun job buffers its stdout apart (NCCL fwrite()s its lines to stdout
        # unflushed: src/debug.cc at v2.27.7-1:388), so another rank's lines, its "NCCL_ALGO set by environment to
        # Ring" too, can reach the log before nccl-tests' header of their own process; they join the run whose
        # '#  Rank' lines name their process (run_env)
        self.unplaced: dict[tuple[str, int], dict[str, str]] = {}
        self.version: str | None = None  # NCCL's, from nccl-tests' version line (nccl-library); nccl_version()
        # the process's NCCL version lines (NCCL_VERSION_*_RE): version -> line. Forgotten where nccl_env is (a process
        # starts), not at its device report: NCCL's lines are flushed at once, nccl-tests' own stdout (printf) may wait
        # in its buffer when piped, so the version line often comes first in the log
        self.nccl_lines: dict[str, int] = {}
        # commbench's own --format nccl-tests text says the backend it ran (its intro line, or nccl-library=0 in its
        # version line: no NCCL, so gloo); nccl-tests' own logs are NCCL's. Set by each run's version line.
        self.backend = "nccl"
        self.intro_backend: str | None = None  # commbench's intro line above the version line it heads
        # commbench's intro line and '# topology:' line above that version line, and those of the process the
        # version line starts (its emulated fabric and racks: _header), as intro_backend and backend
        self.intro_line: str | None = None
        self.intro_topology: str | None = None
        self.intro: str | None = None
        self.topology_line: str | None = None
        self.argv: list[str] = []
        self.run_id: str | None = None
        self.average = "avg"
        self.average_given = False  # a -a on a command line: nccl-tests >= 2.10.0, which has -a
        self.tests_version = given_version  # nccl-tests' own version (printed, or --nccl-tests-version)
        self.newer_columns = False  # a #wrong column: nccl-tests >= 2.13.0
        self.threads = 1  # the banner's nThread: timing threads per process
        self.iter_skip = 0  # -K: leading iterations nccl-tests' -I summary leaves out (its '# Per-Iteration' line)
        self.point: dict[str, str] = {}  # commbench's '# commbench point:' line: sub-groups, algorithm
        self.cycles: Cycles | None = None  # the current -N cycle's sweeps (nccl_tests_cycles: where the next starts)
        self.cycle_runs: list[str] = []  # the run id of each -N cycle of the current table, in cycle order
        self.rows_from: int | None = None  # the line of the first row no footer has closed yet
        self.stopped: list[int] = []  # first row lines of runs that ended with no footer (stopped during the run)
        self.sizes: int | None = None  # sizes the banner's minBytes/maxBytes/step sweep (banner_sizes)
        self.sweep: tuple[int, int, float, str] | None = None  # the banner's (minBytes, maxBytes, step, kind)
        self.moe: dict | None = None  # the MoE layer commbench's moe_all_to_all banner states (parse_moe_banner)
        self.ours = False  # the table is commbench's own --format nccl-tests text (its version line says so)
        self.stated_plan: int | None = None  # the planned points commbench's text states for each run of its table
        self.table: TableCount | None = None  # the current table's rows, to plan its runs' points from the banner
        self.planned: dict[str, tuple[int, str]] = {}  # run id -> (planned_points, note) of the tables closed so far
        self.footer_runs: dict[str, bool] = {}  # runs since the last footer -> whether a record of theirs is wrong
        # runs since the last "Avg bus bandwidth" footer line -> whether a row of theirs had a nonzero #bitdiff
        self.bitwise_runs: dict[str, bool] = {}

    def close_table(self, stopped: bool) -> None:
        """The current table ends (its footer, the next table, the end of the log): plan its runs' points from its
        banner (every run of nccl-tests' own logs; a stopped one only for commbench's own text, whose banner's step
        can be a stand-in for a list of sizes: results/nccl_tests_text.size_step); commbench's text that states its
        runs' planned points (nccl_tests_text.planned_line), every run from that."""
        if self.table is not None and self.ours and self.stated_plan is not None:
            self.planned.update(self.table.stated(self.stated_plan, stopped))
        elif self.table is not None and (stopped or not self.ours):
            self.planned.update(self.table.planned(stopped))
        elif self.table is not None and (sizes := ours_banner_sizes(self.collective, self.sweep, self.table.row_points)):
            # commbench's text written before its '# planned points:' line: planned from its banner's sweep as
            # commbench aligned it, where every row lies on that sweep (else its step stood in for a list of sizes)
            self.table.sizes = sizes
            self.planned.update(self.table.planned(stopped))
        self.table = None

    def new_run(self, *, forget_devices: bool = True) -> None:
        stopped = self.rows_from is not None
        if stopped:
            self.stopped.append(self.rows_from)
            self.rows_from = None
        self.close_table(stopped)
        self.run_id = None
        self.point = {}
        self.cycles = None
        self.cycle_runs = []
        if forget_devices:   # another process: its own devices and environment
            self.device_list, self.nccl_env, self.nccl_lines = DeviceList(), {}, {}

    def said_setting(self, line: str, key: str, value: str) -> None:
        """An NCCL INFO line's NCCL_* setting (NCCL_ENV_LOG_RE): the current process's, and its own process's where the
        line names it (unplaced, until a run header is written)."""
        self.nccl_env[key] = value
        if (process := NCCL_LINE_PROCESS_RE.search(line)):
            self.unplaced.setdefault((process.group(1), int(process.group(2))), {})[key] = value

    def run_env(self) -> tuple[dict[str, str], list[str]]:
        """(nccl_env, notes) of the run whose header is written now: the settings read since its process started,
        and those of NCCL lines read before it whose process its '#  Rank' lines name; a note for each setting its
        processes' lines give two values (their ranks ran differently: nccl_env keeps the one read in the run)."""
        notes = []
        for process, said in self.unplaced.items():
            if process not in self.device_list.processes:
                continue
            for key, value in said.items():
                held = self.nccl_env.setdefault(key, value)
                if held != value:
                    notes.append(f"NCCL's INFO lines give {key} two values: {value} ({process[0]} pid {process[1]}) "
                                 f"and {held}; nccl_env keeps {held}, the value the run's own lines said last")
        self.unplaced = {}
        return self.nccl_env, notes

    def nccl_version(self, line_version: str | None = None, number: int = 0) -> str | None:
        """The run's NCCL version: nccl-tests' version line's nccl-library, NCCL's own version lines (`line_version`:
        one just read, at line `number`); refused in one line where they disagree (a log of two NCCL releases)."""
        if line_version is not None:
            self.nccl_lines.setdefault(line_version, number)
        said = {**{v: f"NCCL's own version line, line {n}" for v, n in self.nccl_lines.items()},
                **({self.version: "nccl-tests' version line (nccl-library)"} if self.version else {})}
        if len(said) > 1:
            (first, where), (second, other) = list(said.items())[:2]
            raise CommbenchError(f"{self.source}: the log names two NCCL versions for one run, {first} ({where}) and "
                                 f"{second} ({other}): runs of two NCCL releases are not one measurement (fit and "
                                 "compare refuse them together); split the log where the release changes")
        return next(iter(said), None)

    def ranks(self) -> tuple[list[str], list[str], list[str]]:
        """(hosts, devices, notes) of every rank of the run (DeviceList.ranks: the world where nccl-tests cut the
        list), read once per device list and banner."""
        key = (id(self.device_list), len(self.device_list.listed), self.threads_gpus, self.threads, self.banner)
        if self._ranks is None or self._ranks[0] != key:
            self._ranks = (key, self.device_list.ranks(self.threads, self.threads_gpus // max(self.threads, 1),
                                                       self.banner, self.source))
        return self._ranks[1]

    def cycle_of(self, lead: tuple[str, ...]) -> tuple[int, bool]:
        """(the -N cycle a row with these leading columns (size, count, type, redop[, root]) belongs to, whether its
        size sweep restarts there) (nccl_tests_cycles.Cycles)."""
        point = {} if self.point == {"group_layout": "world"} else self.point  # what rows before any point line are
        if self.cycles is None:
            self.cycles = Cycles(self.sizes, self.ours)
        return self.cycles.cycle_of((*lead[2:], tuple(sorted(point.items()))), int(lead[0]), lead)


def _group_layout(columns: list[str]) -> tuple[list[str], list[list[str]]]:
    """Split header columns into the leading ones and the per-placement groups (each starts at time)."""
    starts = [i for i, c in enumerate(columns) if c in ("time", "cputime")]  # cputime: refused at the header
    if not starts:
        raise ValueError("no time column")
    ends = starts[1:] + [len(columns)]
    groups = [[c for c in columns[s:e] if c != "timestamp"] for s, e in zip(starts, ends)]
    return columns[:starts[0]], groups


def _cell(text: str, kind=float):
    return None if text == "N/A" else kind(text)


def count_mismatch(collective: str, size: int, count: int, nccl_type: str, world: int | None) -> str | None:
    """Why a row's size and count cannot both be nccl-tests' for this collective (a row spliced from two
    lines, a column shifted), or None: size = count x the type's bytes, x the rank count where count is one
    rank's chunk (any whole multiple where the log does not list its ranks)."""
    item = NCCL_TYPE_BYTES.get(nccl_type)
    if item is None or collective not in PER_RANK_COUNT | WHOLE_COUNT or size < 0 or count <= 0:
        return None   # count 0: commbench's --format nccl-tests row of a point that failed (no numbers)
    chunk = count * item
    if collective in WHOLE_COUNT:
        return None if size == chunk else f"size {size} B is not count {count} x {item} B ({nccl_type})"
    if size % chunk or (world and size != chunk * world):
        ranks = f"{world} ranks" if world else "a whole number of ranks"
        return f"size {size} B is not count {count} x {item} B ({nccl_type}) x {ranks} ({collective} counts one rank's chunk)"
    return None


# nccl-tests before 2.9 printed all_gather's and reduce_scatter's algbw as count x type bytes x (n-1) / time, the
# same number as busbw (src/all_gather.cu, src/reduce_scatter.cu GetBw until commit ec1b5e2, June 2020: "This change
# makes algbw higher; busbw is unchanged"); since then algbw = size / time and busbw = algbw x (n-1)/n.
OLD_ALGBW_NOTE = ("algbw rescaled by n/(n-1) from busbw: the row printed algbw = busbw, nccl-tests < 2.9's all_gather/"
                  "reduce_scatter formula ((n-1) chunks / time); commbench's algbw is size / time")


def old_algbw(collective: str, algbw: str, busbw: str, ranks: int) -> float | None:
    """size / time for an all_gather or reduce_scatter row printed with nccl-tests' pre-2.9 algbw (the same text as
    busbw), from busbw x n/(n-1); None for any other row, or where the two formulas would print alike (the
    difference under 1.5 units of the printed last digit, so the row cannot tell them apart)."""
    if collective not in ("all_gather", "reduce_scatter") or ranks < 2 or algbw != busbw or "e" in busbw.lower():
        return None
    value = float(busbw)
    unit = 10.0 ** -len(busbw.partition(".")[2])
    rescaled = value * ranks / (ranks - 1)
    return rescaled if rescaled - value > 1.5 * unit else None


BLANK_CELL_GAP = 20  # characters between root and the first number when the out-of-place cell is blank:
# its fields print as "  %7s  %6s  %6s  %6g" (src/util.cu writeBenchmarkLineBody), 33 wide; a printed one leaves 2-8


def _gap_before_body(raw: str, tokens: list[str], lead: int) -> int:
    """Spaces between the row's last leading column (root) and its first number, in the raw line."""
    end = 0
    for token in tokens[:lead]:
        end = raw.index(token, end) + len(token)
    return raw.index(tokens[lead], end) - end


def _one_cell(body: list[str], widths: list[int], raw: str, tokens: list[str], lead: int) -> bool | None:
    """Which placement a row holding one cell's numbers holds (True: in-place), None if neither fits.
    nccl-tests prints the out-of-place cell before it runs in-place, so a run stopped during its in-place
    test leaves a row ending after out-of-place; a blank out-of-place cell (numbers far to the right)
    leaves in-place. A row cut inside either group fits neither."""
    if not body or len(body) not in widths[:2]:
        return None
    blank = _gap_before_body(raw, tokens, lead) >= BLANK_CELL_GAP
    if blank and len(body) == widths[1]:
        return True
    if not blank and len(body) == widths[0]:
        return False
    return None


def point_identity(record: Measurement) -> tuple:
    """What tells one imported point from another in a run (as compare keys them): a repeat is the same point."""
    return (record.dtype, record.op, (record.params or {}).get("root"), record.size_bytes, record.in_place,
            record.group_size, record.group_layout, record.num_groups, (record.params or {}).get("algorithm"))


def _parse_row(state: _TextRun, tokens: list[str], result: ImportResult, raw: str, number: int | None = None) -> None:
    """One result row into records; `number`: its line, where the next -N cycle's rows start if it starts one."""
    lead, groups = _group_layout(state.columns)
    widths = [len(g) for g in groups]
    body = tokens[len(lead):]
    if len(body) >= sum(widths):
        chunks = [(False, body[:widths[0]]), (True, body[widths[0]:widths[0] + widths[1]])] if len(groups) > 1 \
            else [(False, body[:widths[0]])]
    elif len(groups) > 1 and (in_place := _one_cell(body, widths, raw, tokens, len(lead))) is not None:
        chunks = [(in_place, body)]
    else:
        raise ValueError(f"{len(tokens)} cells, the header has {len(lead) + sum(widths)}")
    row = dict(zip(lead, tokens[:len(lead)]))
    if state.collective is None:
        raise ValueError("which collective is this? the log names no *_perf binary: pass --collective")
    hosts, devices, rank_notes = state.ranks()
    group = int(state.point["group_size"]) if "group_size" in state.point else len(devices) or None
    world = len(devices) or state.threads_gpus
    cycle, restart = state.cycle_of(tuple(tokens[:len(lead)]))
    if restart and number is not None:   # a cycle that stops is warned at its own first row, not the first cycle's
        state.rows_from = number
    # the cycle's run (the same devices and banner; a new header for a cycle not seen yet)
    state.run_id = state.cycle_runs[cycle] if cycle < len(state.cycle_runs) else None
    timers = (world // state.threads_gpus if state.threads_gpus and world % state.threads_gpus == 0 else 1) * state.threads
    average, time_notes = state.average, []
    if timers > 1 and state.tests_version is not None and state.tests_version < AVERAGE_SINCE:
        average, time_notes = "rank0", [RANK0_TIME_NOTE]
    if state.run_id is None:
        state.run_id = new_run_id()
        state.cycle_runs.append(state.run_id)
        notes = rank_notes if devices else [f"world size {world} from the banner's nThread x nGpus (no device lines)"]
        notes += time_notes
        if timers > 1 and state.tests_version is None and not (state.average_given or state.newer_columns):
            notes.append(UNKNOWN_VERSION_NOTE.format(timers))
        if state.tests_version == AVERAGE_SINCE and state.average == "avg" and state.threads_gpus > 1:
            notes.append(AVERAGE_2_10_0_NOTE.format(n=state.threads_gpus))
        if "i_min" in groups[0]:
            notes.append(per_iter.TEXT_SUMMARY_NOTE)
        nccl_env, env_notes = state.run_env()
        notes += env_notes
        result.records.append(_header(state.run_id, source=state.source, world=world, hosts=hosts or ["unknown"],
                                      devices=devices or ["unknown"], argv=state.argv, version=state.nccl_version(),
                                      backend=state.backend, ranks_per_rack=getattr(result, "ranks_per_rack", None),
                                      nccl_env=nccl_env, notes=notes, intro=state.intro,
                                      topology_line=state.topology_line))
    root = int(row["root"]) if "root" in row else None
    flags, flag_notes = kernel_params(state.argv, state.nccl_version())   # -R / -D from the log's command line, if it has one
    workload = moe_params(state.moe, state.point, group or world) if state.collective == "moe_all_to_all" else None
    made = []
    for in_place, cells in chunks:
        values = dict(zip(groups[1] if in_place and len(groups) > 1 else groups[0], cells))
        time_us = _cell(values.get("time", "N/A"))
        if time_us is None:
            continue
        metrics = round_trip_metrics(state.point) if state.collective in ROUND_TRIP_BUS_FACTOR else {}
        wrong, check_notes = None, []
        if "#wrong" in values:
            wrong = _cell(values["#wrong"], lambda t: int(float(t)))
        bits = _cell(values["#bitdiff"], float) if "#bitdiff" in values else None
        if bits is not None:
            metrics["nccl_tests_bitdiff"] = bits
        elif "error" in values:
            error = _cell(values["error"])
            metrics["max_abs_error"] = error
            wrong = 0 if error == 0 else None
            bound = DELTA_MAX.get(row["type"], math.nan) * (world - 1)
            if error is not None and error > bound:   # nan bound (an unknown type, one rank): never
                wrong, check_notes = 1, [OLD_CHECK_NOTE.format(error=error, bound=bound)]
        for key in ("i_min", "i_max", "i_p99", "i_cv%"):
            if key in values and values[key] != "N/A":
                metrics[f"nccl_tests_{key.replace('%', '_pct')}"] = float(values[key])
        algbw, notes = float(values["algbw"]), list(check_notes)
        if (rescaled := old_algbw(state.collective, values["algbw"], values["busbw"], group or world)) is not None:
            algbw, notes = rescaled, [OLD_ALGBW_NOTE]
            metrics["nccl_tests_printed_algbw_gbps"] = float(values["algbw"])
        record = _measurement(
            state.run_id, state.collective, size=int(row["size"]), count=int(row["count"]), dtype=row["type"],
            redop=row.get("redop", "none"), root=root, in_place=in_place, world=world, iters=state.iters,
            warmup=state.warmup, time_us=time_us, algbw=algbw, busbw=float(values["busbw"]),
            num_wrong=wrong, metrics=metrics, average=average, point=state.point,
            notes=notes + time_notes + flag_notes, backend=state.backend, loop={**state.loop, **flags},
            ranks=group or world, workload=workload)
        if record.status == "ok" and (summary := per_iter.from_text(
                values, state.loop.get(AGG_GROUPED, 1), state.iters - state.iter_skip)):   # nccl-tests -m: per call
            record = dataclasses.replace(record, **summary)
        made.append(record)
    # after the records' own checks (a value out of range names its field first)
    if (why := count_mismatch(state.collective, int(row["size"]), int(row["count"]), row["type"], group)):
        raise ValueError(why)
    if made and state.table is None:
        state.table = TableCount(state.sizes)
    points = [point_identity(r) for r in made]
    # a row of its sweep's point again (sizes below nccl-tests' alignment print alike: nccl_tests_cycles): the first
    # row's records are the point's; a failed or wrong repeat is kept beside them (compare and fit take the failure)
    repeat = bool(made) and state.table.holds(state.run_id, points)
    for record in made:   # result.records may be a sink with append only
        bits = record.metrics.get("nccl_tests_bitdiff")
        if bits and record.status == "ok":   # nccl-tests' own verdict on the point: a failed one, as #wrong is wrong
            record = dataclasses.replace(record, status="failed", error=BITDIFF_ERROR.format(bits=bits))
        if repeat and record.status == "ok" and not record.num_wrong:
            continue
        state.bitwise_runs[record.run_id] = state.bitwise_runs.get(record.run_id, False) or bool(bits)
        result.records.append(record)
        state.footer_runs.setdefault(record.run_id, False)
        if record.num_wrong:
            state.footer_runs[record.run_id] = True
    if made:
        first = made[0]
        state.table.add_row(state.run_id, (first.dtype, first.op, (first.params or {}).get("root"),
                                           tuple(sorted(state.point.items()))), points, repeat=repeat)
        state.table.row_points.update((r.size_bytes, r.dtype, r.group_size) for r in made)


def _comment(state: _TextRun, line: str) -> str | None:
    """Reads a comment line into `state`; returns why the table it heads is refused, if it does."""
    body = line.lstrip("#").strip()
    if (match := _AVERAGE_RE.search(body)) and "-a" in body:
        state.average, state.average_given = NCCL_TESTS_AVERAGE_MODES[int(match.group(1))], True
    if body.startswith(POINT_LINE):  # commbench's own text: what the rows below measured beyond the columns
        pairs = [item.partition("=") for item in body[len(POINT_LINE):].split()]
        state.point = {key: value for key, _, value in pairs if key in POINT_KEYS and value}   # text: moe_params types
    elif state.ours and (match := _PLANNED_RE.match(body)):   # commbench's text: its runs' planned_points
        state.stated_plan = int(match.group(1))
    elif body.startswith("Collective test starting:"):
        match = _PERF_RE.search(body)
        state.collective = _named(state, collective_name(match.group(1)) if match else None)
        state.new_run()
    elif (match := _COMMBENCH_INTRO_RE.match(body)) and match.group(1) in BACKEND_NAMES:
        state.intro_backend = match.group(1)
        state.intro_line = body
    elif _TOPOLOGY_RE.match(body):
        state.intro_topology = body
    elif (match := _VERSION_RE.search(body)):
        state.version = nccl_version(match.group(2))
        state.nccl_lines = {}   # a process starts: NCCL's lines before it were another's
        state.ours = match.group(1).startswith("commbench-")
        state.stated_plan = None
        without_nccl = state.ours and int(match.group(2)) == 0
        if without_nccl:  # commbench's text of a run without NCCL (results/nccl_tests_text.banner): no NCCL version
            state.version = None
        state.backend = state.intro_backend or ("gloo" if without_nccl else "nccl")
        state.intro_backend = None
        state.intro, state.topology_line = state.intro_line, state.intro_topology
        state.intro_line = state.intro_topology = None
        printed = tests_version(match.group(1))
        if printed is not None and state.given_version is not None and printed != state.given_version:
            raise CommbenchError(f"--nccl-tests-version={'.'.join(map(str, state.given_version))!r} is invalid for "
                                 f"{state.source}: the log says nccl-tests version {match.group(1)}; leave it out")
        state.tests_version = printed or state.tests_version
    elif (match := _BANNER_RE.search(body)):
        state.threads_gpus = int(match.group(1)) * int(match.group(2))
        state.threads = int(match.group(1))
        state.banner = True
        state.warmup, state.iters = int(match.group(3)), int(match.group(4))
        state.moe = parse_moe_banner(body)
        sizes = _SIZES_RE.search(body)
        state.sizes = banner_sizes(int(sizes.group(1)), int(sizes.group(2)), float(sizes.group(3)),
                                   sizes.group(4)) if sizes else None
        state.sweep = (int(sizes.group(1)), int(sizes.group(2)), float(sizes.group(3)), sizes.group(4)) if sizes else None
        agg, graph, unalign = _AGG_RE.search(body), _GRAPH_RE.search(body), _UNALIGN_RE.search(body)
        state.loop = loop_params(int(agg.group(1)) if agg else 1, int(graph.group(1)) if graph else 0, False,
                                 int(unalign.group(1)) if unalign else 0, grouped=not state.ours)
        state.iter_skip = 0
    elif body.startswith("Per-Iteration Report"):   # -I 1 (util.cu writeDeviceReport), with -K N: "summary skips first N"
        skip = _ITER_SKIP_RE.search(body)
        state.iter_skip = int(skip.group(1)) if skip else 0
    elif body.startswith("Blocking Enabled"):   # -z, printed after the banner it qualifies
        state.loop = {**state.loop, "blocking": blocking_from_banner(body)}
    elif body.startswith("Using devices"):
        state.device_list = DeviceList()
    elif state.device_list.add(line.strip()):   # a '#  Rank' line, or where nccl-tests cut them
        pass
    elif body.split()[:2] == ["size", "count"]:
        state.new_run(forget_devices=False)  # a second table without a banner: same devices
        state.columns = body.split()
        state.newer_columns = state.newer_columns or "#wrong" in state.columns
        state.refused = CPUTIME_REFUSAL if "cputime" in state.columns else None
        return state.refused
    elif body.split()[:2] == ["bytes", "N"]:  # nccl-tests 1.x's table header
        state.new_run(forget_devices=False)
        state.columns, state.refused = body.split(), V1_REFUSAL
        return state.refused
    return None


def parse_text(text: str | Iterable[str], source: str, collective: str | None = None,
               result: ImportResult | None = None, version: tuple[int, ...] | None = None) -> ImportResult:
    """Records from an nccl-tests text log: `text` whole, or its lines one by one (a file object: a
    200 MB log is streamed); `result`: where records and problems go (anything with append); `version`:
    nccl-tests' own (--nccl-tests-version), for logs that print none (before 2.10.0 the time is rank 0's)."""
    result = ImportResult() if result is None else result
    state = _TextRun(source, collective or _guess_from_name(source), version)
    state.given = collective
    lines = text.splitlines() if isinstance(text, str) else (line.rstrip("\r\n") for line in text)
    for number, raw in enumerate(lines, start=1):
        raw = _LAUNCHER_PREFIX_RE.sub("", raw, count=1)
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if line.lstrip("# ").startswith(FOOTER_LINES):
                state.rows_from = None
                state.close_table(stopped=False)
                failed = _OUT_OF_BOUNDS_RE.search(line)
                if failed and int(failed.group(1)) > 0 and not any(state.footer_runs.values()):
                    result.failed_checks.update({run: FOOTER_CHECK_NOTE.format(count=failed.group(1))
                                                 for run in state.footer_runs})
                if failed or "Out of bounds" not in line:
                    state.footer_runs = {}
                if (low := _AVG_BW_FAILED_RE.search(line)):
                    result.failed_runs.update({run: AVG_BW_FOOTER_ERROR.format(bw=low.group(1))
                                               for run in state.bitwise_runs})
                if "Avg bus bandwidth" in line:
                    state.bitwise_runs = {}
            elif (mismatched := _BITWISE_RE.search(line)) and int(mismatched.group(1)) > 0 \
                    and not any(state.bitwise_runs.values()):
                result.failed_runs.update({run: BITWISE_FOOTER_ERROR.format(count=mismatched.group(1))
                                           for run in state.bitwise_runs if run not in result.failed_runs})
            if (refused := _comment(state, line)):
                result.problems.append((source, number, raw, refused))
            continue
        tokens = line.split()
        nccl_log = NCCL_LOG_RE.search(line)
        if tokens[0].isdigit() and state.columns:
            if state.refused:
                continue  # said once at the table's header
            if state.rows_from is None:
                state.rows_from = number
            try:
                if nccl_log:   # another rank's NCCL_DEBUG line written into this row: its cells cannot be trusted
                    raise ValueError(f"{ROW_WITH_NCCL_LOG} ({nccl_log.group(0)!r} at column {nccl_log.start() + 1})")
                _parse_row(state, tokens, result, raw, number)
            except (ValueError, KeyError) as exc:
                result.problems.append((source, number, raw, f"unparsable result row: {exc}"))
            continue
        if nccl_log:   # NCCL_DEBUG=INFO output (any rank's): not nccl-tests' own, but it says the NCCL_* settings
            if (said := NCCL_VERSION_INFO_RE.search(line)):
                state.nccl_version(said.group(1), number)
            if (setting := NCCL_ENV_LOG_RE.search(line)):
                value = setting.group(2)
                state.said_setting(line, setting.group(1), value[:-1] if re.fullmatch(r"-?\d+\.", value) else value)
            continue
        if (said := NCCL_VERSION_BARE_RE.fullmatch(line)):   # NCCL_DEBUG=WARN/VERSION: NCCL's version, bare
            state.nccl_version(said.group(1), number)
            continue
        if line == CUT_MARK and state.device_list.add(line):   # nccl-tests cut the device list at a line's end
            continue
        if _EMULATE_LINE_RE.match(line):  # commbench emulate's banner and uplink counters (the intro names the fabric)
            continue
        if line.startswith(V1_BARE_LINES):  # nccl-tests 1.x printed its banner and footer without '#'
            _comment(state, "# " + line)
            continue
        if (match := _PERF_RE.search(line)) and not tokens[0].isdigit():
            state.collective = _named(state, collective_name(match.group(1)))  # a command line names the test
            state.argv = line.lstrip("+$ ").split()
            average = _AVERAGE_RE.search(line)  # each command line says its own -a; none: nccl-tests' default, 1
            state.average = NCCL_TESTS_AVERAGE_MODES[int(average.group(1))] if average else "avg"
            state.average_given = average is not None
            state.new_run()
            continue
        result.problems.append((source, number, raw, "not an nccl-tests line"))
    state.new_run()
    result.collective_ignored.extend((source, name) for name in sorted(state.named))
    for line in state.stopped:
        result.stopped.append((source, line))
    for run_id, planned in state.planned.items():   # a sink may be a dict: item by item
        result.planned[run_id] = planned
    if isinstance(result.records, list):   # a sink has written the headers: the import command sets them after
        result.records[:] = with_planned(result.records, result.planned)
        result.records[:] = [with_failed_check(r, result.failed_checks, result.failed_runs) for r in result.records]
    return result


def banner_sizes(min_bytes: int, max_bytes: int, step: float, kind: str) -> int | None:
    """How many sizes nccl-tests' loop measures from its banner's sweep (src/common.cu: from minBytes while <=
    maxBytes, times the step factor or plus the step bytes); None where the banner's step cannot advance."""
    if min_bytes <= 0 or max_bytes < min_bytes or step <= (1 if kind == "factor" else 0):
        return None
    if kind != "factor":   # an added step: counted, not stepped through (a 1-byte step over GiBs is 1e9 sizes)
        return int((max_bytes - min_bytes) // step) + 1
    count, size = 0, float(min_bytes)
    while size <= max_bytes:   # a factor of 2 or more: at most 64 steps
        count += 1
        size *= step
    return count


BANNER_SIZES_LIMIT = 4096   # sizes of a banner sweep listed to align them (a 1-byte step over GiBs is not listed)


def ours_banner_sizes(collective: str | None, sweep: tuple[int, int, float, str] | None,
                      row_points: set[tuple[int, str, int]]) -> int | None:
    """How many sizes commbench's own text (one written before its '# planned points:' line) measured of each data
    type: its banner's sweep (`sweep`: minBytes, maxBytes, step, kind) aligned as its bench aligned it (nccl-tests'
    alignment: measure/bench.aligned_sizes, each distinct size once), where every row (`row_points`: size, dtype,
    ranks) lies on that aligned sweep and every data type/group aligns to the same count; else None: the banner's step
    stood in for a list of sizes (nccl_tests_text.size_step), and the banner cannot plan the rows."""
    from commbench.dtypes import get_dtype

    if collective is None or sweep is None or not row_points:
        return None
    low, high, step, kind = sweep
    count = banner_sizes(low, high, step, kind)
    if count is None or count > BANNER_SIZES_LIMIT:
        return None
    listed, size = [], float(low)
    for _ in range(count):
        listed.append(int(size))
        size = size * step if kind == "factor" else size + step
    try:
        from commbench.nccl_tests_counts import nccl_tests_count

        counts = set()
        for dtype, ranks in {(d, n) for _, d, n in row_points}:
            aligned = dict.fromkeys(nccl_tests_count(collective, s, get_dtype(dtype).itemsize, ranks)[1]
                                    for s in listed)
            if any(size not in aligned for size, d, n in row_points if (d, n) == (dtype, ranks)):
                return None
            counts.add(len(aligned))
    except (CommbenchError, ValueError):   # a collective or data type this commbench does not know: no plan
        return None
    return counts.pop() if len(counts) == 1 else None


def with_planned(records: list, planned: dict[str, tuple[int, str]]) -> list:
    """`records` with each header of a run in `planned` carrying its planned_points and the note saying whence."""
    import dataclasses

    return [dataclasses.replace(r, planned_points=planned[r.run_id][0], notes=[*r.notes, planned[r.run_id][1]])
            if isinstance(r, RunHeader) and r.run_id in planned else r for r in records]


def with_failed_check(record, failed_checks: dict[str, str], failed_runs: dict[str, str] | None = None):
    """`record` (a Measurement, or a results file's line as a dict) marked wrong where its run's footer says the data
    check FAILED and no row told which point (FOOTER_CHECK_NOTE): a point with a nonzero max error gets num_wrong 1;
    marked failed (status, error) where its run is in `failed_runs` (a footer that failed the whole run: nccl-tests'
    bandwidth check, a bitwise mismatch no row placed)."""
    import dataclasses

    failed_runs = failed_runs or {}
    if isinstance(record, dict):
        if record.get("record_type") != "measurement":
            return record
        if record.get("run_id") in failed_runs and record.get("status", "ok") == "ok":
            record = {**record, "status": "failed", "error": failed_runs[record["run_id"]]}
        if record.get("run_id") not in failed_checks:
            return record
        if not (record.get("metrics") or {}).get("max_abs_error") or record.get("num_wrong"):
            return record
        return {**record, "num_wrong": 1, "notes": [*(record.get("notes") or []), failed_checks[record["run_id"]]]}
    if not isinstance(record, Measurement):
        return record
    if record.run_id in failed_runs and record.status == "ok":
        record = dataclasses.replace(record, status="failed", error=failed_runs[record.run_id])
    if record.run_id not in failed_checks:
        return record
    if not record.metrics.get("max_abs_error") or record.num_wrong:
        return record
    return dataclasses.replace(record, num_wrong=1, notes=[*record.notes, failed_checks[record.run_id]])


def _named(state: _TextRun, named: str | None) -> str | None:
    """The collective of the rows below a line naming `named` (a *_perf binary): the log's own name over --collective
    (the binary ran it; --collective is for logs that name none), remembered where --collective said another."""
    if named is not None and state.given is not None and named != state.given:
        state.named.add(named)
    return named or state.default


def _guess_from_name(source: str) -> str | None:
    match = _PERF_RE.search(Path(source).name)
    return collective_name(match.group(1)) if match else None


def parse_json(data: dict, source: str, collective: str | None = None, ranks_per_rack: int | None = None) -> ImportResult:
    """nccl-tests' -J file (src/util.cu, JSON_FILE_VERSION 1 to 3: the keys read here are the same in all three).
    The -a mode comes from args, the command line the file keeps."""
    result = ImportResult()
    if not isinstance(data, dict) or "results" not in data:
        result.problems.append((source, 1, "", "not an nccl-tests JSON file (no 'results')"))
        return result
    args = [str(a) for a in data.get("args", [])]
    from_args = _guess_from_name(args[0]) if args else None   # the binary that wrote the file ran this one
    if collective is not None and from_args is not None and from_args != collective:
        result.collective_ignored.append((source, from_args))
    name = from_args or collective or _guess_from_name(source)
    if name is None:
        result.problems.append((source, 1, "", "which collective is this? args[0] names no *_perf binary: pass --collective"))
        return result
    rows = data["results"] if isinstance(data["results"], list) else []
    if any(isinstance(cell, dict) and "cpu_time" in cell
           for row in rows if isinstance(row, dict) for cell in (row.get("out_of_place"), row.get("in_place"))):
        result.problems.append((source, 1, "", f"results hold cpu_time, not time: {CPUTIME_REFUSAL}"))
        return result
    # the -a mode is in no JSON field, only in the command line it keeps (args)
    average = _AVERAGE_RE.search(" ".join(args[1:]))
    average = NCCL_TESTS_AVERAGE_MODES[int(average.group(1))] if average else "avg"
    config = data.get("config", {})
    blocking = blocking_from_json(config.get("blocking_collectives", "false"), args)
    flags, flag_notes = kernel_params(args, nccl_version(data.get("nccl_version")))
    flag_notes += [BLOCKING_UNKNOWN_NOTE] * (blocking == BLOCKING_UNKNOWN)
    devices = config.get("devices", [])
    # one entry per process (src/util.cu writeDeviceReport: jsonRankInfo of the first '#  Rank' line of each
    # process's block), each process driving nthreads x ngpus ranks: its host and device stand for all of them, so a
    # 2-process -g 8 run has 16 ranks on 2 hosts, a domain per host as the text path reads its rank lines
    per_process = int(config.get("nthreads", 1)) * int(config.get("ngpus", 1))
    world = max(1, len(devices)) * per_process
    devices = [d for d in devices if isinstance(d, dict) for _ in range(per_process)]
    env = {k: v for k, _, v in (e.partition("=") for e in data.get("env", [])) if k.startswith("NCCL_")}

    def new_run() -> str:
        run_id = new_run_id()
        result.records.append(_header(run_id, source=source, world=world,
                                      hosts=[d.get("hostname", "unknown") for d in devices] or ["unknown"],
                                      devices=[d.get("device_info", "unknown") for d in devices] or ["unknown"],
                                      argv=args, version=nccl_version(data.get("nccl_version")),
                                      started=str(data.get("start_time", "")), nccl_env=env,
                                      ranks_per_rack=ranks_per_rack))
        return run_id

    step = "factor" if "step_factor" in config else "bytes"
    try:   # the sweep every run planned (config: minimum_bytes, maximum_bytes, step_factor or step_bytes)
        sizes = banner_sizes(int(config["minimum_bytes"]), int(config["maximum_bytes"]),
                             int(config.get("step_factor", config.get("step_bytes", 0))), step)
    except (KeyError, TypeError, ValueError):
        sizes = None
    table = TableCount(sizes)   # the points each run planned, from that sweep (nccl_tests_planned)
    cycles = Cycles(sizes)
    cycle_runs = [new_run()]   # the run id of each -N cycle, in cycle order
    for index, row in enumerate(data["results"]):
        try:
            if not isinstance(row, dict):
                raise TypeError(f"a {type(row).__name__}, not an object")
            # -N cycles: each type/op/root's cycles follow one another in results (src/common.cu TimeTest's run_cycles
            # loop); a row goes to its sweep's pass's cycle run, as for text logs (nccl_tests_cycles)
            key = tuple(str(row.get(k)).strip() for k in ("size", "count", "type", "redop", "root"))
            cycle, _ = cycles.cycle_of(key[2:], int(row["size"]), key)
            if cycle == len(cycle_runs):
                cycle_runs.append(new_run())
            run_id = cycle_runs[cycle]
            root = int(str(row.get("root", "-1")).strip())
            made = []
            for in_place, key in ((False, "out_of_place"), (True, "in_place")):
                cell = row.get(key)
                if not cell:
                    continue
                time_us = cell.get("time")
                if time_us is None:
                    continue
                time_us = float(time_us)   # "nan" (util.cu jsonDouble writes a NaN so): a failed point, kept
                wrong = cell.get("nwrong")
                agg = int(config.get("aggregated_iterations", 1) or 1)
                # a NaN time's per-iteration times are NaN too (jsonDouble's "nan"): a failed point, no samples
                samples, sample_notes = (per_iter.from_json(row.get(f"{key}_per_iter"), agg)
                                         if not math.isnan(time_us) else ({}, []))
                made.append(_measurement(
                    run_id, name, size=int(row["size"]), count=int(row["count"]), dtype=str(row["type"]),
                    redop=str(row.get("redop", "none")), root=root, in_place=in_place, world=world,
                    iters=int(config.get("iterations", 0)), warmup=int(config.get("warmup_iters", 0)),
                    time_us=time_us, algbw=float(cell.get("alg_bw", "nan")), busbw=float(cell.get("bus_bw", "nan")),
                    num_wrong=None if wrong in (None, "nan") else int(float(wrong)), metrics={}, average=average,
                    notes=flag_notes,
                    loop={**loop_params(agg, int(config.get("graph", 0) or 0), blocking), **flags}))
                if samples and made[-1].status == "ok":
                    made[-1] = dataclasses.replace(made[-1], **samples, notes=[*made[-1].notes, *sample_notes])
            if (why := count_mismatch(name, int(row["size"]), int(row["count"]), str(row["type"]), None)):
                raise ValueError(why)
            points = [point_identity(r) for r in made]
            repeat = bool(made) and table.holds(run_id, points)   # its sweep's point again, as for text logs
            for record in made:
                if not (repeat and record.status == "ok" and not record.num_wrong):
                    result.records.append(record)
            if made:
                table.add_row(run_id, (made[0].dtype, made[0].op, made[0].params.get("root"), ()), points,
                              repeat=repeat)
        except (KeyError, TypeError, ValueError) as exc:
            result.problems.append((source, index + 1, json.dumps(row)[:200], f"results[{index}] unparsable: {exc}"))
    # the footer's keys (writeResultFooter: out_of_bounds, average_bus_bandwidth; then end_time) are written
    # after a run's last size; a run that failed mid-way leaves a file without them (main calls
    # outputFileFinalize before TESTCHECK(result), and jsonOutputFinalize only closes the open lists):
    # its last run stopped
    stopped = "out_of_bounds" not in data and bool(table.runs)
    if stopped:
        result.stopped.append((source, 1, STOPPED_JSON_RUN))
    planned = table.planned(stopped)
    result.planned.update(planned)
    result.records[:] = with_planned(result.records, planned)
    return result


def import_file(path: str, collective: str | None = None, result: ImportResult | None = None,
                version: tuple[int, ...] | None = None) -> ImportResult:
    """Records from one nccl-tests output file (-J JSON, or a text log read line by line); `version`: nccl-tests'
    own, for text logs that print none (-J JSON exists since v2.18.5, after -a: its time is what -a says)."""
    from commbench.errors import CommbenchError, decode_user_text

    result = ImportResult() if result is None else result
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise CommbenchError(f"nccl-tests output {str(path)!r} cannot be read: {exc.strerror}") from None
    with handle:
        head = decode_user_text(handle.read(1 << 16), path, "nccl-tests output", errors="replace")
        handle.seek(0)
        if head.lstrip().startswith("{"):
            text = decode_user_text(handle.read(), path, "nccl-tests output", errors="replace")
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                result.problems.append((path, exc.lineno, "", f"invalid JSON: {exc.msg}"))
                return result
            except RecursionError:
                result.problems.append((path, 1, "", "invalid JSON: nested too deeply"))
                return result
            parsed = parse_json(data, path, collective, result.ranks_per_rack)
            for record in parsed.records:
                result.records.append(record)
            for problem in parsed.problems:
                result.problems.append(problem)
            for stopped in parsed.stopped:   # its headers already carry planned_points (parse_json)
                result.stopped.append(stopped)
            result.collective_ignored.extend(parsed.collective_ignored)
            return result
        with io.TextIOWrapper(handle, encoding="utf-8", errors="replace", newline="") as lines:
            return parse_text(lines, path, collective, result, version)


def implied_world_sizes(collective: str, algbw_gbps: float, busbw_gbps: float, algbw_half_unit_gbps: float,
                        busbw_half_unit_gbps: float) -> tuple[float, float] | None:
    """The interval of rank counts n whose bus factor (busbw/algbw = 2(n-1)/n for all_reduce, (n-1)/n for
    reduce_scatter, all_gather and alltoall: nccl-tests src/<test>.cu GetBw) is consistent with the printed bandwidths
    within their print rounding (the half units). 2(n-1)/n flattens as n grows, so two printed decimals pin n only
    loosely at large worlds: 4.99 and 9.96 GB/s allow 286-1994 ranks, 512 among them (the point estimate 499 is not
    a disagreement). The upper end is inf where the rounding allows the factor's limit. None where the factor says
    nothing (1: broadcast, sendrecv, ...) or a bandwidth is within its rounding of 0."""
    scale = 2.0 if collective == "all_reduce" else 1.0
    if collective not in ("all_reduce", "reduce_scatter", "all_gather", "all_to_all"):
        return None
    if algbw_gbps - algbw_half_unit_gbps <= 0 or busbw_gbps - busbw_half_unit_gbps <= 0:
        return None
    low_ratio = (busbw_gbps - busbw_half_unit_gbps) / (algbw_gbps + algbw_half_unit_gbps)
    high_ratio = (busbw_gbps + busbw_half_unit_gbps) / (algbw_gbps - algbw_half_unit_gbps)
    low = scale / (scale - low_ratio) if low_ratio < scale else math.inf
    high = scale / (scale - high_ratio) if high_ratio < scale else math.inf
    return low, high


MULTI_NODE_NVLINK = ("gb200", "gb300")   # their NVL72 racks join hosts of 4 GPUs in one NVLink domain


def host_domain_warnings(records: list[Record]) -> list[str]:
    """One line per imported run whose domains were taken from its hosts (log_topology) on GPUs whose racks join hosts
    over NVLink: there a host is not a domain, and its curves would be read as the scale-out network's."""
    return [f"run {r.run_id}: {len(r.topology['racks'])} hosts of {r.devices[0]} GPUs, each taken as a scale-up "
            "domain; a GB200/GB300 NVL72 rack joins its hosts over NVLink (multi-node NVLink): import again with "
            "--ranks-per-rack (72, or the job's ranks in one rack) if these hosts shared one"
            for r in records if isinstance(r, RunHeader) and (r.topology or {}).get("source") == HOST_DOMAINS
            and any(g in " ".join(r.devices).lower() for g in MULTI_NODE_NVLINK)]


def time_warnings(records: list[Record]) -> list[str]:
    """One line per imported run whose time may not be the average it is stored as: several timing threads and no
    nccl-tests version in the log (before 2.10.0 it is rank 0's), or nccl-tests 2.10.0 with several GPUs or threads
    per process (AVERAGE_2_10_0_NOTE)."""
    return [f"run {r.run_id}: {note}" for r in records if isinstance(r, RunHeader)
            for note in r.notes if note.startswith(("nccl-tests version unknown", "nccl-tests 2.10.0:"))]


def world_size_warnings(records: list[Record]) -> list[str]:
    """One line per imported run whose world size (read from the log) lies outside the rank counts busbw/algbw
    allow at its largest-bandwidth point (the least rounded), the printed bandwidths taken within their print rounding
    (nccl-tests prints two decimals: implied_world_sizes). The line says where the world size came from (the header's
    notes: the '#  Rank' lines, a list nccl-tests cut, the banner where the log has none)."""
    headers = {r.run_id: r for r in records if isinstance(r, RunHeader)}
    def printed(m: Measurement) -> tuple[float | None, float | None]:   # the log's own numbers, not the derived ones
        return (m.metrics.get("nccl_tests_printed_algbw_gbps", m.algbw_gbps),
                m.metrics.get("nccl_tests_printed_busbw_gbps", m.busbw_gbps))

    best: dict[str, Measurement] = {}
    for m in records:
        if isinstance(m, Measurement) and all(printed(m)) and \
                (m.run_id not in best or printed(m)[0] > printed(best[m.run_id])[0]):
            best[m.run_id] = m
    out = []
    for run_id, m in best.items():
        algbw, busbw = printed(m)
        header = headers.get(run_id)
        world = header.world_size if header else None
        span = implied_world_sizes(m.collective, algbw, busbw, printed_half_unit_gbps(algbw),
                                   printed_half_unit_gbps(busbw))
        if span is None or world is None or algbw < 1.0 or span[0] - 1e-6 <= world <= span[1] + 1e-6:
            continue
        low, high = math.ceil(span[0] - 1e-6), span[1] if math.isinf(span[1]) else math.floor(span[1] + 1e-6)
        implied = (f"{low}" if low == high else f"{low} or more" if math.isinf(high) else f"{low}-{high}")
        out.append(f"{m.collective}: world size read as {world} ({_world_source(header)}) but busbw/algbw as printed "
                   f"({busbw:g} / {algbw:g} GB/s, within their rounding) implies {implied} ranks; the records keep "
                   f"{world}")
    return out


def _world_source(header: RunHeader) -> str:
    """Where an imported run's world size came from, by its header's notes (parse_text)."""
    if any(note.startswith("world size") and "no device lines" in note for note in header.notes):
        return "from the banner's nThread x nGpus: the log has no '#  Rank' lines"
    if any(note.startswith("the log lists '#  Rank' lines for") for note in header.notes):
        return "from the banner: nccl-tests cut the log's '#  Rank' lines"
    return f"from the log's device list: {len(header.devices)} ranks"
