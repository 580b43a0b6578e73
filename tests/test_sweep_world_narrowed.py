"""`commbench sweep ci-small --nproc 2` measured a sweep whose file declares world_size = 4 (2 racks x 2 ranks) on 2
ranks with no word (probe CG F6): its grad-rs-hierarchical entry, ranks_per_rack = 2 on 2 ranks, is one rack, so no
hierarchy was measured while the records still say algorithm=hierarchical. Under a launcher, or with the file's own
nproc, a mismatch was noted; a local --nproc was not. Now one line says the world measured is not the file's, and
one line per entry whose hierarchical algorithm runs on one rack (--dry-run and the launch alike: sweep.plan's
notes)."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app


def _dry(*args: str) -> str:
    result = CliRunner().invoke(app, ["sweep", "ci-small", "--dry-run", *args], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_a_local_nproc_other_than_the_files_world_is_said():
    said = _dry("--nproc", "2")
    assert "[sweep] world_size=4" in said and "measures 2 rank(s)" in said, said
    assert "run[10] (grad-rs-hierarchical): algorithm hierarchical on one rack" in said, said
    # the file's own world: neither line
    whole = _dry("--nproc", "4")
    assert "world_size=4" not in whole and "on one rack" not in whole, whole


def test_the_launch_says_it_too():
    from commbench.sweep.plan import size_notes
    from commbench.cli.sweep import load_sweep

    spec = load_sweep("ci-small")
    assert any("grad-rs-hierarchical" in n and "on one rack" in n for n in size_notes(spec, 2))
    assert not any("on one rack" in n for n in size_notes(spec, 4))
