"""Which emitted Megatron-LM flags a table release's own parse_args refuses.

The arguments are Megatron-LM core_v0.16.1's (emit/megatron.megatron_target); a release's container runs its own
Megatron-LM (commbench/data/recipes.json megatron_core), whose arguments.py adds, drops and changes options.
commbench/data/megatron-release-flags.json (tools/megatron_release_flags.py, from each release's tree) records per
release the core_v0.16.1 options it lacks and those whose nargs / choices differ. One rule, from the flags: an emitted
option the release lacks, or whose values its spec does not take, is refused there (argparse: "unrecognized
arguments" / "invalid choice"), and the plan names each one (release_core_note).

What a release's Megatron-LM cannot build is refused before the search (check_model_in_release, as a precision its
megatron-core has no flags for is: recipes.check_precision_in_release), for plan, tune and verify-plan: a hybrid
model whose --hybrid-override-pattern holds a layer symbol the release's hybrid allocator does not take (the data's
hybrid_symbols, read from each tree's Symbols class). MoE layers in hybrid models ('E') came with Megatron-LM
9a1c0d05c9 ("Add MoE layer type to hybrid models (#2259)"), first in core_v0.16.0: 25.09 (core_v0.14.0) and 25.11
(0d8e0714, megatron-core 0.16.0rc0) know M, * and - only (mamba_hybrid_layer_allocation.py:18-21, raising "'E' is
not one of ..." at :71-72), and their validate_args asserts "Model Spec must be None when using MoEs" (core_v0.14.0
arguments.py:940-941, 0d8e0714 arguments.py:1052-1053), so no flag edit makes Nemotron-3-Nano launch there.
"""

from __future__ import annotations

from commbench.data.reference import megatron_release_flags_json

TARGET_CORE = "0.16.1"   # the megatron-core the arguments are checked against (megatron_target)


def argv_values(args: list[str]) -> list[tuple[str, list[str]]]:
    """A Megatron argv as [(option, the values after it)] ([] for a store_true option)."""
    out: list[tuple[str, list[str]]] = []
    for token in args:
        if token.startswith("--"):
            out.append((token, []))
        elif out:
            out[-1][1].append(token)
    return out


def _why(spec: list, values: list[str]) -> str | None:
    """Why argparse refuses `values` after an option of spec [nargs, choices, takes_value], or None."""
    nargs, choices, _ = spec
    count = {None: (1, 1), 0: (0, 0), "?": (0, 1), "*": (0, None), "+": (1, None)}.get(
        nargs, (nargs, nargs) if isinstance(nargs, int) else (0, None))
    if len(values) < count[0] or (count[1] is not None and len(values) > count[1]):
        want = ("no value" if count == (0, 0) else "one value" if count == (1, 1) else
                f"at most {count[1]} value(s)" if count[1] is not None else "one or more values")
        return f"takes {want}" + (f" of {', '.join(choices)}" if choices else "")
    bad = [v for v in values if choices is not None and v not in choices]
    return f"{' '.join(bad)} not among its choices {', '.join(choices)}" if bad else None


def refused_flags(args: list[str], release: str) -> list[str]:
    """Each emitted option `release`'s parse_args refuses, as 'OPTION VALUES (why)'; [] where it takes them all or
    the release is not in the data (a release the table lacks is read as its stand-in before this)."""
    data = megatron_release_flags_json()["releases"].get(release)
    if data is None:
        return []
    lacks, differs = set(data["lacks"]), data["differs"]
    out = []
    for option, values in argv_values(args):
        why = "no such option" if option in lacks else _why(differs[option], values) if option in differs else None
        if why:
            out.append(" ".join([option, *values]) + f" ({why})")
    return out


def lacking(release: str) -> set[str]:
    """The core_v0.16.1 options `release`'s parse_args has not (empty where the release is not in the data)."""
    data = megatron_release_flags_json()["releases"].get(release)
    return set(data["lacks"]) if data is not None else set()


def release_core(release: str) -> tuple[str, str] | None:
    """(the Megatron-LM ref, the megatron-core version) `release` runs, or None where the data has no such release. The
    version is the recipe table's (recipes.json, the one source the step model's version rules read too)."""
    from commbench.planner.layout.recipes import recipes_json_releases
    data = megatron_release_flags_json()["releases"].get(release)
    table = recipes_json_releases().get(release)
    return None if data is None or table is None else (data["ref"], table["megatron_core"]["version"])


# Each hybrid layer symbol: what it builds and the first Megatron-LM tag whose allocator takes it (the trees'
# Symbols classes: tools/megatron_release_flags.py hybrid_symbols).
HYBRID_SYMBOLS = {
    "M": ("Mamba layers", "core_r0.8.0"),
    "*": ("attention layers", "core_r0.8.0"),
    "-": ("MLP layers", "core_r0.8.0"),
    "E": ("MoE layers in a hybrid model", 'core_v0.16.0 (Megatron-LM 9a1c0d05c9, "Add MoE layer type to hybrid models '
          '(#2259)")'),
}


def release_cannot_build(model, release: str) -> str | None:
    """Why the Megatron-LM `release` runs cannot build `model` (a ModelSpec), or None (also where the data has no
    such release): a hybrid pattern symbol its allocator does not take (see the module docstring)."""
    data = megatron_release_flags_json()["releases"].get(release)
    if data is None or not getattr(model, "layer_pattern", ""):
        return None
    have = data["hybrid_symbols"]
    missing = sorted(set(model.layer_pattern) - set(have))
    if not missing:
        return None
    what = "; ".join(f"'{c}' ({HYBRID_SYMBOLS[c][0]}, first in {HYBRID_SYMBOLS[c][1]})" if c in HYBRID_SYMBOLS
                     else f"'{c}'" for c in missing)
    return (f"its hybrid layer allocator (megatron/core/ssm/mamba_hybrid_layer_allocation.py Symbols) takes "
            f"{', '.join(have)} only, and {model.name}'s --hybrid-override-pattern holds {what}")


def check_model_in_release(model, release: str, asked: str | None = None, *, field: str = "--software") -> None:
    """Refuse, in one line naming `field` (the release's option), the release's megatron-core and Megatron-LM, what
    it cannot build of `model` (release_cannot_build) and the releases that build it, a plan of `model` for the table
    release `release` (resolved: a release the table lacks reads its stand-in's; `asked`: as given)."""
    from commbench.errors import invalid
    from commbench.planner.layout.recipes import normalised_release, releases
    why = release_cannot_build(model, release)
    if why is None:
        return
    ref, version = release_core(release)
    name = normalised_release(asked) if asked is not None else release
    read = "" if name == release else f" (read as {release}, the newest table release before it)"
    building = [r for r in releases() if release_cannot_build(model, r) is None]
    raise invalid(field, name, f"release {name}{read} runs megatron-core {version} (Megatron-LM {ref[:12]}), which "
                  f"cannot build {model.name}: {why}; the releases that build it: "
                  + (", ".join(building) + " (or newer)" if building else "none in the table"))


__all__ = ["TARGET_CORE", "HYBRID_SYMBOLS", "argv_values", "check_model_in_release", "lacking", "refused_flags",
           "release_core", "release_cannot_build"]
