"""calibrate/gain_error.py: the MEASURED error of a predicted gain between two published layouts of one run, and
the band `plan` states from it (step.terms.MODEL_GAIN_MEDIAN_ABS_ERROR)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from commbench.planner.calibrate.gain_error import GainError, gain_error_quantile, layout_pair_errors, median_gain_error
from commbench.planner.calibrate.published import published_runs
from commbench.planner.step.terms import MODEL_GAIN_MEDIAN_ABS_ERROR, MODEL_GAIN_P80_ABS_ERROR

TABLES = Path(__file__).resolve().parents[1] / "benchmarks" / "data"


def _run(predicate):
    return next(r for r in published_runs() if r.layout is not None and predicate(r.layout))


def test_a_pair_is_two_structures_of_one_run_counted_once_and_moves_with_the_published_gain():
    """A published gain moved by a factor k one way or the other moves the pair's error by log k (up, one of the
    two ways); the same structure again (another release of it) is no pair, and a repeated pair counts once."""
    run = _run(lambda lay: lay.tp == 1 and lay.mbs == 1)
    other = dataclasses.replace(run.layout, mbs=2)
    base = layout_pair_errors([run, dataclasses.replace(run, layout=other)])
    assert len(base) == 1 and base[0].moe == run.model.is_moe
    published = float(run.row["tokens_per_s_per_gpu"])
    moved = [layout_pair_errors([run, dataclasses.replace(
        run, layout=other, row=dict(run.row, tokens_per_s_per_gpu=published * k))])[0].error for k in (1.25, 0.8)]
    assert max(moved) == pytest.approx(base[0].error + np.log(1.25), rel=1e-6)   # |x -+ log k| = |x| + log k
    again = layout_pair_errors([run, run, dataclasses.replace(run, layout=other), dataclasses.replace(run, layout=other)])
    assert len(again) == 1
    assert layout_pair_errors([run, run]) == []           # one structure: nothing to compare


def test_median_per_family_falls_back_to_every_pair():
    pairs = [GainError(error=e, moe=True, model="m", releases=("a", "b")) for e in (0.1, 0.3, 0.05)]
    assert median_gain_error(pairs) == {"moe": pytest.approx(0.1), "dense": pytest.approx(0.1)}


def test_the_stated_gain_band_is_what_the_shipped_tables_measure():
    """The band `plan` prints (MODEL_GAIN_MEDIAN_ABS_ERROR) is the median error of a predicted gain on every pair
    of published layouts in the calibration, held-out GB300 and newer-release tables, with the shipped terms: a
    change of the step model that moves it must restate it."""
    runs = published_runs()
    for table in ("heldout-gb300-runs.json", "newer-release-runs.json"):
        runs += published_runs(tuple(json.loads((TABLES / table).read_text())))
    pairs = layout_pair_errors(runs)
    assert sum(q.moe for q in pairs) >= 30 and sum(not q.moe for q in pairs) >= 5
    measured = median_gain_error(pairs)
    p80 = gain_error_quantile(pairs, 0.8)
    for family in ("moe", "dense"):
        assert MODEL_GAIN_MEDIAN_ABS_ERROR[family] == pytest.approx(measured[family], abs=0.0015), family
        assert MODEL_GAIN_P80_ABS_ERROR[family] == pytest.approx(p80[family], abs=0.0015), family
        assert MODEL_GAIN_P80_ABS_ERROR[family] >= MODEL_GAIN_MEDIAN_ABS_ERROR[family]


def test_a_quantile_of_the_gain_error_is_per_family_and_the_median_is_its_half():
    pairs = [GainError(error=e, moe=True, model="m", releases=("a", "b")) for e in (0.1, 0.2, 0.3, 0.4, 0.5)]
    pairs += [GainError(error=0.05, moe=False, model="d", releases=("a", "b"))]
    assert gain_error_quantile(pairs, 0.8)["moe"] == pytest.approx(0.42)
    assert gain_error_quantile(pairs, 0.8)["dense"] == pytest.approx(0.05)
    assert median_gain_error(pairs) == gain_error_quantile(pairs, 0.5)
