"""A fitted curve scales to other group sizes by its collective's own step count: nccl-tests' sendrecv is one send
and one recv per rank at any group size (nccl-tests src/sendrecv.cu), as the presets' p2p (1 step)."""

from __future__ import annotations

import pytest

from commbench.costmodel import collective_time_s
from commbench.costmodel.fit_records import fit_all
from commbench.costmodel.formulas import steps
from commbench.costmodel.profile import fabric_from_fits
from tests.test_fit_cross_domain import _records


def test_a_sendrecv_curve_measured_at_8_ranks_keeps_its_latency_at_2():
    """The 'fitted' algorithm's n-1 steps applied to sendrecv: a curve measured at 8 ranks in 21 us predicted 3 us
    at 2 ranks (1/7), the planner's pipeline-parallel p2p."""
    fits, _ = fit_all(_records("sendrecv", 8, 21.0, 50.0, "sr"), {})
    fabric = fabric_from_fits(fits, base=None, name="fitted", source="fitted:test")
    at_8 = float(collective_time_s(fabric, "sendrecv", 1024, 8))
    at_2 = float(collective_time_s(fabric, "sendrecv", 1024, 2))
    assert at_8 == pytest.approx(21e-6 + 1024 / 50e9, rel=0.01)
    assert at_2 == pytest.approx(at_8, rel=1e-9)


def test_other_fitted_collectives_keep_their_ring_steps():
    assert float(steps("sendrecv", "fitted", 8)) == 1.0
    assert float(steps("all_reduce", "fitted", 8)) == 14.0   # reduce-scatter + all-gather ring passes
    assert float(steps("all_gather", "fitted", 8)) == 7.0
