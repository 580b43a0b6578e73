"""The search's speed-ups rest on the step model working row by row: a layout's breakdown is the same evaluated
among any others (with_full_graphs and the last search chunk take rows of breakdowns already evaluated), and a term
computed once per group of rows reads only the layout columns its key fixes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from commbench.costmodel import load_preset
from commbench.planner import evaluate_layouts, load_model
from commbench.planner.layout.graph_scope import scope_mask
from commbench.planner.layout.recompute import graph_kept_moe_norm
from commbench.planner.layout.spec import CODE_FIELDS, LayoutArrays
from commbench.planner.search.candidates import candidates
from commbench.planner.search.space import SearchRequest, search
from commbench.row_groups import RowGroups


def same(a, b) -> None:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), f.name


def test_a_layouts_breakdown_is_the_same_among_any_others():
    model, fabric = load_model("deepseek-v3"), load_preset("gb300-nvl72", num_gpus=256)
    arr, _, _ = candidates(SearchRequest(model=model, fabric=fabric, num_gpus=256, gbs=4096, precision="mxfp8"))
    rng = np.random.default_rng(0)
    rows = rng.choice(len(arr), 3000, replace=False)   # TP, EP, PP, FSDP, recompute and flags mixed
    some = arr.take(rows)
    assert len(set(some.tp.tolist())) > 1 and some.fsdp.any() and (some.pp > 1).any()
    whole = evaluate_layouts(model, fabric, some)
    order = rng.permutation(len(some))
    same(whole.take(order), evaluate_layouts(model, fabric, some.take(order)))
    same(whole.take(slice(10, 40)), evaluate_layouts(model, fabric, some.take(np.arange(10, 40))))
    full = LayoutArrays(**{**{f: getattr(some, f) for f in some.__dataclass_fields__},
                           "cuda_graph": np.full(len(some), CODE_FIELDS["cuda_graph"].index("full"), dtype=np.int8)})
    mask = rng.random(len(some)) < 0.5
    mixed = LayoutArrays(**{f: np.where(mask, getattr(full, f), getattr(some, f)) for f in some.__dataclass_fields__})
    same(whole.where(mask, evaluate_layouts(model, fabric, full)), evaluate_layouts(model, fabric, mixed))


def test_search_breakdown_is_its_layouts_evaluated():
    model, fabric = load_model("deepseek-v3"), load_preset("gb300-nvl72", num_gpus=64)
    res = search(SearchRequest(model=model, fabric=fabric, num_gpus=64, gbs=512, precision="mxfp8"))
    same(res.breakdown, evaluate_layouts(model, fabric, res.layouts))


def test_a_group_term_reads_only_its_key_columns():
    model, fabric = load_model("deepseek-v3"), load_preset("gb300-nvl72", num_gpus=64)
    arr, _, _ = candidates(SearchRequest(model=model, fabric=fabric, num_gpus=64, gbs=512, precision="mxfp8"))
    groups = RowGroups(arr.tp, arr.ep)
    cols = groups.columns(arr, ("tp", "ep"))
    assert len(cols) == len(groups) < len(arr)
    assert np.array_equal(groups.expand(cols.tp), arr.tp) and np.array_equal(groups.expand(cols.ep), arr.ep)
    with pytest.raises(AttributeError):
        cols.recompute
    table = np.stack([cols.tp, cols.ep])
    assert np.array_equal(groups.expand_each(table), np.stack([arr.tp, arr.ep]))


def test_row_groups_never_merge_rows_a_packed_key_would_wrap():
    """Columns whose ranges multiply past 2**64 (RowGroups packs every column's code into one int64 key): rows that
    differ only in the first column stay apart (the key renumbers before it would overflow)."""
    wide = (1 << 20) - 1   # the widest range a column is packed at its offset
    first = np.array([0, 1, 0])
    rest = [np.array([0, 0, wide]) for _ in range(4)]   # 2 x (2**20)**4 = 2**81 codes
    groups = RowGroups(first, *rest)
    assert len(groups) == 3
    index = groups.expand(np.arange(len(groups)))
    assert np.array_equal(groups.of(first)[index], first)


def test_memory_is_the_same_among_rows_that_share_its_groups():
    """memory_per_gpu computes each rank's weights, gradients and optimizer state once per group of rows, and its
    activations once per group keyed by the MoE norm's CUDA-graph rule rather than by the graph, its scope, the
    dispatcher and EP: rows mixing those (and recompute_layers, CPU offloading) evaluate as they do alone."""
    model, fabric = load_model("deepseek-v3"), load_preset("gb300-nvl72", num_gpus=256)
    arr, _, _ = candidates(SearchRequest(model=model, fabric=fabric, num_gpus=256, gbs=4096, precision="mxfp8"))
    rng = np.random.default_rng(1)
    some = arr.take(rng.choice(len(arr), 400, replace=False))
    n = len(some)
    scopes = np.array([0] + [scope_mask(t) for t in ("attn+moe_router", "moe_router+moe_preprocess", "moe", "layer")],
                      dtype=some.cuda_graph_scope.dtype)   # 0: the default scope
    mixed = dataclasses.replace(
        some, cuda_graph=rng.integers(0, 3, n).astype(some.cuda_graph.dtype),
        cuda_graph_scope=rng.choice(scopes, n), dispatcher=rng.integers(0, 2, n).astype(some.dispatcher.dtype),
        recompute_layers=np.where(rng.random(n) < 0.3, rng.integers(1, 4, n), 0).astype(some.recompute_layers.dtype),
        cpu_offload_layers=np.where(rng.random(n) < 0.2, 2, 0).astype(some.cpu_offload_layers.dtype))
    whole = evaluate_layouts(model, fabric, mixed)
    assert len(set(whole.mem_pipeline_rank.tolist())) > 1 and whole.valid.any()
    assert set(graph_kept_moe_norm(model, mixed).tolist()) == {False, True}
    for i in rng.choice(n, 25, replace=False):
        same(whole.take(slice(i, i + 1)), evaluate_layouts(model, fabric, mixed.take(np.array([i]))))


def test_structure_terms_are_each_rows_own_among_invalid_rows():
    """The CP ring step, the PP send/recv and the DP groups' domains are priced once per structure group (evaluate.py
    `structure`, dp in its key): rows with CP and PP, beside invalid rows (their stand-in layout), evaluate as they do
    alone."""
    model, fabric = load_model("deepseek-v3"), load_preset("gb300-nvl72", num_gpus=256)
    arr, _, _ = candidates(SearchRequest(model=model, fabric=fabric, num_gpus=256, gbs=4096, precision="mxfp8"))
    rng = np.random.default_rng(2)
    some = arr.take(np.concatenate([rng.choice(np.flatnonzero(arr.cp > 1), 40, replace=False),
                                    rng.choice(np.flatnonzero(arr.pp > 1), 40, replace=False)]))
    broken = rng.random(len(some)) < 0.25   # the world rule broken: evaluated on the stand-in layout
    some = dataclasses.replace(some, dp=np.where(broken, some.dp * 2, some.dp).astype(some.dp.dtype))
    whole = evaluate_layouts(model, fabric, some)
    assert not whole.valid[broken].any() and whole.valid[~broken].all() and (whole.cp_total_s > 0).any()
    for i in rng.choice(len(some), 12, replace=False):
        same(whole.take(slice(i, i + 1)), evaluate_layouts(model, fabric, some.take(np.array([i]))))
