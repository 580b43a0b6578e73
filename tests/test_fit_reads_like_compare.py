"""fit and tune --results read a results file by compare's and report's rules (probe AC F2, F3): a run holding one
point twice with different measurements is refused (which copy to fit is unknown), a file a commbench run is still
writing is refused until it ends, and a profile fitted before a run's last points were written is said to be older
than its results."""

from __future__ import annotations

import dataclasses

import numpy as np
from typer.testing import CliRunner

from commbench.cli.app import app
from tests.test_compare import record, write

SIZES = (1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24)


def points(run_id: str = "r"):
    rng = np.random.default_rng(2)
    return [record(size, (20 + size / 2e4) * np.exp(rng.normal(0, 0.01, 30)), run_id=run_id) for size in SIZES]


def one_error(result, code: int, *must: str) -> str:
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == code and len(errors) == 1 and "Traceback" not in result.output, result.output
    for text in must:
        assert text in errors[0], errors[0]
    return errors[0]


def test_a_point_twice_with_different_measurements_is_refused_by_fit_and_tune_as_by_compare(tmp_path):
    clean = points()
    copy = dataclasses.replace(clean[1], time_us_median=clean[1].time_us_median * 10,
                               iter_times_us=[t * 10 for t in clean[1].iter_times_us])
    path = write(tmp_path / "conflict.jsonl", clean + [copy])
    for args in (["fit", path, "-O", str(tmp_path / "f.json")], ["tune", "--results", path, "-O", str(tmp_path / "t")],
                 ["compare", write(tmp_path / "base.jsonl", points("b")), path]):
        one_error(CliRunner().invoke(app, args), 2, "run r holds all_reduce float32 256 KiB n=2 twice with different "
                                                    "measurements")
    assert not (tmp_path / "f.json").exists() and not (tmp_path / "t" / "plan.json").exists()
    same = write(tmp_path / "dup.jsonl", clean + [clean[1]])   # an identical copy is harmless: read once
    assert CliRunner().invoke(app, ["fit", same]).exit_code == 0
    other = write(tmp_path / "other.jsonl", [copy])   # the same run in two files, measured apart
    one_error(CliRunner().invoke(app, ["fit", write(tmp_path / "clean.jsonl", clean), other]), 2,
              "holds all_reduce float32 256 KiB n=2 twice", "clean.jsonl", "other.jsonl")
