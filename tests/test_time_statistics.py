"""The harness's named statistics from what the loop measured (pure: no processes)."""

import numpy as np
import pytest

from commbench.measure.harness import point_seed, time_statistics
from collectives.base import PointSpec
from commbench.dtypes import get_dtype


def test_p99_only_with_enough_iterations_and_nccl_tests_modes():
    loop_by_rank = np.array([12.0, 10.0, 14.0])
    few = time_statistics(np.arange(1.0, 21.0), loop_by_rank)
    assert few["time_us_p99"] is None and few["time_us_max"] == 20.0 and few["time_us_median"] == 10.5
    assert few["loop_time_us"] == {"avg": 12.0, "rank0": 12.0, "min": 10.0, "max": 14.0}
    assert few["iter_times_us"] == [float(x) for x in range(1, 21)]
    many = time_statistics(np.arange(1.0, 201.0), loop_by_rank)
    assert many["time_us_p99"] == pytest.approx(np.percentile(np.arange(1.0, 201.0), 99)) and many["time_us_p99"] < 200


def test_point_seed_varies_with_size_and_repetition():
    spec = PointSpec(size_bytes=1024, dtype=get_dtype("float32"))
    seeds = {point_seed(spec, r) for r in range(1, 50)} | {point_seed(PointSpec(size_bytes=2048, dtype=spec.dtype), 1)}
    assert len(seeds) == 50
