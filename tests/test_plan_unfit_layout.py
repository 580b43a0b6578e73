"""A pinned layout predicted not to fit in HBM never reads as fitting, and its launch is not written as if launchable.

Found from outside (probe DE F2): `plan --model mixtral-8x22b --system h100-hgx --gpus 8 --precision fp8 --layout
tp=1,pp=1,vp=1,ep=1,mbs=1 -O p2` exited 0 and wrote megatron_args.txt and launch.env under the headline
"tokens/s/GPU 2,923"; only one memory-table row said "total 839.1 (does not fit)" against 84.9 GB. The loss note said
"the layout fits with it", defaults_taken "the ... choice that fits" though none did, and verify-plan said nothing."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

PLAN = ["plan", "--model", "mixtral-8x22b", "--system", "h100-hgx", "--gpus", "8", "--precision", "fp8",
        "--layout", "tp=1,pp=1,vp=1,ep=1,mbs=1"]
# 839.1 GB when found; 852.0 since the optimizer step's fp32 gradient copy (STEP_MODEL .26): moves with the memory model
FIGURES = ("predicted 852.0 GB per GPU", "84.9 GB of HBM")


def _run(*args: str):
    return CliRunner().invoke(app, [*PLAN, *args], env={"COLUMNS": "400"})


def test_out_is_refused_in_one_line_naming_both_figures_after_the_plan_is_printed(tmp_path):
    result = _run("-O", str(tmp_path / "p"))
    assert result.exit_code == 2, result.output
    # the plan is printed before the refusal (its figure moves with the step model)
    assert re.search(r"tokens/s/GPU \d{1,3}(,\d{3})*\b", result.output) and "Traceback" not in result.output
    (error,) = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert all(f in error for f in FIGURES) and "--allow-unfit" in error, error
    assert not (tmp_path / "p" / "megatron_args.txt").exists() and not (tmp_path / "p" / "launch.env").exists()


@pytest.mark.parametrize("emit", ["megatron", "torchtitan"])
def test_emit_of_the_launch_is_refused(emit):
    result = _run("--emit", emit)
    assert result.exit_code == 2 and f"--emit {emit} refused" in result.output, result.output


def test_the_terminal_warns_beside_the_headline_even_when_no_layout_fits():
    lines = _run().output.splitlines()
    (head,) = [i for i, line in enumerate(lines) if line.startswith("tokens/s/GPU")]
    assert lines[head + 1].startswith("WARNING: this layout does not fit (predicted)") and FIGURES[0] in lines[head + 1]


def test_allow_unfit_writes_files_that_say_it_and_verify_plan_says_it(tmp_path):
    result = _run("-O", str(tmp_path / "p"), "--allow-unfit")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "p" / "plan.json").read_text()
    doc = json.loads(text)
    assert doc["predicted"]["fits"] is False
    assert doc["assumptions"][0].startswith("WARNING: this layout does not fit") and FIGURES[0] in doc["assumptions"][0]
    assert "fits with it" not in text and "the layout does not fit, predicted" in text
    assert not [d for d in doc["defaults_taken"] if "that fits" in d["why"] or "and fits" in d["why"]]
    assert any("none fits here" in d["why"] for d in doc["defaults_taken"])
    assert "# WARNING: this layout does not fit" in (tmp_path / "p" / "launch.env").read_text()
    verify = CliRunner().invoke(app, ["verify-plan", str(tmp_path / "p"), "--backend", "gloo", "--nproc", "2",
                                      "-e", "64K", "--iters", "1", "--json"])
    assert verify.exit_code == 0, verify.output
    flags = json.loads(verify.stdout)["unmet_assumptions"]
    assert flags[0].startswith("DOES NOT FIT: this layout does not fit") and FIGURES[0] in flags[0], flags


def test_a_fitting_pinned_layout_has_no_warning():
    result = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "8",
                                      "--precision", "fp8", "--layout", "tp=1,pp=1,vp=1,ep=8,mbs=1", "--json"])
    assert result.exit_code == 0 and "WARNING" not in result.output, result.output
    doc = json.loads(result.stdout)
    assert doc["predicted"]["fits"] is True and "the layout fits with it" in json.dumps(doc)


def test_emit_megatron_with_allow_unfit_prints_the_launch_and_the_warning_on_stderr():
    result = _run("--emit", "megatron", "--allow-unfit")
    assert result.exit_code == 0, result.output
    assert "pretrain_gpt.py" in result.stdout and "WARNING" not in result.stdout
    assert result.stderr.startswith("WARNING: this layout does not fit (predicted)"), result.stderr


def test_a_partial_layout_that_fits_nowhere_names_its_fields_not_the_model():
    """A partial --layout (no vp) that no variant fits: the error said "no layout of mixtral-8x22b fits ... nor on
    any count up to 65536" (or "the smallest GPU count where one fits") as if no layout of the model fitted, though
    others fit on these 8 GPUs; it names the pinned fields now."""
    args = [a if a != "tp=1,pp=1,vp=1,ep=1,mbs=1" else "tp=1,pp=1,ep=1,mbs=1" for a in PLAN]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    (error,) = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert "no layout of mixtral-8x22b with tp=1, pp=1, ep=1, mbs=1" in error, error
    assert "the smallest GPU count where one fits is 32" in error, error  # with these fields, searched on
