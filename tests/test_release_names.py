"""A release is a NeMo Framework container tag, YY.MM[.NN]: MM is a month, 01 to 12. --software 26.13 and 26.00 passed
as releases the table lacks ("26.13 is not in the recipe table ...") while 26.2 and v26.02 were refused (found from
outside); one rule (recipes.RELEASE_NAME) refuses them on plan/tune --software and in a calibrate row's 'release'."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.layout import recipes

PLAN = ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8"]


@pytest.mark.parametrize("release", ["26.13", "26.00", "26.00.01", "99.99", "26.20"])
def test_a_release_whose_month_is_no_month_is_refused_everywhere(release, tmp_path):
    assert not recipes.RELEASE_NAME.fullmatch(release) and recipes.resolve_release(release)[0] is None
    result = CliRunner().invoke(app, [*PLAN, "--software", release], env={"COLUMNS": "300"})
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    said = " ".join(result.output.split())
    assert f"--software={release!r} is invalid: a NeMo release YY.MM[.NN]" in said and "month" in said, said
    row = dict(model="Llama3-8B", gpu="H100", num_gpus=8, precision="FP8", seq_len=8192, gbs=128, mbs=1, tp=1, pp=1,
               tokens_per_s_per_gpu=14000, release=release)
    (tmp_path / "runs.json").write_text(json.dumps([row]))
    refused = CliRunner().invoke(app, ["calibrate", "--evaluate", str(tmp_path / "runs.json")], env={"COLUMNS": "300"})
    assert refused.exit_code == 2 and f"field 'release' = {release!r}" in " ".join(refused.output.split())


@pytest.mark.parametrize("release", ["26.01", "26.12", "26.10", "26.04.02", "25.09"])
def test_every_month_is_a_release_name(release):
    assert recipes.RELEASE_NAME.fullmatch(release) and recipes.resolve_release(release)[0] is not None
