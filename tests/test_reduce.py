"""`commbench bench reduce` (nccl-tests' reduce_perf): size = the buffer, busbw = algbw (factor 1), the
root's output checked against the exact reduction, both forms in nccl-tests' text with the root column.
`bench reduce` used to be refused ("collective='reduce' is invalid") though nccl-tests, the importer and
the tuner plugin all know it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collectives import REGISTRY, PointSpec
from commbench.cli.app import app
from commbench.dtypes import get_dtype
from commbench.measure.harness import LoopOptions, measure_point
from tests.distributed import run_ranks
from tests.faulty_comm import FaultyComm

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]


def _records(path):
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["record_type"] == "measurement"]


def test_bench_reduce_sizes_root_and_bandwidths_follow_nccl_tests(tmp_path):
    out = tmp_path / "reduce.jsonl"
    result = runner.invoke(app, ["bench", "reduce", "--nproc", "3", "-b", "100", "-e", "1001", "-f", "10", "-r", "2",
                                 "-o", "max", "-d", "int32", "-n", "3", "-w", "0", "-O", str(out)])
    assert result.exit_code == 0, result.output
    records = _records(out)
    assert [(r["size_bytes"], r["count"]) for r in records] == [(100, 25), (1000, 250)]  # count = size / 4, as nccl-tests
    for rec in records:
        assert rec["num_wrong"] == 0 and rec["params"]["root"] == 2 and rec["op"] == "max" and rec["in_place"]
        assert rec["algbw_gbps"] == pytest.approx(rec["size_bytes"] / rec["time_us_median"] / 1e3, rel=1e-12)
        assert rec["busbw_gbps"] == rec["algbw_gbps"]  # nccl-tests ReduceGetBw: busBw = baseBw


def test_reduce_nccl_tests_text_has_both_forms_and_the_root(tmp_path):
    out = tmp_path / "reduce.jsonl"
    result = subprocess.run([sys.executable, "-m", "commbench", "bench", "reduce", "--nproc", "2", "-b", "64", "-e",
                             "64", "-r", "1", "-n", "2", "--format", "nccl-tests", "-O", str(out)], capture_output=True,
                            text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line.strip().startswith("64 ")]
    assert len(rows) == 1 and rows[0][:5] == ["64", "16", "float", "sum", "1"], result.stdout
    assert rows[0][8] == "0" and rows[0][12] == "0"  # #wrong of both forms
    assert "# Collective test concluded: reduce_perf" in result.stdout
    assert [r["in_place"] for r in _records(out)] == [False, True]


def _reduce_wrong(backend, mode):
    world = backend.world_size
    comm = backend.world if mode == "none" else FaultyComm(backend.world, mode)
    out = {}
    for index, (dtype, op, out_of_place) in enumerate([("float32", "sum", False), ("bfloat16", "sum", True),
                                                       ("int8", "max", False), ("float16", "prod", True),
                                                       ("int64", "min", False), ("float32", "avg", True)]):
        if mode == "nan" and dtype.startswith("int"):
            continue
        spec = PointSpec(size_bytes=world * 64, dtype=get_dtype(dtype), op=op, out_of_place=out_of_place,
                         root=world - 1, seed=index + 1)
        out[(dtype, op, out_of_place)] = measure_point(backend, comm, REGISTRY["reduce"], spec,
                                                       LoopOptions(iters=2, warmup_iters=1), run_id="reduce").num_wrong
    return out


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("mode", ["none", "noop", "half", "wrong_peer", "zeros", "stale", "shift"])
def test_reduce_checks_the_roots_result(world, mode):
    wrong = run_ranks(_reduce_wrong, world, args=(mode,), timeout_s=120)[0]
    if mode == "none":
        assert set(wrong.values()) == {0}, wrong
    else:
        assert all(count > 0 for count in wrong.values()), wrong
