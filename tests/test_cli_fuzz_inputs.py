"""User errors found by fuzzing the CLI: each is one line naming the option or field, exit 2, no traceback."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

runner = CliRunner()
PLAN = ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8"]


def one_line_error(args: list[str], must: str) -> str:
    result = runner.invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert must in lines[0], result.output
    return lines[0]


# str.isdigit() is true for '²' and '①', which int() refuses: the check passed and int() raised ValueError
@pytest.mark.parametrize("args,must", [
    (PLAN + ["--layout", "tp=²"], "tp='²' is invalid"),
    (PLAN + ["--layout", "recompute_layers=①"], "recompute_layers='①' is invalid"),
    (PLAN + ["--layout", "tp=1,pp=1,vp=1,ep=1,mbs=1,recompute_layers=²"], "recompute_layers='²' is invalid"),
    (["bench", "all_reduce", "--backend", "gloo", "--nccl-channels", "²"], "--nccl-channels='²' is invalid"),
    (["sweep", "ci-small", "--dry-run", "--nccl-channels", "²"], "--nccl-channels='²' is invalid"),
])
def test_non_ascii_digits_are_one_line(args, must):
    one_line_error(args, must)


# 2**70 overflowed the search's int64 arrays (OverflowError); a plan.json refuses more than 16M tokens already
@pytest.mark.parametrize("value", [str(2 ** 70), str((1 << 24) + 1)])
def test_plan_seq_len_is_bounded(value):
    one_line_error(PLAN + ["--seq-len", value], f"--seq-len={value} is invalid: a sequence length in tokens from 1 to 16,777,216")


# a dry run looked the name up in its estimate tables: KeyError traceback
@pytest.mark.parametrize("value", ["bogus", "", "cupy-nccl"])
def test_sweep_backend_is_checked(value):
    one_line_error(["sweep", "ci-small", "--dry-run", "--backend", value],
                   f"--backend={value!r} is invalid: allowed auto, nccl, gloo")


# verify-plan called .get() on it: AttributeError traceback
@pytest.mark.parametrize("value", [5, "x", None, [1]])
def test_plan_file_fabric_must_be_an_object(tmp_path, value):
    import json

    out = tmp_path / "plan"
    assert runner.invoke(app, PLAN + ["-O", str(out)]).exit_code == 0
    doc = json.loads((out / "plan.json").read_text())
    doc["inputs"]["fabric"] = value
    (out / "plan.json").write_text(json.dumps(doc))
    one_line_error(["verify-plan", str(out / "plan.json"), "--backend", "gloo", "--nproc", "2"],
                   "field 'inputs.fabric'=")


RUNS = "commbench/data/calibration-runs.json"


# --evaluate -O FILE exited 0 without writing FILE
def test_calibrate_evaluate_and_out_conflict():
    one_line_error(["calibrate", RUNS, "--no-loo", "--evaluate", "-O", "never-written.json"],
                   "-O/--out='never-written.json' and --evaluate conflict")


# --model/--system/--gpus beside JSON run lists were read by nothing without a word: now a warning says so (an
# error would refuse a run a script states its system for), and the rows' own model and system are used
@pytest.mark.parametrize("extra,must", [
    (["--model", "llama3-8b"], "--model='llama3-8b' is not used"),
    (["--system", "h100-hgx"], "--system='h100-hgx' is not used"),
    (["--gpus", "8"], "--gpus=8 is not used"),
])
def test_calibrate_options_that_would_be_ignored_are_named(extra, must):
    result = runner.invoke(app, ["calibrate", RUNS, "--no-loo", "--evaluate", *extra])
    assert result.exit_code == 0, result.output
    assert must in " ".join(result.output.split()) and "JSON run lists" in result.output
    plain = runner.invoke(app, ["calibrate", RUNS, "--no-loo", "--evaluate"])
    assert plain.exit_code == 0
    assert plain.output.split("median |error|")[1][:40] == result.output.split("median |error|")[1][:40]


# a log whose first line opens with a bracket (torchrun's "[rank0]:" prefix, a "[date]" stamp) was read as a JSON
# list: "not valid JSON", and the --model given for it counted no log
@pytest.mark.parametrize("first", ["", "[2026-01-10 10:00:00] launcher started\n"])
def test_calibrate_reads_a_log_that_opens_with_a_bracket(tmp_path, first):
    from pathlib import Path

    log = Path(__file__).resolve().parent / "data" / "torchtitan_qwen3_30b_b200.log"
    raw = first + "".join(line for line in log.read_text().splitlines(keepends=True) if not line.startswith("#"))
    assert raw.startswith("[")
    path = tmp_path / "train.log"
    path.write_text(raw)
    result = runner.invoke(app, ["calibrate", "--evaluate", str(path), "--model", "qwen3-30b-a3b", "--system", "b200",
                                 "--gpus", "8"])
    assert result.exit_code == 0, result.output
    assert "median |error|" in result.output


# a JSON runs file cut mid-write was called "a torchtitan log: give --model and --system" when its sources held an
# "https:" (the log sniffing matched "tps:" anywhere); a cut JSON object was "neither a JSON list ... nor a log".
# A log is now a line shaped as the framework prints it, and a file opening as JSON that does not parse says so.
@pytest.mark.parametrize("cut", [
    '[{"source": "https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/main/docs/x.md", "notes": "step: 3 of the recipe',
    '[{"model": "llama3-70b", "source": "https://example.com/run", "gpu": "GB200"',
    '{"source": "https://example.com/run", "model": ',
    '[{"notes": "Unterminated https://example.com/x\n',
])
def test_calibrate_calls_a_cut_json_runs_file_invalid_json_not_a_log(tmp_path, cut):
    path = tmp_path / "runs.json"
    path.write_text(cut)
    result = runner.invoke(app, ["calibrate", "--evaluate", str(path)])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "Traceback" not in result.output, result.output
    assert "not valid JSON (" in lines[0] and " at line 1)" in lines[0] and "log" not in lines[0], lines[0]
    assert " at at " not in lines[0], lines[0]


# -N 2**70 was accepted and ran the size sweep cycle after cycle until killed
@pytest.mark.parametrize("cycles", [str(2 ** 70), "150000"])
def test_bench_run_cycles_are_bounded(cycles):
    one_line_error(["bench", "all_reduce", "--backend", "gloo", "--nproc", "2", "-b", "8", "-e", "16", "-N", cycles],
                   f"-N={cycles} cycles of 2 size(s) would plan")


# a dense model's etp pin was dropped: the plan showed ETP1 (or ETP=tp) for --layout etp=2
@pytest.mark.parametrize("layout", ["etp=2", "tp=2,etp=1", "tp=1,pp=1,vp=1,ep=1,mbs=1,etp=2"])
def test_plan_refuses_etp_pin_on_a_dense_model(layout):
    one_line_error(PLAN + ["--layout", layout], "etp=")


@pytest.mark.parametrize("layout", ["etp=1", "tp=2,etp=2", "tp=1,pp=1,vp=1,ep=1,mbs=1,etp=1"])
def test_plan_keeps_a_dense_etp_pin_that_is_tp(layout):
    assert runner.invoke(app, PLAN + ["--layout", layout]).exit_code == 0


# 2**70 ranks (or racks) were predicted as if they were a system
@pytest.mark.parametrize("extra,option", [
    (["-g", str(2 ** 70), "--gpus", str(2 ** 70)], "--group"),
    (["-g", "8", "--gpus", str(2 ** 70)], "--gpus"),
    (["-g", "8", "--racks", str(2 ** 70)], "--racks"),
])
def test_predict_rank_counts_are_bounded(extra, option):
    least = 2 if option == "--group" else 1   # a group of one communicates nothing
    one_line_error(["predict", "-c", "all_reduce", "--system", "h100-hgx", *extra],
                   f"{option}={2 ** 70} is invalid: an integer from {least} ")


# --- bad-input gaps a new user hit (probe P5) ---

def test_verify_plan_checks_memory_before_its_ranks_start(small_plan, monkeypatch):
    """bench refused -e 8G before any rank started; verify-plan sized its buffers up to -e (1T passed) unchecked and
    started its ranks. Now the same check (measure.bench.check_memory) runs on the largest point it measures."""
    import commbench.comm.job as job
    import commbench.measure.bench as bench

    monkeypatch.setattr(bench, "memory_limit_bytes", lambda backend: (1 << 20, "this machine's physical memory"))
    monkeypatch.setattr(job, "run_job", lambda *a, **k: pytest.fail("ranks started"))
    line = one_line_error(["verify-plan", str(small_plan), "-e", "1T"], "is too large here: 4 rank(s) x 3 buffers")
    assert "the plan's " in line and "lower -e/--max-bytes" in line


def test_every_size_unit_the_parser_takes_is_named():
    """'1T' is read as 1 TiB everywhere, but the unknown-unit line and the size options' help named only K/M/G."""
    line = one_line_error(["bench", "all_reduce", "-b", "9E"], "unknown unit 'E'")
    assert "K/M/G/T" in line
    for args in (["verify-plan", "--help"], ["bench", "--help"], ["predict", "--help"]):
        out = runner.invoke(app, args, env={"COLUMNS": "400"}).output
        assert "K/M/G/T" in out and "K/M/G;" not in out and "K/M/G " not in out, args


def test_sweep_nproc_zero_is_refused_before_any_note(tmp_path):
    """--nproc 0 printed two notes that contradicted each other (0 ranks; one rack of 2) before its refusal."""
    one_line_error(["sweep", "ci-small", "--nproc", "0", "-O", str(tmp_path / "s.jsonl")], "--nproc=0 is invalid: allowed 1..")


def test_bench_racks_neither_count_nor_list_names_racks():
    """--racks abc: a note on --rack-ranks, then an error naming --rack-ranks, an option the user never typed."""
    one_line_error(["bench", "all_reduce", "--racks", "abc"], "--racks='abc' is invalid: a number of racks")


def test_compare_empty_path_and_history_folder_problems(tmp_path):
    """compare '' said 'cannot be read: Is a directory' (the empty path is the current folder); a --history folder
    whose results sit in a sub-folder said it held none, a missing one 'not a folder'."""
    good = tmp_path / "a.jsonl"
    good.write_text("")
    one_line_error(["compare", "", str(good)], "BASE='' is empty: give a results file (an unset shell variable?)")
    one_line_error(["compare", str(good), ""], "NEW='' is empty")
    one_line_error(["compare", str(good), str(good), "--history", str(tmp_path / "nodir")], "no such folder")
    (tmp_path / "h" / "sub").mkdir(parents=True)
    (tmp_path / "h" / "sub" / "x.jsonl").write_text("")
    one_line_error(["compare", str(good), str(good), "--history", str(tmp_path / "h")], "only in its sub-folders")


@pytest.mark.parametrize("value", ["1", "999999999"])
def test_predict_group_states_one_range(value):
    """-g 1 was refused 'at least 2 ranks' while -g 999999999 said 'from 1 to 131,072': one range for both."""
    one_line_error(["predict", "-c", "all_reduce", "-g", value, "--system", "h100-hgx"],
                   f"--group={value} is invalid: an integer from 2 (a group of one communicates nothing) to 131,072")


@pytest.mark.parametrize("value", ["0", "99"])
def test_tune_nproc_states_one_range(tmp_path, value):
    """tune --nproc 0 said '2 or more' and --nproc 99 'allowed 1..8' (1 is refused too: a fit needs a group)."""
    from commbench.comm.backends import max_local_ranks

    limit = max_local_ranks("gloo")[0]
    line = one_line_error(["tune", "--nproc", value, "-O", str(tmp_path / "t")], f"--nproc={value} is invalid")
    assert f"allowed 2..{limit} on gloo" in line and "2 or more" not in line


def test_warmup_bound_gives_its_own_reason():
    """-w 2000000 was refused because 'every timed iteration is kept in the record': -n's reason, not -w's."""
    line = one_line_error(["bench", "all_reduce", "-w", "2000000"], "--warmup-iters=2000000 is invalid")
    assert "timed iteration" not in line


def test_nccl_axes_echo_what_was_typed():
    one_line_error(["bench", "all_reduce", "--nccl-proto", "LL9"], "--nccl-proto='LL9' is invalid")
    one_line_error(["sweep", "ci-small", "--dry-run", "--nccl-algo", "Ring9"], "--nccl-algo='Ring9' is invalid")


def test_a_repeated_option_reports_the_value_click_refused(monkeypatch, capsys):
    """`--gpus 256 --gpus abc` is refused for 'abc' (click reads the last) but said '(got '256')'."""
    import sys

    from commbench.cli.app import main

    monkeypatch.setattr(sys, "argv", ["commbench"] + PLAN[:-1] + ["256", "--gpus", "abc"])
    with pytest.raises(SystemExit) as stopped:
        main()
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "(got 'abc')" in err and "'256'" not in err, err


@pytest.mark.parametrize("args,option", [
    (PLAN + ["--layout", ""], "--layout='' is empty"),
    (PLAN + ["--layout", " , "], "--layout=' , ' is invalid"),
    (["tune", "--layout", ""], "--layout='' is empty"),
    (["fit", "x.jsonl", "--name", ""], "--name='' is empty"),
])
def test_empty_text_is_refused_not_read_as_left_out(args, option):
    """--layout '' ran a full search and fit --name '' wrote a profile named 'fitted': an unset shell variable
    passed unseen, where -O '' is refused."""
    line = one_line_error(args, option)
    assert "unset shell variable" in line or "holds none" in line
