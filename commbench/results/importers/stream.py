"""Where an import's records and problems go while it reads: straight to the results file (a 200 MB
log never sits in memory), keeping only what the summary needs."""

from __future__ import annotations

from commbench.results.records import JsonlWriter, Measurement, Record, RunHeader

SHOWN_PROBLEMS = 20  # unparsed lines printed one by one; the rest are counted


class RecordSink:
    """`append(record)` writes it; a run's header waits for the run's first measurement (a run with no
    rows leaves nothing behind). Keeps per run the header and the largest-bandwidth point (the
    world-size check's inputs), the collectives seen and the point count."""

    def __init__(self, writer: JsonlWriter) -> None:
        self._writer = writer
        self._waiting: RunHeader | None = None
        self.headers: dict[str, RunHeader] = {}
        self.best: dict[str, Measurement] = {}
        self.collectives: set[str] = set()
        self.num_points = 0
        self.not_ok: dict[str, list] = {}   # "failed" / "wrong" -> [count, the first such record]

    def append(self, record: Record) -> None:
        if isinstance(record, RunHeader):
            self._waiting = record
            return
        if self._waiting is not None and self._waiting.run_id == record.run_id:
            self._writer.write(self._waiting)
            self.headers[record.run_id] = self._waiting
            self._waiting = None
        self._writer.write(record)
        self.num_points += 1
        self.collectives.add(record.collective)
        why = "failed" if record.status != "ok" else "wrong" if record.num_wrong else None
        if why is not None:
            entry = self.not_ok.setdefault(why, [0, record])
            entry[0] += 1
        best = self.best.get(record.run_id)
        if record.algbw_gbps and (best is None or record.algbw_gbps > (best.algbw_gbps or 0)):
            self.best[record.run_id] = record

    def summary_records(self) -> list[Record]:
        return [*self.headers.values(), *self.best.values()]


class FirstProblems:
    """`append(problem)` keeps the first SHOWN_PROBLEMS and counts them all."""

    def __init__(self) -> None:
        self.shown: list[tuple[str, int, str, str]] = []
        self.count = 0

    def append(self, problem: tuple[str, int, str, str]) -> None:
        self.count += 1
        if len(self.shown) < SHOWN_PROBLEMS:
            self.shown.append(problem)

    def __bool__(self) -> bool:
        return self.count > 0


def set_planned_points(path, planned: dict[str, tuple[int, str]], failed_checks: dict[str, str] | None = None,
                       failed_runs: dict[str, str] | None = None) -> None:
    """Give the headers in results file `path` of the runs in `planned` (run id -> (planned_points, note)) their
    planned point count and the note saying whence: a run's rows, counted against its banner's sweep, are known only
    after its header was written (nccl_tests_planned.TableCount); and the measurements of the runs in
    `failed_checks` (a footer's failed data check, known only after the rows: nccl_tests.with_failed_check) their
    num_wrong, and those of the runs in `failed_runs` (a footer that failed the whole run) status failed. The other
    lines stay as written;
    the file is replaced whole (a temporary file renamed over it)."""
    import json
    import os

    from commbench.results.importers.nccl_tests import with_failed_check

    failed_checks, failed_runs = failed_checks or {}, failed_runs or {}
    if not planned and not failed_checks and not failed_runs:
        return
    path = str(path)
    tmp = f"{path}.planned.tmp"
    with open(path, encoding="utf-8") as src, open(tmp, "w", encoding="utf-8") as out:
        for line in src:
            try:
                data = json.loads(line)
            except ValueError:
                data = None
            if isinstance(data, dict) and data.get("record_type") == "header" and data.get("run_id") in planned:
                count, note = planned[data["run_id"]]
                data["planned_points"] = count
                data["notes"] = [*(data.get("notes") or []), note]
                line = json.dumps(data, separators=(",", ":")) + "\n"
            elif isinstance(data, dict) and (marked := with_failed_check(data, failed_checks, failed_runs)) is not data:
                line = json.dumps(marked, separators=(",", ":")) + "\n"   # the footer's failed data check
            out.write(line)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
