"""The files a plan was made from (a fitted profile `--system FILE`, a `--calibration FILE`) as plan.json records them,
and where `verify-plan` finds them again.

plan.json's inputs.system / inputs.calibration hold the path as it was typed, relative to the directory `plan` ran
in: `plan --system fab.json -O out/` then `cd / && verify-plan /abs/out/plan.json` could not read fab.json. Written
into a plan folder, each such input also records its absolute path and its path from the plan's folder
(inputs.input_files), as a fitted profile records its results files (costmodel/profile.py `located`); verify-plan
tries the path from the plan's folder, the absolute one, then the path as given from here and beside the plan, and
says which it read.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from commbench.files import path_from, recorded_places

# plan.json inputs that name a file (when not the value that names none)
FILE_INPUTS = ("system", "calibration")


def _names_file(field: str, value: Any) -> bool:
    if not isinstance(value, str) or not value:
        return False
    if field == "calibration":
        return value != "shipped"
    from commbench.costmodel import preset_names

    return value not in preset_names()


def record_input_files(doc: dict[str, Any], folder: str | Path) -> None:
    """Set doc's inputs.input_files: per file input, {path (as given), absolute, from_plan (from `folder`)}."""
    inputs = doc["inputs"]
    files = {}
    for field in FILE_INPUTS:
        value = inputs.get(field)
        if not _names_file(field, value):
            continue
        absolute = os.path.abspath(value)
        entry = {"path": value, "absolute": absolute}
        relative = path_from(absolute, folder)
        if relative is not None:
            entry["from_plan"] = relative
        files[field] = entry
    if files:
        inputs["input_files"] = files
    else:
        inputs.pop("input_files", None)


def input_places(doc: dict[str, Any], plan_file: str | Path, field: str) -> list[tuple[Path, str]]:
    """Where to look for a plan's file input, first found wins, each with how it was found: from the plan's folder,
    the absolute path recorded, as given from here, beside the plan (a plan written before input_files: the last two)."""
    folder = Path(plan_file).parent
    value = doc["inputs"][field]
    entry = (doc["inputs"].get("input_files") or {}).get(field)
    entry = entry if isinstance(entry, dict) and entry.get("path") == value else {"path": value}
    return recorded_places(entry, folder, "from_plan", "plan")


def resolve_input_files(doc: dict[str, Any], plan_file: str | Path) -> tuple[dict[str, Any], list[str]]:
    """doc with each file input replaced by the path found (input_places), and one line per input read from
    elsewhere than the path as given, from here, saying which was read. A fitted profile (inputs.system) found nowhere is refused in one line (exit 2): its predictions are the
    plan's. A calibration file found nowhere is left as given: verify-plan flags it and predicts with the terms the
    plan recorded (workflows/verify.plan_context)."""
    from commbench.errors import CommbenchError

    inputs, lines = dict(doc["inputs"]), []
    for field in FILE_INPUTS:
        if not _names_file(field, inputs.get(field)):
            continue
        places = input_places(doc, plan_file, field)
        found = next(((path, how) for path, how in places if path.is_file()), None)
        if found is None:
            if field == "system":
                tried = "; ".join(f"{path} ({how})" for path, how in places)
                raise CommbenchError(f"plan field 'inputs.system'={inputs[field]!r} is a fabric profile found nowhere "
                                     f"here: tried {tried}; put it at one of those paths, or plan again")
            continue
        path, how = found
        if os.path.abspath(path) != os.path.abspath(inputs[field]):   # not the path as given, from here: said
            lines.append(f"plan inputs.{field} {inputs[field]!r}: read {path} ({how})")
        inputs[field] = str(path)
    return {**doc, "inputs": inputs}, lines
