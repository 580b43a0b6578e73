"""The stale-profile warning advised "refit (`commbench fit ... -O fab.json --force`) to plan on them" where the run
appended since the fit has no readable header record, and fit then refuses that refit (a headerless run is not
merged with others: costmodel.profile.check_setup_known), so the advice could not be followed (probe CQ F5). The
warning now names such runs and what to do with them."""

from __future__ import annotations

from tests.results_files import COMPARE, invoke as _invoke, records as _records, write as _write


def test_a_headerless_run_appended_since_the_fit_is_not_answered_with_a_refit_that_fit_refuses(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = _records(COMPARE / "gloo_all_reduce_a.jsonl")
    _write(tmp_path / "results.jsonl", first)
    assert _invoke("fit", "results.jsonl", "-O", "fab.json").exit_code == 0
    later = [r for r in _records(COMPARE / "gloo_all_reduce_b.jsonl") if r.get("record_type") != "header"]
    _write(tmp_path / "results.jsonl", first + later)   # its header line lost
    run = later[0]["run_id"]
    said = " ".join(_invoke("predict", "--fabric", "fab.json", "-c", "all_reduce", "-g", "2", "-b", "1K",
                            "-e", "4K").output.split())
    assert f"not fitted on (run {run})" in said, said
    assert f"run {run} has no readable header record" in said and "restore its header line" in said, said
    assert "to plan on them" not in said, said
    refit = _invoke("fit", "results.jsonl", "-O", "fab.json", "--force")   # what the old advice said to do
    assert refit.exit_code == 2 and "without a readable header record" in refit.output, refit.output
