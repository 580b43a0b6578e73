"""A fitted profile older than the results it was fitted from (a run appended since the fit) was said by predict and
plan only: `report --fabric` drew its dashed lines from it, `nccl-tuner --fabric` wrote rules from it and
`verify-plan` predicted from it, each without a word (probe CG F4). One check (cli/base.py
profile_older_than_results, over costmodel.profile.runs_since_fit) that every command reading a fitted profile runs."""

from __future__ import annotations

import json

from tests.results_files import COMPARE, invoke as _invoke, records as _records, write as _write


def test_every_command_reading_a_fitted_profile_says_it_is_older_than_its_results(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = _records(COMPARE / "gloo_all_reduce_a.jsonl")
    _write(tmp_path / "results.jsonl", first)
    assert _invoke("fit", "results.jsonl", "-O", "fab.json").exit_code == 0
    fresh = _invoke("report", "results.jsonl", "--fabric", "fab.json", "-O", "rep0")
    assert fresh.exit_code == 0 and "not fitted on" not in fresh.output, fresh.output
    later = _records(COMPARE / "gloo_all_reduce_b.jsonl")
    _write(tmp_path / "results.jsonl", first + later)
    said = (f"results.jsonl now holds 1 run(s) the profile fab.json was not fitted on (run {later[0]['run_id']}):"
            " results added since the fit; refit")
    report = _invoke("report", "results.jsonl", "--fabric", "fab.json", "-O", "rep")
    assert report.exit_code == 0 and f"warning: {said}" in " ".join(report.output.split()), report.output
    readme = " ".join((tmp_path / "rep" / "README.md").read_text().split())
    assert said in readme and "not fitted on" not in (tmp_path / "rep0" / "README.md").read_text()
    # nccl-tuner: said before it reads the curves (a gloo profile then predicts no NCCL collective: refused)
    tuner = _invoke("nccl-tuner", "--fabric", "fab.json", "--gpus", "2", "-O", "t.conf")
    assert f"warning: {said}" in " ".join(tuner.output.split()), tuner.output
    # verify-plan: a flag beside its predictions, as its other unmet assumptions
    from commbench.cli.verify_plan import _plan_fabric
    flags: list[str] = []
    fabric = json.loads((tmp_path / "fab.json").read_text())
    doc = {"inputs": {"system": "fab.json", "fabric": {"name": fabric["name"], "source": fabric["source"]}}}
    assert _plan_fabric(doc, 2, flags) is not None
    assert any(said in flag for flag in flags), flags
