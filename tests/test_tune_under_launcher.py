"""`commbench tune` as the ranks of an outside launch (`torchrun --nproc-per-node 2 -m commbench tune`, or `commbench
emulate -- tune`): every rank claimed OUT's files, so one failed with "--out='.../fabric.json' is in use by PID <its
sibling rank> (another commbench run writing it)", nothing was measured and three empty files were left (found from
outside, probe AM F4). Now rank 0 alone claims, writes, fits and plans, as bench and sweep's other ranks write
nothing; the others measure the sweep's points with it. The launch here is what torchrun sets (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.distributed import free_port
from tests.test_plan_files_guarded import TINY

REPO = Path(__file__).resolve().parents[1]
SWEEP = """[sweep]
name = "tiny"
backend = "gloo"
[defaults]
iters = 3
warmup_iters = 1
[[run]]
name = "ar"
collective = "all_reduce"
sizes = ["1M", "4M", "16M"]
"""


def _launch(tmp_path, world: int, extra: list[str]) -> list[subprocess.CompletedProcess]:
    (tmp_path / "tiny.toml").write_text(SWEEP)
    (tmp_path / "m.toml").write_text(TINY)
    port = free_port()
    procs = []
    for rank in range(world):
        env = {**os.environ, "PYTHONPATH": str(REPO), "RANK": str(rank), "WORLD_SIZE": str(world),
               "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "commbench", "tune", "--sweep", str(tmp_path / "tiny.toml"), "--model", "tiny",
             "--model-file", str(tmp_path / "m.toml"), "--system", "h100-hgx", "--gpus", "8", "--gbs", "64",
             "--top", "1", "-O", str(tmp_path / "out"), *extra],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    # as torchrun: once a rank fails, the others (waiting for it at a rendezvous) are stopped
    started, failed_at = time.monotonic(), None
    while any(p.poll() is None for p in procs) and time.monotonic() - started < 240:
        if failed_at is None and any(p.poll() not in (None, 0) for p in procs):
            failed_at = time.monotonic()
        if failed_at is not None and time.monotonic() - failed_at > 10:
            break
        time.sleep(0.2)
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
    return [subprocess.CompletedProcess(p.args, p.returncode, *p.communicate()) for p in procs]


@pytest.mark.timeout(300)
def test_tune_under_an_outside_launch_measures_on_every_rank_and_writes_once(tmp_path):
    ranks = _launch(tmp_path, 2, [])
    for rank, done in enumerate(ranks):
        assert done.returncode == 0, f"rank {rank}: {done.stdout}{done.stderr}"
        assert "is in use by PID" not in done.stderr
    out = tmp_path / "out"
    records = [json.loads(line) for line in (out / "tune-sweep.jsonl").read_text().splitlines()]
    measured = [r for r in records if r["record_type"] == "measurement"]
    assert len(measured) >= 3 and {r["world_size"] for r in measured} == {2}
    assert (out / "fabric.json").stat().st_size > 0 and (out / "plan.json").stat().st_size > 0
    assert not [p.name for p in out.iterdir() if p.is_file() and p.stat().st_size == 0]
    assert "Plan (predicted)" in ranks[0].stdout and "Plan (predicted)" not in ranks[1].stdout   # rank 0 reports


@pytest.mark.timeout(120)
def test_a_conflicting_nproc_under_a_launch_is_one_line_before_any_file(tmp_path):
    ranks = _launch(tmp_path, 2, ["--nproc", "4"])
    for done in ranks:
        assert done.returncode == 2, done.stdout + done.stderr
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "--nproc=4" in errors[0] and "2 ranks" in errors[0], done.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("stage", ["_check_every_stage", "_run_sweep"])
def test_a_stopped_rank_other_than_0_leaves_what_was_kept_to_rank_0(tmp_path, monkeypatch, stage):
    # a Ctrl-C to torchrun's process group: rank 1 said "interrupted (SIGTERM) before tune wrote anything: nothing
    # was written" beside rank 0's "10 measured point(s) kept in OUT/tune-sweep.jsonl" (probe AW F2): a rank other
    # than 0 writes nothing, so what was kept is rank 0's to say
    from typer.testing import CliRunner

    import commbench.cli.tune as tune_cli
    from commbench.cli.app import app
    from commbench.errors import Interrupted

    def stopped(*args, **kwargs):
        if stage == "_check_every_stage":
            raise KeyboardInterrupt()
        raise Interrupted("interrupted (SIGTERM): rank 1 of the torchrun launch stopped; results measured so far are "
                          "in x", signal="SIGTERM")   # as run_job says it

    monkeypatch.setattr(tune_cli, stage, stopped)
    out = tmp_path / "out"
    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999",
           "TORCHELASTIC_RUN_ID": "t", "COLUMNS": "400"}   # torchrun's own variable: the launch is torchrun's
    result = CliRunner().invoke(app, ["tune", "--model", "mixtral-8x7b", "--system", "h100-hgx", "--gpus", "16",
                                      "-O", str(out)], env=env)
    assert result.exit_code == 130, result.output
    line = " ".join(result.output.split())
    assert "nothing was written" not in line and "kept in" not in line, line
    assert "rank 1 of the torchrun launch stopped" in line and f"rank 0 writes tune's files in {out}" in line, line
    assert not out.exists()
