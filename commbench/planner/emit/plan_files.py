"""The files `plan --out` and `tune` write into a plan folder, under the output lock (files.claim_output):
plan.json, megatron_args.txt, launch.env and the TorchTitan file(s). A file of one of those names that
commbench did not write (no marker in its first 4 KiB) is refused unless --force."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from commbench.planner.emit.plan import PLAN_FORMAT, plan_json_text, torchtitan_text
from commbench.planner.emit.torchtitan_config import MODULE_FILE

__all__ = ["PLAN_FILE_MARKERS", "PLAN_FILE_NAMES", "check_plan_folder", "plan_files", "remove_plan_files", "write_plan_files"]

# What each plan file starts with when commbench wrote it (files.claim_output looks in its first 4 KiB).
PLAN_FILE_MARKERS = {"plan.json": f'"{PLAN_FORMAT}"', "megatron_args.txt": "--num-layers ",
                     "launch.env": "# commbench plan", "torchtitan_args.txt": "--parallelism.",
                     "torchtitan.toml": "# commbench plan"}


_ALL_MARKERS = {**PLAN_FILE_MARKERS, MODULE_FILE: "commbench plan"}
# Every name a plan folder's writer may write or delete (an earlier plan's files go): none may be an input
PLAN_FILE_NAMES = tuple(_ALL_MARKERS)


def plan_files(doc: dict[str, Any]) -> dict[str, str]:
    """Name -> text of the files a plan folder gets: plan.json, megatron_args.txt, launch.env and the
    TorchTitan file (torchtitan_args.txt for 0.3, torchtitan.toml for 0.2; none when refused)."""
    files = {"plan.json": plan_json_text(doc)}
    meg = doc["megatron"]
    if "refused" not in meg:
        files["megatron_args.txt"] = shlex.join(meg["args"]) + "\n"
        files[meg["launch_env_file"]] = meg["launch_env_text"]
    tt = doc["torchtitan"]
    if "refused" not in tt:
        files["torchtitan_args.txt" if "config" in tt else "torchtitan.toml"] = torchtitan_text(tt)
        if "config_module" in tt:  # a generated TorchTitan config function (emit/torchtitan_config.py)
            files[tt["config_module"]["file"]] = tt["config_module"]["text"]
    return files


def check_plan_folder(folder: str | Path, *, force: bool = False, option: str = "--out") -> None:
    """Refuse, before any work, a plan folder whose plan files another run is writing or that hold
    files of those names commbench did not write (unless `force`)."""
    from commbench.files import claim_output

    for name, marker in _ALL_MARKERS.items():
        claim_output(Path(folder) / name, option, marker=marker, what=f"plan file ({name})", force=force).release()


def remove_plan_files(folder: str | Path, *, keep: tuple[str, ...] = (), option: str = "--out") -> list[str]:
    """Delete the plan files in `folder` that commbench wrote (their marker in the first 4 KiB), except
    `keep`, under the output lock: an earlier plan's megatron_args.txt or TorchTitan file is never left
    beside a new plan. A file of those names commbench did not write is kept. Returns the names removed."""
    from commbench.files import claim_output, remove_if_written

    removed = []
    for name, marker in _ALL_MARKERS.items():
        if name not in keep and (Path(folder) / name).is_file():
            with claim_output(Path(folder) / name, option, marker=marker, what=f"plan file ({name})", force=True):
                removed += [name] if remove_if_written(Path(folder) / name, marker) else []
    return removed


def write_plan_files(doc: dict[str, Any], folder: str | Path, *, force: bool = False,
                     option: str = "--out") -> list[str]:
    """Write plan_files(doc) into `folder` under the output lock (files.claim_output): another run
    writing them, or a file of that name commbench did not write, is refused in one line before
    anything is written, unless `force`. Plan files an earlier plan wrote there that this one has not
    and the old plan.json are deleted first, and plan.json is written last: a
    folder with a plan.json holds that plan's files only. Returns the names written."""
    from commbench.files import claim_output, remove_if_written, write_output

    from commbench.planner.emit.input_paths import record_input_files

    folder = Path(folder)
    record_input_files(doc, folder)   # a relative --system/--calibration found again from another directory
    files = plan_files(doc)
    folder.mkdir(parents=True, exist_ok=True)
    locks = []
    try:
        for name in files:
            marker = PLAN_FILE_MARKERS.get(name, "commbench plan")
            locks.append(claim_output(folder / name, option, marker=marker, what=f"plan file ({name})", force=force))
        stale = [name for name in _ALL_MARKERS if name not in files and (folder / name).is_file()]
        for name in stale:  # another plan's files: a file commbench did not write is kept
            locks.append(claim_output(folder / name, option, marker=_ALL_MARKERS[name], what=f"plan file ({name})",
                                      force=True))
        # plan.json too: it names the files beside it, so it goes first and comes back last
        for name in [*stale, "plan.json"]:
            remove_if_written(folder / name, _ALL_MARKERS[name])
        for name in sorted(files, key=lambda name: name == "plan.json"):
            write_output(folder / name, files[name], option, marker="", what="", claimed=True)
    finally:
        for lock in locks:
            lock.release()
    return list(files)
