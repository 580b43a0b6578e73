"""Every path a command reads, given as empty text (an unset shell variable: `fit "$RESULTS"`), is refused in one
line, exit 2, as compare and -O already said it: '<option>='' is empty: give ... (an unset shell variable?)'
(files.refuse_empty_inputs). Probe P5 (session 46): `fit ''`, `report ''` and `nccl-tuner ''` said 'cannot be read:
Is a directory', sweep / tune --results / import / calibrate said 'No such file', and `verify-plan ''` planned from
./plan.json, running whatever plan the current folder held. A walk over the app's commands makes sure every
parameter named like a path has a case here."""

from __future__ import annotations

import pytest
import typer.main
from typer.testing import CliRunner

from commbench.cli.app import app
from tests.cli_commands import leaf_commands

runner = CliRunner()
PLAN = ["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256"]

# (command, parameter name) -> (args with the path given as '', the option the line names)
CASES = {
    ("fit", "results"): (["fit", ""], "RESULTS"),
    ("report", "files"): (["report", ""], "FILES"),
    ("report", "fabric"): (["report", "r.jsonl", "--fabric", ""], "--fabric"),
    ("nccl-tuner", "files"): (["nccl-tuner", ""], "RESULTS"),
    ("nccl-tuner", "fabric_path"): (["nccl-tuner", "--fabric", "", "--gpus", "8"], "--fabric"),
    ("nccl-tuner", "build_plugin_dir"): (["nccl-tuner", "--build-plugin", ""], "--build-plugin"),
    ("verify-plan", "plan_file"): (["verify-plan", ""], "PLAN_FILE"),
    ("sweep", "file"): (["sweep", ""], "FILE"),
    ("tune", "sweep"): (["tune", "--sweep", ""], "--sweep"),
    ("tune", "results"): (["tune", "--results", ""], "--results"),
    ("tune", "model_file"): (["tune", "--model-file", ""], "--model-file"),
    ("tune", "calibration"): (["tune", "--calibration", ""], "--calibration"),
    ("tune", "model"): (["tune", "--model", "hf:"], "--model hf:PATH"),
    ("import nccl-tests", "files"): (["import", "nccl-tests", "", "-O", "a.jsonl"], "FILES"),
    ("calibrate", "runs"): (["calibrate", "", "-O", "c.json"], "RUNS"),
    ("calibrate", "calibration"): (["calibrate", "runs.json", "--calibration", "", "-O", "c.json"], "--calibration"),
    ("plan", "system"): (["plan", "--model", "deepseek-v3", "--system", "", "--gpus", "8"], "--system"),
    ("plan", "model"): (["plan", "--model", "hf:", "--system", "gb300-nvl72", "--gpus", "8"], "--model hf:PATH"),
    ("plan", "model_file"): ([*PLAN, "--model-file", ""], "--model-file"),
    ("plan", "calibration"): ([*PLAN, "--calibration", ""], "--calibration"),
    ("predict", "fabric_path"): (["predict", "--fabric", "", "-c", "all_reduce", "-g", "8"], "--fabric"),
    ("compare", "base"): (["compare", "", "n.jsonl"], "BASE"),
    ("compare", "new"): (["compare", "b.jsonl", ""], "NEW"),
    ("compare", "history"): (["compare", "b.jsonl", "n.jsonl", "--history", ""], "--history"),
    ("bench", "moe_routing"): (["bench", "moe_all_to_all", "--nproc", "2", "--tokens", "8", "--routing", "trace:"],
                               "--routing trace:FILE"),
}
# parameters named so that they hold a path the command reads (calibrate's --model and --system are lists of zoo
# and preset names per log, hf:PATH read by the same load_model as plan's)
PATH_NAMES = {"results", "files", "file", "plan_file", "runs", "base", "new", "fabric", "fabric_path", "model_file",
              "calibration", "sweep", "history", "build_plugin_dir"}


def test_every_path_parameter_has_a_case_here():
    found = {(name, param.name) for name, cmd in leaf_commands(typer.main.get_command(app)) for param in cmd.params
             if param.name in PATH_NAMES}
    assert found <= set(CASES), found - set(CASES)


@pytest.mark.parametrize("case", list(CASES), ids=[" ".join(key) for key in CASES])
def test_an_empty_input_path_is_refused_in_one_line(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plan.json").write_text("{}")   # what verify-plan '' read as ./plan.json
    args, option = CASES[case]
    result = runner.invoke(app, args, env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith(f"error: {option}='' is empty: give ") and "(an unset shell variable?)" in lines[0], \
        lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]
