"""nccl-tests output with a NaN time (a text row's `nan`, the -J file's "time": "nan", util.cu jsonDouble) is a
failed point, kept as one: the text row was refused whole (its valid out-of-place half too) and the JSON cell dropped
without a word, so the point read as missing and compare --allow-missing passed the run."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.importers.nccl_tests import import_file
from commbench.results.records import Measurement
from tests.nccl_tests_inputs import ROWS, json_file, text_log

NAN_ROW = ("    16777216       4194304     float     sum      -1   131.85  127.25  127.25       0      nan     nan     nan"
           "       0")


def _points(result):
    return {(m.size_bytes, m.in_place): m for m in result.records if isinstance(m, Measurement)}


def test_a_nan_time_in_a_text_row_is_a_failed_point_and_its_valid_half_is_kept(tmp_path):
    log = tmp_path / "all_reduce_perf.log"
    log.write_text(text_log(ROWS[:2] + (NAN_ROW,)))
    result = import_file(str(log))
    points = _points(result)
    assert result.problems == [] and len(points) == 6
    assert points[(1 << 24, False)].status == "ok" and points[(1 << 24, False)].loop_time_us == {"avg": 131.85}
    failed = points[(1 << 24, True)]
    assert failed.status == "failed" and failed.loop_time_us == {} and "nan" in failed.error


def test_a_nan_time_in_a_json_cell_is_a_failed_point(tmp_path):
    data = json.loads(json_file())
    data["results"][2]["in_place"]["time"] = "nan"
    path = tmp_path / "all_reduce.json"
    path.write_text(json.dumps(data))
    points = _points(import_file(str(path)))
    assert len(points) == 6 and points[(1 << 24, True)].status == "failed"


def test_compare_allow_missing_fails_a_run_with_a_nan_time(tmp_path):
    runner = CliRunner()
    for name, rows in (("base", ROWS), ("new", ROWS[:2] + (NAN_ROW,))):
        (tmp_path / f"{name}.log").write_text(text_log(rows))
        imported = runner.invoke(app, ["import", "nccl-tests", str(tmp_path / f"{name}.log"), "--collective",
                                       "all_reduce", "-O", str(tmp_path / f"{name}.jsonl")])
        assert imported.exit_code == 0, imported.output
    assert "1 point(s) failed, kept as such" in " ".join(imported.output.split())
    gate = runner.invoke(app, ["compare", str(tmp_path / "base.jsonl"), str(tmp_path / "new.jsonl"), "--allow-missing"])
    assert gate.exit_code == 1 and "failed" in gate.output, gate.output


def _with_per_iter(doc: dict, scale: float) -> dict:
    """`doc` as an -I 1 run wrote it: each cell's `<placement>_per_iter` (20 iterations, util.cu writePerIterReport)."""
    doc["config"]["per_iter_timing"] = True
    for row in doc["results"]:
        for key in ("out_of_place", "in_place"):
            times = [row[key]["time"] * scale * (1 + 0.01 * (i % 5)) for i in range(20)]
            row[f"{key}_per_iter"] = {"skipped_iterations": 0, "min_us": min(times), "max_us": max(times),
                                      "times_us": times}
    return doc


def test_a_nan_time_with_nan_per_iteration_times_is_a_failed_point_and_fails_compare(tmp_path):
    """A -J row of an -I 1 run whose time is "nan" has "nan" per-iteration times too (jsonDouble): the per-iteration
    reader refused them, so the row was "unparsable", the point read as planned and never reached, and
    `compare --allow-cut-short` passed the run (probe P2: jbase vs jnan3, exit 0). Now it is a failed point."""
    runner = CliRunner()
    for name, scale in (("base", 1.0), ("new", 1.01)):
        doc = _with_per_iter(json.loads(json_file()), scale)
        if name == "new":
            cell = doc["results"][1]["in_place"]
            cell.update(time="nan", alg_bw="nan", bus_bw="nan")
            per_iter = doc["results"][1]["in_place_per_iter"]
            per_iter.update(min_us="nan", max_us="nan", times_us=["nan"] * 20)
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    result = import_file(str(tmp_path / "new.json"))
    points = _points(result)
    assert result.problems == [] and len(points) == 6
    failed = points[(1 << 22, True)]
    assert failed.status == "failed" and failed.iter_times_us == [] and "nan" in failed.error
    assert len(points[(1 << 22, False)].iter_times_us) == 20   # the row's valid half keeps its samples
    for name in ("base", "new"):
        imported = runner.invoke(app, ["import", "nccl-tests", str(tmp_path / f"{name}.json"),
                                       "-O", str(tmp_path / f"{name}.jsonl")])
        assert imported.exit_code == 0, imported.output
    for allow in ((), ("--allow-cut-short",), ("--allow-missing",)):
        gate = runner.invoke(app, ["compare", str(tmp_path / "base.jsonl"), str(tmp_path / "new.jsonl"), *allow])
        assert gate.exit_code == 1 and "newly failed" in gate.output, gate.output
