"""A new user's frictions (outside probe P5, session 45): what a first hour with the README and bad input met.

Each case failed on main before its fix: a numpy warning printed before the one-line error of an empty routing trace
(and a traceback for an empty .npy), an error blaming an option the user did not give (--top-k=8 for `--experts 3`),
`<bool>` shown as the value of flags that take none, compare reading both files before naming a bad --statistic,
a refused command leaving the -O folder it made."""

import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.moe.routing import load_trace

WIDE = {"COLUMNS": "200"}


def test_an_empty_text_trace_is_refused_without_numpy_warning(tmp_path):
    empty = tmp_path / "e.txt"
    empty.write_text("")
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # main: numpy's UserWarning "loadtxt: input contained no data"
        with pytest.raises(CommbenchError, match="holds no expert ids"):
            load_trace(str(empty), num_experts=8, top_k=2)


def test_an_empty_or_archive_npy_trace_is_one_line(tmp_path):
    empty = tmp_path / "e.npy"
    empty.write_bytes(b"")   # main: EOFError, a traceback
    with pytest.raises(CommbenchError, match="cannot be read"):
        load_trace(str(empty), num_experts=8, top_k=2)
    archive = tmp_path / "z.npy"
    with archive.open("wb") as handle:
        np.savez(handle, a=np.zeros((4, 2), dtype=np.int64))   # main: AttributeError on NpzFile
    with pytest.raises(CommbenchError, match="npz archive"):
        load_trace(str(archive), num_experts=8, top_k=2)


def test_cli_empty_trace_prints_only_the_error(tmp_path):
    empty = tmp_path / "e.txt"
    empty.write_text("")
    result = CliRunner().invoke(app, ["bench", "moe_all_to_all", "-n", "2", "-w", "0", "--routing", f"trace:{empty}"],
                                env=WIDE)
    assert result.exit_code == 2, result.output
    assert "Warning" not in result.output and result.output.startswith("error: ")


@pytest.mark.parametrize("args,says", [
    (["--experts", "3"], "--experts=3 is fewer than the default --top-k=8"),
    (["--top-k", "100"], "--top-k=100 is more than the default --experts=64"),
    (["--preset", "deepseek-v3", "--experts", "4"], "the preset deepseek-v3's --top-k=8"),
    (["--experts", "3", "--top-k", "4"], "--top-k=4 is invalid"),   # both given: as before
])
def test_top_k_beyond_experts_names_both_and_which_is_a_default(args, says):
    result = CliRunner().invoke(app, ["bench", "moe_all_to_all", "-n", "2", "-w", "0", *args], env=WIDE)
    assert result.exit_code == 2, result.output
    assert says in result.output, result.output


@pytest.mark.parametrize("argv", [["--help"], ["report", "--help"], ["import", "nccl-tests", "--help"],
                                  ["plan", "--help"], ["fit", "--help"]])
def test_help_shows_no_value_type_beside_flags(argv):
    result = CliRunner().invoke(app, argv, env=WIDE)
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output   # main: `--version -V <bool>`, `--svg <bool>`, `--help <bool>`
    if argv != ["--help"]:
        assert "<str>" in result.output or "<int>" in result.output   # options that take a value keep their type


def test_compare_names_a_bad_statistic_before_reading_the_files(tmp_path):
    same = tmp_path / "r.jsonl"   # main: read first, so a missing (or the same-run) file was reported instead
    result = CliRunner().invoke(app, ["compare", str(same), str(same), "--statistic", "foo"], env=WIDE)
    assert result.exit_code == 2 and "--statistic='foo' is invalid" in result.output, result.output
    result = CliRunner().invoke(app, ["compare", str(same), str(same), "--history", str(tmp_path / "none")], env=WIDE)
    assert result.exit_code == 2 and "--history=" in result.output, result.output


@pytest.mark.parametrize("argv", [
    ["nccl-tuner", "{bin}", "-O", "{missing}/x.conf"],
    ["nccl-tuner", "{bin}", "-O", "x.conf", "--csv", "{missing}/deeper/x.csv"],
    ["import", "nccl-tests", "{bin}", "-O", "{missing}/deeper/x.jsonl"],
    ["plan", "--model", "no-such-model", "--system", "gb300-nvl72", "--gpus", "8", "-O", "{missing}/plan"],
])
def test_a_refused_command_leaves_no_output_folder(tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    binary = tmp_path / "bin.dat"
    binary.write_bytes(b"\xa4\x00\x01 not results\n\x00")
    missing = tmp_path / "missing"
    result = CliRunner().invoke(app, [a.format(bin=binary, missing=missing) for a in argv], env=WIDE)
    assert result.exit_code == 2, result.output
    assert not missing.exists(), sorted(p.name for p in missing.rglob("*"))
    assert not (tmp_path / "x.conf").exists()


def _readme_command(pattern: str) -> list[str]:
    """The README's first `commbench ...` line matching `pattern`, as argv without `commbench` and its comment."""
    import re
    import shlex
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    line = next(line for line in readme.splitlines() if line.startswith("commbench ") and re.search(pattern, line))
    return shlex.split(line, comments=True)[1:]


def test_readme_torchtitan_02_example_runs_as_written(tmp_path, monkeypatch):
    """README's `plan ... --emit torchtitan --torchtitan-version 0.2` read as the DeepSeek-V3 plan above it was refused
    (0.2.2 builds RMSNorm eps 1e-5, DeepSeek-V3 1e-6): it now names a model 0.2.2 builds, and runs as written."""
    monkeypatch.chdir(tmp_path)
    argv = _readme_command(r"--torchtitan-version 0\.2\b")
    assert "..." not in argv, argv
    result = CliRunner().invoke(app, argv, env=WIDE)
    assert result.exit_code == 0, result.output
    assert 'name = "gpt_oss"' in result.stdout


@pytest.mark.parametrize("emit", [["--emit", "megatron"],
                                  ["--layout", "tp=1,pp=1,ep=32,mbs=4,gbs=1280", "--emit", "megatron"]])
def test_plan_says_where_out_files_went_when_stdout_is_the_launch(tmp_path, emit):
    """`plan ... --emit megatron -O plan2/` wrote plan.json, megatron_args.txt and launch.env and said nothing of them
    (only -O without --emit printed `plan → plan2: ...`): the line now goes to stderr, stdout keeping the launch."""
    out = tmp_path / "plan2"
    result = CliRunner().invoke(app, ["plan", "--model", "gpt-oss-120b", "--system", "gb200-nvl72", "--gpus", "64",
                                      *emit, "-O", str(out)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert f"plan → {out}: plan.json, megatron_args.txt, launch.env" in result.stderr, result.stderr
    assert "plan →" not in result.stdout
