"""A rank killed between two points: the failed record and the line name the point lost, not the one the rank had
finished (found from outside: kill -9 of rank 2 of a sweep wrote a failed 256 KiB record whose error read 'rank 2 was
killed by SIGKILL at ... 64 KiB', beside a good 64 KiB record that README's 'delete its line to retry it' then lost)."""

from __future__ import annotations

import json
import multiprocessing.connection
import os
import signal
import time

import pytest

from commbench.comm.local_ranks import RanksHung, launch_local
from commbench.comm.progress import append_record


def _pending(size_bytes: int) -> dict:
    return {"record_type": "measurement", "run_id": "r", "collective": "all_reduce", "size_bytes": size_bytes,
            "dtype": "float32", "group_layout": "world", "point_key": f"all_reduce/{size_bytes}", "params": {},
            "status": "failed", "error": ""}


def _rank_dies_after_point_0(rank_env, arg):
    """Rank 0 records point 0 and announces point 1; rank 1, which announced only point 0, then dies by SIGKILL
    (as after the agreement on point 0 and before its own announcement of point 1). Rank 0 then waits to be killed by
    the launcher (`rank_0_waits`: as on a collective with the dead rank) or returns."""
    folder, rank_0_waits = arg
    progress, flag = rank_env.progress, os.path.join(folder, "rank0-at-point-1")
    progress.at(0, "64 KiB", _pending(65536) if rank_env.rank == 0 else None)
    if rank_env.rank == 0:
        append_record(os.path.join(folder, "out.jsonl"), {**_pending(65536), "status": "ok", "error": None})
        progress.recorded(0, True)
        progress.at(1, "256 KiB", _pending(262144))
        open(flag, "w").close()
        if rank_0_waits:
            time.sleep(60)
        return "rank 0 left point 1 to the launcher"
    deadline = time.monotonic() + 20
    while not os.path.exists(flag) and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGKILL)


def _wait_for_every_rank_to_end(monkeypatch) -> None:
    """The launcher's first look comes once every rank has ended (they died between two of its looks)."""
    from commbench.comm import local_ranks

    def wait(objects, timeout=None):
        sentinels = [o for o in objects if isinstance(o, int)]
        deadline = time.monotonic() + 20
        while len(multiprocessing.connection.wait(sentinels, timeout=0.05)) < len(sentinels) \
                and time.monotonic() < deadline:
            pass
        return multiprocessing.connection.wait(objects, timeout=0)

    monkeypatch.setattr(local_ranks, "wait", wait)


@pytest.mark.parametrize("rank_0_waits", [True, False], ids=["rank-0-killed-by-the-launcher", "both-end-between-looks"])
def test_a_rank_killed_between_points_is_named_at_the_point_lost(tmp_path, monkeypatch, rank_0_waits):
    # both-end-between-looks: the launcher saw no rank alive before it had listed the failed ones, and took the killed
    # rank for a plain failure (RunFailed: the sweep stopped instead of going on with fresh ranks)
    if not rank_0_waits:
        _wait_for_every_rank_to_end(monkeypatch)
    output = tmp_path / "out.jsonl"
    with pytest.raises(RanksHung) as caught:
        launch_local(2, _rank_dies_after_point_0, (str(tmp_path), rank_0_waits), backend="gloo", output_path=str(output),
                     timeout_s=5, start_method="fork")
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert [(r["size_bytes"], r["status"]) for r in records] == [(65536, "ok"), (262144, "failed")]
    error = records[1]["error"]
    assert error.startswith("rank 1 was killed by SIGKILL at 256 KiB, between points (after 64 KiB, which rank 0 "
                            "recorded"), error
    assert str(caught.value).startswith(error)
    assert caught.value.recorded
