"""Every leaf command of commbench's typer app, named as typed ("nccl-tuner", "import nccl-tests"): for tests
that walk every command's parameters."""

from __future__ import annotations

from collections.abc import Iterator


def leaf_commands(group, prefix: str = "") -> Iterator[tuple[str, object]]:
    """(name as typed, click command) of every command under `group` (typer.main.get_command(app))."""
    for name, cmd in getattr(group, "commands", {}).items():
        if getattr(cmd, "commands", None):
            yield from leaf_commands(cmd, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", cmd
