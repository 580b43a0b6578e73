"""A tune refused or failed before writing anything leaves no folder it created (probe BS F5): `tune --results
EMPTY -O NEWDIR` left an empty NEWDIR (also an outside launch whose rendezvous failed). A folder that existed, or
holds what was written, is kept."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app


def _refused(tmp_path, out):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = CliRunner().invoke(app, ["tune", "--results", str(empty), "-O", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert len([line for line in result.output.splitlines() if line.startswith("error:")]) == 1, result.output


def test_a_refused_tune_leaves_no_folder_it_made(tmp_path):
    _refused(tmp_path, tmp_path / "tune_x")
    assert not (tmp_path / "tune_x").exists()
    _refused(tmp_path, tmp_path / "a" / "b" / "tune_y")
    assert not (tmp_path / "a").exists()


def test_a_folder_that_existed_is_kept(tmp_path):
    (tmp_path / "kept").mkdir()
    _refused(tmp_path, tmp_path / "kept")
    assert (tmp_path / "kept").is_dir()
