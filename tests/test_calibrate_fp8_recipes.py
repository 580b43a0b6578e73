"""FP8 recipes are priced only as far as the step model has a price for them (probe P6): Megatron-LM's --fp8-recipe
delayed (its default through core_v0.16.0, arguments.py:1224 at core_v0.14.0) runs the same per-tensor-scaled FP8
GEMMs as tensorwise (Transformer Engine float8_per_tensor_scaling) and is priced so, with a note that says it;
blockwise (128x128 weight / 1x128 activation blocks, other kernels) is refused by name; a JSON row's precision label
the tables do not use ("FP8-XYZ", "fp8_blockwise") is refused listing the allowed ones, not read as FP8 because it
holds "fp8"."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.planner.calibrate.published import precision_of, published_runs
from commbench.planner.calibrate.runlogs import read_runs_noted
from tests.megatron_log import megatron_log


def _read(tmp_path, **args):
    path = tmp_path / "run.log"
    path.write_text(megatron_log(**args))
    return read_runs_noted(str(path), model="qwen3-30b-a3b", gpu="h100-hgx")


def test_a_blockwise_fp8_log_is_refused_naming_the_recipe(tmp_path):
    with pytest.raises(CommbenchError) as exc:
        _read(tmp_path, fp8="hybrid", fp8_recipe="blockwise", bf16="True")
    message = str(exc.value)
    assert "fp8_recipe=blockwise" in message and "\n" not in message, message
    assert "tensorwise, delayed, mxfp8" in message, message


def test_a_delayed_scaling_log_is_priced_as_per_tensor_fp8_and_says_so(tmp_path):
    (row,), notes = _read(tmp_path, fp8="hybrid", fp8_recipe="delayed", bf16="True")
    assert precision_of(row["precision"]) == "fp8"
    said = [n for n in notes if "fp8_recipe=delayed" in n]
    assert len(said) == 1 and "per-tensor" in said[0], notes


def test_a_tensorwise_log_says_nothing_of_its_recipe(tmp_path):
    (row,), notes = _read(tmp_path, fp8="hybrid", fp8_recipe="tensorwise", bf16="True")
    assert row["precision"] == "FP8" and not [n for n in notes if "fp8_recipe" in n], notes


def test_a_log_before_fp8_recipe_existed_is_delayed_scaling_said(tmp_path):
    text = megatron_log(fp8="hybrid", bf16="True")
    path = tmp_path / "old.log"
    path.write_text("\n".join(line for line in text.splitlines() if "fp8_recipe" not in line) + "\n")
    (row,), notes = read_runs_noted(str(path), model="qwen3-30b-a3b", gpu="h100-hgx")
    assert precision_of(row["precision"]) == "fp8"
    assert any("no fp8_recipe printed" in n and "delayed" in n for n in notes), notes


def _row(precision):
    return {"source": "mine", "model": "qwen3-30b-a3b", "gpu": "B200", "num_gpus": 64, "precision": precision,
            "seq_len": 4096, "gbs": 512, "mbs": 1, "tp": 1, "pp": 1, "cp": 1, "vp": 1, "ep": 8, "etp": 1,
            "tokens_per_s_per_gpu": 15000, "release": "26.02"}


@pytest.mark.parametrize("label", ["FP8-XYZ", "fp8_blockwise", "FP8 blockwise", "fp8-e4m3-anything"])
def test_an_unknown_fp8_label_is_refused_listing_the_allowed(tmp_path, label):
    path = tmp_path / "runs.json"
    path.write_text(json.dumps([_row(label)]))
    result = CliRunner().invoke(app, ["calibrate", "--evaluate", str(path), "--json"], env={"COLUMNS": "400"})
    assert result.exit_code == 2, result.output
    assert f"field 'precision' = {label!r}" in result.output and "FP8-DS" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_a_delayed_scaling_row_is_priced_as_fp8_and_noted():
    (run,) = published_runs([_row("FP8-DS")])
    assert run.layout.precision == "fp8" and "per-tensor" in run.layout_note, run.layout_note


def test_the_shipped_blockwise_row_keeps_its_reading_and_says_it():
    """The 25.09 table's one blockwise row was read as FP8 before (a substring match): kept, explicitly, and said."""
    from commbench.planner.calibrate.published import precision_note
    (run,) = [r for r in published_runs() if "blockwise" in str(r.row.get("precision"))]
    assert precision_of(run.row["precision"]) == "fp8"
    assert "no blockwise price" in precision_note(run.row["precision"])
