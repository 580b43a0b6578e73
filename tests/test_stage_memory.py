"""Memory per GPU is the busiest pipeline rank's (step/stage_memory.py): what each rank's stages build (the
embedding, the output layer, an MTP stage's embedding copy, its own layers by kind) and the micro-batches it keeps
in flight, held to megatron-core's own schedule and model builder where they are importable."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from commbench.planner import Layout, LayoutArrays, load_model
from commbench.planner.models.counts import param_counts
from commbench.planner.models.zoo import model_names
from commbench.planner.step.mamba import block_counts
from commbench.planner.step.stage_memory import candidate_ranks, rank_loads
from commbench.row_groups import RowGroups

SPLITS = [(1, 1), (2, 1), (4, 1), (4, 2), (8, 1), (9, 1), (16, 1)]


@pytest.mark.parametrize("name", model_names())
def test_the_ranks_hold_the_whole_model_once(name):
    model = load_model(name)
    pc = param_counts(model, vocab=0)
    whole = block_counts(model)
    for pp, vp in SPLITS:
        loads = rank_loads(model, pp, vp)
        assert sum(x.non_expert_params for x in loads) == pytest.approx(pc.non_expert, rel=1e-9)
        assert sum(x.expert_params for x in loads) == pytest.approx(pc.expert, rel=1e-9, abs=1e-6)
        for kind in ("attention", "mamba", "dense", "moe", "layers", "linear"):
            assert sum(getattr(x.counts, kind) for x in loads) == getattr(whole, kind), (name, pp, vp, kind)
        assert sum(x.loss for x in loads) == 1


def test_vocabulary_copies_are_where_megatron_core_builds_them():
    """gpt_model.py builds the embedding `if self.pre_process or self.mtp_process`; the output layer on the loss
    stage; a tied output layer with pp > 1 is a copy of its own (language_module.py
    setup_embeddings_and_output_layer)."""
    dsv3 = rank_loads(load_model("deepseek-v3"), 8, 1)     # MTP on the last stage
    assert [x.vocab_matrices for x in dsv3] == [1, 0, 0, 0, 0, 0, 0, 2]
    llama = load_model("llama3-8b")
    tied = dataclasses.replace(llama, tied_embeddings=True)
    assert [x.vocab_matrices for x in rank_loads(tied, 1, 1)] == [1]
    assert [x.vocab_matrices for x in rank_loads(tied, 4, 1)] == [1, 0, 0, 1]
    assert [x.vocab_matrices for x in rank_loads(llama, 1, 1)] == [2]


def _megatron_warmup(pp, rank, vp, num_microbatches=64):
    schedules = pytest.importorskip("megatron.core.pipeline_parallel.schedules")
    comm = SimpleNamespace(pp_group=SimpleNamespace(size=lambda: pp, rank=lambda: rank),
                           virtual_pipeline_model_parallel_size=vp if vp > 1 else None)
    _, _, warmup, _ = schedules.get_pp_rank_microbatches(num_microbatches, vp, pp, p2p_communicator=comm)
    return warmup


@pytest.mark.parametrize("pp,vp", [(2, 1), (4, 1), (8, 1), (4, 2), (8, 4)])
def test_chunks_in_flight_are_megatron_cores_warmup_plus_one(pp, vp):
    model = load_model("qwen3-30b-a3b")
    for load in rank_loads(model, pp, vp):
        assert load.chunks_in_flight == _megatron_warmup(pp, load.rank, vp) + 1


def _layout(**kw):
    base = dict(tp=1, cp=1, pp=8, vp=1, ep=8, etp=1, mbs=1, precision="bf16", recompute="none")
    return Layout(**{**base, **kw})


def test_memory_is_the_busiest_ranks_not_the_mean_stages():
    """DeepSeek-V3 over 8 stages: stage 0 holds the embedding and the three dense layers (replicated over EP) and
    keeps 8 micro-batches in flight; the memory charged is at least every rank's and names the rank."""
    from commbench.planner.step import memory
    from commbench.planner.step.stage_memory import candidate_arrays

    model = load_model("deepseek-v3")
    arr = LayoutArrays.from_layouts([_layout()])
    gpu = SimpleNamespace(usable_hbm_bytes=186e9, compute_capability=(10, 0), host_memory_gb_per_gpu=480)
    from commbench.planner.step.terms import CALIBRATED
    one = np.ones(1, dtype=np.int64)
    kw = dict(tp=one, cp=one, pp=8 * one, vp=one, ep=8 * one, etp=one, dense_group=8 * one, expert_group=one,
              n_mb=np.array([32.0]), tokens_mb=np.array([4096.0]), sp=np.array([False]))
    mem = memory.memory_per_gpu(model, arr, gpu, CALIBRATED, **kw)
    loads = candidate_arrays(model, kw["pp"], kw["vp"], kw["tp"])
    assert len(loads) >= 3
    saved = memory.SavedElements(model, arr, tp=one, cp=one, etp=one, sp=kw["sp"])
    logits = memory.logits_bytes(model, tp=one, cp=one, tokens_mb=kw["tokens_mb"])
    transient = memory.moe_backward_transient_bytes(model, tp=one, cp=one, etp=one, tokens_mb=kw["tokens_mb"])
    vocab_params = 129280 * model.hidden
    totals = {}
    for load in loads:
        act = memory.rank_activation_bytes(model, arr, load, saved, vp=one, n_mb=kw["n_mb"],
                                           tokens_mb=kw["tokens_mb"], logits=logits, transient=transient)[0]
        dense = float(np.ravel(load.non_expert_params)[0]) + float(np.ravel(load.vocab_matrices)[0]) * vocab_params
        expert = float(np.ravel(load.expert_params)[0]) / 8
        # bf16 weights and gradients (2 + 2 B), Adam's 12 B sharded over the DP groups (8 dense, 1 expert)
        totals[int(np.ravel(load.rank)[0])] = (dense * 4 + expert * 4 + 12 * (dense / 8 + expert), act)
    busiest = max(totals, key=lambda r: sum(totals[r]))
    assert int(mem.rank[0]) == busiest
    static, act = totals[busiest]
    assert mem.activations[0] == pytest.approx(act)
    assert mem.weights[0] + mem.grads[0] + mem.optimizer[0] == pytest.approx(static)
    # the mean stage (the whole model / pp) holds less than the busiest rank
    pc = param_counts(model, vocab=129280)
    assert mem.weights[0] > (pc.non_expert / 8 + pc.expert / 64) * 2


@pytest.mark.parametrize("n,runs", [(4000, 5), (4000, 4000)])
def test_row_groups_spread_each_groups_value_back(n, runs):
    rng = np.random.default_rng(n + runs)
    a = np.repeat(rng.integers(1, 64, runs), n // runs)
    b = np.repeat(rng.integers(1, 4, runs), n // runs)
    c = rng.random(runs)[np.repeat(np.arange(runs), n // runs)]
    groups = RowGroups(a, b, c)
    index = groups.expand(np.arange(len(groups)))
    assert np.array_equal(groups.of(a)[index], a) and np.array_equal(groups.of(b)[index], b)
    assert np.array_equal(groups.of(c)[index], c)
    assert len(groups) <= len({(x, y, z) for x, y, z in zip(a, b, c)}) * (1 if runs == n else runs)


def test_candidates_are_the_lowest_rank_of_each_content():
    model = load_model("llama3.1-405b")
    loads = rank_loads(model, 8, 1)
    picked = candidate_ranks(model, 8, 1)
    for load in loads:
        same = [c for c in picked if (c.vocab_matrices, round(c.non_expert_params), c.counts, c.loss)
                == (load.vocab_matrices, round(load.non_expert_params), load.counts, load.loss)]
        assert len(same) == 1 and same[0].rank <= load.rank
