"""Which CUDA device a rank uses, and the Slurm launches the docs show.

`srun --gpus-per-task 1` binds each task to its own GPU (srun(1): it implies --tres-bind=gres/gpu:per_task:1), so
CUDA_VISIBLE_DEVICES lists that one GPU and it is cuda:0 for the task; commbench took SLURM_LOCALID as the CUDA
ordinal (cuda:3 where one device is visible: "invalid device ordinal" on every task but the first of a node). And
README's Slurm example asked for 72 tasks per node, one GPU each: no node has 72 GPUs (an NVL72 rack is 18 trays of
4, an HGX node 8), so Slurm could not place it."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from commbench.comm.backends import cuda_device_for
from commbench.comm.launch import detect_rank_env
from commbench.errors import CommbenchError

REPO = Path(__file__).resolve().parents[1]
STEP = {"SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_STEP_NUM_TASKS": "4",
        "SLURM_NTASKS": "4", "SLURM_LOCALID": "3", "SLURM_STEP_NODELIST": "g1"}


def test_a_task_that_sees_one_gpu_uses_cuda_0():
    rank_env = detect_rank_env({**STEP, "CUDA_VISIBLE_DEVICES": "3"})
    assert rank_env.local_rank == 3            # its place on the node, still recorded as such
    assert cuda_device_for(rank_env, visible=1) == 0


def test_a_task_that_sees_every_gpu_of_its_node_uses_its_local_rank():
    rank_env = detect_rank_env({**STEP, "CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert cuda_device_for(rank_env, visible=4) == 3
    assert cuda_device_for(rank_env, visible=8) == 3


@pytest.mark.parametrize("visible", [0, 2, 3])
def test_a_local_rank_past_the_visible_devices_is_refused_in_one_line(visible, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",".join(str(i) for i in range(visible)))
    with pytest.raises(CommbenchError) as info:
        cuda_device_for(detect_rank_env(STEP), visible=visible)
    line = str(info.value)
    assert "\n" not in line and "SLURM_LOCALID=3" in line and f"{visible} CUDA device(s)" in line
    assert "CUDA_VISIBLE_DEVICES" in line


def test_create_backend_joins_on_the_chosen_device(monkeypatch):
    """The choice reaches the backend (TorchBackend stubbed: no GPU needed)."""
    from commbench.comm import backends, torch_backend

    seen = {}

    class Stub:
        def __init__(self, name, **kwargs):
            seen.update(kwargs, name=name)

    monkeypatch.setattr(torch_backend, "TorchBackend", Stub)
    monkeypatch.setattr(backends, "cuda_device_count", lambda: 1)
    backends.create_backend("nccl", detect_rank_env({**STEP, "CUDA_VISIBLE_DEVICES": "3"}), 10.0)
    assert seen["device_index"] == 0 and seen["local_rank"] == 3
    backends.create_backend("gloo", detect_rank_env(STEP), 10.0)
    assert seen["device_index"] is None   # gloo runs on the CPU


def _srun_lines() -> list[tuple[str, str]]:
    files = [REPO / "README.md", *sorted((REPO / "sweeps").glob("*.toml")),
             *sorted((REPO / "commbench" / "data" / "sweeps").glob("*.toml")), *sorted((REPO / "docs").glob("*.md"))]
    return [(f"{path.name}:{number}", line) for path in files
            for number, line in enumerate(path.read_text().splitlines(), 1)
            if re.match(r"\s*#?\s*srun\s", line)]   # a command line (in a shell block or a sweep file's comment)


def _option(words: list[str], name: str) -> int | None:
    for i, word in enumerate(words):
        if word == name and i + 1 < len(words):
            return int(words[i + 1])
        if word.startswith(name + "="):
            return int(word.split("=", 1)[1])
    return None


@pytest.mark.parametrize("where,line", _srun_lines())
def test_every_documented_srun_fits_a_node(where, line):
    """Tasks per node x GPUs per task fit a node's GPUs: 4 on an NVL72 tray, 8 on an HGX node (the largest host)."""
    words = shlex.split(line[line.index("srun"):].split("#")[0])
    tasks = _option(words, "--ntasks-per-node")
    per_task, per_node = _option(words, "--gpus-per-task"), _option(words, "--gpus-per-node")
    if tasks is None:
        return
    gpus = per_node if per_node is not None else tasks * (per_task or 0)
    assert 1 <= tasks <= 8 and gpus <= 8, where
    if per_node is not None:
        assert tasks == per_node, where   # one task per GPU, as every command that measures runs
