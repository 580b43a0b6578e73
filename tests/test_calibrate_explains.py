"""`commbench calibrate` says what it changed (issue 29, item 2): regularised toward the shipped terms,
no more terms than the runs determine, moves and bounds reported, leave-one-out error beside in-sample,
several models and systems in one call, `--json` with format/version and a schema."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

DATA = Path(__file__).parent / "data"
MEGATRON, TITAN = DATA / "megatron_deepseek_v3_gb300.log", DATA / "torchtitan_qwen3_30b_b200.log"
SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "commbench/data/schemas/calibrate.schema.json").read_text())


def run(args, exit_code=0):
    result = CliRunner().invoke(app, ["calibrate", *map(str, args)])
    assert result.exit_code == exit_code, result.output
    return result


def fit_json(args) -> dict:
    doc = json.loads(run([*args, "--json"]).stdout)
    jsonschema.validate(doc, SCHEMA, cls=jsonschema.Draft202012Validator)
    return doc


def test_one_log_fits_one_term_and_says_which_moved(tmp_path):
    # start from terms that mispredict the log (GEMM efficiency 60% of shipped), so the fit has a move to make; the
    # start file names a GB300 run (a file that names none keeps its kernel terms off every GPU)
    from commbench.planner.step.terms import CALIBRATED, calibration_json
    start = tmp_path / "start.json"
    start.write_text(json.dumps(calibration_json(dataclasses.replace(
        CALIBRATED, gemm_efficiency_blackwell=0.6 * CALIBRATED.gemm_efficiency_blackwell), fitted_on=["test"],
        runs=["deepseek-v3 64x gb300-nvl72 MXFP8 user tp1 pp1: 1 tokens/s/GPU"])))
    doc = fit_json([MEGATRON, "--model", "deepseek-v3", "--system", "gb300-nvl72", "--calibration", start,
                    "-O", tmp_path / "c.json"])
    assert doc["format"] == "commbench-calibrate" and doc["version"] == 1 and doc["mode"] == "fit"
    assert doc["num_distinct_runs"] == 1 and len(doc["terms_fitted"]) == 1   # one run determines one term
    held = {h["term"]: h["why"] for h in doc["terms_held"]}
    from commbench.planner.step.terms import FITTED_TERMS
    assert len(held) == len(FITTED_TERMS) - 1 and held["gemm_efficiency_hopper"] == "no run depends on it"
    terms = json.loads((tmp_path / "c.json").read_text())["terms"]
    started = json.loads(start.read_text())["terms"]
    changed = {t for t, v in terms.items() if v != started[t]}
    assert changed <= set(doc["terms_fitted"]) and {m["term"] for m in doc["moved"]} == changed
    # the prior keeps it from fitting the run exactly (the old fit moved four terms to 0.0% in-sample)
    assert 0 < doc["median_abs_error_pct_in_sample"] < doc["median_abs_error_pct_before"]
    assert doc["median_abs_error_pct_leave_one_out"] is None and "at least 2" in doc["leave_one_out_note"]
    assert changed and doc["median_abs_error_pct_before"] > 5
    text = run([MEGATRON, "--model", "deepseek-v3", "--system", "gb300-nvl72", "--calibration", start,
                "-O", tmp_path / "c.json", "--force"]).stdout
    assert f"moved: {doc['moved'][0]['term']}" in text and "in-sample, leave-one-out needs" in " ".join(text.split())


def test_logs_of_two_models_and_systems_in_one_call_with_leave_one_out(tmp_path):
    args = [MEGATRON, TITAN, "--model", "deepseek-v3", "--model", "qwen3-30b-a3b", "--system", "gb300-nvl72",
            "--system", "b200-hgx", "--gpus", "256", "--gpus", "8", "-O", tmp_path / "c.json"]
    doc = fit_json(args)
    assert [(r["model"], r["gpu"]) for r in doc["rows"]] == [("deepseek-v3", "gb300-nvl72"), ("qwen3-30b-a3b", "b200-hgx")]
    assert len(doc["leave_one_out_abs_error_pct"]) == 2 and doc["median_abs_error_pct_leave_one_out"] is not None
    assert len(doc["terms_fitted"]) <= 2
    bad = run([MEGATRON, TITAN, "--model", "a", "--model", "b", "--model", "c", "--system", "b200-hgx",
               "-O", tmp_path / "d.json"], exit_code=2)
    assert "--model given 3 times for 2 training log(s)" in " ".join(bad.output.split())


def test_term_pushed_to_its_bound_is_warned(tmp_path):
    """A run faster than the physical terms allow (yet under the GPU's peak), fitted from terms at their fast ends: the
    fitted term stays at its bound, and the output says so."""
    from commbench.planner.calibrate.fit import BOUNDS
    from commbench.planner.step.terms import CALIBRATED, FITTED_TERMS, calibration_json
    fast = {t: (BOUNDS[t][0] if t.endswith("_s") or t == "gemm_traffic_factor" else BOUNDS[t][1])
            for t in FITTED_TERMS if t in BOUNDS}
    start = tmp_path / "start.json"
    start.write_text(json.dumps(calibration_json(dataclasses.replace(CALIBRATED, **fast), fitted_on=["test"],
                                                 runs=["qwen3-30b-a3b 16x b200-hgx MXFP8 tp1 pp1: 1 tokens/s/GPU"])))
    rows = tmp_path / "runs.json"
    rows.write_text(json.dumps([{"model": "qwen3-30b-a3b", "gpu": "b200-hgx", "num_gpus": 8, "precision": "MXFP8",
                                 "seq_len": 4096, "gbs": 512, "mbs": 4, "tp": 1, "pp": 1, "ep": 8,
                                 "tokens_per_s_per_gpu": 150000.0}]))  # 77% MFU: below the peak
    result = run([rows, "--calibration", start, "-O", tmp_path / "c.json"])
    assert "warning:" in result.output and "bound" in result.output
    doc = fit_json([rows, "--calibration", start, "-O", tmp_path / "c.json"])
    assert doc["at_bound"] and doc["at_bound"][0]["term"] in doc["terms_fitted"]


def test_torchtitan_log_reads_the_gpu_count_from_its_device_mesh_line(tmp_path):
    text = TITAN.read_text()
    log = tmp_path / "titan.log"
    log.write_text(text.replace("Running with args:", "Building 1-D device mesh with ['dp_shard'], [8]\n"
                                "[rank0]:[titan] Running with args:", 1))
    out = json.loads(run(["--evaluate", log, "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--json"]).stdout)
    assert out["rows"][0]["num_gpus"] == 8 and out["format"] == "commbench-calibrate" and out["mode"] == "evaluate"
    jsonschema.validate(out, SCHEMA, cls=jsonschema.Draft202012Validator)
    missing = run(["--evaluate", TITAN, "--model", "qwen3-30b-a3b", "--system", "b200-hgx"], exit_code=2)
    assert "--gpus" in missing.output and "device mesh" in missing.output
