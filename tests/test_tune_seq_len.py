"""`commbench tune` printed 'seq_len 4096 (default; --seq-len to change)' and wrote it into plan.json, but had no
--seq-len ('No such option: --seq-len'; probe AW F6). tune now takes plan's --seq-len (one option definition and
one check for both), and plans at it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from tests.test_plan_files_guarded import DATA

PLAN = ["--model", "mixtral-8x7b", "--system", "h100-hgx", "--gpus", "16", "--top", "1"]


@pytest.mark.timeout(180)
def test_tune_plans_at_the_seq_len_given_as_plan_does(tmp_path):
    out = tmp_path / "t"
    result = CliRunner().invoke(app, ["tune", "--results", str(DATA), *PLAN, "--seq-len", "8192", "-O", str(out)],
                                env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "seq_len 8192," in result.output and "--seq-len to change" not in result.output
    doc = json.loads((out / "plan.json").read_text())
    assert doc["inputs"]["seq_len"] == 8192 and not doc["inputs"]["seq_len_default"]
    assert "seq_len" not in [d.get("field") for d in doc["defaults_taken"]]
    again = CliRunner().invoke(app, ["plan", *PLAN, "--system", str(out / "fabric.json"), "--seq-len", "8192",
                                     "--json"], env={"COLUMNS": "400"})
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["layout"] == doc["layout"]


def test_tune_and_plan_share_one_seq_len_option():
    import commbench.cli.plan as plan_cli
    import commbench.cli.tune as tune_cli
    import inspect

    for command in (plan_cli.plan, tune_cli.tune):
        parameter = inspect.signature(command).parameters["seq_len"]
        assert parameter.annotation in (plan_cli.SeqLenOption, "SeqLenOption"), command
