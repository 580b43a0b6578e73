"""verify-plan checks a plan's release and precision as `plan` does and re-predicts its recorded layout (probe BP F3):
it was silent when inputs.software was edited to a release that cannot run the precision (25.09 with nvfp4) or one
--software refuses (24.12), and when the precision was edited consistently in inputs, layout and megatron_args while
the predicted figures stayed the old precision's."""

from __future__ import annotations

import copy
import json
from functools import lru_cache

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.workflows.verify import plan_context, prediction_flags


@lru_cache(maxsize=None)
def _plan(*args: str) -> str:
    res = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "4", "--gbs",
                                   "64", "--json", *args], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    return res.stdout


def _doc(*args: str) -> dict:
    return json.loads(_plan(*args))


def _flags(doc: dict) -> list[str]:
    ctx = plan_context(doc)
    return list(ctx.flags) + prediction_flags(doc, ctx, load_preset(doc["inputs"]["system"], num_gpus=4))


PINNED = ("--layout", "tp=1,pp=1,ep=4,mbs=1", "--precision", "nvfp4", "--software", "26.08")


def test_an_unedited_plan_searched_or_pinned_raises_no_such_line():
    for doc in (_doc(), _doc(*PINNED), _doc("--moe-capacity-factor", "1.5", "--layout", "cuda_graph=none")):
        assert not [f for f in _flags(doc) if "edited" in f or "predicted figures" in f], _flags(doc)


def test_a_release_edited_to_one_plan_refuses_is_flagged():
    for software, says in (("25.09", "inputs.precision='nvfp4' is invalid"), ("24.12", "inputs.software='24.12'")):
        doc = _doc(*PINNED)
        doc["inputs"]["software"] = software
        new = [f for f in plan_context(doc).flags if says in f]
        assert len(new) == 1 and "edited by hand" in new[0], plan_context(doc).flags


def test_a_precision_edited_in_all_three_places_is_flagged_by_its_figures():
    doc = copy.deepcopy(_doc(*PINNED))
    doc["inputs"]["precision"] = doc["layout"]["precision"] = "mxfp8"
    args = doc["megatron_args"]
    i = args.index("--fp4-format")
    args[i:i + 4] = ["--fp8-format", "e4m3", "--fp8-recipe", "mxfp8", "--fp8-param-gather",
                     "--reuse-grad-buf-for-mxfp8-param-ag"]
    doc["megatron"]["args"] = list(args)
    found = [f for f in _flags(doc) if "predicted figures are not its recorded layout's (precision mxfp8)" in f]
    assert len(found) == 1 and "step_s" in found[0] and "edited or stale" in found[0]
