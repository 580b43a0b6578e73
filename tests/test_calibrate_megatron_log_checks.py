"""What `calibrate` reads from a Megatron-LM log beside its times (probe P4): the pipeline split it ran, priced as it
ran; the architecture arguments the step model prices; the log's own TFLOP/s; and how its measured figure was read."""

from __future__ import annotations

import dataclasses

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
