"""A record whose summary times (time_us_min/median/mean) were x10 beside its unchanged iter_times_us passed `compare`
(probe DK hb/x10_summary_only.jsonl: the median ratio column showed 9.66, the judged min came from the samples) and
fed `fit`. The harness computes both from one array (measure/harness.py time_statistics), so such a record was edited
or corrupted: every reader refuses the line (records.iter_records, record_checks.check_summary_matches_samples),
naming file, line and fields; compare fails on it, fit refuses the file, nccl-tuner refuses any unreadable line."""

from __future__ import annotations

import dataclasses

import numpy as np
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.records import iter_records
from tests.test_compare import record, write

SIZES = (1024, 4096, 16384, 65536, 262144)


def _run(run_id: str, seed: int):
    rng = np.random.default_rng(seed)
    return [record(size, (20 + size / 2e4) * np.exp(rng.normal(0, 0.02, 30)), run_id=run_id) for size in SIZES]


def _summary_x10(m):
    return dataclasses.replace(m, time_us_min=m.time_us_min * 10, time_us_median=m.time_us_median * 10,
                               time_us_mean=m.time_us_mean * 10)


def test_a_record_whose_summary_disagrees_with_its_samples_is_refused(tmp_path):
    base = write(tmp_path / "base.jsonl", _run("b", 1))
    new_run = _run("n", 2)
    new = write(tmp_path / "new.jsonl", [*new_run[:2], _summary_x10(new_run[2]), *new_run[3:]])
    bad: list = []
    kept = list(iter_records(new, on_bad_line=lambda n, why: bad.append((n, why)), drop_samples=True))
    assert len(kept) == 1 + len(SIZES) - 1 and len(bad) == 1, bad
    line, why = bad[0]
    assert line == 4 and "time_us_min=" in why and "time_us_median=" in why and "time_us_mean=" in why, why
    assert "disagrees with its own iter_times_us" in why and "time_us_max" not in why, why
    compared = CliRunner().invoke(app, ["compare", base, new, "--allow-stale"])
    said = " ".join(compared.output.split())
    assert compared.exit_code == 1 and "new.jsonl:4: skipped unreadable line (time_us_min=" in said, said
    fitted = CliRunner().invoke(app, ["fit", new, "-O", str(tmp_path / "f.json")])
    said = " ".join(fitted.output.split())
    assert fitted.exit_code == 2 and "new.jsonl line 4: time_us_min=" in said, said
    assert not (tmp_path / "f.json").exists()
    # within the samples' rounding (1 ns) and a median anywhere between the two middle samples: read as they are
    m = new_run[0]
    ordered = sorted(m.iter_times_us)
    upper = dataclasses.replace(m, time_us_median=ordered[len(ordered) // 2], time_us_min=m.time_us_min + 0.0004,
                                algbw_gbps=m.size_bytes / ordered[len(ordered) // 2] / 1e3,   # algbw from that median
                                busbw_gbps=m.size_bytes / ordered[len(ordered) // 2] / 1e3)   # x 1 (all_reduce, 2 ranks)
    write(tmp_path / "ok.jsonl", [upper])
    skipped: list = []
    assert len(list(iter_records(tmp_path / "ok.jsonl", on_bad_line=lambda n, why: skipped.append(why)))) == 2
    assert skipped == []


def test_fit_tells_a_self_contradicting_record_by_its_type_not_by_the_words_of_another_lines_reason(tmp_path):
    """fit refused a file when any unreadable line's reason held SUMMARY_DISAGREES' words: a line refused for a
    collective name quoting them read as a self-contradicting record. The refusal is record_checks.SummaryDisagrees,
    given to iter_records' on_self_contradicting; any other unreadable line is skipped and counted, as before."""
    from pathlib import Path

    import pytest

    from commbench.results.record_checks import SUMMARY_DISAGREES, SummaryDisagrees, check_summary_matches_samples
    from tests.results_files import invoke, records, write as write_rows

    run = _run("n", 2)
    rows = records(Path(write(tmp_path / "new.jsonl", run)))
    # no writer writes it: made by hand
    path = write_rows(tmp_path / "new.jsonl", rows + [dict(rows[-1], collective=f"x {SUMMARY_DISAGREES}")])
    bad, contradicting = [], []
    kept = list(iter_records(path, on_bad_line=lambda n, why: bad.append(n), drop_samples=True,
                             on_self_contradicting=lambda n, why: contradicting.append(n)))
    assert len(kept) == 1 + len(SIZES) and bad == [len(SIZES) + 2] and contradicting == []
    said = " ".join(invoke("fit", path, "-O", str(tmp_path / "f.json")).output.split())
    assert "contradict themselves" not in said and "1 unreadable line(s) skipped" in said, said
    x10 = write(tmp_path / "x10.jsonl", [*run[:2], _summary_x10(run[2]), *run[3:]])
    bad.clear()
    list(iter_records(x10, on_bad_line=lambda n, why: bad.append(n),
                      on_self_contradicting=lambda n, why: contradicting.append(n)))
    assert contradicting == [4] and bad == []
    with pytest.raises(SummaryDisagrees):
        check_summary_matches_samples(dataclasses.asdict(_summary_x10(run[2])))


def test_a_record_whose_size_is_not_its_algbw_times_its_time_is_refused(tmp_path):
    """A record whose size_bytes was edited (x16) beside its unchanged algbw and time was read, tabled (report: a
    64 MiB row at 0.878 GB/s where 64 MiB / 4778 µs is 14 GB/s) and compared as a point of another size: bench and
    import both write algbw = size / time (record_checks.check_algbw_matches_size), so every reader now refuses the
    line, naming both values. An import's bandwidth as nccl-tests printed it (2 decimals) is read as it is."""
    base = write(tmp_path / "base.jsonl", _run("b", 1))
    new_run = _run("n", 2)
    edited = dataclasses.replace(new_run[2], size_bytes=new_run[2].size_bytes * 16, count=new_run[2].count * 16)
    new = write(tmp_path / "new.jsonl", [*new_run[:2], edited, *new_run[3:]])
    bad: list = []
    kept = list(iter_records(new, on_bad_line=lambda n, why: bad.append((n, why))))
    assert len(kept) == len(SIZES) and len(bad) == 1, bad
    line, why = bad[0]
    assert line == 4 and f"size_bytes={edited.size_bytes}" in why and "its algbw is not size_bytes / its time" in why
    compared = CliRunner().invoke(app, ["compare", base, new, "--allow-stale"])
    said = " ".join(compared.output.split())
    assert compared.exit_code != 0 and "new.jsonl:4: skipped unreadable line (algbw_gbps=" in said, said
    reported = CliRunner().invoke(app, ["report", new, "-O", str(tmp_path / "rep")])
    said = " ".join(reported.output.split())
    assert "skipped line 4 of" in said and "its algbw is not size_bytes / its time" in said, said
    # an import: nccl-tests' time (loop_time_us) and the 2-decimal bandwidth it printed; not the collectives whose
    # algbw counts other bytes (moe_all_to_all: the round trip's)
    m = new_run[0]
    printed = dataclasses.replace(m, time_us_median=None, time_us_mean=None, time_us_min=None, time_us_max=None,
                                  iter_times_us=[], loop_time_us={"avg": 33.94}, size_bytes=1024, count=256,
                                  algbw_gbps=0.03, busbw_gbps=0.03)
    moe = dataclasses.replace(m, collective="moe_all_to_all", algbw_gbps=m.algbw_gbps * 3,
                              busbw_gbps=m.algbw_gbps * 3 * 0.5)   # its bus factor (n-1)/n, checked (record_checks)
    write(tmp_path / "ok.jsonl", [printed, moe])
    skipped: list = []
    assert len(list(iter_records(tmp_path / "ok.jsonl", on_bad_line=lambda n, why: skipped.append(why)))) == 3
    assert skipped == []
