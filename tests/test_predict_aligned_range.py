"""predict --fabric flagged the nominal size a fit measured as 'extrapolated' (probe Q 10): all_to_all on 3 ranks
measures -e 64K as 65,520 B (nccl-tests' 16 B per rank alignment), the fit's largest size, so predicting 64 KiB on
the same 3 ranks said 'beyond 1008 B..65520 B'. A size the sweep would have measured inside the fitted sizes (the
same alignment, in the data type the curve was measured in) is in range now; one byte further is not."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from collectives import REGISTRY
from commbench.cli.app import app
from commbench.results.records import JsonlWriter, Measurement, RunHeader


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    """all_to_all on 3 gloo ranks, float32, nominal 1 KiB..64 KiB x 2, recorded at their aligned sizes (as bench)."""
    folder = tmp_path_factory.mktemp("fit")
    results = folder / "a2a.jsonl"
    with JsonlWriter(results) as writer:
        writer.write(RunHeader(run_id="a2a", started_at="t", argv=[], commbench_version="0", python_version="3",
                               torch_version=None, nccl_version=None, cuda_version=None, cupy_version=None,
                               backend="gloo", world_size=3, hostnames=["h"], devices=["cpu"] * 3, nccl_env={},
                               launcher="local"))
        for p in range(10, 17):
            count, size = REGISTRY["all_to_all"].count_for(1 << p, 4, 3)
            time_s = (400e-6 + 2 / 3 * size / 1e9) * float(np.exp(np.random.default_rng(p).normal(0, 0.01)))
            writer.write(Measurement(run_id="a2a", collective="all_to_all", backend="gloo", size_bytes=size,
                                     count=count, dtype="float32", op="sum", in_place=False, world_size=3,
                                     group_size=3, iters=10, warmup_iters=2, time_us_median=time_s * 1e6))
    fitted = CliRunner().invoke(app, ["fit", str(results), "-O", str(folder / "fabric.json")])
    assert fitted.exit_code == 0, fitted.output
    return folder / "fabric.json"


def _marks(profile, *args):
    result = CliRunner().invoke(app, ["predict", "--fabric", str(profile), "-c", "all_to_all", "-g", "3", *args,
                                      "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    return doc, {row["size_bytes"]: row["extrapolated"] for row in doc["rows"]}


def test_the_nominal_size_measured_is_in_range_and_no_wider(profile):
    doc, marks = _marks(profile, "-b", "1K", "-e", "64K", "-f", "8")
    assert doc["fitted_range"]["max_size_bytes"] == 65520 and doc["fitted_range"]["min_size_bytes"] == 1008
    assert marks == {1024: False, 8192: False, 65536: False}, marks
    assert doc["fitted_range"]["dtypes"] == ["float32"] and doc["fitted_range"]["collective"] == "all_to_all"
    # 65,567 B still aligns to 65,520 B on 3 ranks; 65,568 B is measured as 65,568 B: beyond the fit
    _, edge = _marks(profile, "-b", "65567", "-e", "65568", "-i", "1")
    assert edge == {65567: False, 65568: True}, edge
    # below: 1,000 B aligns to 960 B, under the smallest measured 1,008 B
    _, low = _marks(profile, "-b", "1000", "-e", "1000")
    assert low == {1000: True}, low
    table = CliRunner().invoke(app, ["predict", "--fabric", str(profile), "-c", "all_to_all", "-g", "3", "-b", "1K",
                                     "-e", "64K", "-f", "8"], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "extrapolated" not in table.output.split("predicted by the cost model")[0]
