"""Whether NEW measured a point with fewer timed iterations (a record's `iters`: bench/sweep -n, nccl-tests -n) than
BASE did: narrowed data, which compare refuses unless --allow-fewer-iters (run by `compare.compare`).

`iters` is no part of a point's identity (compare.IDENTITY_FIELDS): a time over 20 iterations and one over 1 are the
same point, so a CI step that cut -n (to save time, say) was judged as if it had measured what BASE did. It had not:
- a time per iteration over n iterations (the median of n samples, nccl-tests' loop time / n) scatters about
  1/sqrt(n) as much as one iteration does, so NEW's run holds more noise than the run-to-run noise compare reads from
  BASE's and --history's runs, measured at BASE's count: the verdict's intervals and the "smallest slowdown it could
  have seen" would be BASE's, not NEW's;
- where NEW holds no per-iteration samples (an nccl-tests text import) nothing in NEW's file measures its own
  noise, and one iteration (-n 1) is one sample;
- the low tail (min, p10) of more iterations is lower by chance: compare already takes it over each record's first n
  iterations, n the fewest (compare_judge), so BASE too is judged on NEW's fewer, and the gate checks less than
  BASE could.
More iterations in NEW narrow nothing: its median or mean scatters less than BASE's, the noise read from BASE's
runs is then an over-estimate (a wider interval, not a missed slowdown), and the tail statistics are trimmed to
BASE's count. A record whose `iters` is 0 (an nccl-tests -J file without config.iterations) says nothing and is
not compared.
"""

from __future__ import annotations

from commbench.errors import CommbenchError
from commbench.results.compare import is_bad, point_label

ALLOW_OPTION = "--allow-fewer-iters"


def fewer_iters(base_runs, new_runs, base_keys) -> list[tuple[int, str, int, int]]:
    """(number from 1 of NEW's run, point label, NEW's iters, the fewest iters of BASE's good records there) per
    good record of NEW at a point of BASE measured with fewer iterations than every good BASE record there."""
    out = []
    for key in base_keys:
        base = [run[key].iters for run in base_runs if key in run and not is_bad(run[key]) and run[key].iters > 0]
        if not base:
            continue
        fewest_base = min(base)
        for index, run in enumerate(new_runs, start=1):
            m = run.get(key)
            if m is not None and not is_bad(m) and 0 < m.iters < fewest_base:
                out.append((index, point_label(m), m.iters, fewest_base))
    return out


def check_new_iters(base_runs, new_runs, base_keys, *, allow: bool) -> list[str]:
    """Refuse (one line, exit 2) a NEW whose run measured a point with fewer iterations than BASE (fewer_iters),
    naming both counts and the option; with `allow`, "point (run i/n): iters N, base M" per such record (said by the
    CLI and in --json: fewer_iters)."""
    found = fewer_iters(base_runs, new_runs, base_keys)
    if not found:
        return []
    if not allow:
        index, label, new_count, base_count = found[0]
        run_id = next(iter(new_runs[index - 1].values())).run_id
        also = f" ({len(found)} point run(s) so, this the first)" if len(found) > 1 else ""
        raise CommbenchError(
            f"the new file's run {index}/{len(new_runs)} (run {run_id}) measured {label} over {new_count} "
            f"iteration(s) (iters) where the base's records hold {base_count}{also}: a time over fewer iterations "
            "is a noisier measurement than the base's, whose run-to-run noise the gate judges it by, so it would "
            f"check less than the base did; measure the new file with -n >= {base_count} (bench, sweep, nccl-tests), "
            f"or {ALLOW_OPTION} to judge it as it is (more iterations in the new file are fine)")
    return [f"{label} (run {index}/{len(new_runs)}): iters {new_count}, base {base_count}"
            for index, label, new_count, base_count in found]
