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
                                          ("r.jsonl", "interrupted (SIGINT): no point measured (r.jsonl was not written)")])
def test_the_interrupted_line_names_a_file_only_where_there_is_one(monkeypatch, tmp_path, output, said):
    # probe PC: `bench ... -O c.jsonl` stopped before rank 0 opened the file said '0 point(s) kept in c.jsonl', and
    # there was no c.jsonl
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(local_ranks, "_watch", _interrupted)
    with pytest.raises(Interrupted) as caught:
        local_ranks.launch_local(1, _noop, None, backend="gloo", output_path=output)
    assert str(caught.value) == said
    assert not (tmp_path / "r.jsonl").exists()


def test_a_header_only_file_is_named_as_a_file_that_holds_no_point(monkeypatch, tmp_path):
    """Stopped after rank 0 wrote its run header and before the first point: the file is there, with no point."""
    output = tmp_path / "h.jsonl"
    output.write_text('{"record_type":"header","schema_version":1,"run_id":"27194fc57ad9"}\n')   # as rank 0 writes it
    monkeypatch.setattr(local_ranks, "_watch", _interrupted)
    with pytest.raises(Interrupted) as caught:
        local_ranks.launch_local(1, _noop, None, backend="gloo", output_path=str(output))
    assert str(caught.value) == f"interrupted (SIGINT): no point measured ({output} holds none: only a run header)"
