"""A second stop signal while the launcher stops its ranks after the first (Ctrl-C pressed twice;
`timeout -s INT` and batch systems signal the launcher and then its whole process group) must not
replace the one line that says how many points were kept and where by a bare KeyboardInterrupt."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from commbench.comm import local_ranks
from commbench.errors import Interrupted


def _sleep(rank_env, _arg):
    time.sleep(60)


def test_a_second_sigint_during_the_ranks_kill_keeps_the_kept_points_line(tmp_path, monkeypatch):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    real_kill_groups, calls = local_ranks.kill_groups, []

    def kill_groups_signalled_again(pids):
        calls.append(list(pids))
        if len(calls) == 1:  # the second signal lands while the first one's cleanup runs
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)  # the handler runs here, at the next bytecode boundary
        real_kill_groups(pids)

    monkeypatch.setattr(local_ranks, "kill_groups", kill_groups_signalled_again)
    output = tmp_path / "twice.jsonl"
    message = _interrupted_launch(output)
    assert message == f"interrupted (SIGINT): no point measured ({output} was not written)"
    assert calls and all(not os.path.exists(f"/proc/{pid}/stat") or _zombie(pid) for pid in calls[0])


def _interrupted_launch(output) -> str:
    """What a 2-rank gloo launch writing `output` says when SIGINT reaches it 2 s in (its ranks sleep)."""
    timer = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        local_ranks.launch_local(2, _sleep, None, backend="gloo", output_path=str(output), timeout_s=10)
    except Interrupted as exc:
        return str(exc)
    except KeyboardInterrupt as exc:  # what escaped before: the CLI then printed no count and no path
        return f"{type(exc).__name__}({exc}) escaped the launcher"
    else:
        return "not interrupted"
    finally:
        timer.cancel()


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def test_an_interrupted_resume_says_what_the_file_still_holds(tmp_path):
    # probe BL 7: a --resume stopped before its first new point said '0 point(s) kept in FILE' while FILE held the 6
    # points of the earlier launch (kept counts this launch's): it read as if the file had been emptied
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    output = tmp_path / "resumed.jsonl"
    output.write_text('{"record_type":"header","run_id":"a"}\n' + '{"record_type":"measurement","run_id":"a"}\n' * 6)
    assert _interrupted_launch(output) == f"interrupted (SIGINT): 0 point(s) recorded by this launch; {output} holds 6"
