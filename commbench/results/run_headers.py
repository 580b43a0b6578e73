"""One run id, one header: the headers of the files a reader merges (fit, report, nccl-tuner, tune, compare), by run.

A run id is drawn at random when its run starts (records.new_run_id) and its header is written once, first in its
run's lines; a resume writes a header of its own under a new id (results.resumed). So two files hold one run id only
as copies of one file (`cp`, a partial sweep file resumed in two places), and a copy holds the very same header. Two
different headers of one run id are a copy edited by hand (another torch version, hosts or world size) or two files
concatenated under one id: which one says the run's setup is unknown, and a reader that kept the last one read
(`{h.run_id: h for h in headers}`) judged every point of the run by a setup the other file contradicts. Such a pair
is refused in one line naming the run id, both files and the first field in which they differ.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from commbench.results.records import Record, RunHeader

_SHOWN_CHARS = 60   # of a differing value in the refusal: a header's hostnames or nccl_env may be long


def header_difference(a: RunHeader, b: RunHeader) -> str | None:
    """The first field (in RunHeader's order) in which two headers differ, with both values; None where equal."""
    for spec in dataclasses.fields(RunHeader):
        left, right = getattr(a, spec.name), getattr(b, spec.name)
        if left != right:
            return f"{spec.name} ({_shown(left)} vs {_shown(right)})"
    return None


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS - 3] + "..."


class OneHeaderPerRun:
    """Headers added file by file (`add(path, header)`, in the order read); `runs` maps each run id to its header.
    A second header of a run id that differs from the first is refused (CommbenchError, exit 2); an equal one (the
    same file given twice, an unedited copy) is the same header, read once."""

    def __init__(self) -> None:
        self.runs: dict[str, RunHeader] = {}
        self._file_of: dict[str, str] = {}

    def add(self, path: str, header: RunHeader) -> None:
        from commbench.errors import CommbenchError

        first = self.runs.get(header.run_id)
        if first is None:
            self.runs[header.run_id] = header
            self._file_of[header.run_id] = str(path)
            return
        difference = header_difference(first, header)
        if difference is None:
            return
        earlier = self._file_of[header.run_id]
        where = f"{earlier} holds two" if earlier == str(path) else f"{earlier} and {path} hold"
        raise CommbenchError(f"run {header.run_id}: {where} different headers of it, first in {difference}: one run "
                             "has one header (a copy edited by hand, or files concatenated under one run id?), so "
                             "which setup its points were measured on is unknown; keep the unedited copy, or give "
                             "each its own run id")

    def add_records(self, path: str, records: Iterable[Record]) -> None:
        for record in records:
            if isinstance(record, RunHeader):
                self.add(path, record)


def one_header_per_run(per_file: Iterable[tuple[str, Iterable[Record]]]) -> dict[str, RunHeader]:
    """{run id: its header} over `per_file` ((path, its records) in the order given), refusing a run id whose files
    hold two different headers (OneHeaderPerRun)."""
    seen = OneHeaderPerRun()
    for path, records in per_file:
        seen.add_records(path, records)
    return seen.runs
