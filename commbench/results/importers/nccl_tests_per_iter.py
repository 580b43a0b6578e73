"""nccl-tests' per-iteration report (-I 1, nccl-tests >= 2.19) as a commbench record's per-iteration fields.

What nccl-tests reports (src/common.cu and src/util.cu at v2.19.6): each timed iteration's CUDA-event time on every
GPU of a process, its max over the process's GPUs (common.cu:861-871), then its max over the processes
(ReduceProcessMaxIterTimes, common.cu:425-433): each iteration is the slowest rank's, as commbench's iter_times_us
(records.Measurement). An iteration's events bracket its -m agg_iters calls (BenchTime, common.cu:729-744), so a time
per call is the iteration's / agg_iters, as commbench's harness divides (measure/harness.py). writePerIterReport
(util.cu:559-604) prints the summary over the iterations after the -K skip (min, max, p99, cv%: text columns i_min i_max
i_p99 i_cv%) and, in the -J file, every iteration (`{out_of_place,in_place}_per_iter.times_us`, the skipped leading
ones included: `skipped_iterations`). A -J file gives the samples compare's min and p10 judge; a text log only the
summary (kept as time_us_min / time_us_max / time_us_p99, with one warning that the samples are in the -J file).
"""

from __future__ import annotations

import math

import numpy as np

from commbench.results.records import MIN_ITERS_FOR_P99, RunHeader

PER_ITER_NOTE = ("per-iteration times from nccl-tests -I (CUDA events; each iteration the slowest process's: "
                 "src/common.cu ReduceProcessMaxIterTimes){}")
TEXT_SUMMARY_NOTE = ("nccl-tests -I text log: its per-iteration summary (i_min, i_max, i_p99) kept as time_us_min/max/p99; "
                     "the samples (iter_times_us) are only in the run's -J file")


def _per_call(agg_iters: int) -> str:
    return f", / {agg_iters} calls an iteration (-m)" if agg_iters > 1 else ""


def from_json(report, agg_iters: int) -> tuple[dict, list[str]]:
    """(Measurement fields, notes) from a -J row's `<placement>_per_iter` object; ({}, []) where there is none.
    Raises ValueError where it is not nccl-tests' (times_us not a list of finite times >= 0)."""
    if not isinstance(report, dict) or report.get("times_us") is None:
        return {}, []
    times, skipped = report["times_us"], int(report.get("skipped_iterations", 0) or 0)
    if not isinstance(times, list) or not all(isinstance(t, (int, float)) and not isinstance(t, bool)
                                              and math.isfinite(t) and t >= 0 for t in times):
        raise ValueError("per_iter.times_us is not a list of finite times >= 0 µs")
    if not 0 <= skipped < len(times):
        raise ValueError(f"per_iter.skipped_iterations={skipped} with {len(times)} times")
    samples = [round(float(t) / agg_iters, 3) for t in times[skipped:]]
    skip = f"; the first {skipped} (-K) left out, as nccl-tests' summary leaves them" if skipped else ""
    fields = {"iter_times_us": samples, "time_us_min": min(samples), "time_us_max": max(samples),
              "time_us_p99": float(np.percentile(samples, 99)) if len(samples) >= MIN_ITERS_FOR_P99 else None}
    return fields, [PER_ITER_NOTE.format(_per_call(agg_iters) + skip)]


def from_text(values: dict[str, str], agg_iters: int, summarized: int) -> dict:
    """Measurement fields from a text row's i_min / i_max / i_p99 cells (`summarized`: the iterations its summary
    covers; p99 only over MIN_ITERS_FOR_P99 or more, as commbench's own); {} where the row has none."""
    def cell(key: str) -> float | None:
        text = values.get(key)
        return None if text in (None, "N/A") else float(text) / agg_iters
    low, high = cell("i_min"), cell("i_max")
    if low is None or high is None:
        return {}
    p99 = cell("i_p99") if summarized >= MIN_ITERS_FOR_P99 else None
    return {"time_us_min": low, "time_us_max": high, "time_us_p99": p99}


def text_summary_warnings(records: list) -> list[str]:
    """One line for the runs imported from -I text logs: compare cannot judge their min or p10 (no samples)."""
    runs = [r.run_id for r in records if isinstance(r, RunHeader) and TEXT_SUMMARY_NOTE in r.notes]
    if not runs:
        return []
    return [f"run(s) {', '.join(runs[:3])}{' ...' if len(runs) > 3 else ''}: {TEXT_SUMMARY_NOTE}; compare's min and "
            "p10 need those samples: import the -J file to judge them"]
