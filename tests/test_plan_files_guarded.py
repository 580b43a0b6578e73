"""`plan --out` and `tune` write plan files under the output lock and replace only plan files commbench
wrote (unless --force); plan.json never holds Infinity/NaN. Through the CLI."""

from __future__ import annotations

import fcntl
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

DATA = Path(__file__).resolve().parent / "data" / "compare" / "gloo_all_reduce_a.jsonl"
PINNED = ("plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256", "--layout", "tp=1,pp=8,ep=32")
SEARCH = ("plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256", "--top", "2")
TUNE = ("tune", "--results", str(DATA), "--gpus", "256", "--top", "2")
FOREIGN = "my notes\nkeep me\n"
runner = CliRunner()
# what these tests check is which files plan/tune write and keep; the same search, run again for each, is made once
pytestmark = pytest.mark.usefixtures("search_once")


def invoke(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


def one_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


@pytest.mark.parametrize("command", [PINNED, SEARCH, TUNE], ids=["plan-layout", "plan-search", "tune"])
@pytest.mark.parametrize("name", ["plan.json", "launch.env", "megatron_args.txt", "torchtitan_args.txt"])
def test_a_foreign_file_in_the_plan_folder_is_kept_unless_force(tmp_path, command, name):
    (tmp_path / name).write_text(FOREIGN)
    line = one_line(invoke(*command, "--out", str(tmp_path)))
    assert name in line and "--force" in line
    assert (tmp_path / name).read_text() == FOREIGN
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # refused before anything was written

    forced = invoke(*command, "--out", str(tmp_path), "--force")
    assert forced.exit_code == 0, forced.output
    assert (tmp_path / name).read_text() != FOREIGN


@pytest.mark.parametrize("command", [PINNED, SEARCH], ids=["plan-layout", "plan-search"])
def test_plan_replaces_its_own_plan_files(tmp_path, command):
    first = invoke(*command, "--out", str(tmp_path))
    assert first.exit_code == 0, first.output
    names = sorted(p.name for p in tmp_path.iterdir())
    assert {"plan.json", "launch.env", "megatron_args.txt"} <= set(names)
    again = invoke(*command, "--out", str(tmp_path))
    assert again.exit_code == 0, again.output
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    assert json.loads((tmp_path / "plan.json").read_text())["format"] == "commbench-plan"


def test_a_plan_folder_another_run_writes_is_refused(tmp_path):
    plan_json = tmp_path / "plan.json"
    plan_json.write_text('{\n "format": "commbench-plan"\n}\n')
    with plan_json.open("a") as handle:  # as a concurrent plan run holds it
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        line = one_line(invoke(*PINNED, "--out", str(tmp_path)))
    assert "in use by" in line
    assert plan_json.read_text() == '{\n "format": "commbench-plan"\n}\n'


TINY = """[model.tiny]
layers = 4
hidden = 1024
heads = 8
kv_heads = 8
head_dim = 128
dense_ffn = 4096
vocab = 32000
seq_len = 2048
"""


@pytest.mark.parametrize("value", ["inf", "nan", "-1.0", '"abc"', "1e300"])
def test_a_non_finite_published_figure_in_a_model_file_is_refused_by_name(tmp_path, value):
    model_file = tmp_path / "m.toml"
    model_file.write_text(TINY + f"flops_per_token_gflop = {value}\n")
    line = one_line(invoke("plan", "--model", "tiny", "--model-file", str(model_file), "--system", "gb300-nvl72",
                           "--gpus", "8", "--layout", "tp=1,pp=1", "--out", str(tmp_path / "plan")))
    assert "tiny.flops_per_token_gflop=" in line
    assert not (tmp_path / "plan" / "plan.json").exists()


@pytest.mark.parametrize("key,value,named", [
    ("published_flops_per_token_gflop", float("inf"), "tiny.flops_per_token_gflop=inf"),
    ("published_params_total_b", float("nan"), "tiny.params_total_b=nan"),
    ("hidden", 10 ** 15, "tiny.hidden=1000000000000000"),
    ("hidden", 1e15, "'hidden'=1000000000000000.0"),
])
def test_a_plan_json_with_a_huge_or_non_finite_model_field_is_refused_by_name(tmp_path, key, value, named):
    model_file = tmp_path / "m.toml"
    model_file.write_text(TINY)
    written = invoke("plan", "--model", "tiny", "--model-file", str(model_file), "--system", "gb300-nvl72",
                     "--gpus", "8", "--layout", "tp=1,pp=1", "--out", str(tmp_path / "plan"))
    assert written.exit_code == 0, written.output
    text = (tmp_path / "plan" / "plan.json").read_text()
    assert "Infinity" not in text and "NaN" not in text
    doc = json.loads(text)
    doc["inputs"]["model_spec"][key] = value
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    line = one_line(invoke("verify-plan", str(edited), "--nproc", "2"))
    assert named in line


def test_plan_json_is_never_written_with_infinity():
    from commbench.errors import CommbenchError
    from commbench.planner.emit.plan import plan_json_text

    with pytest.raises(CommbenchError, match=r"predicted\.step_s = inf"):
        plan_json_text({"format": "commbench-plan", "predicted": {"step_s": float("inf")}})


@pytest.mark.parametrize("section,key,value", [
    ("inputs", "gpus", 10 ** 12), ("inputs", "moe_imbalance", float("inf")), ("placement", "gpus_per_rack", 0),
])
def test_a_plan_json_with_impossible_inputs_is_refused_before_ranks_start(tmp_path, section, key, value):
    written = invoke(*PINNED, "--out", str(tmp_path / "plan"))
    assert written.exit_code == 0, written.output
    doc = json.loads((tmp_path / "plan" / "plan.json").read_text())
    doc[section][key] = value
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    line = one_line(invoke("verify-plan", str(edited), "--nproc", "2", "--iters", "2"))
    assert f"field '{section}.{key}'={value!r} is invalid" in line
