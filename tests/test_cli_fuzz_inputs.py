"""User errors found by fuzzing the CLI: each is one line naming the option or field, exit 2, no traceback."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

runner = CliRunner()
PLAN = ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8"]


def one_line_error(args: list[str], must: str) -> str:
    result = runner.invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert must in lines[0], result.output
    return lines[0]


# str.isdigit() is true for '²' and '①', which int() refuses: the check passed and int() raised ValueError
@pytest.mark.parametrize("args,must", [
    (PLAN + ["--layout", "tp=²"], "tp='²' is invalid"),
    (PLAN + ["--layout", "recompute_layers=①"], "recompute_layers='①' is invalid"),
    (PLAN + ["--layout", "tp=1,pp=1,vp=1,ep=1,mbs=1,recompute_layers=²"], "recompute_layers='²' is invalid"),
    (["bench", "all_reduce", "--backend", "gloo", "--nccl-channels", "²"], "--nccl-channels='²' is invalid"),
    (["sweep", "ci-small", "--dry-run", "--nccl-channels", "²"], "--nccl-channels='²' is invalid"),
])
def test_non_ascii_digits_are_one_line(args, must):
    one_line_error(args, must)


# 2**70 overflowed the search's int64 arrays (OverflowError); a plan.json refuses more than 16M tokens already
@pytest.mark.parametrize("value", [str(2 ** 70), str((1 << 24) + 1)])
def test_plan_seq_len_is_bounded(value):
    one_line_error(PLAN + ["--seq-len", value], f"--seq-len={value} is invalid: a sequence length in tokens from 1 to 16,777,216")


# a dry run looked the name up in its estimate tables: KeyError traceback
@pytest.mark.parametrize("value", ["bogus", "", "cupy-nccl"])
def test_sweep_backend_is_checked(value):
    one_line_error(["sweep", "ci-small", "--dry-run", "--backend", value],
                   f"--backend={value!r} is invalid: allowed auto, nccl, gloo")


# verify-plan called .get() on it: AttributeError traceback
@pytest.mark.parametrize("value", [5, "x", None, [1]])
def test_plan_file_fabric_must_be_an_object(tmp_path, value):
    import json

    out = tmp_path / "plan"
    assert runner.invoke(app, PLAN + ["-O", str(out)]).exit_code == 0
    doc = json.loads((out / "plan.json").read_text())
    doc["inputs"]["fabric"] = value
    (out / "plan.json").write_text(json.dumps(doc))
    one_line_error(["verify-plan", str(out / "plan.json"), "--backend", "gloo", "--nproc", "2"],
                   "field 'inputs.fabric'=")
