"""`commbench calibrate` on rows of published tables nobody has shown it yet (newer releases, other spellings):
each row is modelled (saying whose recipe stood in) or listed as not modelled with the field and value that
stop it, or refused in one line; never a traceback, and an unreadable row never changes a fit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.calibrate.published import precision_of, published_runs

ROWS = json.loads((Path(__file__).parents[1] / "benchmarks" / "data" / "newer-release-runs.json").read_text())


def _row(of: str = "DeepSeekV3", on: str = "DGX-GB300", **changes) -> dict:
    """A 26.08 row of newer-release-runs.json (model `of`, GPU `on`) with `changes`."""
    row = next(r for r in ROWS if r["model"] == of and r["gpu"] == on and r["release"] == "26.08")
    return dict(row, **changes)


def _evaluate(tmp_path, rows: list[dict], *args: str):
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(rows))
    return CliRunner().invoke(app, ["calibrate", "--evaluate", str(path), *args], env={"COLUMNS": "400"})


@pytest.mark.parametrize("precision", [8, 8.0, True, ["FP8"], {"format": "fp8"}])
def test_precision_that_is_not_text_is_one_line(tmp_path, precision):
    result = _evaluate(tmp_path, [_row(precision=precision), _row("Qwen3_30B_a3B", "DGX-GB200")])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "field 'precision'" in result.output and len(result.output.strip().splitlines()) == 1, result.output


@pytest.mark.parametrize("label,precision", [("FP8-CS", "fp8"), ("FP8-MX", "mxfp8"), ("MXFP8", "mxfp8"),
                                             ("NVFP4", "nvfp4"), ("BF16", "bf16"), ("FP8", "fp8"), ("FP8-DS", "fp8"),
                                             ("fp8-cs", "fp8"), ("mxfp8", "mxfp8"),
                                             ("MXFP8(32x32)", "mxfp8"), (None, "fp8")])
def test_precision_spellings_of_the_tables(label, precision):
    assert precision_of(label) == precision


@pytest.mark.parametrize("label", ["MXFP4", "mxfp4", "FP4", "MXFP6", "FP16", "fp32"])
def test_a_format_the_model_lacks_is_not_read_as_another(tmp_path, label):
    """MXFP4 (gpt-oss's format) was read as MXFP8 because it says "mx": a fit took it at the wrong peak. A real
    format the step model lacks is listed as not modelled, naming the field and value; the other rows go on."""
    with pytest.raises(ValueError):
        precision_of(label)
    result = _evaluate(tmp_path, [_row("GPT OSS 120B", "DGX-GB200", precision=label), _row("Qwen3_30B_a3B", "DGX-GB200")],
                       "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert len(out["rows"]) == 1 and out["rows"][0]["model"] == "Qwen3_30B_a3B"
    (skipped,) = out["skipped"]
    assert skipped["run_index"] == 1 and f"field 'precision' = {label!r}" in skipped["reason"], skipped


@pytest.mark.parametrize("label", ["fp9", "mxpf8", "half", "FP8 blockwise", "FP8-XYZ"])
def test_an_unreadable_precision_is_still_one_line(tmp_path, label):
    result = _evaluate(tmp_path, [_row(precision=label), _row("Qwen3_30B_a3B", "DGX-GB200")])
    assert result.exit_code == 2 and "field 'precision'" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("field", ["vp", "ep", "etp", "cp"])
@pytest.mark.parametrize("spelling", ["n/a", "N/A", "-", ""])
def test_a_tables_n_a_reads_as_unset(tmp_path, field, spelling):
    """The tables print "n/a" where a size does not apply (tools/published_tables.py reads it as unset); a row
    copied with it was refused as 'allowed: a positive integer', stopping every other row."""
    unset = _evaluate(tmp_path, [_row("GPT OSS 120B", "DGX-GB200", **{field: None})], "--json")
    spelled = _evaluate(tmp_path, [_row("GPT OSS 120B", "DGX-GB200", **{field: spelling})], "--json")
    assert unset.exit_code == 0 and spelled.exit_code == 0, spelled.output
    a, b = json.loads(unset.output)["rows"][0], json.loads(spelled.output)["rows"][0]
    assert a["predicted_tokens_per_s_per_gpu"] == b["predicted_tokens_per_s_per_gpu"]


def test_n_a_in_a_required_size_is_still_one_line(tmp_path):
    result = _evaluate(tmp_path, [_row(tp="n/a")])
    assert result.exit_code == 2 and "field 'tp'" in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("changes,needles", [
    # 26.10 reads 26.08's recipes, which have none for DeepSeek-V3 on H200: said, with the defaults taken
    (dict(gpu="H200", precision="FP8", release="26.10"), ("26.10 is not in the recipe table", "26.08",
                                                          "no recipe for deepseek-v3 on h200-hgx at fp8")),
    (dict(of="Nemotron_3_Super", model="Nemotron-3-Super", release="26.12"),
     ("26.12 is not in the recipe table", "no recipe for nemotron-3-super-120b-a12b")),
    (dict(release="24.07"), ("24.07 is older than the recipe table's oldest release", "default recipe flags")),
])
def test_a_release_the_table_lacks_says_what_stood_in_even_without_a_recipe(tmp_path, changes, needles):
    result = _evaluate(tmp_path, [_row(**changes)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "not modelled" not in text and all(n in text for n in needles), text


def test_a_table_release_or_user_run_has_no_release_note(tmp_path):
    for release in ("user", None):
        result = _evaluate(tmp_path, [_row(gpu="H200", precision="FP8", release=release)])
        assert result.exit_code == 0 and "note:" not in result.output, result.output
    # a table release names no stand-in; its flags are the default recipe's (no H200 recipe), assumed, and said
    result = _evaluate(tmp_path, [_row(gpu="H200", precision="FP8", release="26.08")])
    text = " ".join(result.output.split())
    assert result.exit_code == 0 and "not in the recipe table" not in text, result.output
    assert "recipe flags assumed: the default recipe's (no recipe is read for deepseek-v3 on h200-hgx at 26.08)" in text


@pytest.mark.parametrize("note", ["FSDP=8", "fsdp=8", "FSDP = 8", "Megatron-FSDP: 8"])
def test_fsdp_in_the_notes_is_read_however_spelled(note):
    """FSDP=N in the notes makes the run Megatron-FSDP; "fsdp=8" was passed over without a word and the run
    modelled (and fitted) as plain DP."""
    row = _row("Qwen3_30B_a3B", "DGX-GB200", notes=f"26.10 table; {note}", release="26.10", num_gpus=64, gbs=512)
    (run,) = published_runs((row,))
    assert run.layout is not None and run.layout.fsdp, run.skip_reason


@pytest.mark.parametrize("notes", [5, ["FSDP=8"], {"fsdp": 8}])
def test_notes_that_are_not_text_are_one_line(tmp_path, notes):
    result = _evaluate(tmp_path, [_row(notes=notes)])
    assert result.exit_code == 2, result.output
    assert "field 'notes'" in result.output and len(result.output.strip().splitlines()) == 1, result.output


@pytest.mark.parametrize("field", ["num_gpus", "gbs", "mbs", "seq_len", "vp", "ep", "etp", "recompute_layers",
                                   "cpu_offload_layers"])
def test_a_size_past_any_run_is_one_line_not_an_overflow(tmp_path, field):
    """2**70 in a size overflowed numpy's int64 in the step model: an OverflowError traceback, exit 1."""
    result = _evaluate(tmp_path, [_row(**{field: 2 ** 70}), _row("Qwen3_30B_a3B", "DGX-GB200")])
    assert result.exit_code == 2, result.output
    assert f"field {field!r}" in result.output and len(result.output.strip().splitlines()) == 1, result.output


def test_a_recipe_objects_size_past_any_run_is_one_line(tmp_path):
    result = _evaluate(tmp_path, [_row(recipe={"recompute_layers": 2 ** 70})])
    assert result.exit_code == 2 and "recompute_layers" in result.output, result.output


@pytest.mark.parametrize("changes,needle", [(dict(gpu="VR200"), "field 'gpu' = 'VR200'"),
                                            (dict(gpu="MI355X"), "field 'gpu' = 'MI355X'"),
                                            (dict(model="Kimi-K3"), "field 'model' = 'Kimi-K3'"),
                                            (dict(tokens_per_s_per_gpu=None), "tokens_per_s_per_gpu")])
def test_a_row_not_modelled_names_its_field_and_value(tmp_path, changes, needle):
    result = _evaluate(tmp_path, [_row(release="26.10", **changes), _row("Qwen3_30B_a3B", "DGX-GB200")], "--json")
    assert result.exit_code == 0, result.output
    (skipped,) = json.loads(result.output)["skipped"]
    assert needle in skipped["reason"], skipped


def test_json_rows_say_what_stood_in(tmp_path):
    """--json had the rows but not the note the text output prints (26.10 read as 26.08): a script comparing a
    newer release could not tell which recipe stood in."""
    import jsonschema
    schema = json.loads((Path(__file__).resolve().parents[1] / "commbench/data/schemas/calibrate.schema.json").read_text())
    result = _evaluate(tmp_path, [_row(release="26.10"), _row("Qwen3_30B_a3B", "DGX-GB200")], "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)
    newer, same = doc["rows"]
    assert "26.10 is not in the recipe table" in newer["layout_note"] and "26.08's" in newer["layout_note"]
    assert same["layout_note"] == ""


def test_a_runs_file_with_a_byte_order_mark_is_read_as_json(tmp_path):
    """A JSON list saved with a UTF-8 byte-order mark (PowerShell, Excel exports) was taken for a TorchTitan log:
    'give --model and --system for it'."""
    path = tmp_path / "runs.json"
    path.write_text("\ufeff" + json.dumps([_row(release="26.10")]), encoding="utf-8")
    result = CliRunner().invoke(app, ["calibrate", "--evaluate", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)["rows"]) == 1


def test_a_field_given_twice_in_one_row_is_one_line(tmp_path):
    """{"tp": 1, ..., "tp": 2}: JSON keeps the last without a word, so the run was modelled (and fitted) at tp 2."""
    path = tmp_path / "runs.json"
    path.write_text(json.dumps([_row(release="26.10")]).replace('"tp": 1', '"tp": 1, "tp": 2'))
    result = CliRunner().invoke(app, ["calibrate", "--evaluate", str(path)])
    assert result.exit_code == 2, result.output
    assert "'tp'" in result.output and "twice" in result.output and len(result.output.strip().splitlines()) == 1


def test_a_units_mismatch_names_the_file_row(tmp_path):
    """The units check named 'run 2' only: with several RUNS files the user had to count rows across them."""
    rows = [_row("Qwen3_30B_a3B", "DGX-GB200"), _row(release="26.10", tflops_per_gpu=99999)]
    result = _evaluate(tmp_path, rows)
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert f"{tmp_path / 'runs.json'} row 2" in " ".join(result.output.split()) and "tflops_per_gpu=99999" in result.output
