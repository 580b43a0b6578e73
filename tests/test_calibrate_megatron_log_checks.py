"""What `calibrate` reads from a Megatron-LM log beside its times (probe P4): the pipeline split it ran, priced as it
ran; the architecture arguments the step model prices; the log's own TFLOP/s; and how its measured figure was read."""

from __future__ import annotations

import dataclasses
import re

import pytest

from commbench.errors import CommbenchError
from commbench.planner.calibrate.published import check_row, predict_runs, published_runs
from commbench.planner.calibrate.runlogs import parse_megatron_log
from tests.megatron_log import megatron_log


def _row(text: str) -> dict:
    return parse_megatron_log(text, source="m.log", model="qwen3-30b-a3b", gpu="h100-hgx")


def test_megatron_s_default_even_split_is_priced_as_it_ran():
    """pp4 with no split flag is 12/12/12/12 with the loss on the last rank (busiest 1.24x the mean); the step model's
    best, 13/13/13/9, is 1.01x: the row was priced at the best and a fit moved expert_gemm_kernel_s +38% to make up
    the difference, with a note in --json only."""
    from commbench.planner.layout.split import best_split
    row = _row(megatron_log())
    assert row["pipeline_layout"] == "Et*12|(t*12|)*2t*12L"
    run = published_runs((row,))[0]
    assert run.model.pinned_split == row["pipeline_layout"]
    assert best_split(run.model, 4, 1).stages == ("Et" + "t" * 11, "t" * 12, "t" * 12, "t" * 12 + "L")
    pinned = float(predict_runs([run]).predicted_tokens[0])
    best = float(predict_runs([dataclasses.replace(run, model=dataclasses.replace(run.model, pinned_split=""))])
                 .predicted_tokens[0])
    assert pinned < 0.9 * best


def test_a_row_s_pipeline_layout_is_checked_against_its_model_and_sizes():
    row = {"model": "qwen3-30b-a3b", "gpu": "h100-hgx", "num_gpus": 16, "seq_len": 4096, "gbs": 256, "mbs": 1,
           "tp": 1, "pp": 4, "ep": 4, "precision": "BF16", "tokens_per_s_per_gpu": 5000.0}
    check_row(dict(row, pipeline_layout="Et*12|(t*12|)*2t*12L"), "r")
    with pytest.raises(CommbenchError, match="r: field 'pipeline_layout': .*it holds 40 decoder"):
        check_row(dict(row, pipeline_layout="Et*10|(t*10|)*2t*10L"), "r")
    with pytest.raises(CommbenchError, match="r: field 'pipeline_layout' = .* has 8 stages; allowed: pp x vp = 4 x 1"):
        check_row(dict(row, pipeline_layout="Et*6|(t*6|)*6t*6L"), "r")


@pytest.mark.parametrize("args, named", [({"swiglu": False}, "swiglu=False, but --model qwen3-30b-a3b has True"),
                                         ({"squared_relu": True}, "squared_relu=True"),
                                         ({"normalization": "LayerNorm"}, "normalization='LayerNorm'"),
                                         ({"qk_layernorm": False}, "qk_layernorm=False"),
                                         ({"add_qkv_bias": True}, "add_qkv_bias=True"),
                                         ({"window_size": "(4095, 0)"}, r"window_size=\(4095, 0\)")])
def test_a_layer_form_argument_other_than_the_model_s_is_refused(args, named):
    """--swiglu off is two MLP GEMMs of three (training.py counts the gated multiplier only with it): fitted as the
    gated model, without a word."""
    with pytest.raises(CommbenchError, match=f"ran with {named}.*the log is of another model"):
        _row(megatron_log(**args))


def _calibrate(tmp_path, text: str):
    from typer.testing import CliRunner

    from commbench.cli.app import app
    log = tmp_path / "m.log"
    log.write_text(text)
    return CliRunner().invoke(app, ["calibrate", "--evaluate", str(log), "--model", "qwen3-30b-a3b", "--system",
                                    "h100-hgx"])


def test_the_log_s_own_tflops_is_checked_against_megatron_s_count(tmp_path):
    """The same count agrees within 1% (FLOPS.md's departures) and the log's rounding: 5% off is another network or
    count, said in one line (only 0.5x-2x, other units, was checked)."""
    quiet = _calibrate(tmp_path, megatron_log())
    assert quiet.exit_code == 0 and "warning" not in quiet.output, quiet.output
    said = _calibrate(tmp_path, megatron_log(flop_per_gpu_step=0.95 * 1507.74e12))
    assert said.exit_code == 0
    assert re.search(r"warning: .*throughput per GPU is 149\.2 TFLOP/s, but Megatron-LM's FLOP count for "
                     r"qwen3-30b-a3b at its iteration time is 157\.\d \(-5\.0%", said.output), said.output


def test_what_is_measured_a_thin_log_and_a_crash_are_said(tmp_path):
    out = _calibrate(tmp_path, megatron_log()).output
    assert "measured: the median of 48 of its 50 iteration lines (iterations 3-50)" in out, out
    assert "median of 48 of 50 iteration line(s)" in _row(megatron_log())["notes"]
    assert "note: " + str(tmp_path / "m.log") + ": pipeline split priced as it ran: no split argument" in out, out
    thin = _calibrate(tmp_path, megatron_log(iterations=3)).output
    assert "of 1 of its 3 iteration lines (iteration 3), the rest warm-up or left out; only 1: too few" in thin, thin
    crashed = _calibrate(tmp_path, megatron_log(crash_at=25)).output
    assert re.search(r"note: .*m\.log: crashed after iteration 24 \(torch\.OutOfMemoryError: CUDA out of memory\."
                     r".*\): the lines before it are read", crashed), crashed
    assert "crashed" not in out
