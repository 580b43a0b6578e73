"""When NEW was measured: a NEW whose runs started before the newest baseline run (BASE's or the --history
folder's, from the run headers' `started_at`) is likely a stale file (an old file left in a CI cache while the
launch meant to write it died before its header, BASE and NEW swapped) judged as this change's measurement.
`compare` refuses it unless --allow-stale (a baseline measured again after the change is the rare intended case)."""

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


def _before(a: datetime.datetime, b: datetime.datetime) -> bool:
    """a started before b for certain: with a zone on one side only, by more than the widest UTC offset."""
    if (a.tzinfo is None) == (b.tzinfo is None):
        return a < b
    return a.replace(tzinfo=None) + _ZONE_SLACK < b.replace(tzinfo=None)


def runs_older_than_baseline(new_headers: list, baseline: dict[str, list]) -> list[str]:
    """One text per run of NEW that started before the newest run of a baseline side (`baseline`: side name ->
    its run headers): "run ID started 2025-01-01 10:00:00, before the base's newest run (ID, started ...)"."""
    out = []
    newest = {}
    for side, headers in baseline.items():
        times = [(t, h.run_id) for h in headers if (t := started(h.started_at)) is not None]
        if times:
            newest[side] = max(times, key=lambda x: x[0].replace(tzinfo=None))
    for h in new_headers:
        t = started(h.started_at)
        if t is None:
            continue
        late = [f"the {side}'s newest run ({run_id}, started {when.isoformat(sep=' ')})"
                for side, (when, run_id) in newest.items() if _before(t, when)]
        if late:
            out.append(f"run {h.run_id} started {t.isoformat(sep=' ')}, before {' and '.join(late)}")
    return out
