"""Like with like for the order statistics nccl-tuner ranks by: min, max and p99 over as many iterations on every side.

The fastest of n samples of one distribution is the 1/n quantile (in expectation: the k-th order statistic of n
sits near the k/(n+1) quantile; David & Nagaraja, Order Statistics, 3rd ed., ch. 2-3), so it falls as n grows: the
min of 500 iterations beats the min of 20 of the very same distribution (by about 1.06x at 5% noise), and the max
and p99 rise with n the same way. A combination measured with -n 500 then "beats" NCCL's default measured with
-n 20 by chance alone, and a rule forces it. The median and mean estimate one fixed quantity whatever n is (n
sets only their noise, which the noise estimate carries), so they are left as they are.

Where the records one cell compares (a collective, nNodes, nRanks and size: every combination, dtype, way and
repeat measured there) hold different iteration counts, each record's statistic is taken over n of its
iterations, n the fewest any of them holds -- like with like, as `compare` does for its tail statistics
(results.compare_judge._same_sample_counts) -- and its noise from those n samples too
(nccl_tuner.record_noise_rel), so the significance test judges what is compared. The n are drawn at random
without replacement (a fixed seed from the record's identity: the same file gives the same config), not the
first n as `compare` takes them: a min over any n of the samples is a min of n draws whatever order a file keeps
them in, while the first n of samples kept sorted (or drifting with the run) would be its fastest again. A
record with more iterations but no per-iteration samples (an older file) cannot be cut down: CommbenchError in
one line.
"""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np

from commbench.errors import CommbenchError

ORDER_STATISTICS = ("min", "max", "p99")  # their value moves with the number of samples they are taken over


def sample_count(record) -> int:
    """The iterations a record's statistics were taken over: its samples where it keeps them, else `iters`."""
    return len(record.iter_times_us) if record.iter_times_us else (record.iters or 0)


def subsample(record, n: int):
    """The record as if it had run n iterations: n of its samples at random (kept in loop order; the seed from the
    record's run, point and params), iters n and min/max/p99 over them."""
    from commbench.results.records import MIN_ITERS_FOR_P99

    identity = f"{record.run_id} {record.collective} {record.size_bytes} {record.dtype} {record.op} " \
               f"{record.in_place} {sorted(record.params.items())} {len(record.iter_times_us)}"
    rng = np.random.default_rng(zlib.crc32(identity.encode()))
    kept = [record.iter_times_us[i] for i in sorted(rng.choice(len(record.iter_times_us), size=n, replace=False))]
    samples = np.asarray(kept, dtype=float)
    return dataclasses.replace(record, iter_times_us=kept, iters=n,
                               time_us_min=float(samples.min()), time_us_max=float(samples.max()),
                               time_us_p99=float(np.percentile(samples, 99)) if n >= MIN_ITERS_FOR_P99 else None)


def equal_sample_counts(records: list, statistic: str, cell_of) -> tuple[list, list[str]]:
    """`records` (those that would give points) with `statistic` over as many iterations within each cell
    (`cell_of(record)`: the key of the cell it is compared in), and a note where any was cut down. Other
    statistics: the records as they are."""
    from commbench.units import format_size

    if statistic not in ORDER_STATISTICS:
        return records, []
    has_it = [r for r in records if getattr(r, f"time_us_{statistic}", None)]
    counts: dict = {}
    for r in has_it:
        counts.setdefault(cell_of(r), set()).add(sample_count(r))
    common = {cell: min(found) for cell, found in counts.items() if len(found) > 1}
    if not common:
        return records, []
    out = []
    for r in records:
        n = common.get(cell_of(r)) if getattr(r, f"time_us_{statistic}", None) else None
        if n is None or sample_count(r) == n:
            out.append(r)
            continue
        if len(r.iter_times_us) < n:
            found = sorted(counts[cell_of(r)])
            raise CommbenchError(
                f"--statistic {statistic}: {r.collective} at {format_size(r.size_bytes)} was measured with "
                f"different iteration counts (-n {', '.join(map(str, found))}) and run {r.run_id}'s record "
                f"(-n {sample_count(r)}) "
                f"keeps no per-iteration samples to take its {statistic} over {n} of them: the {statistic} of more "
                "iterations differs by chance alone, so no cell would compare like with like; measure every "
                "combination with one -n, or rank by --statistic median or mean")
        out.append(subsample(r, n))
    counts_text = ", ".join(map(str, sorted({c for cell in common for c in counts[cell]})))
    note = (f"--statistic {statistic} over {', '.join(map(str, sorted(set(common.values()))))} iteration(s) "
            f"drawn at random from each record at {len(common)} (collective, scale, size) cell(s): the results "
            f"hold different iteration counts there (-n {counts_text}), and the {statistic} of more iterations is "
            f"{'lower' if statistic == 'min' else 'higher'} by chance alone (as compare does)")
    return out, [note]
