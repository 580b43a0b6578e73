"""Output files: checked before launch, one writer at a time, resume only the same sweep, torn tails repaired."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.files import OutputLock, check_output_dir, check_output_file

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()
QUICK = """[sweep]
name = "q"
nproc = 2
backend = "gloo"
[[run]]
name = "quick"
collective = "all_reduce"
sizes = [8, {last}]
iters = 2
warmup_iters = 0
"""


def sweep_file(tmp_path: Path, name: str, last: int = 16) -> Path:
    path = tmp_path / name
    path.write_text(QUICK.format(last=last))
    return path


def test_an_out_folder_named_like_a_file_is_refused_not_made(tmp_path):
    """`plan -O out/plan.json` made a folder called plan.json (plan's, tune's and report's --out is a folder, where
    bench's and fit's -O name a file): refused in one line naming the folder to give, and nothing is made."""
    target = tmp_path / "out" / "plan.json"
    with pytest.raises(CommbenchError, match=r"--out='.*plan\.json' names a file, but --out is the folder .* e\.g\. "
                                              r"--out '.*out'"):
        check_output_dir(target, "--out")
    assert not (tmp_path / "out").exists()
    result = runner.invoke(app, ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8",
                                 "-O", str(target)])
    assert result.exit_code == 2 and "names a file" in result.output and not target.exists(), result.output
    (tmp_path / "made.json").mkdir()          # a folder that exists is taken, whatever its name
    assert check_output_dir(tmp_path / "made.json", "--out") == tmp_path / "made.json"


def test_output_file_checks_name_the_option(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CommbenchError, match=r"--output='.*' is a directory"):
        check_output_file(tmp_path, "--output")
    with pytest.raises(CommbenchError, match=r"cannot be written: '.*file' is a file, not a folder"):
        check_output_file(blocker / "out.jsonl", "--output")
    with pytest.raises(CommbenchError, match=r"--out='.*file' is a file: give a folder"):
        check_output_dir(blocker, "--out")
    fresh = tmp_path / "new" / "out.jsonl"
    check_output_file(fresh, "-o")
    assert fresh.parent.is_dir() and not fresh.exists()  # checked, nothing left behind


@pytest.mark.parametrize("args", [
    ["bench", "all_reduce", "-J", "{dir}"], ["sweep", "{sweep}", "-O", "{under}"], ["fit", "{results}", "-O", "{dir}"],
    ["report", "{results}", "--out", "{file}"], ["import", "nccl-tests", "{file}", "-O", "{under}"],
    ["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256", "--layout", "ep=32",
     "--out", "{file}"],
    ["tune", "--out", "{file}"],
])
def test_unwritable_outputs_are_refused_before_anything_runs(tmp_path, args):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    results = tmp_path / "r.jsonl"
    results.write_text("")
    values = {"dir": str(tmp_path), "file": str(blocker), "under": str(blocker / "x.jsonl"),
              "sweep": str(sweep_file(tmp_path, "q.toml")), "results": str(results)}
    started = time.monotonic()
    result = runner.invoke(app, [a.format(**values) for a in args])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1, result.output
    assert "Traceback" not in result.output and time.monotonic() - started < 10


def test_a_second_writer_is_told_which_pid_holds_the_file(tmp_path):
    output = tmp_path / "held.jsonl"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; sys.path.insert(0, sys.argv[1]);"
                               "from commbench.files import OutputLock; lock = OutputLock(sys.argv[2], '-o');"
                               "print('locked', flush=True); time.sleep(30)", str(REPO), str(output)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        result = runner.invoke(app, ["sweep", str(sweep_file(tmp_path, "q.toml")), "-O", str(output), "--resume"])
        assert result.exit_code == 2
        assert f"is in use by PID {holder.pid}" in result.output
        bench = runner.invoke(app, ["bench", "all_reduce", "-J", str(output)])
        assert bench.exit_code == 2 and f"in use by PID {holder.pid}" in bench.output
    finally:
        holder.kill()
        holder.wait()
    with OutputLock(output, "-o"):  # free again once the holder is gone
        pass


def test_resume_refuses_another_sweep_but_continues_the_same(tmp_path):
    output = tmp_path / "s.jsonl"
    first = runner.invoke(app, ["sweep", str(sweep_file(tmp_path, "a.toml")), "-O", str(output)])
    assert first.exit_code == 0, first.output
    other = runner.invoke(app, ["sweep", str(sweep_file(tmp_path, "b.toml", last=32)), "-O", str(output), "--resume"])
    assert other.exit_code == 2 and "--resume into" in other.output and "is refused" in other.output, other.output
    wider = runner.invoke(app, ["sweep", str(sweep_file(tmp_path, "a.toml")), "-O", str(output), "--resume",
                                "--nproc", "3"])
    assert wider.exit_code == 2 and "3 rank(s)" in wider.output, wider.output
    renamed = runner.invoke(app, ["sweep", str(sweep_file(tmp_path, "c.toml")), "-O", str(output), "--resume"])
    assert renamed.exit_code == 0 and "nothing to do" in renamed.output, renamed.output


def test_bench_appending_after_a_cut_off_line_keeps_its_header(tmp_path):
    output = tmp_path / "b.jsonl"
    output.write_text('{"record_type":"header","run_id":"cut')
    result = runner.invoke(app, ["bench", "all_reduce", "--nproc", "2", "-b", "8", "-e", "8", "-n", "2", "-J", str(output)])
    assert result.exit_code == 0, result.output
    kinds = [json.loads(line)["record_type"] for line in output.read_text().splitlines()]
    assert kinds == ["header", "measurement"]


def test_default_bench_outputs_are_unique(tmp_path, monkeypatch):
    from commbench.measure.bench import default_output_path

    monkeypatch.chdir(tmp_path)
    assert len({default_output_path("all_reduce") for _ in range(50)}) == 50
    assert os.path.basename(default_output_path("all_reduce")).startswith("all_reduce-")


def test_two_sweeps_on_one_file_the_second_is_refused(tmp_path):
    slow = tmp_path / "slow.toml"
    slow.write_text(QUICK.format(last=16).replace("iters = 2", "iters = 1000000"))
    output = tmp_path / "two.jsonl"
    # TMPDIR: the kill -9 below leaves the ranks' rendezvous folder (until the next launch there) in tmp_path, not /tmp
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path)}
    first = subprocess.Popen([sys.executable, "-m", "commbench", "sweep", str(slow), "-O", str(output)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (output.exists() and output.stat().st_size) and time.monotonic() < deadline:
            assert first.poll() is None
            time.sleep(0.05)
        second = runner.invoke(app, ["sweep", str(slow), "-O", str(output), "--resume"])
        assert second.exit_code == 2 and f"is in use by PID {first.pid}" in second.output, second.output
    finally:
        first.kill()
        first.wait()


def test_files_written_whole_get_the_umask_mode_like_appended_results(tmp_path):
    """`commbench tune` left plan.json, fabric.json, launch.env, ... at mode 0600 (a temporary file renamed into
    place) beside its 0644 results file: a colleague or a job under another account could not read the plan."""
    old = os.umask(0o022)
    try:
        result = runner.invoke(app, ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8",
                                     "-O", str(tmp_path / "plan")])
        assert result.exit_code == 0, result.output
        os.umask(0o027)
        result = runner.invoke(app, ["nccl-tuner", "--system", "h100-hgx", "--gpus", "8", "-O", str(tmp_path / "t.conf")])
        assert result.exit_code == 0, result.output
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "plan").iterdir()}
    assert modes and set(modes.values()) == {0o644}, modes
    assert (tmp_path / "t.conf").stat().st_mode & 0o777 == 0o640
