"""compare --history: a run of NEW found in the history folder (NEW written there, `-O baselines/$(date).jsonl` then
`--history baselines/`, or copied there under another run id) is NEW's own run, never a baseline run: the run shift
was measured from it, so a x3 slowdown of NEW read as run-to-run noise and the gate passed it."""

from __future__ import annotations

import dataclasses

import numpy as np

from commbench.results.compare import compare
from tests.test_compare import write
from tests.test_compare_runs import run_cli, runs


def _files(tmp_path):
    rng = np.random.default_rng(5)
    base = runs(rng, 1, prefix="base", point_sd=0.01, within_sd=0.01)
    history = runs(rng, 3, prefix="hist", shift_sd=0.02, point_sd=0.01, within_sd=0.01)
    slow = [dataclasses.replace(m, iter_times_us=[t * 3 for t in m.iter_times_us], time_us_median=m.time_us_median * 3,
                                time_us_min=m.time_us_min * 3, time_us_max=m.time_us_max * 3,
                                time_us_mean=m.time_us_mean * 3, loop_time_us={"avg": m.loop_time_us["avg"] * 3},
                                algbw_gbps=m.algbw_gbps / 3, busbw_gbps=m.busbw_gbps / 3)
            for m in runs(rng, 1, prefix="new", point_sd=0.01, within_sd=0.01)]
    folder = tmp_path / "baselines"
    folder.mkdir()
    for index in range(3):
        write(folder / f"h{index}.jsonl", [m for m in history if m.run_id == f"hist{index}"])
    return write(tmp_path / "base.jsonl", base), slow, folder, history, base


def test_new_written_into_the_history_folder_is_left_out_and_its_slowdown_fails(tmp_path):
    base, slow, folder, _, _ = _files(tmp_path)
    outside = write(tmp_path / "new.jsonl", slow)
    assert run_cli(base, outside, "--history", folder).exit_code == 1
    inside = write(folder / "new.jsonl", slow)   # the same run, its own run id, in the history folder
    result = run_cli(base, inside, "--history", folder)
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert "history: 1 run(s) are the new file's own run (new.jsonl: run new0)" in text, text
    assert "history 3" in text, text   # runs: base 1, new 1, history 3


def test_new_copied_into_the_history_under_another_run_id_is_left_out():
    rng = np.random.default_rng(6)
    base, history = runs(rng, 1, prefix="b"), runs(rng, 3, prefix="h", shift_sd=0.02)
    new = [dataclasses.replace(m, time_us_min=m.time_us_min * 3, iter_times_us=[t * 3 for t in m.iter_times_us],
                               time_us_median=m.time_us_median * 3) for m in runs(rng, 1, prefix="n")]
    copy = [dataclasses.replace(m, run_id="copied") for m in new]
    result = compare(base, new, max_regression=0.1, history=history + copy)
    assert result.history_of_new == 1 and result.runs["history"] == 3 and not result.passed
