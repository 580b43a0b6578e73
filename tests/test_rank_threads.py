"""Forked local ranks run with OMP_NUM_THREADS intra-op threads (issue 29, item 9): torch imported before
the fork kept the parent's count (one per core), whose spinning OpenMP threads starved the other rank's
gloo thread (512 KiB reduce_scatter on 2 ranks: tens of ms instead of ~2 ms; benchmarks/gloo_reduce_scatter.py)."""

from __future__ import annotations

import json

import torch
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.comm.local_ranks import launch_local


def _threads(rank_env, arg):
    import torch as rank_torch
    return rank_torch.get_num_threads()


def test_forked_ranks_take_omp_num_threads(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert "torch" in __import__("sys").modules   # imported before the fork, as the CLI has it
    got = launch_local(2, _threads, None, backend="gloo", output_path=str(tmp_path / "x.jsonl"), timeout_s=60)
    assert got == {0: 1, 1: 1}


def test_the_header_says_how_many_threads_each_rank_ran(tmp_path):
    out = tmp_path / "rs.jsonl"
    result = CliRunner().invoke(app, ["bench", "reduce_scatter", "--nproc", "2", "-b", "512K", "-e", "512K", "-n", "3",
                                      "-w", "1", "-J", str(out)])
    assert result.exit_code == 0, result.output
    header = json.loads(out.read_text().splitlines()[0])
    assert any(n.startswith("1 torch intra-op thread(s) per rank") for n in header["notes"]), header["notes"]
    assert torch.get_num_threads() >= 1


def test_one_rank_in_process_runs_and_says_the_same_thread_rule(tmp_path, monkeypatch):
    """`--nproc 1` runs in this process: it kept every core's intra-op threads while its header said "OMP_NUM_THREADS,
    1 unless set" (probe U, session 33). It takes launch_local's rule now, and leaves this process as it found it."""
    from commbench.comm.job import run_job

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        got = run_job(_threads, None, nproc=1, backend="gloo", validate_world=lambda world: None,
                      output_path=str(tmp_path / "x.jsonl"), timeout_s=60)
        assert got == {0: 1}
        assert torch.get_num_threads() == 2 and "OMP_NUM_THREADS" not in __import__("os").environ
        out = tmp_path / "ar.jsonl"
        result = CliRunner().invoke(app, ["bench", "all_reduce", "--nproc", "1", "-b", "1K", "-e", "1K", "-n", "1",
                                          "-w", "0", "-J", str(out)])
        assert result.exit_code == 0, result.output
        header = json.loads(out.read_text().splitlines()[0])
        assert header["launcher"] == "single"
        assert any(n.startswith("1 torch intra-op thread(s) per rank") for n in header["notes"]), header["notes"]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
