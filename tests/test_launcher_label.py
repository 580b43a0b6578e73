"""The header's launcher says who set RANK / WORLD_SIZE as far as the environment tells: torchrun where torchrun's own
variables sit beside them, `emulate` under `commbench emulate`, `env` where nothing names a launcher (set by hand).
Every such launch read `launcher: torchrun`."""

from __future__ import annotations

import pytest

from commbench.comm.launch import detect_rank_env

BY_HAND = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511"}


@pytest.mark.parametrize("extra, launcher", [
    ({}, "env"),                                                        # exported by hand, LOCAL_RANK missing
    ({"LOCAL_RANK": "0"}, "env"),                                       # all three by hand
    ({"LOCAL_RANK": "0", "TORCHELASTIC_RUN_ID": "j"}, "torchrun"),
    ({"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0"}, "torchrun"),
    ({"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "COMMBENCH_EMULATED": "{}"}, "emulate"),   # emulate/ranks.py's env
    ({"COMMBENCH_LOCAL_LAUNCH": "1"}, "local"),
])
def test_the_launcher_is_what_the_environment_says(extra, launcher):
    rank_env = detect_rank_env({**BY_HAND, **extra})
    assert (rank_env.launcher, rank_env.rank, rank_env.world_size) == (launcher, 1, 2)


@pytest.mark.parametrize("rank", [0, 1])
def test_a_stopped_sweep_under_torchrun_says_how_to_resume_once_and_under_what(tmp_path, monkeypatch, rank):
    """Every torchrun rank printed 'continue with: commbench sweep ... --resume', a command that run alone starts
    local ranks: now rank 0 alone says it, with the launch to run it under."""
    from typer.testing import CliRunner

    import commbench.comm.job as job
    from commbench.cli.app import app
    from commbench.errors import Interrupted

    def stopped(*args, **kwargs):
        raise Interrupted(f"interrupted (SIGINT): rank {rank} of the torchrun launch stopped; results measured so far "
                          "are in x", signal="SIGINT")   # as run_job says it

    monkeypatch.setattr(job, "run_job", stopped)
    env = {**BY_HAND, "RANK": str(rank), "LOCAL_RANK": str(rank), "TORCHELASTIC_RUN_ID": "t", "COLUMNS": "400"}
    out = tmp_path / "s.jsonl"
    result = CliRunner().invoke(app, ["sweep", "ci-small", "-O", str(out), "--backend", "gloo"], env=env)
    line = " ".join(result.output.split())
    assert result.exit_code == 130 and f"rank {rank} of the torchrun launch stopped" in line, line
    hint = f"continue with: commbench sweep ci-small -O {out} --resume, run under the same torchrun launch as this one"
    assert (hint in line) == (rank == 0) and ("continue with" in line) == (rank == 0), line
