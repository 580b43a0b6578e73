"""Whether the gate's low tail can be judged, by the per-iteration samples each side's records hold, and the line
saying why it judged another statistic (run by `compare.compare` under `--statistic auto`).

The low tail (min, p10) needs >= MIN_SAMPLES_FOR_TAIL samples in every record of a point on both sides; where one
record lacks them, auto falls to the median (or nccl-tests' time) for every run at that point. On a shared host the
median moves several times more between runs (README: run-to-run log sd 0.63 against the min's 0.11), so a NEW run
measured with fewer iterations (bench -n 10) appended to a failing NEW turned its FAIL into a pass (probe PD: three
runs x2.8 failing on the min, plus one -n 10 run: exit 0 on the median)."""

from __future__ import annotations

from commbench.errors import CommbenchError
from commbench.results.compare import (AUTO, AUTO_TAIL, MIN_SAMPLES_FOR_TAIL, TAIL_STATISTICS, is_bad, point_label)
from commbench.results.records import TIME_STATISTICS


def _counts(runs, key) -> list[int]:
    return [len(run[key].iter_times_us or ()) for run in runs if key in run and not is_bad(run[key])]


def _held(counts: list[int]) -> str:
    low, high = min(counts), max(counts)
    return "none" if high == 0 else f"{low}" if low == high else f"{low}-{high}"


def check_new_samples(base_runs, new_runs, base_keys) -> None:
    """Refuse (one line, exit 2) a NEW whose run holds fewer per-iteration samples at a point than the low tail needs
    where every BASE record there holds enough: auto would judge every run, the others too, on the median. A NEW
    with no samples at all (an nccl-tests text import) is no such run: nothing it could hold was cut, and the
    statistic line says what it forces (fallback_text)."""
    for key in base_keys:
        base = _counts(base_runs, key)
        new = [(index, len(run[key].iter_times_us or ())) for index, run in enumerate(new_runs, start=1)
               if key in run and not is_bad(run[key])]
        if not base or not new or min(base) < MIN_SAMPLES_FOR_TAIL or min(n for _, n in new) >= MIN_SAMPLES_FOR_TAIL:
            continue
        if max(n for _, n in new) == 0:
            continue
        index, fewest = min(new, key=lambda found: found[1])
        m = new_runs[index - 1][key]
        raise CommbenchError(
            f"the new file's run {index}/{len(new_runs)} (run {m.run_id}) holds {fewest} per-iteration sample(s) at "
            f"{point_label(m)} where the base's records hold {_held(base)}: the gate's low tail ({AUTO_TAIL}) needs >= "
            f"{MIN_SAMPLES_FOR_TAIL} in every record on both sides, so --statistic {AUTO} would judge every run of "
            "the new file on the median, which moves far more between runs on a shared host (one short run appended "
            f"would pass runs that fail on the {AUTO_TAIL}); measure the new file with -n >= {MIN_SAMPLES_FOR_TAIL} "
            f"(bench, sweep), or --statistic median to judge every run on the median")


def fallback_text(base_runs, new_runs, points, requested: str = AUTO) -> str:
    """Where points were judged on another statistic than the low tail and a side's records hold too few
    per-iteration samples for it: one clause naming the statistic, why (auto: forced by the samples; else as
    --statistic asked), the side and the samples each side holds ("" else)."""
    fell = {}
    for p in points:
        if p.statistic not in ("-", *TAIL_STATISTICS) and p.ratio is not None:
            fell.setdefault(p.statistic, []).append(p.key)
    parts = []
    for statistic, keys in sorted(fell.items()):
        base = [n for key in keys for n in _counts(base_runs, key)]
        new = [n for key in keys for n in _counts(new_runs, key)]
        if not base or not new or min(base + new) >= MIN_SAMPLES_FOR_TAIL:
            continue
        short = [side for side, counts in (("the base", base), ("the new file", new))
                 if min(counts) < MIN_SAMPLES_FOR_TAIL]
        none = [side for side, counts in (("the base", base), ("the new file", new)) if max(counts) == 0]
        verb = "holds" if len(short) == 1 else "hold"
        held = (f"{' and '.join(none)} {'holds' if len(none) == 1 else 'hold'} no per-iteration samples (an "
                f"nccl-tests text import? its -J file of an -I 1 run keeps them), which the low tail needs: >= "
                f"{MIN_SAMPLES_FOR_TAIL} a record, base {_held(base)}, new {_held(new)}" if none == short else
                f"{' and '.join(short)} {verb} fewer than the {MIN_SAMPLES_FOR_TAIL} per-iteration samples a record "
                f"the low tail needs: base {_held(base)}, new {_held(new)}")
        parts.append(f"{statistic} at {len(keys)} point(s), not the low tail: {held}" if requested == AUTO else
                     f"{statistic} at {len(keys)} point(s) as --statistic asks ({held})")
    return "; ".join(parts)


def statistic_reason(base_runs, new_runs, points, requested: str = AUTO) -> str:
    """Why each judged statistic was judged, one clause per statistic (compare --json `statistic_reason`): as
    --statistic asks; or under auto the low tail where every record of a point on both sides holds enough
    per-iteration samples, else the fallback and the samples that forced it (fallback_text)."""
    judged: dict = {}
    for p in points:
        if p.statistic != "-" and p.ratio is not None:
            judged.setdefault(p.statistic, []).append(p.key)
    if requested != AUTO:
        return f"{requested} at {sum(map(len, judged.values()))} point(s) as --statistic asks" if judged else ""
    parts = [f"{statistic} at {len(keys)} point(s): {AUTO} judges the low tail where every record of a point on both "
             f"sides holds >= {MIN_SAMPLES_FOR_TAIL} per-iteration samples"
             for statistic, keys in sorted(judged.items()) if statistic in TAIL_STATISTICS]
    fallback = fallback_text(base_runs, new_runs, points, requested)
    if fallback:
        parts.append(fallback)
    else:   # a fallback no sample count explains (a side holds no median: nccl-tests' time is what both hold)
        parts += [f"{statistic} at {len(keys)} point(s): the first of {', '.join(TIME_STATISTICS)} every record of "
                  "the point on both sides holds" for statistic, keys in sorted(judged.items())
                  if statistic not in TAIL_STATISTICS]
    return "; ".join(parts)
