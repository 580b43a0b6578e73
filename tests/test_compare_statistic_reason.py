"""compare --json says why it judged the statistic it judged (noise.statistic_reason): the low tail where both files
hold the samples, what forced another (an nccl-tests text import holds no samples: the median both hold), or
--statistic as asked. Before, --json held only the statistic's name."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
from typer.testing import CliRunner

from commbench.cli.app import app
from tests.test_compare import record, write

SIZES = [1024 * 8 ** i for i in range(4)]


def _runs(rng, tag: str, num_runs: int) -> list:
    return [record(size, (50 + size / 1000) * np.exp(np.abs(rng.normal(0, 0.05, 40))), run_id=f"{tag}{index}")
            for index in range(num_runs) for size in SIZES]


def _reason(tmp_path, base, new, *args) -> str:
    result = CliRunner().invoke(app, ["compare", write(tmp_path / "base.jsonl", base),
                                      write(tmp_path / "new.jsonl", new), "--json", *args])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)["noise"]["statistic_reason"]


def test_the_low_tail_says_why(tmp_path):
    rng = np.random.default_rng(0)
    reason = _reason(tmp_path, _runs(rng, "b", 2), _runs(rng, "n", 1))
    assert reason == ("min at 4 point(s): auto judges the low tail where every record of a point on both sides holds "
                      ">= 20 per-iteration samples"), reason


def test_an_import_without_samples_says_what_forced_the_median(tmp_path):
    rng = np.random.default_rng(1)
    imported = [dataclasses.replace(m, iter_times_us=[]) for m in _runs(rng, "i", 1)]
    reason = _reason(tmp_path, _runs(rng, "b", 2), imported)
    assert reason.startswith("median at 4 point(s), not the low tail: the new file holds no per-iteration samples (an "
                             "nccl-tests text import?"), reason


def test_as_asked(tmp_path):
    rng = np.random.default_rng(2)
    reason = _reason(tmp_path, _runs(rng, "b", 2), _runs(rng, "n", 1), "--statistic", "p10")
    assert reason == "p10 at 4 point(s) as --statistic asks", reason
