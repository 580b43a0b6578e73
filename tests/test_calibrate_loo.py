"""Leave-one-out in `commbench calibrate` refits with the fit's own procedure."""

from __future__ import annotations

import json

import pytest

from commbench.cli.calibrate import load_runs
from commbench.planner.calibrate.regularise import _abs_error_pct, _same, calibrate_report, distinct_runs
from commbench.planner.step.terms import CALIBRATED

NOTES = "Megatron-Bridge/NeMo 26.04 container; task=Pre-Training; system=DGX-GB300; FSDP={}"
# Megatron-Bridge's performance-summary-archive.md (commit 067f987df03b8355b03192d88d70f1709fedf51a), Llama3 70B on
# 64 GB300 at 26.04
ROWS = [dict(model="LLAMA3_70B", gpu="DGX-GB300", num_gpus=64, precision=precision, gbs=256, mbs=mbs, seq_len=8192,
             tp=1, pp=pp, cp=1, vp=vp, ep=None, etp=None, tokens_per_s_per_gpu=tok, tflops_per_gpu=tflops,
             notes=NOTES.format(fsdp), release="26.04")
        for precision, mbs, pp, vp, tok, tflops, fsdp in (("NVFP4", 1, 4, 5, 7397, 3321, 0),
                                                          ("MXFP8", 1, 4, 5, 4742, 2131, 0),
                                                          ("FP8", 2, 1, None, 5243, 2355, 64))]


def test_leave_one_out_refits_as_the_fit_does(tmp_path):
    """Leave-one-out refitted with 3 rounds of the coordinate search where the fit uses 5, so on these three GB300
    rows it reported 4.9% on the FP8 row where the fit's own procedure on the other two leaves 7.2% (from outside: a
    leave-one-out median below the in-sample one). Each held-out error is now the fit's, run without that run."""
    (tmp_path / "rows.json").write_text(json.dumps(ROWS))
    runs = [r for r in load_runs([str(tmp_path / "rows.json")]) if r.layout is not None]
    report = calibrate_report(runs, CALIBRATED)
    by_hand = [float(_abs_error_pct([held], calibrate_report([r for r in runs if not _same(r, held)], CALIBRATED,
                                                             loo=False).fitted)[0])
               for held in distinct_runs(runs)]
    assert report.loo_abs_error_pct == pytest.approx(by_hand, rel=1e-12)
