"""benchmarks/pipeline_replay.py: megatron-core's 1F1B orders replayed, against hand-worked schedules and the step
model's pipeline charge."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import pipeline_replay  # noqa: E402


def test_plain_1f1b_two_ranks_two_microbatches_by_hand():
    # rank 1: F0 1-2, B0 2-4, F1 4-5, B1 5-7; rank 0: F0 0-1, F1 1-2, B0 4-6, B1 7-9
    assert pipeline_replay.replay_s(np.ones((2, 1)), 2) == pytest.approx(9.0)


def test_schedule_table_takes_each_chunk_for_a_group_of_microbatches():
    # megatron-core's example (schedules.py forward_backward_pipelining_with_interleaving): PP2 N3M5 with VP2, groups
    # of 3 micro-batches, 5 micro-batches; the last group takes what is left
    table = pipeline_replay.schedule_table(5, 2, 3)
    assert [m for m, _ in table] == [0, 1, 2, 0, 1, 2, 3, 4, 3, 4]
    assert [c for _, c in table] == [0, 0, 0, 1, 1, 1, 0, 0, 1, 1]


@pytest.mark.parametrize("pp, vp, n_mb", [(2, 2, 8), (2, 10, 16), (4, 5, 32), (4, 5, 8), (8, 4, 16)])
def test_interleaved_equal_chunks_take_the_bubble_the_step_model_charges(pp, vp, n_mb):
    chunk = 0.25
    per_mb = 3 * vp * chunk            # a rank's forward + backward of one micro-batch
    assert pipeline_replay.replay_s(np.full((pp, vp), chunk), n_mb) == pytest.approx(
        n_mb * per_mb + (pp - 1) / vp * per_mb)


@pytest.mark.parametrize("pp, vp, n_mb", [(2, 2, 8), (2, 24, 32), (4, 4, 64), (4, 5, 8), (8, 4, 16)])
def test_overlapped_sends_wait_only_on_the_fill_and_drain_chains(pp, vp, n_mb):
    chunks, p2p = np.ones((pp, vp)), 0.01
    added = pipeline_replay.replay_s(chunks, n_mb, p2p_s=p2p) - pipeline_replay.replay_s(chunks, n_mb)
    assert added == pytest.approx(2 * (pp * vp - 1) * p2p)
