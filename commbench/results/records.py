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

from commbench.errors import CommbenchError

SCHEMA_VERSION = 1


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


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """One measured point. `size_bytes` means what nccl-tests' "size" column means for the collective.

    Times are per iteration, taking the slowest rank of each iteration; algbw = size_bytes / time,
    busbw = algbw * the collective's bus factor (GB = 1e9 B), both from the median time.
    `status` is "ok", "failed" or "skipped" (an NCCL tuning combination NCCL refused); for the last
    two `error` says why and the numbers are absent.
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


Record = RunHeader | Measurement
_FIELDS = {cls.__name__: {f.name for f in dataclasses.fields(cls)} for cls in (RunHeader, Measurement)}


def to_dict(record: Record) -> dict[str, Any]:
    return dataclasses.asdict(record)


def from_dict(data: dict[str, Any]) -> Record:
    """Rebuild a record; unknown keys (from newer writers) are ignored, missing required ones fail."""
    kind = data.get("record_type")
    cls = {"header": RunHeader, "measurement": Measurement}.get(kind)
    if cls is None:
        raise ValueError(f"record_type={kind!r}: expected 'header' or 'measurement'")
    known = _FIELDS[cls.__name__]
    return cls(**{k: v for k, v in data.items() if k in known})


class JsonlWriter:
    """Appends records to a JSONL file, one line each, flushed and fsynced as written."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")

    def write(self, record: Record) -> None:
        self._file.write(json.dumps(to_dict(record), separators=(",", ":")) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "JsonlWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_records(path: str | os.PathLike[str], *, on_bad_line=None) -> Iterator[Record]:
    """Yield the records of a JSONL file. Bad lines go to `on_bad_line(line_number, reason)`."""
    try:
        handle = Path(path).open(encoding="utf-8")
    except OSError as exc:
        raise CommbenchError(f"results file {str(path)!r} cannot be read: {exc.strerror}") from None
    with handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield from_dict(json.loads(line))
            except (ValueError, TypeError) as exc:
                if on_bad_line is not None:
                    on_bad_line(line_number, str(exc))


def read_records(paths: Iterable[str | os.PathLike[str]], *, on_bad_line=None) -> list[Record]:
    return [rec for path in paths for rec in iter_records(path, on_bad_line=on_bad_line)]


def measurements(records: Iterable[Record]) -> list[Measurement]:
    return [rec for rec in records if isinstance(rec, Measurement)]


def headers(records: Iterable[Record]) -> list[RunHeader]:
    return [rec for rec in records if isinstance(rec, RunHeader)]
