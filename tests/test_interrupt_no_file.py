"""Ctrl-C in `commbench verify-plan` (which writes no results file) printed 'interrupted (SIGINT): 0 point(s) kept in
(verify-plan writes no file)': a count of points kept in a file that does not exist."""

from __future__ import annotations

import pytest

import commbench.comm.local_ranks as local_ranks
from commbench.errors import Interrupted


def _noop(rank_env, arg):
    return None


def _interrupted(ranks, grace_s, output_path):
    raise KeyboardInterrupt


@pytest.mark.parametrize("output, said", [("(verify-plan writes no file)", "interrupted (SIGINT): verify-plan writes no file"),
                                          ("r.jsonl", "interrupted (SIGINT): 0 point(s) kept in r.jsonl")])
def test_the_interrupted_line_names_a_file_only_where_there_is_one(monkeypatch, output, said):
    monkeypatch.setattr(local_ranks, "_watch", _interrupted)
    with pytest.raises(Interrupted) as caught:
        local_ranks.launch_local(1, _noop, None, backend="gloo", output_path=output)
    assert str(caught.value) == said
