"""compare refuses NEW whose newest run holds no point of BASE (an earlier run does not stand in for it), but took
the newest run to be the file's last: NEW put together out of order (`cat` of CI artifacts in glob order, a run
copied in) whose newest run, by its header's started_at, was measured on another dtype passed with
--allow-missing (exit 0, 'passed': true; probe CQ F2), though compare's own stale check orders runs by started_at.
Now the newest run is the one that started last (ties: the later in the file); file order only where a run of NEW
has no start time."""

from __future__ import annotations

from tests.results_files import COMPARE, invoke as _invoke, records as _records, write as _write
from tests.test_compare_unmatched_runs import _other_dtype


def test_the_newest_run_by_start_time_not_file_order_is_the_one_refused(tmp_path):
    base, new = _records(COMPARE / "gloo_all_reduce_a.jsonl"), _records(COMPARE / "gloo_all_reduce_b.jsonl")
    base_path = _write(tmp_path / "base.jsonl", base)
    # the bfloat16 run started last (15:00) but stands first in the file
    shuffled = _write(tmp_path / "new.jsonl", _other_dtype(new, "tonight", "2026-11-30T15:00:00+00:00") + new)
    for extra in ((), ("--allow-missing",), ("--allow-missing", "--json")):
        result = _invoke("compare", base_path, shuffled, *extra)
        said = " ".join(result.output.split())
        assert result.exit_code == 2, said
        assert "the new file's newest run (run tonight, 1/2; started 2026-11-30 15:00:00+00:00, the latest start " \
               "of its runs) holds no point of the base" in said, said


def test_file_order_where_a_run_has_no_start_time(tmp_path):
    base, new = _records(COMPARE / "gloo_all_reduce_a.jsonl"), _records(COMPARE / "gloo_all_reduce_b.jsonl")
    base_path = _write(tmp_path / "base.jsonl", base)
    later = [r for r in _other_dtype(new, "tonight", "") if r["record_type"] != "header"]   # no header: no time
    earlier = _write(tmp_path / "first.jsonl", later + new)
    result = _invoke("compare", base_path, earlier, "--allow-missing")
    assert result.exit_code == 0, result.output   # as before: the headerless run is not the last in the file
    last = _write(tmp_path / "last.jsonl", new + later)
    said = " ".join(_invoke("compare", base_path, last, "--allow-missing").output.split())
    assert "the new file's last run (run tonight, 2/2) holds no point of the base" in said, said


def test_run_start_times_gives_each_runs_start_parsed_once():
    """run_start_times parsed each header's started_at to order a resumed sweep's launches, then returned the text,
    which newest_run and back_to_back_note parsed again: it returns the times, which both use as they are."""
    import datetime

    from commbench.results.compare import run_start_times
    from commbench.results.records import read_records

    times = run_start_times(read_records([COMPARE / "gloo_all_reduce_b.jsonl"]))
    assert times and all(isinstance(t, datetime.datetime) for t in times.values()), times
