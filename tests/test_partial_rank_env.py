"""WORLD_SIZE exported with no RANK (no launcher) is no launch: detect_rank_env needs both, and bench started its own
local ranks with nothing said (found from outside: `WORLD_SIZE=2 commbench bench all_reduce -O x.jsonl` wrote
'launcher: local' in the header and no line on the terminal). It is now said in one note, as a Slurm batch script
of several tasks without srun is (launch.slurm_unlaunched_note)."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.comm.launch import detect_rank_env, partial_rank_env_note


def test_part_of_torchruns_variables_is_named_and_the_whole_set_is_no_note():
    assert detect_rank_env({"WORLD_SIZE": "2"}) is None
    assert partial_rank_env_note({"WORLD_SIZE": "2"}) == (
        "WORLD_SIZE=2 is set but RANK is not: not a torchrun/srun launch; commbench starts its own local ranks here")
    assert "RANK=1 and LOCAL_RANK=1 are set but WORLD_SIZE is not" in partial_rank_env_note({"RANK": "1",
                                                                                               "LOCAL_RANK": "1"})
    assert "LOCAL_RANK=0 is set but RANK and WORLD_SIZE are not" in partial_rank_env_note({"LOCAL_RANK": "0"})
    assert partial_rank_env_note({}) is None and partial_rank_env_note({"RANK": "0", "WORLD_SIZE": "2"}) is None


def test_bench_with_world_size_alone_says_it_starts_its_own_ranks(tmp_path):
    result = CliRunner().invoke(app, ["bench", "all_reduce", "--nproc", "1", "-b", "8", "-e", "8", "-n", "1", "-w", "0",
                                      "-O", str(tmp_path / "ws.jsonl")], env={"WORLD_SIZE": "2", "COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert ("note: WORLD_SIZE=2 is set but RANK is not: not a torchrun/srun launch; commbench starts its own local "
            "ranks here (--nproc 1)") in result.output
