"""A sweep launch names what the file says, as its --dry-run does (probe AN): an entry's group_sizes the ranks
cannot hold was refused at launch as `--group-sizes=3`, an option never given, where the dry run named the file,
the entry and its key."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app


def _file(tmp_path, text: str):
    path = tmp_path / "s.toml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("nproc, group_sizes, needle", [
    (2, 3, "run[0] (all_reduce) on 2 ranks: group_sizes=3 is invalid: must be <= the 2 ranks"),
    (3, 2, "run[0] (all_reduce) on 3 ranks: group_sizes=2 is invalid: must divide the 3 ranks"),
])
def test_a_launch_names_the_entry_and_key_of_group_sizes(tmp_path, nproc, group_sizes, needle):
    sweep = _file(tmp_path, f'[sweep]\nbackend = "gloo"\nnproc = {nproc}\n[[run]]\ncollective = "all_reduce"\n'
                            f'sizes = ["1K"]\ngroup_sizes = [{group_sizes}]\n')
    runner = CliRunner()
    for args in (["--dry-run"], ["-O", str(tmp_path / "out.jsonl")]):
        result = runner.invoke(app, ["sweep", sweep, *args])
        said = " ".join(result.output.split())
        assert result.exit_code == 2 and needle in said and "--" not in said, (args, said)
        assert said.startswith(f"error: sweep {sweep}: "), said
    assert not (tmp_path / "out.jsonl").exists()


def test_a_dry_run_plans_the_ranks_the_files_nproc_launches(tmp_path):
    """[sweep] nproc = 2 beside world_size = 4: `sweep F --dry-run` said valid for 4 ranks while `sweep F` started
    2 and refused group_sizes=[4] (probe AN-2); the dry run now plans the 2 ranks the launch starts and says
    that world_size 4 is not what runs here."""
    sweep = _file(tmp_path, '[sweep]\nbackend = "gloo"\nnproc = 2\nworld_size = 4\n[[run]]\ncollective = "all_reduce"\n'
                            'sizes = ["1K"]\ngroup_sizes = [4]\n')
    runner = CliRunner()
    dry = runner.invoke(app, ["sweep", sweep, "--dry-run"])
    launch = runner.invoke(app, ["sweep", sweep, "-O", str(tmp_path / "out.jsonl")])
    needle = "run[0] (all_reduce) on 2 ranks: group_sizes=4 is invalid: must be <= the 2 ranks"
    for result in (dry, launch):
        said = " ".join(result.output.split())
        assert result.exit_code == 2 and needle in said, said
    planned = runner.invoke(app, ["sweep", sweep, "--dry-run", "--world-size", "4"])   # the world it is written for
    assert planned.exit_code == 0, planned.output
    fits = _file(tmp_path, '[sweep]\nbackend = "gloo"\nnproc = 2\nworld_size = 4\n[[run]]\ncollective = "all_reduce"\n'
                           'sizes = ["1K"]\n')
    result = runner.invoke(app, ["sweep", fits, "--dry-run"])
    said = " ".join(result.output.split())
    assert result.exit_code == 0 and "point(s) on 2 rank(s)" in said, said
    assert "[sweep] world_size=4" in said and "nproc=2" in said and "--world-size 4" in said, said


def test_a_gpu_sweep_on_a_host_without_nccl_names_the_files_backend(monkeypatch, tmp_path):
    """`commbench sweep h100-node` on a CPU host blamed `--backend=nccl`, never given (probe AN-4): the refusal
    names the file's [sweep] backend and what the file needs; a --backend given stays named as the option."""
    from commbench.comm import backends

    monkeypatch.setattr(backends, "backend_status", lambda name: (name == "gloo", "this torch build has no NCCL"))
    runner = CliRunner()
    result = runner.invoke(app, ["sweep", "h100-node", "-O", str(tmp_path / "x.jsonl")])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "[sweep] backend=nccl is not available here" in said, said
    assert "--backend" not in said.split("not available")[0] and "8 GPUs" in said, said
    given = runner.invoke(app, ["sweep", "h100-node", "--backend", "nccl", "-O", str(tmp_path / "x.jsonl")])
    assert given.exit_code == 2 and "--backend=nccl is not available here" in given.output, given.output
    assert not (tmp_path / "x.jsonl").exists()
