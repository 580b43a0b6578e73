"""nccl-tests 2.19's per-iteration report (-I 1; src/util.cu writePerIterReport at v2.19.6): a -J file's
`<placement>_per_iter.times_us` (each iteration the slowest process's: src/common.cu ReduceProcessMaxIterTimes) and a
text log's i_min/i_max/i_p99 imported with exit 0 and no warning, but iter_times_us [] and time_us_min/max/p99 None, so
compare could not judge the min of a run that measured it (found from outside: imp/D_periter.log, imp/D2_periter.json).
Now the -J samples are iter_times_us (per call under -m, -K's skipped ones left out) and compare judges their min; a
text log's summary is kept and one line says the samples are in the -J file."""

from __future__ import annotations

import json
from pathlib import Path

from commbench.results.compare import choose_statistic
from commbench.results.importers.nccl_tests import import_file
from commbench.results.records import Measurement, read_records
from tests.results_files import invoke

DATA = Path(__file__).parent / "data" / "nccl-tests"
TIMES_US = [12.0, 9.5, *[10.0 + 0.1 * i for i in range(22)], 15.0]   # 25 iterations


def _json_with_per_iter(tmp_path, *, skipped: int = 0, agg_iters: int = 1) -> Path:
    """sendrecv.json as an -I 1 run wrote it: each cell's `<placement>_per_iter` beside it (util.cu:570-601)."""
    doc = json.loads((DATA / "sendrecv.json").read_text())
    doc["config"].update(per_iter_timing=True, per_iter_skip=skipped, iterations=len(TIMES_US),
                         aggregated_iterations=agg_iters)
    for row in doc["results"]:
        for key in ("out_of_place", "in_place"):
            summarized = sorted(TIMES_US[skipped:])
            row[f"{key}_per_iter"] = {"skipped_iterations": skipped, "min_us": summarized[0], "max_us": summarized[-1],
                                      "p99_us": summarized[-1], "times_us": TIMES_US}
    path = tmp_path / "sendrecv.json"
    path.write_text(json.dumps(doc))
    return path


def _points(path) -> list[Measurement]:
    result = import_file(str(path))
    assert result.problems == []
    return [r for r in result.records if isinstance(r, Measurement)]


def test_json_per_iteration_times_are_the_records_samples_and_compare_judges_their_min(tmp_path):
    points = _points(_json_with_per_iter(tmp_path))
    assert len(points) == 4
    for point in points:
        assert point.iter_times_us == TIMES_US
        assert (point.time_us_min, point.time_us_max, point.time_us_p99) == (9.5, 15.0, None)   # p99: 100+ samples
        assert point.time_us_median is None and point.loop_time_us   # nccl-tests' time stays its headline
        assert any("nccl-tests -I" in note for note in point.notes)
    assert choose_statistic(points, points, "auto") == "min"


def test_json_per_iteration_times_leave_out_the_skipped_and_are_per_call(tmp_path):
    points = _points(_json_with_per_iter(tmp_path, skipped=2, agg_iters=2))
    assert points[0].iter_times_us == [round(t / 2, 3) for t in TIMES_US[2:]]
    assert (points[0].time_us_min, points[0].time_us_max) == (5.0, 7.5)


def test_text_per_iteration_summary_is_kept_and_the_missing_samples_said_in_one_line(tmp_path):
    log = DATA / "broadcast-per-iter.log"
    points = _points(log)
    assert (points[0].time_us_min, points[0].time_us_max, points[0].time_us_p99) == (9.87, 12.40, None)  # 20 iters
    assert points[0].iter_times_us == []
    out = tmp_path / "text.jsonl"
    result = invoke("import", "nccl-tests", str(log), "-O", str(out))
    assert result.exit_code == 0, result.output
    warned = [line for line in result.output.splitlines() if "i_min, i_max, i_p99" in line]
    assert len(warned) == 1 and "-J file" in warned[0], result.output
    assert [r.time_us_min for r in read_records([out]) if isinstance(r, Measurement)][0] == 9.87
    quiet = invoke("import", "nccl-tests", str(_json_with_per_iter(tmp_path)), "-O", str(tmp_path / "json.jsonl"))
    assert quiet.exit_code == 0 and "i_min, i_max, i_p99" not in quiet.output, quiet.output
