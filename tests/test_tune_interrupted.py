"""A stop signal during `commbench tune` says what was kept, truly, at every stage: it said "results written so far
are kept" before its output folder existed, and nothing of the fit or plan it had or had not written."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import commbench.cli.tune as tune_cli
from commbench.cli.app import app
from commbench.errors import Interrupted
from tests.test_plan_files_guarded import DATA

MEASURE = ["tune", "--system", "h100-hgx", "--gpus", "16", "--model", "mixtral-8x7b", "--top", "1"]


def _ctrl_c(*args, **kwargs):
    raise KeyboardInterrupt()


def _run(args) -> str:
    result = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
    assert result.exit_code == 130, result.output
    line = " ".join(result.output.split())
    assert "written so far are kept" not in line
    return line


def test_before_the_folder_exists_nothing_was_written(tmp_path, monkeypatch):
    monkeypatch.setattr(tune_cli, "_check_every_stage", _ctrl_c)
    line = _run(MEASURE + ["-O", str(tmp_path / "t")])
    assert line == "interrupted (SIGINT) before tune wrote anything: nothing was written"
    assert not (tmp_path / "t").exists()


def test_before_the_first_point_none_is_said_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(tune_cli, "_run_sweep", _ctrl_c)
    folder = tmp_path / "t"
    line = _run(MEASURE + ["-O", str(folder)])
    results = folder / "tune-sweep.jsonl"   # the empty file claimed for the sweep is removed with its lock
    assert f"no point measured ({results} {'holds none' if results.exists() else 'was not written'})" in line
    assert "nothing fitted or planned" in line and "--results" not in line


def _stopped_after_the_points(where, lines):
    results = where / "tune-sweep.jsonl"
    results.write_text("".join(lines))
    raise Interrupted(f"interrupted (SIGTERM): {len(lines) - 1} point(s) kept in {results}", signal="SIGTERM")


def test_during_the_sweep_the_points_kept_and_how_to_go_on(tmp_path, monkeypatch):
    folder = tmp_path / "t"
    lines = DATA.read_text().splitlines(keepends=True)
    measured = [line for line in lines if '"measurement"' in line][:2]
    monkeypatch.setattr(tune_cli, "_run_sweep", lambda sweep_file, nproc, where, *args, **kwargs:
                        _stopped_after_the_points(where, lines[:1] + measured))   # as launch_local
    line = _run(MEASURE + ["-O", str(folder)])
    results = folder / "tune-sweep.jsonl"
    assert "interrupted (SIGTERM) before the fit was written" in line and f"2 measured point(s) kept in {results}" in line
    assert (f"nothing fitted or planned (to fit and plan from them: commbench tune --results {results} -O {folder} "
            "--model mixtral-8x7b --system h100-hgx --gpus 16 --top 1)") in line
    assert not (folder / "fabric.json").exists()


@pytest.mark.timeout(180)
def test_the_way_on_plans_what_was_asked(tmp_path, monkeypatch):
    # the hint was `commbench tune --results R -O OUT` alone: followed as printed it planned tune's defaults
    # (DeepSeek-V3 on 256 GB300 in mxfp8) into OUT, not what the interrupted run was asked for (probe AW F1)
    import shlex

    folder = tmp_path / "t"
    asked = ["--model", "mixtral-8x7b", "--system", "h100-hgx", "--gpus", "16", "--precision", "bf16",
             "--mem-headroom", "0.1", "--gbs", "256"]
    lines = DATA.read_text().splitlines(keepends=True)
    monkeypatch.setattr(tune_cli, "_run_sweep", lambda sweep_file, nproc, where, *args, **kwargs:
                        _stopped_after_the_points(where, lines))
    line = _run(["tune", "--top", "1", "-O", str(folder), *asked])
    hint = line.split("(to fit and plan from them: ", 1)[1].split(")", 1)[0]
    words = shlex.split(hint)
    assert words[:2] == ["commbench", "tune"] and "--sweep" not in words and "--nproc" not in words
    monkeypatch.undo()
    result = CliRunner().invoke(app, words[1:], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    import json

    inputs = json.loads((folder / "plan.json").read_text())["inputs"]
    assert (inputs["model"], inputs["system"], inputs["gpus"], inputs["precision"], inputs["gbs"],
            inputs["mem_headroom_fraction"]) == ("mixtral-8x7b", "h100-hgx", 16, "bf16", 256, 0.1)


def test_while_fitting_from_results_the_file_is_only_read(tmp_path, monkeypatch):
    monkeypatch.setattr("commbench.workflows.tune.planning_fabric", _ctrl_c)
    line = _run(MEASURE + ["--results", str(DATA), "-O", str(tmp_path / "t")])
    assert f"the results file {DATA} is unchanged (tune only reads it); nothing fitted or planned" in line


@pytest.mark.timeout(120)
def test_while_planning_the_fabric_written_and_no_plan(tmp_path, monkeypatch):
    monkeypatch.setattr("commbench.cli.search_view.run_plan_search", _ctrl_c)
    folder = tmp_path / "t"
    line = _run(MEASURE + ["--results", str(DATA), "-O", str(folder)])
    assert "interrupted (SIGINT) while planning" in line
    assert f"{folder / 'fabric.json'}" in line and "written" in line and "no plan.json written" in line
    assert (folder / "fabric.json").is_file() and not (folder / "plan.json").exists()
