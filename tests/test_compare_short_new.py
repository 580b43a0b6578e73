"""compare --statistic auto: a run of NEW with fewer per-iteration samples than the low tail needs (bench -n 10)
put every run on the median, unsaid, and a short run appended to a failing NEW passed it (probe PD: s5x3 fails, s5x3
plus one -n 10 run: exit 0). Now refused in one line saying what to do; --statistic median judges it, saying why;
a NEW with no samples at all (an nccl-tests text import) is judged on what both hold, said in the statistic line."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.results.compare import compare
from tests.test_compare import record, write

SIZES = [8 * 4 ** i for i in range(9)]


def _preempted(rng, tag: str, factor: float, num_runs: int, iters: int = 40) -> list:
    """Runs whose iterations are preempted at random (20-80% of them, x2-x30): the median moves wildly between runs,
    the fastest iteration does not (a shared host, README). Every time x `factor`."""
    out = []
    for index in range(num_runs):
        for size in SIZES:
            samples = (50 + size / 1000) * factor * np.exp(np.abs(rng.normal(0, 0.05, iters)))
            hit = rng.random(iters) < rng.uniform(0.2, 0.8)
            samples[hit] *= rng.uniform(2, 30, hit.sum())
            out.append(record(size, samples, run_id=f"{tag}{index}"))
    return out


def _cli(*args):
    return CliRunner().invoke(app, ["compare", *map(str, args)])


def _said(result) -> str:
    return " ".join(result.output.split())


def test_a_short_run_appended_never_turns_a_failure_into_a_pass(tmp_path):
    rng = np.random.default_rng(0)
    base, slow, short = _preempted(rng, "b", 1, 3), _preempted(rng, "n", 3, 3), _preempted(rng, "s", 3, 1, iters=10)
    assert not compare(base, slow, max_regression=0.1).passed   # x3 on the min: fails
    with pytest.raises(CommbenchError, match=r"run 4/4 \(run s0\) holds 10 per-iteration sample"):
        compare(base, slow + short, max_regression=0.1, allow_fewer_iters=True)   # was: every run on the median
    b, mixed = write(tmp_path / "base.jsonl", base), write(tmp_path / "mixed.jsonl", slow + short)
    result = _cli(b, mixed, "--allow-fewer-iters")   # fewer iterations than BASE: refused without it
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(errors) == 1 and "Traceback" not in result.output, result.output
    said = _said(result)
    assert "base's records hold 40" in said and "-n >= 20" in said and "--statistic median" in said, said
    # NEW wholly measured with -n 10: refused the same way (it judged the median, smallest detectable x29)
    only_short = write(tmp_path / "short.jsonl", short)
    assert _cli(b, only_short).exit_code == 2


def test_the_median_when_asked_says_why_and_the_forced_min_says_what_to_do(tmp_path):
    rng = np.random.default_rng(1)
    base, short = _preempted(rng, "b", 1, 3), _preempted(rng, "s", 1, 1, iters=10)
    b, n = write(tmp_path / "base.jsonl", base), write(tmp_path / "short.jsonl", short)
    median = _said(_cli(b, n, "--statistic", "median", "--allow-fewer-iters"))
    assert ("statistic judged: median; median at 9 point(s) as --statistic asks (the new file holds fewer than the 20 "
            "per-iteration samples a record the low tail needs: base 40, new 10)") in median, median
    forced = _cli(b, n, "--statistic", "min")
    assert forced.exit_code == 2 and "measure it with -n >= 20, or judge --statistic median" in _said(forced)


def test_a_new_without_samples_says_what_it_forces(tmp_path):
    """NEW imported from nccl-tests' text log (no per-iteration samples) against a commbench BASE: judged on what both
    hold (here the median), which was disclosed only by a wide smallest-detectable line."""
    rng = np.random.default_rng(2)
    base, new = _preempted(rng, "b", 1, 3), _preempted(rng, "n", 1, 1)
    text_like = [dataclasses.replace(m, iter_times_us=[]) for m in new]
    result = _cli(write(tmp_path / "base.jsonl", base), write(tmp_path / "imported.jsonl", text_like))
    said = _said(result)
    assert result.exit_code == 0, said
    assert ("median at 9 point(s), not the low tail: the new file holds no per-iteration samples (an nccl-tests text "
            "import? its -J file of an -I 1 run keeps them)") in said, said
