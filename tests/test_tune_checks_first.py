"""`commbench tune` checks every stage's inputs before the first stage starts (issue 29, item 8):
`--gpus 7` used to run the whole sweep, print `3/3 plan: done`, then fail."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app


@pytest.mark.parametrize("args, needle", [
    (["--gpus", "7"], "no layout of deepseek-v3 fits in memory on 7 GPUs"),
    (["--precision", "fp7"], "--precision"),
    (["--top", "0"], "--top"),
    (["--gbs", "99999999999"], "--gbs=99999999999 is invalid"),  # as --layout gbs=; it was planned
    (["--gbs", "0"], "--gbs=0 is invalid"),
    (["--seq-len", "0"], "--seq-len=0 is invalid"),   # tune said '--seq-len to change' and had no --seq-len (AW F6)
    (["--seq-len", "99999999999"], "--seq-len=99999999999 is invalid"),
    (["--nproc", "0"], "--nproc=0 is invalid"),
    # one rank ran the whole sweep, then 'no usable points ... group of one rank' (exit 2), --nproc unnamed (AW F5)
    (["--nproc", "1"], "--nproc=1 is invalid: a fit needs groups of >= 2 ranks"),
    (["--nproc", "1"], "without a sweep: commbench plan --model deepseek-v3 --system gb300-nvl72 --gpus 256"),  # 0 read as "not given": the sweep ran on the sweep's 2 ranks
    (["--layout", "tp=3,pp=1,vp=1,ep=1,mbs=1"], "deepseek-v3"),
    (["--sweep", "no-such-sweep"], "no-such-sweep"),
    (["--results", "/nonexistent/results.jsonl"], "cannot be read"),
    # --results skips the sweep: --sweep and --nproc were ignored without a word
    (["--results", "r.jsonl", "--sweep", "s.toml"], "--sweep='s.toml' is invalid: not with --results"),
    (["--results", "r.jsonl", "--nproc", "4"], "--nproc=4 is invalid: not with --results"),
    # checked only after the whole sweep, naming fit's --dtype / --op, options tune lacks (probe AW F4)
    (["--fit-dtype", "foo"], "--fit-dtype='foo' is invalid: the built-in sweep measures float32"),
    (["--fit-op", "max"], "--fit-op='max' is invalid: the built-in sweep's reductions are sum"),
    # the release's validate_args refuses these pins (search/wgrad_graph.py), through framework_pins
    (["--model", "gpt-oss-120b", "--gpus", "64", "--precision", "mxfp8", "--layout",
      "moe_a2a_overlap=true,cuda_graph=layer"], "doesn't support attn bias"),
])
def test_bad_input_for_a_later_stage_stops_before_the_sweep(tmp_path, args, needle):
    out = tmp_path / "tune"
    result = CliRunner().invoke(app, ["tune", "-O", str(out), *args])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert needle in text and "1/3 sweep" not in text and "3/3 plan" not in text
    assert not (out / "tune-sweep.jsonl").exists() and not (out / "fabric.json").exists()
    assert not out.exists()   # the -O folder is made only once every option is known good


def test_more_local_ranks_than_the_machine_runs_is_refused_before_the_earlier_run_is_deleted(tmp_path):
    # `tune --nproc 99 -O DIR` on a folder holding an earlier tune emptied DIR/tune-sweep.jsonl and deleted its
    # fabric and plan files, then said 'error: --nproc=99 is invalid: allowed 1..8 on gloo' (exit 2)
    from tests.test_plan_files_guarded import DATA
    out = tmp_path / "tune"
    first = CliRunner().invoke(app, ["tune", "--results", str(DATA), "--system", "h100-hgx", "--gpus", "16",
                                     "--model", "mixtral-8x7b", "--top", "1", "-O", str(out)])
    assert first.exit_code == 0, first.output
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    result = CliRunner().invoke(app, ["tune", "--nproc", "99", "-O", str(out)])
    assert result.exit_code == 2 and "--nproc=99 is invalid" in result.output, result.output
    assert "1/3 sweep" not in result.output
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_fit_dtype_or_op_the_results_lack_names_tunes_option_and_writes_nothing(tmp_path):
    from tests.test_plan_files_guarded import DATA
    out = tmp_path / "tune"
    for option, value, said in (("--fit-dtype", "bfloat16", "the results hold float32"),
                                ("--fit-op", "max", "the results' reductions are sum")):
        result = CliRunner().invoke(app, ["tune", "--results", str(DATA), "--system", "h100-hgx", "--gpus", "16",
                                          "--model", "mixtral-8x7b", "--top", "1", "-O", str(out), option, value])
        assert result.exit_code == 2, result.output
        text = " ".join(result.output.split())
        assert f"{option}='{value}' is invalid: {said}" in text and "--dtype" not in text.replace("--fit-dtype", "")
        assert not out.exists() or not any(out.iterdir())


def test_a_sweep_file_or_launch_of_one_rank_is_refused_before_it_runs(tmp_path):
    sweep = tmp_path / "one.toml"
    sweep.write_text('[sweep]\nname = "one"\nnproc = 1\nbackend = "gloo"\n[[run]]\ncollective = "all_reduce"\n'
                     'sizes = ["16K", "1M"]\n')
    out = tmp_path / "tune"
    result = CliRunner().invoke(app, ["tune", "--sweep", str(sweep), "-O", str(out)])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and f"sweep {sweep}: [sweep] nproc=1 is invalid: a fit needs groups of >= 2" in text
    assert "1/3 sweep" not in text and not out.exists()
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"}
    result = CliRunner().invoke(app, ["tune", "-O", str(out)], env=env)
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "the env launch of 1 rank is too small to tune" in text, text
    assert "1/3 sweep" not in text and not out.exists()
