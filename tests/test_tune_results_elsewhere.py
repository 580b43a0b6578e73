"""`commbench tune --results OTHER -O OUT` where OUT holds an earlier run's tune-sweep.jsonl: the fit of OTHER was
written beside it (fabric-measured.json 'fitted:OTHER', plan.json naming no results file), so OUT's files read as
one run whose measurements were another's (probe AW F7; README lists tune-sweep.jsonl as tune's measurements in
OUT). Such a file is now refused before anything is written (measurements are not remade from anything in OUT:
plan from them with --results, choose another --out, or --force deletes it once the fit succeeds), and plan.json
names the results file its fit came from (inputs.results_file)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from tests.test_plan_files_guarded import DATA

PLAN = ["--model", "mixtral-8x7b", "--system", "h100-hgx", "--gpus", "16", "--top", "1"]


def _tune(*args):
    return CliRunner().invoke(app, ["tune", *PLAN, *args], env={"COLUMNS": "400"})


@pytest.mark.timeout(240)
def test_an_earlier_sweep_in_out_is_refused_then_deleted_with_force(tmp_path):
    out = tmp_path / "t"
    out.mkdir()
    earlier = out / "tune-sweep.jsonl"
    lines = DATA.read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["argv"] = ["/usr/bin/commbench", "tune", "-O", str(out)]   # an earlier tune's, cut short
    earlier.write_text(json.dumps(header) + "\n" + "".join(lines[1:3]))
    before = earlier.read_bytes()
    refused = _tune("--results", str(DATA), "-O", str(out))
    assert refused.exit_code == 2, refused.output
    text = " ".join(refused.output.split())
    assert str(earlier) in text and f"--results {earlier}" in text and "--force" in text, text
    assert earlier.read_bytes() == before and sorted(p.name for p in out.iterdir()) == ["tune-sweep.jsonl"]
    done = _tune("--results", str(DATA), "-O", str(out), "--force")
    assert done.exit_code == 0, done.output
    assert not earlier.exists()
    assert json.loads((out / "plan.json").read_text())["inputs"]["results_file"] == str(DATA)


@pytest.mark.timeout(240)
def test_plan_json_names_the_results_file_the_fit_came_from(tmp_path):
    out = tmp_path / "t"
    done = _tune("--results", str(DATA), "-O", str(out), "--json")
    assert done.exit_code == 0, done.output
    doc = json.loads((out / "plan.json").read_text())
    assert doc["inputs"]["results_file"] == str(DATA) and json.loads(done.stdout)["inputs"]["results_file"] == str(DATA)
    # the results file tune's own sweep wrote, planned from as the hint to go on says: nothing to refuse
    (out / "tune-sweep.jsonl").write_bytes(DATA.read_bytes())
    again = _tune("--results", str(out / "tune-sweep.jsonl"), "-O", str(out))
    assert again.exit_code == 0, again.output
    assert json.loads((out / "plan.json").read_text())["inputs"]["results_file"] == str(out / "tune-sweep.jsonl")
    assert (out / "tune-sweep.jsonl").read_bytes() == DATA.read_bytes()
