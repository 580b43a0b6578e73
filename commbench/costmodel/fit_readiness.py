"""What `bench` and `sweep` say at their end about the curves they measured that `fit` could not use.

A curve whose times do not grow with size determines no bandwidth: `fit` keeps it from prediction and refuses a
profile of such curves alone (profile.check_usable_curve). Measuring 1 KiB..64 KiB on gloo and learning it only at
`fit` cost a user a second measurement; the measuring command says it instead, from the points it measured, fitted
as `fit` fits them (fit_records.fit_all) and judged by the same test (fit_records.bandwidth_undetermined: growth within
the noise of the points' own iterations, or no growth at all).
"""

from __future__ import annotations

from pathlib import Path

from commbench.units import MEASURED_MAX_BYTES, format_size, parse_size_bytes

MAX_NOTES = 5  # curves named one a line; the rest are counted


def undetermined_bandwidth_notes(path: str, *, larger: str, larger_moe: str = "--tokens",
                                 skip_runs: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """One line per curve of the runs in results file `path` but `skip_runs` (those there before this launch) whose measured times
    determine no bandwidth, naming its sizes and what to measure (`larger`: how to ask for larger sizes in the
    command that measured, e.g. '-e 16M'; `larger_moe`: for moe_all_to_all, whose size is the busiest rank's routed
    bytes, how to ask for more tokens per rank, e.g. '--tokens': it takes no sizes, and a MoE sweep entry told to
    raise 'sizes in the sweep file' has none). Points of one data type and op are fitted together, as `fit` fits one."""
    from commbench.costmodel.fit_records import bandwidth_undetermined, fit_all
    from commbench.results.records import headers, iter_records, measurements

    if not Path(path).is_file():   # nothing written (no point measured): nothing to say
        return []
    # iter_records, not read_records: a note after the launch's own points; an earlier run's two headers in the
    # file (results.run_headers) are refused by the readers that judge it, not by the launch that measured
    records = list(iter_records(path, on_bad_line=lambda *_: None, drop_samples=True))
    points = [m for m in measurements(records) if m.run_id not in skip_runs]
    runs = {h.run_id: h for h in headers(records)}
    by_dtype_op: dict[tuple, list] = {}
    for m in points:
        by_dtype_op.setdefault((m.dtype, m.op), []).append(m)
    lines = []
    for (dtype, op), group in sorted(by_dtype_op.items(), key=lambda kv: tuple(map(str, kv[0]))):
        fits, _ = fit_all(group, runs)
        for fit in fits:
            if not bandwidth_undetermined(fit.fit, fit.growth):
                continue
            kind = f" {dtype}" + (f" {op}" if op and op != "sum" else "") if len(by_dtype_op) > 1 else ""
            sizes = f"{format_size(fit.min_size_bytes)}..{format_size(fit.max_size_bytes)}"
            most = format_size(parse_size_bytes(MEASURED_MAX_BYTES))
            if fit.key.collective == "moe_all_to_all":   # swept by tokens per rank, its size the routed bytes
                what = (f"raise the tokens per rank ({larger_moe}) until the busiest rank's bytes reach {most}"
                        if fit.max_size_bytes < parse_size_bytes(MEASURED_MAX_BYTES)
                        else f"measure more tokens per rank ({larger_moe}), or on a host with no other load")
            else:
                what = (f"measure up to {most} ({larger})" if fit.max_size_bytes < parse_size_bytes(MEASURED_MAX_BYTES)
                        else "measure larger sizes, or on a host with no other load")
            lines.append(f"{fit.key.label}{kind} {sizes}: time does not grow with size, so `fit` keeps it "
                         f"latency-only (no bandwidth from these points); for a bandwidth, {what}")
    if len(lines) > MAX_NOTES:
        lines = lines[:MAX_NOTES] + [f"and {len(lines) - MAX_NOTES} more curve(s) whose time does not grow with size"]
    return lines
