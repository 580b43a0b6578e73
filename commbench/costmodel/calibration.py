"""What a preset's published figures cover, as a fitted profile's measured range (cli/predict.fitted_range) does.

A preset's terms were set on the [[measured]] figures of hardware.toml (checks.PUBLISHED_FIGURES): its own and those
it borrows from other presets (presets.PresetSpec.calibrated_on; scale-out terms are shared, so every preset's
cross-domain figures). A prediction at a group size, domain count and size those figures span is calibrated there,
"borrowed" where only another preset's figures span it, and "extrapolated" where none does: `predict` on
gb200-nvl72 at 1,440 GPUs on 20 racks, and b200-hgx on figures all measured on Hopper, read as calibrated (probe P8).
"""

from __future__ import annotations

from commbench.costmodel.checks import PUBLISHED_FIGURES, PublishedFigure, chosen_pair
from commbench.costmodel.presets import PRESETS
from commbench.data.reference import published_measurements


def calibration_figures(preset: str, collective: str, num_domains: int,
                        algorithm: str | None = None) -> list[PublishedFigure]:
    """The published figures of `collective` on the tier `num_domains` runs on that set `preset`'s terms there;
    with a forced `algorithm`, only those that ran it (NCCL's pick for a figure that forced none)."""
    cross = num_domains > 1
    figures = [f for f in PUBLISHED_FIGURES if f.collective == collective and (f.num_domains > 1) == cross
               and (cross or f.preset == preset or _calibrates(preset, f))]
    if algorithm is not None:   # NCCL's pick for a figure that forced none ('' on the alpha-beta curves: kept)
        figures = [f for f in figures if (f.algorithm or chosen_pair(f).split("/")[0] or algorithm) == algorithm]
    return figures


def _calibrates(preset: str, figure: PublishedFigure) -> bool:
    """Whether `figure` set one of `preset`'s scale-up terms (PresetSpec.calibrated_on: "PRESET" or "PRESET:COLLECTIVE")."""
    return any(entry in (figure.preset, f"{figure.preset}:{figure.collective}") for entry in PRESETS[preset].calibrated_on)


def _source(figure: PublishedFigure) -> str:
    return next((row.get("source", "") for row in published_measurements() if figure.row in row["system"]), "")


def preset_calibration(preset: str, collective: str, group: int, num_domains: int, sizes,
                       algorithm: str | None = None) -> dict:
    """The figures that calibrate a preset's prediction (`figures`, each with its preset and source; `borrowed_from`:
    the other presets among them) and per size (`rows`): `extrapolated` where no figure at this group size and domain
    count spans the size (smallest to largest of one preset's), else `borrowed_from`, the presets whose figures span it
    where `preset`'s own do not ([] where they do)."""
    figures = calibration_figures(preset, collective, num_domains, algorithm)
    spans: dict[str, tuple[int, int]] = {}
    for f in figures:
        if f.group_size == group and f.num_domains == num_domains:
            low, high = spans.get(f.preset, (f.size_bytes, f.size_bytes))
            spans[f.preset] = (min(low, f.size_bytes), max(high, f.size_bytes))
    rows = []
    for size in sizes:
        spanning = sorted(p for p, (low, high) in spans.items() if low <= int(size) <= high)
        rows.append({"extrapolated": not spanning, "borrowed_from": [] if preset in spanning else spanning})
    tier = "scale_out" if num_domains > 1 else "scale_up"
    return {"curve": f"{collective}{f'[{algorithm}]' if algorithm else ''} ({tier})",
            "borrowed_from": sorted({f.preset for f in figures} - {preset}),
            "figures": [{"preset": f.preset, "what": f.what, "group_size": f.group_size, "num_domains": f.num_domains,
                         "size_bytes": f.size_bytes, "busbw_gbps": f.busbw_gbps, "source": _source(f)}
                        for f in figures],
            "rows": rows}


def borrowed_figures(preset: str) -> dict[str, list[str]]:
    """Per other preset, the collectives whose published figures `preset` borrows (scale-up: PresetSpec.calibrated_on;
    scale-out: every preset's cross-domain figures)."""
    out: dict[str, set[str]] = {}
    for f in PUBLISHED_FIGURES:
        if f.preset != preset and (f.num_domains > 1 or _calibrates(preset, f)):
            out.setdefault(f.preset, set()).add(f.collective + (" across domains" if f.num_domains > 1 else ""))
    return {p: sorted(names) for p, names in sorted(out.items())}


def own_figures(preset: str) -> int:
    """How many published figures were measured on `preset` itself."""
    return sum(f.preset == preset for f in PUBLISHED_FIGURES)


def borrowed_statement(preset: str) -> str:
    """One line: how many figures are its own, and which it borrows from which preset."""
    own = own_figures(preset)
    borrowed = "; ".join(f"{p} ({', '.join(names)})" for p, names in borrowed_figures(preset).items())
    mine = f"{own} published figure(s) measured on it" if own else "no published figure measured on it"
    return f"{mine}; borrowed from {borrowed}" if borrowed else mine


def figures_summary(calibration: dict, preset: str) -> str:
    """preset_calibration's figures per group size and domain count, the presets other than `preset` marked borrowed:
    '8 ranks 1 KiB..8 GiB (borrowed from h100-hgx, h200-hgx)'."""
    from commbench.units import format_size

    spans: dict[tuple[int, int], tuple] = {}
    for f in calibration["figures"]:
        low, high, presets = spans.get((f["group_size"], f["num_domains"]), (f["size_bytes"], f["size_bytes"], set()))
        spans[(f["group_size"], f["num_domains"])] = (min(low, f["size_bytes"]), max(high, f["size_bytes"]),
                                                      presets | {f["preset"]})

    def whose(presets: set[str]) -> str:
        others = ", ".join(sorted(presets - {preset}))
        return "; ".join(([preset] if preset in presets else []) + ([f"borrowed from {others}"] if others else []))

    return "; ".join(f"{group} ranks{f' on {domains} domains' if domains > 1 else ''} "
                     f"{format_size(low)}{f'..{format_size(high)}' if high > low else ''} ({whose(presets)})"
                     for (group, domains), (low, high, presets) in sorted(spans.items()))
