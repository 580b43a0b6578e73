"""recipes.resolve_release (layout stage) and release_data.stand_in_release (model stage, which may not import the
layout stage) held two copies of "the newest table release not newer than X" with different refusals (session 45):
resolve_release now calls stand_in_release. Both behaviours are pinned here, and that they agree."""

from __future__ import annotations

import pytest

from commbench.planner.layout import recipes
from commbench.planner.layout.recipes import newest_release, releases, resolve_release
from commbench.planner.models.release_data import stand_in_release


def test_resolve_release_reads_the_newest_table_release_not_newer_and_says_why_not():
    assert resolve_release("26.06.01") == ("26.06.01", "")
    assert resolve_release("NeMo 26.06.02")[0] == "26.06.01"
    stand, note = resolve_release("26.10")
    assert stand == newest_release() and f"newest {newest_release()}" in note and "26.10 is not in" in note
    assert resolve_release("25.01") == (None, f"25.01 is older than the recipe table's oldest release "
                                              f"({releases()[0]}): no recipe")
    assert resolve_release("26.13")[0] is None and "not a NeMo release name" in resolve_release("26.13")[1]


def test_stand_in_release_reads_the_same_and_refuses_with_a_value_error():
    assert stand_in_release(None) == newest_release()
    assert stand_in_release("26.06.02") == "26.06.01" and stand_in_release("26.10") == newest_release()
    with pytest.raises(ValueError, match="older than the recipe table"):
        stand_in_release("25.01")
    with pytest.raises(ValueError, match="not a release name"):
        stand_in_release("latest")
    for name in ("25.09", "25.10", "26.02.01", "26.03", "26.04.02", "26.07", "27.01"):
        assert resolve_release(name)[0] == stand_in_release(name), name


def test_resolve_release_reads_the_model_stages_rule(monkeypatch):
    # one copy of the rule: resolve_release follows stand_in_release (at main it had its own)
    monkeypatch.setattr(recipes, "stand_in_release", lambda release: "25.11")
    assert resolve_release("26.10")[0] == "25.11"
