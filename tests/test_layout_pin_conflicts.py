"""--layout pins that say two things: a key given twice, or gbs= against --gbs (plan and tune).
Both used to be taken silently (the last tp=; --gbs over gbs=, and tune planned its default gbs 4096
over a --layout gbs= pin and wrote that into megatron_args.txt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.planner.search.space import parse_pins

PLAN = ["plan", "--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "16", "--top", "1"]
NCCL_LOG = Path(__file__).parent / "data" / "nccl-tests" / "all_reduce_perf-2018.log"


def test_a_key_given_twice_is_refused():
    with pytest.raises(CommbenchError, match=r"each key once \(tp is given twice\)"):
        parse_pins("tp=1,ep=8,tp=2")
    result = CliRunner().invoke(app, [*PLAN, "--layout", "tp=1,tp=2"])
    assert result.exit_code == 2 and "tp is given twice" in result.output


def test_plan_gbs_pin_against_gbs_option_is_refused_and_agreeing_is_fine():
    result = CliRunner().invoke(app, [*PLAN, "--layout", "gbs=256", "--gbs", "512"])
    assert result.exit_code == 2 and "--gbs=512 is invalid: must equal the pinned gbs=256" in result.output
    agreed = CliRunner().invoke(app, [*PLAN, "--layout", "gbs=256", "--gbs", "256", "--emit", "json"])
    assert agreed.exit_code == 0, agreed.output
    assert json.loads(agreed.output)["layout"]["gbs"] == 256


def test_tune_takes_the_gbs_pin_and_refuses_a_conflicting_gbs(tmp_path):
    results = tmp_path / "measured.jsonl"
    imported = CliRunner().invoke(app, ["import", "nccl-tests", str(NCCL_LOG), "-O", str(results)])
    assert imported.exit_code == 0, imported.output
    tune = ["tune", "--results", str(results), "--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "16"]
    refused = CliRunner().invoke(app, [*tune, "-O", str(tmp_path / "a"), "--gbs", "512", "--layout", "gbs=256"])
    assert refused.exit_code == 2 and "must equal the pinned gbs=256" in refused.output
    out = tmp_path / "b"
    planned = CliRunner().invoke(app, [*tune, "-O", str(out), "--layout", "gbs=256"], env={"COLUMNS": "200"})
    assert planned.exit_code == 0, planned.output
    assert json.loads((out / "plan.json").read_text())["layout"]["gbs"] == 256
    assert "--global-batch-size 256 " in (out / "megatron_args.txt").read_text()
