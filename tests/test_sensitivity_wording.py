"""The default tune's sensitivity printed '- With half the scale-up (NVLink) bandwidth, TP1 PP2 VP16 EP128 ... overtakes
the plan by 0.0% (the plan changes -8.7% to 4,384)': a margin of 0.003% rounded to nothing beside 'overtakes'."""

from __future__ import annotations

from commbench.planner.search.explain import sensitivity_lines


def _row(margin_pct: float) -> dict:
    return {"scenario": "half the scale-up (NVLink) bandwidth", "winner_tokens_per_s_per_gpu": 4383.9,
            "winner_change_pct": -8.7, "best_index": 2, "best_layout": "TP1 PP2 VP16", "best_tokens_per_s_per_gpu": 4384.1,
            "best_margin_pct": margin_pct, "decision_changes": True}


def test_a_margin_below_a_tenth_of_a_percent_is_not_printed_as_zero():
    [line] = sensitivity_lines([_row(0.0035)], "TP1 PP2 VP4")
    assert "overtakes the plan by less than 0.1%" in line and "by 0.0%" not in line


def test_a_larger_margin_is_printed_as_before():
    [line] = sensitivity_lines([_row(6.339)], "TP1 PP2 VP4")
    assert "overtakes the plan by 6.3% (the plan changes -8.7% to 4,384)" in line
