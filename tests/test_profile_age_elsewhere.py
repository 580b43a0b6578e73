"""A fitted profile older than its results was warned about only from the directory `fit` ran in: fit recorded the
results file as typed ('fitted:res/x.jsonl') and the check (costmodel.profile.profile_age) looked for it there or
beside the profile ('res/res/x.jsonl'), returning [] in silence when neither was a file. From `cd res` (or a CI step
in another directory) predict, report, plan, nccl-tuner --fabric and verify-plan passed a stale profile without a word
(probe CQ F1; README: every command that reads a fitted profile warns). fit now records each results file's absolute
path and its path from the profile's directory, and a results file found nowhere is said once, by name."""

from __future__ import annotations

import json
import shutil

from tests.results_files import COMPARE, invoke as _invoke, records as _records, write as _write

PREDICT = ["-c", "all_reduce", "-g", "2", "-b", "1K", "-e", "4K"]


def _flat(result) -> str:
    return " ".join(result.output.split())


def _fit_in_res(tmp_path, monkeypatch) -> str:
    """fit res/x.jsonl -O res/fab.json from tmp_path, then a run appended to res/x.jsonl: the new run's id."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "res").mkdir()
    first = _records(COMPARE / "gloo_all_reduce_a.jsonl")
    _write(tmp_path / "res" / "x.jsonl", first)
    fitted = _invoke("fit", "res/x.jsonl", "-O", "res/fab.json")
    assert fitted.exit_code == 0, fitted.output
    later = _records(COMPARE / "gloo_all_reduce_b.jsonl")
    _write(tmp_path / "res" / "x.jsonl", first + later)
    return later[0]["run_id"]


def test_a_stale_profile_is_said_from_another_directory(tmp_path, monkeypatch):
    run = _fit_in_res(tmp_path, monkeypatch)
    said = f"the profile res/fab.json was not fitted on (run {run})"
    assert said in _flat(_invoke("predict", "--fabric", "res/fab.json", *PREDICT))   # from fit's directory, as before
    monkeypatch.chdir(tmp_path / "res")   # the profile's own directory: `res/x.jsonl` is not a file here
    predicted = _invoke("predict", "--fabric", "fab.json", *PREDICT)
    assert predicted.exit_code == 0 and "x.jsonl now holds 1 run(s) the profile fab.json was not fitted on " \
        f"(run {run})" in _flat(predicted), predicted.output
    report = _invoke("report", "x.jsonl", "--fabric", "fab.json", "-O", "rep")
    assert report.exit_code == 0 and "not fitted on" in _flat(report), report.output
    assert "OLDER" in (tmp_path / "res" / "rep" / "README.md").read_text()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")   # neither fit's directory nor the profile's
    predicted = _invoke("predict", "--fabric", "../res/fab.json", *PREDICT)
    assert "x.jsonl now holds 1 run(s) the profile ../res/fab.json was not fitted on" in _flat(predicted), predicted.output


def test_a_moved_tree_is_still_checked(tmp_path, monkeypatch):
    # the results and the profile moved together (a CI artifact unpacked elsewhere): found from the profile's folder
    run = _fit_in_res(tmp_path, monkeypatch)
    shutil.move(str(tmp_path / "res"), str(tmp_path / "moved"))
    predicted = _invoke("predict", "--fabric", "moved/fab.json", *PREDICT)
    assert f"moved/x.jsonl now holds 1 run(s) the profile moved/fab.json was not fitted on (run {run})" \
        in _flat(predicted), predicted.output


def test_results_that_cannot_be_found_are_said_once_not_passed_in_silence(tmp_path, monkeypatch):
    _fit_in_res(tmp_path, monkeypatch)
    (tmp_path / "res" / "x.jsonl").rename(tmp_path / "res" / "gone.jsonl")
    predicted = _invoke("predict", "--fabric", "res/fab.json", *PREDICT)
    text = _flat(predicted)
    assert predicted.exit_code == 0 and text.count("cannot check whether the profile res/fab.json") == 1, text
    assert "res/x.jsonl" in text and "not found" in text, text
    # a profile written before fit recorded where its results are: its source as typed, from another directory
    profile = json.loads((tmp_path / "res" / "fab.json").read_text())
    profile.pop("source_files", None)
    (tmp_path / "res" / "fab.json").write_text(json.dumps(profile))
    (tmp_path / "res" / "gone.jsonl").rename(tmp_path / "res" / "x.jsonl")
    monkeypatch.chdir(tmp_path / "res")
    text = _flat(_invoke("predict", "--fabric", "fab.json", *PREDICT))
    assert "cannot check whether the profile fab.json" in text and "res/x.jsonl" in text, text


def test_verify_plan_and_report_carry_the_unchecked_line(tmp_path, monkeypatch):
    _fit_in_res(tmp_path, monkeypatch)
    (tmp_path / "res" / "x.jsonl").rename(tmp_path / "res" / "gone.jsonl")
    from commbench.costmodel.profile import profile_age
    age = profile_age("res/fab.json")
    assert not age.stale and len(age.unchecked) == 1 and "res/x.jsonl" in age.unchecked[0], age
    report = _invoke("report", "res/gone.jsonl", "--fabric", "res/fab.json", "-O", "rep")
    readme = " ".join((tmp_path / "rep" / "README.md").read_text().split())
    assert report.exit_code == 0 and "cannot check whether the profile" in readme and "OLDER" not in readme, readme
