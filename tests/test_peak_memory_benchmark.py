"""benchmarks/peak_memory.py reads each published peak in the unit its source logs: Megatron-Bridge's memory log is
decimal GB (training/utils/train_utils.py report_memory, 067f987:1204: torch's bytes / 1.0e9, 5 significant digits),
whatever a card or skill calls it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import peak_memory  # noqa: E402


def test_every_row_gives_one_unit_and_the_bridge_log_figures_are_decimal_gb():
    rows = json.loads(peak_memory.ROWS.read_text())
    assert all(("published_gb" in row) != ("published_gib" in row) for row in rows)
    # every row's source is a Megatron-Bridge run from v0.2.0 on: its log's GB
    assert all("published_gb" in row for row in rows)
    qwen_alltoall = next(row for row in rows if "alltoall" in row["name"] and "Qwen3-30B" in row["name"])
    assert peak_memory.published_gib(qwen_alltoall) == pytest.approx(61.351e9 / 2 ** 30)   # 57.14 GiB


def test_a_row_with_both_units_or_neither_is_refused():
    with pytest.raises(ValueError, match="exactly one of published_gb"):
        peak_memory.published_gib({"name": "x", "published_gb": 1.0, "published_gib": 1.0})
    with pytest.raises(ValueError, match="neither"):
        peak_memory.published_gib({"name": "x"})
    assert peak_memory.published_gib({"name": "x", "published_gib": 2.0}) == 2.0
