"""Ranks hung while another stopped on a point rank 0 had not reached: the failed record rank 0 leaves is of its own
point, and its error names that point first, as for a rank killed between points (test_killed_between_points). The
line took the stopped rank's own label, so rank 0's failed 64 KiB record read 'point 256 KiB failed: ...'."""

from __future__ import annotations

import json
import os
import time

import pytest

from commbench.comm import local_ranks
from commbench.comm.local_ranks import RanksHung, launch_local
from commbench.comm.progress import append_record


def _pending(size_bytes: int) -> dict:
    return {"record_type": "measurement", "run_id": "r", "collective": "all_reduce", "size_bytes": size_bytes,
            "dtype": "float32", "group_layout": "world", "point_key": f"all_reduce/{size_bytes}", "params": {},
            "status": "failed", "error": ""}


def _rank_0_hangs(rank_env, arg):
    """Rank 1 goes on to point 1 (256 KiB) and fails it, waiting there; rank 0 hangs on point 0 (64 KiB) before its
    record (`rank_0_recorded` False) or after it, between points (True)."""
    folder, rank_0_recorded = arg
    progress = rank_env.progress
    progress.at(0, "64 KiB", _pending(65536) if rank_env.rank == 0 else None)
    if rank_env.rank == 0:
        if rank_0_recorded:
            append_record(os.path.join(folder, "out.jsonl"), {**_pending(65536), "status": "ok", "error": None})
            progress.recorded(0, True)
    else:
        progress.at(1, "256 KiB")
        progress.failed(1, "timed out waiting for rank 0")
    time.sleep(60)


@pytest.mark.parametrize("rank_0_recorded", [False, True], ids=["hung-on-its-point", "hung-between-points"])
def test_hung_rank_0_is_named_at_the_point_of_its_record(tmp_path, monkeypatch, rank_0_recorded):
    monkeypatch.setattr(local_ranks, "hang_grace_s", lambda timeout_s: 1.0)
    output = tmp_path / "out.jsonl"
    with pytest.raises(RanksHung) as caught:
        launch_local(2, _rank_0_hangs, (str(tmp_path), rank_0_recorded), backend="gloo", output_path=str(output),
                     timeout_s=5, start_method="fork")
    line = str(caught.value)
    records = [json.loads(text) for text in output.read_text().splitlines()]
    if rank_0_recorded:   # the good 64 KiB record stays as it was; 256 KiB has none (a --resume measures it)
        assert [(r["size_bytes"], r["status"], r["error"]) for r in records] == [(65536, "ok", None)]
    else:
        assert [(r["size_bytes"], r["status"]) for r in records] == [(65536, "failed")]
        assert records[0]["error"].startswith("point 64 KiB not recorded by rank 0 before it was stopped: "
                                              "point 256 KiB failed: rank(s) 0 hung"), records[0]["error"]
        assert records[0]["error"].endswith("(rank 1: timed out waiting for rank 0)"), records[0]["error"]
    assert line.startswith("point 256 KiB failed: rank(s) 0 hung"), line
    assert "; rank 1 stopped ahead of rank 0 (rank 0 was still at 64 KiB)" in line, line
    assert caught.value.recorded


def _rank_1_stopped_behind(rank_env, arg):
    """Rank 0 records point 0 (64 KiB) and goes on to point 1 (256 KiB); rank 1 failed point 0 and waits there; rank 2
    hangs on point 0."""
    progress = rank_env.progress
    progress.at(0, "64 KiB", _pending(65536) if rank_env.rank == 0 else None)
    if rank_env.rank == 0:
        append_record(os.path.join(arg, "out.jsonl"), {**_pending(65536), "status": "ok", "error": None})
        progress.recorded(0, True)
        progress.at(1, "256 KiB", _pending(262144))
    elif rank_env.rank == 1:
        progress.failed(0, "timed out waiting for rank 2")
    time.sleep(60)


def test_hung_rank_behind_rank_0_is_named_at_the_point_of_rank_0s_record(tmp_path, monkeypatch):
    monkeypatch.setattr(local_ranks, "hang_grace_s", lambda timeout_s: 1.0)
    output = tmp_path / "out.jsonl"
    with pytest.raises(RanksHung) as caught:
        launch_local(3, _rank_1_stopped_behind, str(tmp_path), backend="gloo", output_path=str(output), timeout_s=5,
                     start_method="fork")
    records = [json.loads(text) for text in output.read_text().splitlines()]
    assert [(r["size_bytes"], r["status"]) for r in records] == [(65536, "ok"), (262144, "failed")]
    assert records[1]["error"].startswith("point 256 KiB failed: rank(s) 2 hung"), records[1]["error"]
    assert ("; rank 1 stopped between points (after 64 KiB, which rank 0 recorded; it had not begun 256 KiB)"
            in records[1]["error"]), records[1]["error"]
    assert str(caught.value).startswith(records[1]["error"].split(" (rank 1: ")[0])
    assert caught.value.recorded
