"""Counts and ranges from the user are bounded before anything is expanded: a tiny input naming a
billion ranks gets one line naming the limit, exit 2, inside a memory cap (it used to grow to 23 GB)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MEMORY_CAP_BYTES = 3 << 30  # torch's import maps ~1 GB; expanding 1e9 ranks needs tens of GB


def run_capped(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """The CLI in a child whose address space is capped (a MemoryError or kill instead of swapping)."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))

    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "commbench", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=90, preexec_fn=cap)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), \
        (result.returncode, result.stderr[-2000:])
    return lines[0]


def sweep_file(tmp_path: Path, head: str, entry: str = "") -> str:
    path = tmp_path / "s.toml"
    path.write_text(f'[sweep]\nname = "x"\n{head}\n[[run]]\ncollective = "all_reduce"\nsizes = ["4K"]\n{entry}\n')
    return str(path)


@pytest.mark.timeout(200)
@pytest.mark.parametrize("case,must", [
    (("sweep", "world_size = 1000000000", 'group_sizes = "pow2"'), "world_size=1000000000 is invalid: an integer from 1 to 131,072"),
    (("sweep", "world_size = 4", 'racks = "0-999999999"'), "'0-999999999' goes past the 4 ranks"),
    (("sweep", "nproc = 1000000000", ""), "nproc=1000000000 is invalid"),
    (("sweep", "world_size = 4", "iters = 1000000000000"), "iters=1000000000000 is invalid: an integer from 1 to 1,000,000"),
    (("bench", "--rack-ranks", "0-999999999"), "'0-999999999' goes past the 2 ranks"),
    (("bench", "-w", "1000000000000"), "--warmup-iters=1000000000000 is invalid"),
    (("bench", "-n", "1000000000000"), "--iters=1000000000000 is invalid"),
    (("dry", "--world-size", "1000000000"), "--world-size=1000000000 is invalid: an integer from 1 to 131,072"),
])
def test_a_huge_count_is_one_line_naming_the_limit_under_a_memory_cap(tmp_path, case, must):
    if case[0] == "sweep":
        args = ["sweep", sweep_file(tmp_path, case[1], case[2]), "--dry-run"]
    elif case[0] == "bench":
        args = ["bench", "all_reduce", "-b", "4K", "-e", "4K", "--backend", "gloo", *case[1:], "-O", "r.jsonl"]
    else:
        args = ["sweep", "ci-small", "--dry-run", *case[1:]]
    line = one_line_error(run_capped(args, tmp_path))
    assert must in line
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.timeout(200)
def test_verify_plan_refuses_a_billion_ranks_before_planning_them(tmp_path):
    from typer.testing import CliRunner

    from commbench.cli.app import app

    made = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "4",
                                    "--gbs", "64", "--layout", "tp=2,pp=1,ep=2,etp=1,cp=1", "--out", str(tmp_path),
                                    "--emit", "json"])
    assert made.exit_code == 0, made.output
    line = one_line_error(run_capped(["verify-plan", str(tmp_path / "plan.json"), "--nproc", "1000000000",
                                      "--backend", "gloo"], tmp_path))
    assert "--nproc=1000000000 is invalid: from 2" in line
    line = one_line_error(run_capped(["verify-plan", str(tmp_path / "plan.json"), "--iters", "1000000000000",
                                      "--backend", "gloo"], tmp_path))
    assert "--iters=1000000000000 is invalid" in line


@pytest.mark.timeout(200)
def test_the_largest_allowed_world_plans_within_the_cap(tmp_path):
    """131,072 ranks, every power-of-two sub-group in both layouts: planned and listed inside 3 GB."""
    path = sweep_file(tmp_path, "world_size = 131072", 'group_sizes = "pow2"\ngroup_layout = ["contiguous", "strided"]')
    result = run_capped(["sweep", path, "--dry-run"], tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "33 point(s)" in result.stdout
