"""fit merged a collective's points of different reduction ops or data types into one curve (an -o all log: sum and
mulsum medians per size, 153 -> 102 GB/s, "3 points", no note): the fabric then described no real call. Now one
(dtype, op) per collective is fitted — bf16 (the planner's traffic) else fp32, and sum, unless --dtype / --op say —
and a note names what was left out; the shipped sweeps that measure all_reduce in two dtypes keep working."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
from typer.testing import CliRunner

from commbench.cli.app import app
from tests.test_compare import record, write

SIZES = (1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24)


def _points(slower=1.0, **kw):
    rng = np.random.default_rng(4)
    return [dataclasses.replace(record(size, slower * (20 + size / 2e4) * np.exp(rng.normal(0, 0.01, 30))), **kw)
            for size in SIZES]


def _busbw(output: str) -> float:
    (curve,) = [c for c in json.loads(output)["curves"] if c["collective"] == "all_reduce"]
    return curve["busbw_gbps"][0]


def test_mixed_ops_or_dtypes_fit_one_of_them_and_name_the_rest(tmp_path):
    alone = write(tmp_path / "sum.jsonl", _points())
    ops = write(tmp_path / "ops.jsonl", _points() + [dataclasses.replace(m, op="avg") for m in _points(slower=2.0)])
    one = CliRunner().invoke(app, ["fit", alone, "--json"])
    mixed = CliRunner().invoke(app, ["fit", ops, "--json"])
    assert one.exit_code == 0 and mixed.exit_code == 0, mixed.output
    assert _busbw(mixed.output) == _busbw(one.output)          # sum alone: avg's 2x slower points left out
    said = " ".join(CliRunner().invoke(app, ["fit", ops]).output.split())
    assert "all_reduce: fitted on float32 sum (5 points); left out float32 avg (5 points)" in said
    chosen = CliRunner().invoke(app, ["fit", ops, "--op", "avg", "--json"])
    assert chosen.exit_code == 0 and _busbw(chosen.output) < 0.6 * _busbw(one.output)
    types = write(tmp_path / "types.jsonl", _points() + [dataclasses.replace(m, dtype="bfloat16", count=m.count * 2)
                                                          for m in _points()])   # 2-byte elements: twice the count
    assert "fitted on bfloat16 sum (5 points); left out float32 sum" in " ".join(
        CliRunner().invoke(app, ["fit", types]).output.split())
    bad = CliRunner().invoke(app, ["fit", types, "--dtype", "float16"])
    assert bad.exit_code == 2 and "--dtype='float16' is invalid: the results hold bfloat16, float32" in bad.output


def test_the_note_names_a_tier_only_the_left_out_points_measured(tmp_path):
    """bf16 measured all_reduce on the 4-rank world across hosts n1, n2 and float32 alone the pairs inside each host
    (probe EN, fakeN2.jsonl): the note said it fitted bf16 and left out "float32 sum (9 points)", not that those held
    the only scale-up all_reduce measurement, so the profile had no all_reduce scale-up curve without a word."""
    from tests.test_compare import header_for

    across = [dataclasses.replace(m, dtype="bfloat16", count=m.count * 2, world_size=4, group_size=4, group_layout="world",
                                  busbw_gbps=m.algbw_gbps * 1.5)   # all_reduce's 2(n-1)/n on 4 ranks
              for m in _points()]
    inside = [dataclasses.replace(m, world_size=4, group_size=2, group_layout="contiguous") for m in _points()]
    header = dataclasses.replace(header_for(across[0]), hostnames=["n1", "n1", "n2", "n2"])
    mixed = write(tmp_path / "tiers.jsonl", [header, *across, *inside])
    said = " ".join(CliRunner().invoke(app, ["fit", mixed]).output.split())
    assert ("all_reduce: fitted on bfloat16 sum (5 points); left out float32 sum (5 points): a curve is one call's "
            "time (--dtype / --op choose); the left-out points held the only all_reduce scale_up measurement, so no "
            "all_reduce scale_up curve is fitted") in said, said
    same = write(tmp_path / "same.jsonl", [header, *across, *(dataclasses.replace(m, dtype="float32", count=m.count // 2)
                                                            for m in across)])
    said = " ".join(CliRunner().invoke(app, ["fit", same]).output.split())
    assert "fitted on bfloat16 sum (5 points)" in said and "held the only" not in said
