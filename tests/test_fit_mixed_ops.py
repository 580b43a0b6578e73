"""fit merged a collective's points of different reduction ops or data types into one curve (an -o all log: sum and
mulsum medians per size, 153 -> 102 GB/s, "3 points", no note): the fabric then described no real call. Refused now,
naming the mix; --op / --dtype fit one of them."""

from __future__ import annotations

import dataclasses

import numpy as np
from typer.testing import CliRunner

from commbench.cli.app import app
from tests.test_compare import record, write

SIZES = (1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24)


def _points(**kw):
    rng = np.random.default_rng(4)
    return [dataclasses.replace(record(size, (20 + size / 2e4) * np.exp(rng.normal(0, 0.01, 30))), **kw)
            for size in SIZES]


def test_mixed_ops_or_dtypes_are_refused_and_named_and_one_is_fitted_on_request(tmp_path):
    ops = write(tmp_path / "ops.jsonl", _points() + [dataclasses.replace(m, op="avg") for m in _points()])
    refused = CliRunner().invoke(app, ["fit", ops])
    assert refused.exit_code == 2, refused.output
    assert "all_reduce: float32 avg (5 points), float32 sum (5 points)" in " ".join(refused.output.split())
    fitted = CliRunner().invoke(app, ["fit", ops, "--op", "sum", "--json"])
    assert fitted.exit_code == 0 and fitted.output.count("\"num_points\": 5") == 1, fitted.output
    types = write(tmp_path / "types.jsonl", _points() + [dataclasses.replace(m, dtype="bfloat16") for m in _points()])
    assert "bfloat16 sum (5 points)" in " ".join(CliRunner().invoke(app, ["fit", types]).output.split())
    assert CliRunner().invoke(app, ["fit", types, "--dtype", "bfloat16"]).exit_code == 0
    bad = CliRunner().invoke(app, ["fit", types, "--dtype", "float16"])
    assert bad.exit_code == 2 and "--dtype='float16' is invalid: the results hold bfloat16, float32" in bad.output


def test_tune_refuses_a_sweep_mixing_data_types_before_it_runs(tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text('[sweep]\nname = "s"\nbackend = "gloo"\nnproc = 2\n[defaults]\niters = 2\nwarmup_iters = 1\n'
                     '[[run]]\ncollective = "all_reduce"\nsizes = ["1K", "4K"]\ndtypes = ["float32", "bfloat16"]\n')
    result = CliRunner().invoke(app, ["tune", "--sweep", str(sweep), "-O", str(tmp_path / "out")])
    assert result.exit_code == 2 and "the sweep would measure points that mix" in " ".join(result.output.split())
    assert not (tmp_path / "out" / "tune-sweep.jsonl").exists()
