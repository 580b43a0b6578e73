"""A point of `commbench tune`'s sweep whose rank hangs or is killed from outside (kill -9, the OOM killer): tune
ended there (exit 1, 'results measured so far are in ...'), the sweep's other points never measured and no word of
how to plan from what was, while `commbench sweep` records the point failed and goes on with fresh ranks (README:
'a `sweep` then goes on with fresh ranks ... a rank killed from outside too'; probe AW F3). tune's sweep now goes on
as sweep's does (the same function), then ends before the fit (exit 1, as a sweep with a failed point) saying how to
fit and plan from what it measured."""

from __future__ import annotations

import shlex
import time

import pytest

from tests.processes import alive
from tests.test_all_ranks_hung import FAULTS, hang_sweep
from tests.test_launch_watchdog import finish, lines, rank_pids, start_cli

PLAN = ["--model", "mixtral-8x7b", "--system", "h100-hgx", "--gpus", "16", "--precision", "bf16", "--top", "1"]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("fault, said", FAULTS)
def test_tune_records_the_stuck_point_goes_on_and_says_how_to_plan(tmp_path, fault, said):
    sweep = hang_sweep(tmp_path / "hang.toml", '["16K", "256K", "1M"]')
    out = tmp_path / "out"
    output = out / "tune-sweep.jsonl"
    proc = start_cli("tune", "--sweep", str(sweep), "-O", str(out), *PLAN)
    pids = rank_pids(proc, output)
    time.sleep(0.5)
    fault(pids)
    code, _, err = finish(proc, 150)
    assert code == 1, err
    text = " ".join(err.split())
    assert said in text and "starting fresh ranks for the remaining points" in text, err
    records = [r for r in lines(output) if r["record_type"] == "measurement"]
    assert [(r["size_bytes"], r["status"]) for r in records] == [(8, "failed"), (16384, "ok"), (262144, "ok"),
                                                                 (1048576, "ok")]
    assert "1 of 4 point(s) failed" in text and "nothing fitted or planned" in text, err
    hint = text.split("the fit leaving those points out: ", 1)[1].rsplit(")", 1)[0]
    assert shlex.split(hint) == ["commbench", "tune", "--results", str(output), "-O", str(out), *PLAN], hint
    assert not (out / "plan.json").exists() and not any(alive(pid) for pid in pids)
    planned = start_cli(*shlex.split(hint)[1:])   # the hint, followed: the fit leaves the failed point out
    code, stdout, err = finish(planned, 150)
    assert code == 0, err
    assert "Plan (predicted)" in stdout and (out / "plan.json").is_file()
