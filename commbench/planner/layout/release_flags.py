"""Which emitted Megatron-LM flags a table release's own parse_args refuses.

The arguments are Megatron-LM core_v0.16.1's (emit/megatron.megatron_target); a release's container runs its own
Megatron-LM (commbench/data/recipes.json megatron_core), whose arguments.py adds, drops and changes options.
commbench/data/megatron-release-flags.json (tools/megatron_release_flags.py, from each release's tree) records per
release the core_v0.16.1 options it lacks and those whose nargs / choices differ. One rule, from the flags: an emitted
option the release lacks, or whose values its spec does not take, is refused there (argparse: "unrecognized
arguments" / "invalid choice"), and the plan names each one (release_core_note).
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


__all__ = ["TARGET_CORE", "argv_values", "lacking", "refused_flags", "release_core"]
