"""The hostile pass's low items: each a single line on stderr and exit 2, never a traceback. Through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


def one_error_line(output: str, must: str) -> None:
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and must in errors[0], output[-2000:]
    assert "Traceback" not in output


@pytest.fixture
def files(tmp_path):
    (tmp_path / "deep.json").write_text("[" * 5000)
    (tmp_path / "deep.toml").write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    (tmp_path / "bigint.toml").write_text("[sweep]\nworld_size = " + "9" * 100_000 + "\n")
    return tmp_path


@pytest.mark.parametrize("args,must", [
    (["sweep", "{d}/deep.toml", "--dry-run"], "nested too deeply"),
    (["sweep", "{d}/bigint.toml", "--dry-run"], "more than 4,300 digits"),
    (["plan", "--system", "{d}/deep.json", "--model", "deepseek-v3", "--gpus", "8"], "nested too deeply"),
    (["verify-plan", "{d}/deep.json"], "nested too deeply"),
    (["bench", "all_reduce", "--timeout", "1e-9"], "--timeout=1e-09 is invalid: a finite number of seconds from 0.1"),
    (["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256", "--moe-imbalance", "1e308"],
     "--moe-imbalance=1e+308 is invalid"),
    (["nccl-tuner", "--system", "gb300-nvl72", "--gpus", "8", "-b", "-1K"], "--min-bytes='-1K' is invalid"),
])
def test_a_hostile_value_is_one_line_exit_2(files, args, must):
    result = runner.invoke(app, [a.format(d=files) for a in args], env={"COLUMNS": "250"})
    assert result.exit_code == 2, result.output[-2000:]
    one_error_line(result.output, must)


def cli(args: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "commbench", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env})


def test_a_non_integer_count_is_a_usage_line():
    result = cli(["bench", "all_reduce", "-n", "1e23"])
    assert result.returncode == 2
    one_error_line(result.stderr, "'-n' / '--iters'")


def test_a_missing_gloo_interface_is_one_line_before_ranks_start(tmp_path):
    result = cli(["bench", "all_reduce", "-b", "8", "-e", "8", "--backend", "gloo", "-J", str(tmp_path / "r.jsonl")],
                 GLOO_SOCKET_IFNAME="nosuch0")
    assert result.returncode == 2
    one_error_line(result.stderr, "GLOO_SOCKET_IFNAME='nosuch0' is invalid: no interface 'nosuch0' here")
    assert not (tmp_path / "r.jsonl").exists()


def test_an_ascii_terminal_gets_replacement_characters_not_a_traceback():
    result = cli(["predict", "--system", "gb300-nvl72", "-c", "all_reduce", "-g", "8", "-b", "1M", "-e", "1M"],
                 PYTHONIOENCODING="ascii")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]


def test_closed_stdout_is_one_line_exit_2(tmp_path):
    code = ("import os, runpy, sys; os.close(1); sys.stdout = None; sys.argv = ['commbench'] + sys.argv[1:]; "
            "runpy.run_module('commbench', run_name='__main__')")
    result = subprocess.run([sys.executable, "-c", code, "bench", "all_reduce", "-J", str(tmp_path / "r.jsonl")],
                            stderr=subprocess.PIPE, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 2
    one_error_line(result.stderr, "standard output is closed")


def test_a_plan_whose_model_cannot_be_measured_is_refused_before_ranks_start(tmp_path):
    made = runner.invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "4", "--gbs", "64",
                               "--layout", "tp=2,pp=1,ep=2,etp=1,cp=1", "--out", str(tmp_path), "--emit", "json"])
    assert made.exit_code == 0, made.output
    doc = json.loads((tmp_path / "plan.json").read_text())
    doc["inputs"]["model_spec"]["hidden"] = 10 ** 15
    (tmp_path / "huge.json").write_text(json.dumps(doc))
    result = runner.invoke(app, ["verify-plan", str(tmp_path / "huge.json"), "--backend", "gloo"])
    assert result.exit_code == 2
    one_error_line(result.output, "hidden=1000000000000000")


LIMITED = "import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000)); " \
          "sys.argv = ['commbench'] + sys.argv[1:]; runpy.run_module('commbench', run_name='__main__')"


def test_a_file_size_limit_keeps_the_records_before_it_intact(tmp_path):
    """A write the disk refuses mid-run (full, a size limit) is a failed run, exit 1 (README "Exit codes": 2 is bad
    input found before any rank starts); it exited 2."""
    out = tmp_path / "r.jsonl"
    result = subprocess.run([sys.executable, "-c", LIMITED, "bench", "all_reduce", "-b", "8", "-e", "1M", "-n", "2",
                             "--backend", "gloo", "-J", str(out)], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 1, result.stderr[-2000:]
    one_error_line(result.stderr, "cannot be written: File too large; the records before this one are intact")
    lines = out.read_text().splitlines()
    assert len(lines) >= 2 and all(json.loads(line) for line in lines)


def test_a_sweep_the_disk_stops_exits_1_saying_how_to_resume_and_resumes(tmp_path):
    sweep = tmp_path / "q.toml"
    sweep.write_text('[sweep]\nname = "q"\nnproc = 2\nbackend = "gloo"\n[[run]]\ncollective = "all_reduce"\n'
                     'sizes = [8, 16, 32, 64, 128, 256]\niters = 2\nwarmup_iters = 0\n')
    out = tmp_path / "s.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", LIMITED, "sweep", str(sweep), "-O", str(out)], capture_output=True,
                            text=True, timeout=180, env=env)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    one_error_line(result.stderr, "cannot be written: File too large; the records before this one are intact")
    assert f"continue with: commbench sweep {sweep} -O {out} --resume" in result.stderr, result.stderr[-2000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    kept = [r for r in records if r["record_type"] == "measurement"]
    assert kept and all(r["status"] == "ok" for r in kept)   # the point the disk refused is not recorded failed
    again = subprocess.run([sys.executable, "-m", "commbench", "sweep", str(sweep), "-O", str(out), "--resume"],
                           capture_output=True, text=True, timeout=180, env=env)
    assert again.returncode == 0 and f"{6 - len(kept)} point(s) measured" in again.stdout, again.stdout + again.stderr


@pytest.mark.parametrize("pattern,replacement,named", [
    (r"elapsed time per iteration \(ms\): *[0-9.]+", "elapsed time per iteration (ms): 0.0",
     "elapsed time per iteration (ms)='0.0' is invalid"),
    (r"using world size: 256", "using world size: 0", "world_size=0 is invalid"),
    (r"(  tensor_model_parallel_size \.+ )1", r"\g<1>abc", "tensor_model_parallel_size='abc' is invalid"),
    (r"(  seq_length \.+ )4096", r"\g<1>1e400", "seq_length=inf is invalid"),
])
def test_megatron_logs_with_impossible_values_are_one_line(tmp_path, pattern, replacement, named):
    import re

    log = (Path(__file__).resolve().parent / "data" / "megatron_deepseek_v3_gb300.log").read_text()
    changed = re.sub(pattern, replacement, log)
    assert changed != log
    if "world size: 0" in changed:
        changed = re.sub(r"(  world_size \.+ )256", r"\g<1>0", changed)
    path = tmp_path / "run.log"
    path.write_text(changed)
    result = runner.invoke(app, ["calibrate", "--evaluate", str(path), "--model", "deepseek-v3", "--system",
                                 "gb300-nvl72"])
    assert result.exit_code == 2, result.output[-2000:]
    one_error_line(result.output, named)


@pytest.mark.parametrize("old,new,named", [
    ("'tensor_parallel_degree': 1", "'tensor_parallel_degree': 'x'", "parallelism.tensor_parallel_degree='x' is invalid"),
    ("tps: 24,311", "tps: 0", "tps='0' is invalid"),
    ("'seq_len': 4096", "'seq_len': -5", "training.seq_len=-5 is invalid"),
])
def test_torchtitan_logs_with_impossible_values_name_the_field(tmp_path, old, new, named):
    log = (Path(__file__).resolve().parent / "data" / "torchtitan_qwen3_30b_b200.log").read_text()
    assert old in log
    path = tmp_path / "run.log"
    path.write_text(log.replace(old, new))
    result = runner.invoke(app, ["calibrate", "--evaluate", str(path), "--model", "qwen3-30b-a3b", "--system", "b200",
                                 "--gpus", "8"])
    assert result.exit_code == 2, result.output[-2000:]
    one_error_line(result.output, named)


@pytest.mark.parametrize("args", [
    ["fit", str(Path(__file__).resolve().parent / "data" / "compare" / "gloo_all_reduce_a.jsonl"), "-O", "/dev/full"],
    ["nccl-tuner", "--system", "gb300-nvl72", "--gpus", "8", "-O", "/dev/full"],
])
def test_a_device_as_a_whole_file_output_is_refused_and_left_alone(args):
    import stat

    result = runner.invoke(app, args)
    assert result.exit_code == 2
    one_error_line(result.output, "'/dev/full' is not a regular file")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
