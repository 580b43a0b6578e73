"""With one run a side on a 5-point sweep the noise is read from the pair's own points at ~1.5 degrees of freedom:
a x9.8 slowdown at 2 points passed, and the pass line did not say that the gate could not have seen it (probe
H-F2). The pass line and --json (`detectable`) now state the smallest slowdown the comparison could have failed
on."""

from __future__ import annotations

import json

import numpy as np

from tests.test_compare import record, write
from tests.test_compare_runs import run_cli

SIZES = (8, 64, 512, 4096, 32768)
# one pair's points scatter apart by ~25% (log), as a 5-point gloo sweep on a shared host does (probe H: b/n.jsonl)
SCATTER = (0.0, 0.14, -0.07, 0.20, -0.25)


def _run(run_id, shift, slower=()):
    rng = np.random.default_rng(len(run_id))
    return [record(size, 200 * np.exp(s * shift + (np.log(10) if size in slower else 0) + rng.normal(0, 0.01, 30)),
                   run_id=run_id) for size, s in zip(SIZES, SCATTER)]


def test_a_one_run_pass_says_the_smallest_slowdown_it_could_have_seen(tmp_path):
    base = write(tmp_path / "base.jsonl", _run("b", 0.0))
    new = write(tmp_path / "new.jsonl", _run("n", 1.0))
    result = run_cli(base, new)
    said = " ".join(result.output.split())
    assert result.exit_code == 0, said
    assert "smallest slowdown it could have seen: x" in said and "one run a side" in said and "--history" in said
    found = json.loads(run_cli(base, new, "--json").stdout)["detectable"]
    assert found["point_ratio_median"] > 1.5 and found["collective_ratio_max"] > 1.1
    assert found["run_shift_measured"] is False


def test_a_measured_run_shift_sees_less_and_says_no_hint(tmp_path):
    base = write(tmp_path / "base.jsonl", _run("b1", 0.0) + _run("b22", 0.05) + _run("b333", -0.05))
    new = write(tmp_path / "new.jsonl", _run("n", 0.02))
    found = json.loads(run_cli(base, new, "--json").stdout)["detectable"]
    assert found["run_shift_measured"] is True and found["point_ratio_median"] < 1.5, found
    assert "one run a side" not in " ".join(run_cli(base, new).output.split())
