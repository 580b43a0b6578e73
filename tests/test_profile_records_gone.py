"""A fitted profile's results records deleted or edited after the fit went unnoticed: profile_age checked only that the
runs held no more records than fitted and no new run (probe DK: `head -n -3` of the results, a record edited to x10,
the file replaced by another run's said only "results added since the fit"). Fit now records, per results file and
run, the count and a digest of the records it read (Fabric.source_files "runs"); the check every profile reader runs
(cli.base.profile_older_than_results) names the file and run whose fitted records are gone or changed."""

from __future__ import annotations

import json

from tests.results_files import COMPARE, invoke as _invoke, records as _records, write as _write


def _warnings(tmp_path, profile="fab.json") -> str:
    out = _invoke("predict", "--fabric", profile, "-c", "all_reduce", "-g", "2", "-b", "1M", "-e", "4M")
    assert out.exit_code == 0, out.output
    return " ".join(line for line in out.output.splitlines() if line.startswith("warning:"))


def test_records_deleted_edited_or_replaced_after_the_fit_are_said(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = _records(COMPARE / "gloo_all_reduce_a.jsonl")
    run = rows[0]["run_id"]
    _write(tmp_path / "results.jsonl", rows)
    assert _invoke("fit", "results.jsonl", "-O", "fab.json").exit_code == 0
    assert _warnings(tmp_path) == ""
    reordered = [rows[0], *reversed(rows[1:])]   # the same records in another order: not a change
    _write(tmp_path / "results.jsonl", reordered)
    assert _warnings(tmp_path) == ""
    fitted = sum(r["record_type"] == "measurement" for r in rows)
    _write(tmp_path / "results.jsonl", rows[:-2])
    said = _warnings(tmp_path)
    assert (f"results.jsonl no longer holds the records the profile fab.json was fitted on: run {run} holds "
            f"{fitted - 2} of the {fitted} record(s) fitted (2 deleted or no longer readable)") in said, said
    edited = [dict(r) for r in rows]   # x10 throughout: a record that still agrees with its own samples
    edited[-1].update({k: v * 10 for k, v in edited[-1].items() if k.startswith("time_us_") and v is not None},
                      iter_times_us=[t * 10 for t in edited[-1]["iter_times_us"]],
                      algbw_gbps=edited[-1]["algbw_gbps"] / 10, busbw_gbps=edited[-1]["busbw_gbps"] / 10)
    assert edited[-1]["time_us_median"] and edited[-1]["iter_times_us"]
    _write(tmp_path / "results.jsonl", edited)
    said = _warnings(tmp_path)
    assert f"run {run}'s {fitted} record(s) are not those fitted (edited since the fit)" in said, said
    other = _records(COMPARE / "gloo_all_reduce_b.jsonl")
    _write(tmp_path / "results.jsonl", other)
    said = _warnings(tmp_path)
    assert f"run {run} is gone ({fitted} record(s) fitted)" in said and "results added since the fit" in said, said
    # a profile fitted before the digests: its runs' record counts alone
    old = json.loads((tmp_path / "fab.json").read_text())
    for entry in old["source_files"]:
        del entry["runs"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    _write(tmp_path / "results.jsonl", rows[:-2])
    said = _warnings(tmp_path, "old.json")
    assert f"results.jsonl no longer holds 2 record(s) of run {run} that the profile old.json was fitted on" in said, said
    _write(tmp_path / "results.jsonl", edited)
    assert _warnings(tmp_path, "old.json") == ""   # its content cannot be checked (README says so)
