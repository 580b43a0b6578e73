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


def test_points_rank_0_wrote_but_did_not_report_count_as_this_launchs(monkeypatch, tmp_path):
    """Rank 0's last progress message can be lost as the ranks are killed: a new file holding 16 points read '15
    point(s) recorded by this launch; c.jsonl holds 16', as if one came from an earlier run (probe PC, FG)."""
    output = tmp_path / "n.jsonl"
    output.write_text('{"record_type":"header","run_id":"a"}\n')   # what the launch found: this run's header

    def recorded_then_interrupted(ranks, grace_s, output_path):
        with open(output_path, "a") as handle:   # rank 0 recorded 3 points, their messages never read
            handle.write('{"record_type":"measurement","run_id":"a"}\n' * 3)
        raise KeyboardInterrupt

    monkeypatch.setattr(local_ranks, "_watch", recorded_then_interrupted)
    with pytest.raises(Interrupted) as caught:
        local_ranks.launch_local(1, _noop, None, backend="gloo", output_path=str(output))
    assert str(caught.value) == f"interrupted (SIGINT): 3 point(s) kept in {output}"


def test_an_empty_file_the_output_lock_made_is_not_named_as_kept(monkeypatch, tmp_path):
    """bench's output lock creates FILE empty and removes it on release when nothing was written: the line said
    '0 point(s) kept in c.jsonl' and then there was no c.jsonl."""
    output = tmp_path / "c.jsonl"
    output.touch()
    monkeypatch.setattr(local_ranks, "_watch", _interrupted)
    with pytest.raises(Interrupted) as caught:
        local_ranks.launch_local(1, _noop, None, backend="gloo", output_path=str(output))
    assert str(caught.value) == f"interrupted (SIGINT): no point measured ({output} was not written)"
