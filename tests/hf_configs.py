"""The Hugging Face configs under tests/data/hf, and one of them edited as a test needs it."""

from __future__ import annotations

import json
from pathlib import Path

HF = Path(__file__).parent / "data" / "hf"


def edited_config(tmp_path: Path, folder: str, drop=(), **changes) -> str:
    """tests/data/hf/FOLDER/config.json with `changes` set and the `drop` keys removed, written to tmp_path; the
    hf: model name that plans it."""
    raw = json.loads((HF / folder / "config.json").read_text())
    raw.update(changes)
    for key in drop:
        raw.pop(key)
    (tmp_path / "config.json").write_text(json.dumps(raw))
    return f"hf:{tmp_path}"
