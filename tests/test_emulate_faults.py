"""commbench emulate killed (SIGKILL, SIGHUP): no rank measures on; --cleanup removes what a kill left."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from tests.processes import alive, gone_within

REPO = Path(__file__).resolve().parents[1]
HAS_NETNS = os.geteuid() == 0 and shutil.which("ip") is not None and shutil.which("tc") is not None


def needs_netns(test):
    return pytest.mark.netns(pytest.mark.skipif(not HAS_NETNS, reason="needs root and iproute2")(test))


def namespaces(prefix: str) -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.startswith(prefix + "-")}


def descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*/children"):
            for child in task.read_text().split():
                found.append(int(child))
                todo.append(int(child))
    return found


def start_emulate(prefix: str, output: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "commbench", "emulate", "--racks", "2", "--ranks-per-rack", "1",
                             "--netns-prefix", prefix, "--", "bench", "all_reduce", "-b", "8", "-e", "64",
                             "-n", "1000000", "-J", str(output)], env=env, cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def wait_for_ranks(proc: subprocess.Popen, output: Path) -> list[int]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if output.exists() and output.stat().st_size:
            return descendants(proc.pid)
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    raise AssertionError("the emulated ranks never wrote their header")


@needs_netns
def test_sigkill_leaves_no_rank_and_cleanup_removes_the_namespaces(tmp_path):
    prefix = f"cbt{os.getpid() % 100000}k"
    proc = start_emulate(prefix, tmp_path / "k.jsonl")
    try:
        ranks = wait_for_ranks(proc, tmp_path / "k.jsonl")
        proc.kill()
        proc.wait()
        assert gone_within(ranks)
        assert namespaces(prefix) == {f"{prefix}-r0", f"{prefix}-r1"}
        again = CliRunner().invoke(app, ["emulate", "--netns-prefix", prefix, "--", "bench", "all_reduce"])
        assert again.exit_code == 2 and f"commbench emulate --cleanup --netns-prefix {prefix}" in again.output
        cleaned = CliRunner().invoke(app, ["emulate", "--cleanup", "--netns-prefix", prefix])
        assert cleaned.exit_code == 0 and "removed 2 namespace(s)" in cleaned.output
        assert namespaces(prefix) == set()
    finally:
        for ns in namespaces(prefix):
            subprocess.run(["ip", "netns", "del", ns])


@needs_netns
def test_sighup_tears_down_like_sigterm(tmp_path):
    prefix = f"cbt{os.getpid() % 100000}h"
    proc = start_emulate(prefix, tmp_path / "h.jsonl")
    try:
        ranks = wait_for_ranks(proc, tmp_path / "h.jsonl")
        proc.send_signal(signal.SIGHUP)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 130 and err.strip().startswith("interrupted (SIGHUP)")
        assert namespaces(prefix) == set() and not any(alive(pid) for pid in ranks)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for ns in namespaces(prefix):
            subprocess.run(["ip", "netns", "del", ns])


def test_emulate_caps_ranks_and_refuses_an_empty_prefix():
    many = CliRunner().invoke(app, ["emulate", "--racks", "2", "--ranks-per-rack", "100", "--", "bench", "all_reduce"])
    assert many.exit_code == 2 and "200 ranks is too many" in many.output
    empty = CliRunner().invoke(app, ["emulate", "--netns-prefix", "", "--", "bench", "all_reduce"])
    assert empty.exit_code == 2 and "--netns-prefix=''" in empty.output
