"""When NEW was measured: a NEW whose runs started before the newest baseline run (BASE's or the --history
folder's, from the run headers' `started_at`) is likely a stale file (an old file left in a CI cache while the
launch meant to write it died before its header, BASE and NEW swapped) judged as this change's measurement.
`compare` refuses it unless --allow-stale (a baseline measured again after the change is the rare intended case).

What a start time is: commbench writes UTC with its offset (results/provenance.py, sweep/combos.py); nccl-tests' -J
`start_time` is strftime("%Y-%m-%d %H:%M:%S", localtime()) (src/util.cu TIME_STRING_FORMAT and formatNow, nccl-tests
v2.19.6): the measuring host's local time, zone unknown, so against a zoned time it is read only beyond the widest UTC
offset. An nccl-tests text log prints no start time (its -S 1 timestamps are per row): the import records the log
file's mtime as `started_no_later_than` (a run started before its log was last written), which tells NEW is stale
where even that is before the baseline's newest start. What none of this can tell is said (new_age_unknown), never
passed in silence."""

from __future__ import annotations

import datetime

# the widest UTC offset (UTC+14): an nccl-tests import's start time has no zone, so against a zoned one it is
# only known to within this much
_ZONE_SLACK = datetime.timedelta(hours=14)


def started(text: str | None) -> datetime.datetime | None:
    """A header's started_at as a datetime (ISO 8601, "2026-12-05T13:28:21+00:00" or "2026-12-01 10:00:00"); None
    where it is empty or not a time."""
    try:
        return datetime.datetime.fromisoformat(text.strip()) if text and text.strip() else None
    except ValueError:
        return None


def unreadable_start(header) -> str | None:
    """A text where the header's started_at is set but is no ISO 8601 time ("garbage", an edited header); None else."""
    text = header.started_at
    if text and text.strip() and started(text) is None:
        return f"run {header.run_id} has started_at {text!r}, not an ISO 8601 time"
    return None


def _no_later_than(header) -> datetime.datetime | None:
    """The latest the run can have started (RunHeader.started_no_later_than: an imported log file's mtime), zoned."""
    when = started(getattr(header, "started_no_later_than", None))
    return when if when is not None and when.tzinfo is not None else None


def _before(a: datetime.datetime, b: datetime.datetime) -> bool:
    """a started before b for certain: with a zone on one side only, by more than the widest UTC offset."""
    if (a.tzinfo is None) == (b.tzinfo is None):
        return a < b
    return a.replace(tzinfo=None) + _ZONE_SLACK < b.replace(tzinfo=None)


def _newest(baseline: dict[str, list]) -> dict[str, tuple[datetime.datetime, str]]:
    """Per baseline side with a readable start time: (its newest run's start, that run's id)."""
    newest = {}
    for side, headers in baseline.items():
        times = [(t, h.run_id) for h in headers if (t := started(h.started_at)) is not None]
        if times:
            newest[side] = max(times, key=lambda x: x[0].replace(tzinfo=None))
    return newest


def _newest_text(side: str, when: datetime.datetime, run_id: str) -> str:
    return f"the {side}'s newest run ({run_id}, started {when.isoformat(sep=' ')})"


def runs_older_than_baseline(new_headers: list, baseline: dict[str, list]) -> list[str]:
    """One text per run of NEW that started before the newest run of a baseline side (`baseline`: side name ->
    its run headers): "run ID started 2025-01-01 10:00:00, before the base's newest run (ID, started ...)"; a run
    with no start time whose log was last written (started_no_later_than) before it: "run ID started no later than
    ... (its log file's mtime at import), before ..."."""
    out = []
    newest = _newest(baseline)
    for h in new_headers:
        t = started(h.started_at)
        how = "started"
        if t is None and not (h.started_at or "").strip() and (t := _no_later_than(h)) is not None:
            how = "started no later than"
        if t is None:
            continue
        late = [_newest_text(side, when, run_id) for side, (when, run_id) in newest.items() if _before(t, when)]
        if late:
            mtime = " (its log file's mtime at import)" if how != "started" else ""
            out.append(f"run {h.run_id} {how} {t.isoformat(sep=' ')}{mtime}, before {' and '.join(late)}")
    return out


def new_age_unknown(new_headers: list, baseline: dict[str, list]) -> list[str]:
    """One text per run of NEW whose start cannot be placed against the newest baseline run, and per baseline run
    whose start time is unreadable (left out of that side's newest): no start time (an imported text log; where its
    log's mtime is after the baseline's newest start that bounds nothing), no zone within the widest UTC offset of a
    zoned time, or a baseline recording no start time at all. Runs runs_older_than_baseline names are not here, nor
    NEW's unreadable start times (compare refuses those: unreadable_start)."""
    newest = _newest(baseline)
    out = [f"the {side}'s {text[0].lower()}{text[1:]}" for side, headers in baseline.items() for h in headers
           if (text := unreadable_start(h))]
    if not new_headers:
        return out
    out += [f"the {side}'s runs record no start time" for side, headers in baseline.items()
            if headers and side not in newest]
    if not newest:
        return out
    for h in new_headers:
        t = started(h.started_at)
        if t is None and (h.started_at or "").strip():
            continue   # unreadable: refused by compare
        if t is None:
            bound = _no_later_than(h)
            later = [_newest_text(side, when, run_id) for side, (when, run_id) in newest.items()
                     if not _before(bound, when)] if bound is not None else list(newest)
            if bound is None:
                out.append(f"run {h.run_id} records no start time (an imported nccl-tests text log?)")
            elif later:
                out.append(f"run {h.run_id} records no start time; its log file was last modified (at import) "
                           f"{bound.isoformat(sep=' ')}, not before {' and '.join(later)}: a log copied without its "
                           "times reads so too")
            continue
        unsure = [_newest_text(side, when, run_id) for side, (when, run_id) in newest.items()
                  if (t.tzinfo is None) != (when.tzinfo is None) and not _before(t, when)
                  and not _before(when, t)]
        if unsure:
            out.append(f"run {h.run_id} started {t.isoformat(sep=' ')} with no time zone (nccl-tests' -J start_time "
                       f"is the host's local time), within {_ZONE_SLACK.total_seconds() / 3600:.0f} h of "
                       f"{' and '.join(unsure)}: which came first cannot be told")
    return out
