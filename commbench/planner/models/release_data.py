"""The recipe table's releases and the megatron-core each runs, read from the shipped data (commbench.data): what the
model stage needs to cite a release's megatron-core in an hf: refusal (hf_core_rules) without importing the layout
stage (tests/test_layering.py); layout/release_flags.release_core is this one."""

from __future__ import annotations

import re

from commbench.data.reference import megatron_release_flags_json, recipes_json


def release_version(release: str) -> tuple[int, ...]:
    """'26.02.01' -> (26, 2, 1): how releases order."""
    return tuple(int(p) for p in release.split("."))


def table_releases() -> tuple[str, ...]:
    """The recipe table's releases, oldest first (layout/recipes.releases)."""
    return tuple(sorted(recipes_json()["releases"], key=release_version))


def release_core(release: str) -> tuple[str, str] | None:
    """(the Megatron-LM ref, the megatron-core version) `release` runs, or None where the data has no such release. The
    version is the recipe table's (recipes.json, the one source the step model's version rules read too)."""
    data = megatron_release_flags_json()["releases"].get(release)
    table = recipes_json()["releases"].get(release)
    return None if data is None or table is None else (data["ref"], table["megatron_core"]["version"])


def stand_in_release(release: str | None) -> str:
    """The table release a plan for `release` runs: the newest with none (the plan's default), a table release itself,
    else the newest table release not newer than it; ValueError for one older than the table or not a release name
    (`plan` and `tune` refuse those before any model is read). The one copy of that rule: layout/recipes.resolve_release
    calls it (and turns the refusal into its note)."""
    known = table_releases()
    if release is None:
        return known[-1]
    if release in known:
        return release
    if not re.fullmatch(r"\d+(\.\d+)*", release or ""):
        raise ValueError(f"not a release name: {release!r}")
    older = [r for r in known if release_version(r) <= release_version(release)]
    if not older:
        raise ValueError(f"release {release!r} is older than the recipe table ({known[0]} on)")
    return older[-1]


def core_version_key(version: str) -> tuple[int, int, int]:
    """A megatron-core version ('0.16.0rc0', '0.14', '0.19.0') as (major, minor, patch); an rc counts as its release."""
    found = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    assert found, version
    return int(found[1]), int(found[2]), int(found[3] or 0)
