"""Figures the README and docs quote of a constant the code applies are that constant (probe AX finding 4: README
quoted the gain-error band as 7.8% MoE / 7.2% dense, 23.3% / 8.9%, where plan applies step.terms' 7.6% / 7.3%,
23.5% / 8.9%). Each test formats the code's value as the text does and looks for the sentence that quotes it, so a
changed constant (or a changed sentence) fails here and names the place to restate."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _text(name: str) -> str:
    return " ".join((ROOT / name).read_text(encoding="utf-8").split())


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.1f}%"


def test_the_gain_error_band_is_what_plan_applies():
    from commbench.planner.step.terms import MODEL_GAIN_MEDIAN_ABS_ERROR as MEDIAN, MODEL_GAIN_P80_ABS_ERROR as P80
    quoted = (f"a tie within its median, {_pct(MEDIAN['moe'])} MoE / {_pct(MEDIAN['dense'])} dense; beyond the 80th "
              f"percentile, {_pct(P80['moe'])} / {_pct(P80['dense'])}, still a prediction to measure")
    assert quoted in _text("README.md"), quoted


def test_the_calibration_prior_is_what_the_fit_applies():
    from commbench.planner.calibrate.regularise import PRIOR_SIGMA, ROW_SIGMA
    quoted = f"a log-space prior: ±{100 * PRIOR_SIGMA:g}% per term against ±{100 * ROW_SIGMA:g}% per run"
    assert quoted in _text("README.md"), quoted


def test_the_repeat_spread_calibrate_names_is_its_threshold():
    from commbench.cli.calibrate import REPEAT_AGREE
    quoted = f"whose tokens/s/GPU are more than {100 * (REPEAT_AGREE - 1):.0f}% apart are named in one warning line"
    assert quoted in _text("README.md"), quoted


def test_a_predicted_tuner_rule_leads_by_the_margin_stated():
    from commbench.workflows.nccl_tuner import PREDICTED_MARGIN
    quoted = f"only where the fastest pair leads by more than the cost model's {100 * PREDICTED_MARGIN:.0f}% error"
    assert quoted in _text("README.md"), quoted


def test_the_gate_false_alarm_budget_is_its_alpha():
    from commbench.results.compare import ALPHA
    readme = _text("README.md")
    for quoted in (f"The {100 * ALPHA:.0f}% false-alarm budget is split",
                   f"Unchanged code then fails the whole comparison at most {100 * ALPHA:.0f}% of the time"):
        assert quoted in readme, quoted


def test_the_transfer_figures_say_which_run_and_step_model_they_are_of():
    """README's `newer_releases.py --transfer all` figures (a fit carried to another GPU) are a measurement of one
    step model, too slow to rerun in the suite (minutes per release): the text names the benchmark, the commit and the
    step model it ran, and says so where that is not the shipped one (probe AX finding 6: the shipped-terms figures
    beside them no longer matched what the script prints)."""
    import re

    from commbench.planner.step.terms import STEP_MODEL
    readme = _text("README.md")
    quoted = re.search(r"\(`python benchmarks/newer_releases.py --transfer all` at commit [0-9a-f]{7,}, step model "
                       r"(\S+?),? (not re-measured since)?", readme)
    assert quoted, "the transfer figures name no benchmark, commit and step model"
    assert quoted.group(1) == STEP_MODEL or quoted.group(2), quoted.group(0)


def test_the_tuner_selection_widening_quoted_is_the_formula():
    """docs/nccl-tuner.md quotes z(1 - 0.025/K) / z(0.975) for 2, 18 and 54 combinations; it said 1.71 for 54, where
    the formula (results/nccl_tuner.selection_widening; statistics.NormalDist agrees) gives 1.690 (probe AX finding 5)."""
    from statistics import NormalDist

    from commbench.results.nccl_tuner import selection_widening
    z = NormalDist().inv_cdf
    for k in (2, 18, 54):
        assert selection_widening(k) == pytest.approx(z(1 - 0.025 / k) / z(0.975), rel=1e-6)
    quoted = (f"z(1 - 0.025/K) / z(0.975) -- {selection_widening(2):.2f} for 2 combinations, "
              f"{selection_widening(18):.2f} for 18, {selection_widening(54):.2f} for 54 --")
    assert quoted in _text("docs/nccl-tuner.md"), quoted
