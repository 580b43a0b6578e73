"""The sweep files shipped with commbench (commbench/data/sweeps; `sweeps/` in the source tree links there),
so `commbench sweep ci-small` works from any directory."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from commbench.errors import CommbenchError


def shipped_sweeps() -> list[str]:
    folder = resources.files("commbench.data").joinpath("sweeps")
    return sorted(entry.name[:-5] for entry in folder.iterdir() if entry.name.endswith(".toml"))


def sweep_path(name: str) -> str:
    """`name` when it is a file (or not a shipped name), else the shipped file of that name, e.g. `ci-small`."""
    if Path(name).exists():
        return name
    if name.removesuffix(".toml") in shipped_sweeps():
        return str(resources.files("commbench.data").joinpath("sweeps", f"{name.removesuffix('.toml')}.toml"))
    raise CommbenchError(f"sweep file {name!r} does not exist: give a TOML file or a shipped sweep "
                         f"({', '.join(shipped_sweeps())})")
