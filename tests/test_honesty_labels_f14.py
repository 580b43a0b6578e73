"""Honesty labels found from outside (probe P7): every figure says what it is.

- `fit --json` gave a latency-only curve's raw intercept (176.28 us on the outside run) as `latency_us` where the
  table and `predict` use its median time (257.74 us), that figure only in a key the schema lacked;
- a curve's fit warning said "kept latency-only" where the profile kept no such curve (another curve predicts its
  collective on that tier), and `predict` called a time "in range" from a curve whose latency the fit could not
  determine (all_to_all fitted at 0.00 us, 30.8 us predicted at 4 KiB where 4,155 us was measured);
- `compare` titled two runs on `commbench emulate` "measured ... vs measured ..." and its --json, like `fit`'s and
  `predict`'s, had no typed field for an emulated fabric or for an allowed setup change;
- report's plots drew a "predicted" legend entry for a line with no point, and mixed files' labels said
  "emulated fabric" in lower case where README says EMULATED.
Each test fails on main."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema
import numpy as np
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel.profile import fit_result_files
from commbench.results.records import JsonlWriter
from tests.test_compare import A, B
from tests.test_compare_emulated_fabrics import GBIT, _emulated
from tests.test_fit import SIZES, _header, _record

SCHEMAS = Path(__file__).parents[1] / "commbench" / "data" / "schemas"
GLOO_SMALL = Path(__file__).parent / "data" / "latency_only" / "gloo_all_reduce_1k_64k.jsonl"


def _json(args: list[str]) -> dict:
    result = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _valid(doc: dict, schema: str) -> None:
    jsonschema.validate(doc, json.loads((SCHEMAS / f"{schema}.schema.json").read_text()),
                        cls=jsonschema.Draft202012Validator)


def test_fit_json_gives_the_latency_a_latency_only_curve_predicts_with_and_says_which(tmp_path):
    doc = _json(["fit", str(GLOO_SMALL), "--json", "-O", str(tmp_path / "p.json")])
    _valid(doc, "fit")   # every key defined: the curves allow no other
    (curve,) = doc["curves"]
    held = json.loads((tmp_path / "p.json").read_text())["latency_only"][0]["latency_us"]
    assert curve["latency_us"] == held == curve["latency_only_us"]
    assert curve["latency_kind"] == "latency_only_median_time" and curve["fitted_intercept_us"] != held
    table = CliRunner().invoke(app, ["fit", str(GLOO_SMALL)], env={"COLUMNS": "300"})
    assert f"{held:.2f}" in table.stdout   # the same figure in the table


def _covered_latency_only(path: Path) -> str:
    """reduce_scatter on 4 ranks: groups of 2 fitted with a bandwidth, the world group's time flat (latency-only)."""
    with JsonlWriter(path) as writer:
        writer.write(_header("r1", world_size=4))
        for size in SIZES[::2]:
            writer.write(_record("reduce_scatter", size, 20.0 + size / 1e4, 2, world=4, layout="intra"))
        for size in (1024, 4096, 16384, 65536):
            writer.write(_record("reduce_scatter", size, 500.0, 4, world=4))
    return str(path)


def test_a_latency_only_fit_the_profile_does_not_keep_says_what_predicts_instead(tmp_path):
    fabric, fits, _ = fit_result_files([_covered_latency_only(tmp_path / "rs.jsonl")])
    flat = next(f for f in fits if f.key.group_size == 4)
    kept = {(c.collective, c.group_size) for c in fabric.latency_only}
    assert ("reduce_scatter", 4) not in kept
    text = " ".join(flat.warnings)
    assert "kept latency-only (" not in text, text
    assert "not kept latency-only: reduce_scatter on scale_up is predicted from reduce_scatter" in text, text
    assert flat.latency_only_s is None and flat.to_report()["latency_kind"] == "fitted_intercept"
    for fit in fits:   # no warning tells of a latency-only curve the profile lacks
        if any("kept latency-only (" in w for w in fit.warnings):
            assert (fit.key.collective, fit.key.group_size) in kept


def test_predict_marks_rows_from_a_curve_whose_latency_is_undetermined(tmp_path):
    results = tmp_path / "a2a.jsonl"
    with JsonlWriter(results) as writer:   # pure bandwidth from 4 KiB up: no latency measured
        writer.write(_header("r1", world_size=2))
        for size in SIZES[4:22:2]:
            writer.write(_record("all_to_all", size, size / 1e4, 2, world=2))
    profile = tmp_path / "p.json"
    fit = CliRunner().invoke(app, ["fit", str(results), "-O", str(profile)])
    assert fit.exit_code == 0 and "latency is poorly determined" in " ".join(fit.output.split()), fit.output
    doc = _json(["predict", "-c", "all_to_all", "-g", "2", "--fabric", str(profile), "-b", "4K", "-e", "16K",
                 "--json"])
    _valid(doc, "predict")
    assert doc["latency_undetermined_curves"] and all(r["latency_undetermined"] for r in doc["rows"])
    assert not any(r["extrapolated"] for r in doc["rows"])   # measured sizes, yet not silently "in range"
    table = CliRunner().invoke(app, ["predict", "-c", "all_to_all", "-g", "2", "--fabric", str(profile), "-b", "4K"],
                               env={"COLUMNS": "300"})
    assert "latency undetermined" in table.stdout and "in range" not in table.stdout, table.stdout


def test_compare_says_emulated_in_its_title_and_json(tmp_path):
    base, new = _emulated(tmp_path, "a.jsonl", A, GBIT), _emulated(tmp_path, "b.jsonl", B, dict(GBIT))
    table = CliRunner().invoke(app, ["compare", base, new], env={"COLUMNS": "400"})
    assert table.exit_code == 0, table.output
    assert f"EMULATED {new} vs EMULATED {base}" in table.stdout and "measured " + new not in table.stdout
    doc = _json(["compare", base, new, "--json"])
    _valid(doc, "compare")
    assert doc["emulated"]["base"] == doc["emulated"]["new"] and doc["emulated"]["new"][0].startswith("EMULATED")
    assert doc["allow_setup_change"] is False and doc["setup_changes"] == []
    mixed = _json(["compare", str(A), new, "--allow-setup-change", "--json"])
    _valid(mixed, "compare")
    assert mixed["emulated"]["base"] == [] and mixed["emulated"]["new"]
    assert mixed["allow_setup_change"] is True and any("fabric" in c for c in mixed["setup_changes"])


def test_fit_and_predict_json_from_an_emulated_run_say_so_in_a_field(tmp_path):
    path = tmp_path / "emu.jsonl"
    with JsonlWriter(path) as writer:
        writer.write(dataclasses.replace(_header("r1", world_size=2), emulated=GBIT))
        for size in SIZES[::2]:
            writer.write(_record("all_reduce", size, 20.0 + size / 1e4, 2, world=2))
    profile = tmp_path / "p.json"
    fitted = _json(["fit", str(path), "--json", "-O", str(profile)])
    _valid(fitted, "fit")
    assert fitted["emulated"].startswith("emulated fabric: fitted on `commbench emulate`")
    predicted = _json(["predict", "-c", "all_reduce", "-g", "2", "--fabric", str(profile), "-b", "4K", "--json"])
    _valid(predicted, "predict")
    assert predicted["predicted_from_emulated"] == fitted["emulated"]


def test_plots_draw_no_legend_entry_for_a_prediction_with_no_point():
    from commbench.results.plots import Series, busbw_figure, latency_figure

    rows = [_record("all_reduce", size, 20.0 + size / 1e4, 2, world=2, busbw_gbps=1.0, algbw_gbps=1.0)
            for size in SIZES[:4]]
    series = [Series(label="all_reduce n=2", rows=rows, predicted_s=np.full(len(rows), np.nan))]
    for figure in (busbw_figure("all_reduce", series), latency_figure("all_reduce", series)):
        labels = figure.axes[0].get_legend_handles_labels()[1]
        assert labels and not any(label.startswith("predicted") for label in labels), labels


def test_report_labels_an_emulated_run_in_capitals():
    from commbench.results.run_setup import labels_by_what_differs

    base = _header("run_a", world_size=4)
    labels = labels_by_what_differs({"run_a": base, "run_b": dataclasses.replace(base, run_id="run_b",
                                                                                    emulated=GBIT)})
    assert "EMULATED fabric" in labels["run_b"] and "emulated fabric" not in labels["run_b"], labels
