"""What changed between the sweep a results file holds and the one a --resume launches, in words: the refusal of
another sweep names its settings, file -> launch (resume.check_resume_identity), not two identity hashes alone."""

from __future__ import annotations

import json

from commbench.results.records import RunHeader


CHANGES_SHOWN = 4


def identity_changes(header: RunHeader, launched: list[tuple[list[dict], int, str]]) -> str:
    """'; changed (file -> this launch): all_reduce iters 20 -> 30, world size (--nproc) 2 -> 4', from the file's
    header: its world size and backend, and its entries where it records them (`sweep_entries`, since 2026-12-07;
    before, said unknown). Of several passes (tuning combinations), the one differing least."""
    best: list[str] | None = None
    for entries, world_size, backend in launched:
        changes = [f"world size (--nproc) {header.world_size} -> {world_size}"] * (header.world_size != world_size)
        changes += [f"backend {header.backend} -> {backend}"] * (header.backend != backend)
        if header.sweep_entries is not None:
            changes += entry_changes(header.sweep_entries, entries)
        if best is None or len(changes) < len(best):
            best = changes
    assert best is not None
    if header.sweep_entries is None:
        best.append("the entries' settings are not in the file's header (written before commbench recorded them): "
                    "which of them changed cannot be said")
    if not best:
        return ""
    shown = ", ".join(best[:CHANGES_SHOWN]) + (f" (+{len(best) - CHANGES_SHOWN} more)" if len(best) > CHANGES_SHOWN else "")
    return f"; changed (file -> this launch): {shown}"


def _flat(values: dict) -> dict[str, object]:
    """An entry's settings by the sweep file's keys (its params' keys at top level, as a [[run]] table gives them),
    in_place/out_of_place as measured (schema.measured_placement): a header written before identity_entries
    recorded them so holds the flags as typed, and all_reduce's default (false, false) is its `in_place = true`."""
    from commbench.errors import CommbenchError
    from commbench.sweep.schema import measured_placement

    from commbench.sweep.resume import moe_defaults_left_out

    flat = {k: v for k, v in values.items() if k != "params"}
    params = values.get("params") if isinstance(values.get("params"), dict) else {}
    flat.update(moe_defaults_left_out(str(flat.get("collective")), params))   # a default written out is no change
    if isinstance(flat.get("in_place"), bool) and isinstance(flat.get("out_of_place"), bool):
        try:
            flat["in_place"], flat["out_of_place"] = measured_placement(str(flat.get("collective")), flat["in_place"],
                                                                        flat["out_of_place"])
        except (CommbenchError, KeyError, ValueError):   # a collective this version does not know: as recorded
            pass
    return flat


def entry_changes(theirs: list[dict], ours: list[dict]) -> list[str]:
    """What differs between the file's entries and this launch's (identity_entries): an entry of either side not on
    the other is paired with the other side's entry of its collective that differs in fewest settings, each such
    setting named with both values ('moe_all_to_all seed 1 -> 2'); an entry left unpaired is named as added or
    removed."""
    left = [_flat(e) for e in theirs]
    mine = [_flat(e) for e in ours]
    for values in list(mine):
        if values in left:
            left.remove(values)
            mine.remove(values)

    out = []
    for values in mine:
        def differing(other: dict) -> list[str]:
            return [k for k in sorted(set(other) | set(values)) if other.get(k) != values.get(k)]

        same = [e for e in left if e.get("collective") == values.get("collective")]
        if not same:
            out.append(f"an entry ({values.get('collective')}) the file's sweep lacks")
            continue
        other = min(same, key=lambda e: len(differing(e)))
        left.remove(other)
        out += [f"{values.get('collective')} {k} {_shown(other.get(k))} -> {_shown(values.get(k))}"
                for k in differing(other)]
    return out + [f"the file's entry ({e.get('collective')}) this sweep lacks" for e in left]


def _shown(value) -> str:
    text = "default" if value is None else value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
