"""Which figures a report folder's README.md belongs with: each report lists the files it drew on the last line
of its README.md (an HTML comment, unseen when rendered), so the next report into the folder removes those of
them it does not draw again (a collective no longer in the data, the SVGs of an earlier --svg) instead of leaving
stale plots beside the new README. Files the list does not name (the user's own) are never touched."""

from __future__ import annotations

import json
from pathlib import Path

FIGURES_LINE = "<!-- commbench report figures: "


def figures_line(figures: list[Path]) -> str:
    return f"{FIGURES_LINE}{json.dumps(sorted(f.name for f in figures))} -->"


def earlier_figures(readme: Path) -> set[str]:
    """The file names the README.md an earlier report wrote lists (none for a README without the line)."""
    try:
        lines = readme.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return set()
    for line in reversed(lines[-3:]):
        if line.startswith(FIGURES_LINE) and line.endswith(" -->"):
            try:
                names = json.loads(line[len(FIGURES_LINE):-len(" -->")])
            except ValueError:
                return set()
            # a bare file name in the folder, never a path out of it
            return {n for n in names if isinstance(n, str) and n == Path(n).name and n not in ("", ".", "..")}
    return set()


def remove_stale_figures(out: Path, earlier: set[str], figures: list[Path]) -> list[str]:
    """Remove the earlier report's figures this one did not draw; their names, sorted."""
    drawn = {f.name for f in figures}
    removed = []
    for name in sorted(earlier - drawn - {"README.md"}):
        path = out / name
        if path.is_file() and not path.is_symlink():
            path.unlink()
            removed.append(name)
    return removed
