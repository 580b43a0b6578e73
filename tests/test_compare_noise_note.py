"""compare with one baseline run and no --history assumes the run-to-run noise; on a shared host a point that moves
between runs (a gloo 8 B all_reduce at 58 or 84 us, run by run) then fails unchanged code. The error line says the
noise was assumed and how to measure it, not only the noise line above the verdict."""

from __future__ import annotations

import numpy as np
from typer.testing import CliRunner

from commbench.cli.app import app
from tests.test_compare import write
from tests.test_compare_runs import SIZES, runs


def test_a_regression_judged_on_assumed_noise_says_so_in_its_error_line(tmp_path):
    rng = np.random.default_rng(2)
    base = runs(rng, 1, prefix="b", shifts=[0.0], point_sd=0.06, within_sd=0.005)
    slow = runs(rng, 1, prefix="n", shifts=[0.04], point_sd=0.06, within_sd=0.005, factors={SIZES[5]: 3.0})
    out = CliRunner().invoke(app, ["compare", write(tmp_path / "b.jsonl", base), write(tmp_path / "n.jsonl", slow)])
    error = [line for line in out.output.splitlines() if line.startswith("error:")]
    assert out.exit_code == 1 and len(error) == 1, out.output
    assert "run-to-run noise not measured" in error[0] and "--history" in error[0]
    measured = runs(rng, 3, prefix="h", shifts=[0.0, 0.02, -0.02], point_sd=0.06, within_sd=0.005)
    out = CliRunner().invoke(app, ["compare", write(tmp_path / "b3.jsonl", base + measured),
                                   str(tmp_path / "n.jsonl")])
    assert out.exit_code == 1 and "run-to-run noise not measured" not in out.output
