"""compare's stale check on start times it cannot read as they are (probe PD): an nccl-tests text log prints no start
time, so an old log imported as NEW passed with no word of its age; an edited started_at ('garbage', or a time with
no zone within the widest UTC offset of BASE's) passed the same way."""

from __future__ import annotations

import datetime
import json
import os

from tests.results_files import invoke
from tests.test_compare import as_collective, write
from tests.test_compare_gate_notes import _run
from tests.test_compare_runs import run_cli

# nccl-tests text output (src/util.cu writeResultHeader / writeBenchmarkLine*): no start time anywhere in it
_LOG = """# nccl-tests version 2.17.6 nccl-headers=22703 nccl-library=22703
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 1024 maxBytes 4096 step: 4(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   4242 on      node1 device  0 [0000:19:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   4243 on      node1 device  1 [0000:3b:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        1024           256     float     sum      -1    {t1}    0.10    0.10       0    {t1}    0.10    0.10       0
        4096          1024     float     sum      -1    {t2}    0.40    0.40       0    {t2}    0.40    0.40       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.25
#
# Collective test concluded: all_reduce_perf
"""


def _import(tmp_path, name: str, times: tuple[float, float], mtime: datetime.datetime) -> str:
    """NAME.log with those times, its mtime set, imported into NAME.jsonl (the log's own import, as a user runs it)."""
    log = tmp_path / f"{name}.log"
    log.write_text(_LOG.format(t1=f"{times[0]:.2f}", t2=f"{times[1]:.2f}"))
    os.utime(log, (mtime.timestamp(), mtime.timestamp()))
    out = tmp_path / f"{name}.jsonl"
    assert invoke("import", "nccl-tests", str(log), "-O", str(out)).exit_code == 0
    return str(out)


def _at(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text)


def test_an_old_text_log_imported_as_new_is_refused_by_its_file_time(tmp_path):
    """Probe PD: `touch -d 2026-12-01 old.log; import; compare BASE imp_old.jsonl` passed (exit 0, nothing said).
    The import records the log's mtime (started_no_later_than: a run started before its log was last written); a
    NEW whose log was last written before BASE's newest run started is refused as stale."""
    base = tmp_path / "base.jsonl"
    rows = [json.loads(line) for line in open(_import(tmp_path, "b", (10.0, 20.0), _at("2026-12-05T12:30:00+00:00")))]
    rows[0]["started_at"] = "2026-12-05T12:00:00+00:00"   # BASE a run commbench timed itself
    base.write_text("".join(json.dumps(r) + "\n" for r in rows))
    old = _import(tmp_path, "old", (10.5, 20.5), _at("2026-12-01T00:00:00+00:00"))
    header = json.loads(open(old).readline())
    assert header["started_at"] == "" and header["started_no_later_than"] == "2026-12-01T00:00:00+00:00"
    assert any("mtime at import" in note for note in header["notes"])
    refused = run_cli(base, old)
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2 and "measured before the baseline" in said and "2026-12-01 00:00:00" in said, said
    assert "log file's mtime" in said and "Traceback" not in refused.output
    # a log written after BASE started: its start still cannot be told, said in one line and in --json
    fresh = _import(tmp_path, "fresh", (10.5, 20.5), _at("2026-12-06T00:00:00+00:00"))
    passed = run_cli(base, fresh)
    said = " ".join(passed.output.split())
    assert passed.exit_code == 0 and "age against the baseline cannot be checked" in said, said
    unchecked = json.loads(run_cli(base, fresh, "--json").stdout)["new_age_unchecked"]
    assert len(unchecked) == 1 and "records no start time" in unchecked[0], unchecked


def test_a_start_time_that_cannot_be_read_is_refused_and_one_without_a_zone_is_said(tmp_path):
    """Probe PD: started_at 'garbage', or a naive time before BASE's (zoned) start, passed with exit 0 and no word.
    An unreadable one is refused in one line (exit 2) as a header without started_at is; one without a zone (what
    nccl-tests' -J writes: local time) within 14 h of BASE's start cannot be placed: said, and in --json."""
    base = write(tmp_path / "base.jsonl", _run("b", 1, started="2026-12-07T01:28:00+00:00"))
    garbage = write(tmp_path / "garbage.jsonl", _run("g", 2, started="garbage"))
    refused = run_cli(base, garbage)
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2 and "'garbage'" in said and "cannot be read" in said, said
    assert len(refused.output.strip().splitlines()) <= 3 and "Traceback" not in refused.output
    assert run_cli(base, garbage, "--allow-stale").exit_code == 0
    naive = write(tmp_path / "naive.jsonl", _run("n", 3, started="2026-12-07T01:00:00"))
    passed = run_cli(base, naive)
    said = " ".join(passed.output.split())
    assert passed.exit_code == 0 and "cannot be checked" in said and "no time zone" in said, said
    assert json.loads(run_cli(base, naive, "--json").stdout)["new_age_unchecked"][0].startswith("run n started")
    zoned = write(tmp_path / "zoned.jsonl", _run("z", 4, started="2026-12-07T01:30:00Z"))
    assert "cannot be checked" not in run_cli(base, zoned).output


def test_an_edited_line_is_named_before_the_cut_short_run_it_leaves(tmp_path):
    """Probe PD (ed_min.jsonl): a record whose time_us_min disagrees with its own iter_times_us is dropped as
    unreadable, so its run holds fewer points than it plans; the error led with "cut short ... --allow-cut-short",
    and the real reason (edited or corrupted) showed only after that flag was added. It now comes first."""
    base = write(tmp_path / "base.jsonl", _run("b", 1, planned_points=4))
    path = tmp_path / "edited.jsonl"
    write(path, _run("n", 2, started="2026-12-05T13:00:00+00:00", planned_points=4))
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[2]["time_us_min"] /= 2   # one record's summary halved, its samples left
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    failed = run_cli(base, path)
    said = " ".join(failed.output.split())
    error = said[said.index("error:"):]
    assert failed.exit_code == 1 and error.startswith("error: 1 line(s) of the new file could not be read"), error
    assert "edited or corrupted" in error.split("cut short")[0], error


def test_the_not_planned_error_names_benchs_collective_and_counts_points_per_run(tmp_path):
    """Probe PD (b2.jsonl vs n2.jsonl): `bench --nproc 2 ... all_reduce` was labelled "`bench --nproc`" (argv's
    second word) and "base ...: 8 point(s); new ...: 8 point(s)" read as equal plans while BASE held 16 points over 2
    runs (all_reduce and all_gather). Each run is named by its collective, and the counts say they are per run."""
    argv = ["/usr/bin/commbench", "bench", "--nproc", "2", "-b", "1K", "-e", "64K", "-f", "4"]

    def run(run_id, seed, collective, started):
        header, *points = _run(run_id, seed, started=started, planned_points=4, argv=[*argv, collective])
        return [header, *(as_collective(m, collective) for m in points)]

    base = write(tmp_path / "base.jsonl", [*run("r", 1, "all_reduce", "2026-12-05T12:00:00+00:00"),
                                           *run("g", 2, "all_gather", "2026-12-05T12:00:05+00:00")])
    new = write(tmp_path / "new.jsonl", run("n", 3, "all_reduce", "2026-12-05T13:00:00+00:00"))
    failed = run_cli(base, new)
    said = " ".join(failed.output.split())
    error = said[said.index("error:"):]
    assert failed.exit_code == 1 and "`bench --nproc`" not in said, error
    assert ("base 2 runs, 8 points planned: `bench all_reduce`: 4 point(s) a run; `bench all_gather`: 4 point(s) a "
            "run; new `bench all_reduce`: 4 point(s) a run") in error, error
