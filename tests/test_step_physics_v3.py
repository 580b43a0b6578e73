"""Step model v3: expert (grouped) GEMMs at the efficiency of their precision."""

from __future__ import annotations

import pytest

from commbench.costmodel import load_preset
from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.step.terms import CALIBRATED, PUBLISHED_FIT_TERMS, FITTED_TERMS


def _routed_only(precision: str, **terms):
    m = load_model("deepseek-v3")
    fabric = load_preset("gb200-nvl72", num_gpus=256)
    arr = LayoutArrays.from_layouts([Layout(tp=1, pp=4, vp=4, ep=64, etp=1, dp=64, mbs=1, gbs=4096,
                                            precision=precision)])
    return evaluate_layouts(m, fabric, arr, calibration=CALIBRATED.with_values(**terms)).gemm_s[0]


def test_expert_gemms_use_the_grouped_efficiency_of_their_precision():
    # the 8-bit term moves mxfp8 runs only, the bf16 term bf16 runs only
    assert _routed_only("mxfp8", grouped_gemm_8bit_efficiency=0.3) > _routed_only("mxfp8")
    assert _routed_only("mxfp8", grouped_gemm_efficiency=0.9) == pytest.approx(_routed_only("mxfp8"))
    assert _routed_only("bf16", grouped_gemm_efficiency=0.9) < _routed_only("bf16")
    assert _routed_only("bf16", grouped_gemm_8bit_efficiency=0.3) == pytest.approx(_routed_only("bf16"))
    # the published fit holds the 8-bit term at its kernel anchor; calibrate may fit it
    assert "grouped_gemm_8bit_efficiency" in FITTED_TERMS
    assert "grouped_gemm_8bit_efficiency" not in PUBLISHED_FIT_TERMS
    # GEMMs move their compulsory operand traffic (held at 1 in the published fit)
    assert "gemm_traffic_factor" not in PUBLISHED_FIT_TERMS and CALIBRATED.gemm_traffic_factor == 1.0
    assert CALIBRATED.grouped_gemm_8bit_efficiency == pytest.approx(2672 / 5000 / 0.9564, rel=0.01)

