"""Result records and the JSONL file that holds them: one RunHeader, then one Measurement per point.

Records are frozen, keyword-only dataclasses with units in their field names. A file may hold
several runs (header, measurements, header, measurements, ...); every Measurement carries the
`run_id` of its header. Lines are appended and flushed as each point finishes, so a crash or
Ctrl-C loses nothing already measured; a torn last line is skipped on read with a warning.
"""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from commbench.errors import CommbenchError, ResultsNotWritten, first_line
from commbench.files import MAX_LINE_BYTES, repair_torn_tail  # one bound for the readers and the repair
from commbench.results.record_checks import (SummaryDisagrees, check_algbw_matches_size, check_busbw_matches_algbw,
                                             check_measurement, check_size_matches_count, check_world_size_matches_header,
                                             check_summary_matches_samples, header_contradiction)
from commbench.typed_json import check_fields

SCHEMA_VERSION = 1

# -m N, two loops (a record's params say which): nccl-tests runs the N calls of a timed iteration in one
# ncclGroupStart/End (src/common.cu BenchTime), one grouped NCCL operation; commbench's bench issues N separate calls
# back to back (measure/harness.py aggregated). Two keys, so compare and fit never take one for the other.
AGG_GROUPED = "agg_iters"               # nccl-tests' -m, as `import nccl-tests` records it
AGG_UNGROUPED = "agg_iters_ungrouped"   # commbench's -m
IMPORTED_LAUNCHER = "nccl-tests"        # the header's launcher of an imported run


def ungrouped_if_ours(header: dict, point: dict) -> None:
    """A file written before commbench's -m had its own key: a record commbench measured (its header's launcher is
    not an import's), or imported from commbench's own --format nccl-tests text of a run without NCCL (nccl-tests runs
    only on NCCL), kept its ungrouped calls as agg_iters: read them as agg_iters_ungrouped (in place)."""
    params = point.get("params")
    if not isinstance(params, dict) or AGG_GROUPED not in params or AGG_UNGROUPED in params:
        return
    if header.get("launcher") != IMPORTED_LAUNCHER or header.get("backend") not in ("nccl", None):
        point["params"] = {(AGG_UNGROUPED if key == AGG_GROUPED else key): value for key, value in params.items()}


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True, kw_only=True)
class RunHeader:
    """Provenance of one run: what ran, where, with which software and environment."""

    record_type: str = "header"
    schema_version: int = SCHEMA_VERSION
    run_id: str
    started_at: str
    argv: list[str]
    commbench_version: str
    python_version: str
    torch_version: str | None
    nccl_version: str | None
    cuda_version: str | None
    cupy_version: str | None
    backend: str
    world_size: int
    hostnames: list[str]
    devices: list[str]
    nccl_env: dict[str, str]
    launcher: str
    topology: dict[str, Any] | None = None
    emulated: dict[str, Any] | None = None  # set when the fabric was emulated (commbench emulate)
    notes: list[str] = field(default_factory=list)
    sweep_identity: str | None = None  # a sweep's entries + world size + backend, hashed (--resume checks it)
    # a combination of an NCCL tuning launch (bench/sweep --nccl-*): {"plan": id, "combinations": [every label the
    # launch plans], "combination": this one's} (comm.nccl_tuning.tuning_from_env); None elsewhere
    nccl_tuning: dict[str, Any] | None = None
    planned_points: int | None = None  # the points the run (a sweep: every launch of it) plans; report and fit say when fewer are held
    # a cycle of a `bench -N` launch: {"launch": id shared by its cycles, "cycle": 1-based, "cycles": N}; each cycle
    # is a run of its own, so its planned_points are its own cycle's and a launch stopped between two cycles is named
    # by the cycles it lacks (results.resumed.cycles_not_run). None elsewhere and in files written before it
    run_cycles: dict[str, Any] | None = None
    # NCCL's configuration files read on this host, in NCCL's order -> their NCCL_* settings (comm.nccl_conf)
    nccl_conf: dict[str, dict[str, str]] = field(default_factory=dict)
    # each rank's torch intra-op threads (torch.get_num_threads(): OMP_NUM_THREADS, 1 unless set under a local launch),
    # in rank order: on gloo they decide a collective's time (README: 2 ms vs 20-80 ms per 512 KiB reduce_scatter);
    # None where torch is absent or the file predates the field (its notes then say it in words, if at all)
    torch_threads: list[int] | None = None
    # an imported log that prints no start time (nccl-tests text: started_at ""): the log file's mtime at import, UTC,
    # the latest the run can have started (compare's stale check reads it: results.staleness); None elsewhere
    started_no_later_than: str | None = None
    # a sweep's entries as its identity hashes them (sweep.resume.identity_entries: defaults applied, a routing trace's
    # digest beside its path), so a refused --resume names the setting that changed; None elsewhere and before
    sweep_entries: list[dict[str, Any]] | None = None
    # a sweep launch's resume: the run id of the run of this sweep it went on from in its file (`sweep --resume`, or
    # fresh ranks after a hang), "" for a launch that resumed nothing; only such a header makes its run a continuation
    # (results.resumed). None elsewhere and in files written before it, whose argv's `--resume` then says a resume
    resumes_run_id: str | None = None

    def nccl_settings(self) -> dict[str, str]:
        """The NCCL_* settings NCCL ran with: `nccl_env`, then the files' where the environment leaves a key unset
        (NCCL's setenv(key, value, 0): comm.nccl_conf.effective_settings). A setting from a file counts exactly
        as the same variable exported."""
        from commbench.comm.nccl_conf import effective_settings

        return effective_settings(self.nccl_env or {}, self.nccl_conf)


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """One measured point. `size_bytes` means what nccl-tests' "size" column means for the collective.

    Two time statistics, each named (see TIME_STATISTICS):
    - `time_us_median` (and mean/min/max/p99): over the timed iterations, each iteration counting its
      slowest rank; `iter_times_us` keeps those per-iteration times (rounded to 1 ns) so a gate can
      compute the uncertainty of the median. `time_us_p99` only with >= 100 iterations (below that
      the 99th percentile is the max: see `time_us_max`).
    - `loop_time_us`: nccl-tests' time: the timed loop's host time (device-synced) / iterations on each
      rank, reduced over ranks as nccl-tests' -a modes: "avg" (-a 1, its default), "rank0" (-a 0),
      "min" (-a 2), "max" (-a 3). Records imported from nccl-tests hold this one (mode "avg"); an -I 1 run's
      per-iteration times (importers/nccl_tests_per_iter) add iter_times_us and time_us_min/max/p99, never a median.
    algbw = size_bytes / median time, busbw = algbw * the collective's bus factor (GB = 1e9 B).
    `stages_us_median`: per stage, each stage timed in its own loop behind a barrier (no stage is
    charged for the previous stage's skew). `status` is "ok", "failed" or "skipped" (an NCCL tuning
    combination NCCL refused); for the last two `error` says why and the numbers are absent.
    """

    record_type: str = "measurement"
    run_id: str
    collective: str
    backend: str
    size_bytes: int
    count: int
    dtype: str
    op: str | None
    in_place: bool
    world_size: int
    group_size: int
    group_layout: str = "world"
    num_groups: int = 1
    iters: int
    warmup_iters: int
    time_us_median: float | None = None
    time_us_mean: float | None = None
    time_us_min: float | None = None
    time_us_p99: float | None = None
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    num_wrong: int | None = None
    status: str = "ok"
    error: str | None = None
    stages_us_median: dict[str, float] = field(default_factory=dict)  # per-stage medians, when staged
    params: dict[str, Any] = field(default_factory=dict)  # workload parameters (e.g. MoE routing)
    metrics: dict[str, Any] = field(default_factory=dict)  # workload metrics (e.g. bytes per tier)
    notes: list[str] = field(default_factory=list)
    point_key: str | None = None  # identifies the point within a sweep (for --resume)
    time_us_max: float | None = None
    iter_times_us: list[float] = field(default_factory=list)  # per iteration, slowest rank, in loop order
    loop_time_us: dict[str, float] = field(default_factory=dict)  # nccl-tests' time by -a mode (see above)
    error_detail: str | None = None  # the raw text behind `error` where it names a cause (a peer that left)

    def __post_init__(self) -> None:
        check_measurement(self)


# -a value of nccl-tests (src/common.cu: "0=RANK0/1=AVG/2=MIN/3=MAX") -> key of Measurement.loop_time_us
NCCL_TESTS_AVERAGE_MODES = {0: "rank0", 1: "avg", 2: "min", 3: "max"}
MIN_ITERS_FOR_P99 = 100  # fewer samples: the 99th percentile is (nearly) the max

# Named time statistics, as tables, JSONL consumers, plots and `compare` label them.
TIME_STATISTICS = {
    "median": "median over iterations of the slowest rank's iteration time",
    "nccl-avg": "nccl-tests time: loop time / iterations, averaged over ranks (-a 1)",
    "nccl-rank0": "nccl-tests time: loop time / iterations on rank 0 (-a 0)",
    "nccl-min": "nccl-tests time: loop time / iterations, min over ranks (-a 2)",
    "nccl-max": "nccl-tests time: loop time / iterations, max over ranks (-a 3)",
}


def time_us(m: "Measurement", statistic: str) -> float | None:
    """The named statistic of a record (None when the record lacks it)."""
    if statistic == "median":
        return m.time_us_median
    if statistic.startswith("nccl-") and statistic in TIME_STATISTICS:
        return m.loop_time_us.get(statistic[len("nccl-"):])
    raise CommbenchError(f"statistic={statistic!r} is invalid: allowed {', '.join(TIME_STATISTICS)}")


def headline_time(m: "Measurement") -> tuple[str, float | None]:
    """(statistic name, µs) a record is known by: its median when measured here, else nccl-tests' time
    (records imported from nccl-tests have only that)."""
    for statistic in TIME_STATISTICS:  # median, then nccl-tests' time by -a mode (avg first)
        value = time_us(m, statistic)
        if value is not None:
            return statistic, value
    return "median", None


Record = RunHeader | Measurement
_FIELDS = {cls.__name__: {f.name for f in dataclasses.fields(cls)} for cls in (RunHeader, Measurement)}
_FIELD_ORDER = {cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in (RunHeader, Measurement)}


def to_dict(record: Record) -> dict[str, Any]:
    return dataclasses.asdict(record)


def from_dict(data: Any) -> Record:
    """Rebuild a record, checking each known field's JSON type; unknown keys (from newer writers) are
    ignored, a missing required key or a wrong type is a ValueError naming the field."""
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    kind = data.get("record_type")
    cls = {"header": RunHeader, "measurement": Measurement}.get(kind)
    if cls is None:
        raise ValueError(f"record_type={kind!r}: expected 'header' or 'measurement'")
    fields = check_fields(cls, data)
    if cls is Measurement and "status" not in data:   # every writer writes it: without it the outcome is unknown
        raise ValueError("field 'status' is missing: whether the point was measured (ok), failed or skipped is unknown")
    if cls is RunHeader and fields.get("schema_version", SCHEMA_VERSION) > SCHEMA_VERSION:
        raise ValueError(f"schema_version={data['schema_version']} is newer than this commbench reads "
                         f"({SCHEMA_VERSION}): its fields may mean something else; read it with a newer commbench")
    if cls is Measurement and not fields.get("loop_time_us") and any(
            str(note).startswith(_OLD_IMPORT_NOTE) for note in fields.get("notes", [])):
        # written by an importer that stored nccl-tests' time as the median: put it where it belongs
        fields.update(loop_time_us={"avg": fields.get("time_us_median")}, time_us_median=None, time_us_mean=None)
    return cls(**fields)


_OLD_IMPORT_NOTE = "imported from nccl-tests: time is nccl-tests' mean over iterations"


class JsonlWriter:
    """Appends records to a JSONL file, one line each, flushed and fsynced as written (`sync_each`
    False: once, on close, for bulk writers such as import). A write the disk refuses (full, ulimit -f)
    is cut back to the last whole line and reported in one line: the records before it stay intact. An existing
    file's last line is ended first (files.repair_torn_tail: a whole record kept, a torn one cut and said)."""

    def __init__(self, path: str | os.PathLike[str], *, sync_each: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_torn_tail(self.path)
        self._file = self.path.open("ab")
        self._sync_each = sync_each

    def write(self, record: Record) -> None:
        fields = {name: getattr(record, name) for name in _FIELD_ORDER[type(record)]}  # asdict deep-copies: slow
        line = (json.dumps(fields, separators=(",", ":")) + "\n").encode("utf-8")
        start = self._file.tell()
        try:
            self._file.write(line)
            self._file.flush()
            if self._sync_each:
                os.fsync(self._file.fileno())
        except OSError as exc:
            self._cut_back(start)
            raise ResultsNotWritten(f"results file {str(self.path)!r} cannot be written: {exc.strerror or exc}; "
                                    "the records before this one are intact") from None

    def _cut_back(self, size: int) -> None:
        try:
            self._file.close()
        except OSError:
            pass  # its buffer held the line the disk refused
        try:
            self._file = self.path.open("ab")
            self._file.truncate(size)
        except OSError:
            pass

    def close(self) -> None:
        try:
            if not self._sync_each:
                self._file.flush()
                os.fsync(self._file.fileno())
        except OSError:
            pass
        finally:
            self._file.close()

    def __enter__(self) -> "JsonlWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_records(path: str | os.PathLike[str], *, on_bad_line=None, drop_samples: bool = False,
                 keep_samples_of=None, on_self_contradicting=None) -> Iterator[Record]:
    """Yield the records of a JSONL file, one line in memory at a time. Bad lines go to
    `on_bad_line(line_number, reason)`, a measurement whose summary disagrees with its own samples
    (record_checks.SummaryDisagrees) to `on_self_contradicting(line_number, reason)` where given. `drop_samples`: measurements without `iter_times_us` (for
    readers that never use them: a large file then takes a fraction of the memory), except those whose
    record (the parsed JSON object) `keep_samples_of` returns true for (a reader that needs some).
    A measurement read before its run's header (files concatenated or edited) is held, with the lines after it,
    until that header comes, and checked against it as one after it is (session 45: it passed unchecked); a run
    whose header never comes is yielded at the end, in file order, as a run without a header."""
    try:
        handle = Path(path).open("rb")
    except OSError as exc:
        raise CommbenchError(f"results file {str(path)!r} cannot be read: {exc.strerror}") from None
    runs: dict[str, dict] = {}   # run id -> its header's launcher, backend and world size
    held: list[tuple[int, dict, Record]] = []   # from the first measurement whose header is not read yet, in order
    waiting: set[str] = set()   # the run ids of held measurements whose header is not read yet

    def report(line_number: int, exc: Exception) -> None:
        callback = (on_self_contradicting or on_bad_line) if isinstance(exc, SummaryDisagrees) else on_bad_line
        if callback is not None:
            callback(line_number, first_line(exc))

    def released() -> Iterator[Record]:
        for line_number, data, record in held:
            try:
                yield _with_header(record, data, runs.get(record.run_id))
            except (SummaryDisagrees, ValueError, TypeError, RecursionError) as exc:
                report(line_number, exc)
        held.clear()

    with handle:
        line_number, first = 0, True
        while raw := handle.readline(MAX_LINE_BYTES):
            line_number += 1
            if not raw.endswith(b"\n") and len(raw) == MAX_LINE_BYTES:
                if first:
                    _check_first_line(path, b"")
                while (rest := handle.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                    pass
                if on_bad_line is not None:
                    on_bad_line(line_number, f"longer than {MAX_LINE_BYTES:,} bytes: not a record")
                continue
            if b"\0" in raw:
                raise CommbenchError(f"results file {str(path)!r} is binary, not JSONL (a NUL byte on line {line_number})")
            if not raw.strip():
                continue
            if first:
                first = False
                _check_first_line(path, raw)
            try:
                data = json.loads(raw.decode("utf-8"))
                samples = data.get("iter_times_us") if isinstance(data, dict) else None
                if drop_samples and isinstance(data, dict) and not (keep_samples_of and keep_samples_of(data)):
                    data.pop("iter_times_us", None)
                record = from_dict(data)
                if isinstance(record, Measurement) and samples:   # checked before a reader drops them
                    check_summary_matches_samples({**data, "iter_times_us": samples})
                if isinstance(record, Measurement):
                    check_algbw_matches_size(record)
                    check_busbw_matches_algbw(record)
            except UnicodeDecodeError as exc:
                if on_bad_line is not None:
                    on_bad_line(line_number, f"not UTF-8 text (byte 0x{raw[exc.start]:02x})")
                continue
            except (SummaryDisagrees, ValueError, TypeError, RecursionError) as exc:
                report(line_number, exc)
                continue
            if isinstance(record, RunHeader):
                contradicts = header_contradiction(record)
                runs[record.run_id] = {"launcher": record.launcher, "backend": record.backend,
                                       "world_size": record.world_size, "sweep_entries": record.sweep_entries,
                                       "contradicts": contradicts, "line": line_number}
                waiting.discard(record.run_id)
                if contradicts:   # refused, and every measurement of its run with it (_with_header)
                    report(line_number, SummaryDisagrees(contradicts))
                    if not waiting:
                        yield from released()
                    continue
            elif record.run_id not in runs:
                waiting.add(record.run_id)
            held.append((line_number, data, record))
            if not waiting:
                yield from released()
        yield from released()   # runs whose header never came: unchecked against one, as before


def _with_header(record: Record, data: dict, header: dict | None) -> Record:
    """A measurement checked against its run's header (`header`: launcher, backend, world size; None where the run
    has none) and read as it says (ungrouped_if_ours); a header as it is."""
    if not isinstance(record, Measurement):
        return record
    if header is None:
        check_size_matches_count(record, None, imported=False)
        return record
    if header.get("contradicts"):
        raise SummaryDisagrees(f"its run {record.run_id}'s header (line {header['line']}) contradicts itself: not a "
                               "measurement to judge")
    check_world_size_matches_header(record, header.get("world_size"))
    check_size_matches_count(record, header.get("sweep_entries"),
                             imported=header.get("launcher") == IMPORTED_LAUNCHER)
    if AGG_GROUPED in record.params:
        ungrouped_if_ours(header, data)
        return from_dict(data)
    return record


def _check_first_line(path: str | os.PathLike[str], raw: bytes) -> None:
    """A results file's first line is a commbench record (a header, as every writer starts): anything else
    (a plan.json, a log) is refused in one line instead of one warning per line."""
    why = None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        why = f"not UTF-8 text (byte 0x{raw[exc.start]:02x})"
    except (ValueError, RecursionError) as exc:
        why = first_line(exc) if raw else "longer than a record can be"
    else:
        if not isinstance(data, dict):
            why = f"expected a JSON object, got {type(data).__name__}"
        elif not isinstance(data.get("record_type"), str):
            why = "a JSON object without a record_type"
    if why:
        raise CommbenchError(f"results file {str(path)!r} is not a commbench results file (JSONL): its first line "
                             f"is not a commbench record ({why}); `bench`, `sweep` and `import` write one")


def read_records(paths: Iterable[str | os.PathLike[str]], *, on_bad_line=None, drop_samples: bool = False,
                 on_self_contradicting=None) -> list[Record]:
    """The records of `paths`, in order; a run id whose files (or one file) hold two different headers is refused
    (results.run_headers: one run, one header)."""
    from commbench.results.run_headers import OneHeaderPerRun

    out: list[Record] = []
    one_header = OneHeaderPerRun()
    for path in paths:
        for rec in iter_records(path, on_bad_line=on_bad_line, drop_samples=drop_samples,
                                on_self_contradicting=on_self_contradicting):
            if isinstance(rec, RunHeader):
                one_header.add(str(path), rec)
            out.append(rec)
    return out


def measurements(records: Iterable[Record]) -> list[Measurement]:
    return [rec for rec in records if isinstance(rec, Measurement)]


def headers(records: Iterable[Record]) -> list[RunHeader]:
    return [rec for rec in records if isinstance(rec, RunHeader)]


def mixed_runs_text(values: dict[str, str], files: dict[str, list[str]] | None = None) -> str | None:
    """Where runs differ in a property ({run id: its value}): "value: run a, b, c ...; other: run d", naming at
    most three runs per value; None where they all agree (the one-line refusal of mixed results names them).
    With `files` (run id -> the files holding it, as given): "value: a.jsonl run a, b.jsonl run b", since the user
    typed files, not run ids."""
    by_value: dict[str, list[str]] = {}
    for run_id, value in values.items():
        by_value.setdefault(value, []).append(run_id)
    if len(by_value) < 2:
        return None

    def named(ids: list[str]) -> str:
        if files is None:
            return "run " + ", ".join(ids)
        return ", ".join(f"{', '.join(files[r])} run {r}" if files.get(r) else f"run {r}" for r in ids)

    return "; ".join(f"{value}: {named(sorted(ids)[:3])}" + (" ..." if len(ids) > 3 else "")
                     for value, ids in sorted(by_value.items()))
