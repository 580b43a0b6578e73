"""The data-check arithmetic as pure functions (no processes): every dtype's reduced result is exact at
any rank count, whatever the reduction order; NaN, all-zeros, stale and max-for-prod results are caught."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collectives.base import POISON, count_wrong, pattern, pattern_modulus, reduction_data
from commbench.dtypes import dtype_names, get_dtype

COUNT = 96
OPS = ("sum", "max", "min", "prod", "avg")


def _reduce(op: str, inputs: list[np.ndarray], torch_dtype, order) -> np.ndarray:
    """Reduce rank inputs in `order`, rounding to the dtype after every step (as any ring or tree may)."""
    acc = torch.tensor(inputs[order[0]]).to(torch_dtype)
    for r in order[1:]:
        x = torch.tensor(inputs[r]).to(torch_dtype)
        acc = {"sum": torch.add, "avg": torch.add, "max": torch.maximum, "min": torch.minimum, "prod": torch.mul}[op](acc, x)
    if op == "avg":
        acc = acc / len(inputs)
    return acc.to(torch.float64).numpy()


def _cases():
    for name in dtype_names():
        for op in OPS:
            if op == "avg" and not get_dtype(name).is_float:
                continue
            for n in (2, 3, 288, 4096):
                yield name, op, n


@pytest.mark.parametrize("name,op,n", list(_cases()))
def test_reduced_pattern_is_exact_and_never_zero(name, op, n):
    dtype = get_dtype(name)
    torch_dtype = getattr(torch, dtype.torch_name)
    seed = 12345
    inputs = [reduction_data(op, dtype, r, n, 7, COUNT, seed)[0] for r in range(n)]
    _, expected, rel_tol = reduction_data(op, dtype, 0, n, 7, COUNT, seed)
    assert rel_tol == (2 * dtype.eps if op == "avg" else 0.0)  # integers and non-dividing ops: exact
    assert np.all(expected > 0) and np.all(np.isfinite(expected))  # POISON (0) is never a right answer
    assert all(np.array_equal(x, np.round(x)) and np.abs(x).max() <= dtype.exact_int_limit for x in inputs)
    rng = np.random.default_rng(n)
    for order in ((range(n), rng.permutation(n)) if n < 1000 else (rng.permutation(n),)):
        got = _reduce(op, inputs, torch_dtype, list(order))
        assert count_wrong(got, expected, dtype, rel_tol) == 0
    assert count_wrong(np.full(COUNT, POISON), expected, dtype, rel_tol) == COUNT  # all zeros: all wrong
    assert count_wrong(np.full(COUNT, np.nan), expected, dtype, rel_tol) == COUNT
    stale = reduction_data(op, dtype, 0, n, 7, COUNT, seed + 1)[1]  # the previous point's result
    assert count_wrong(stale, expected, dtype, rel_tol) > COUNT // 4
    own = inputs[0]  # a no-op all_reduce leaves this rank's input
    assert count_wrong(own, expected, dtype, rel_tol) > 0


@pytest.mark.parametrize("n", [2, 3, 288, 4096])
def test_max_cannot_pass_for_prod(n):
    dtype = get_dtype("int8")
    inputs = [reduction_data("prod", dtype, r, n, 0, COUNT)[0] for r in range(n)]
    _, expected, _ = reduction_data("prod", dtype, 0, n, 0, COUNT)
    assert count_wrong(np.max(inputs, axis=0), expected, dtype) == COUNT
    assert count_wrong(np.sum(inputs, axis=0), expected, dtype) > 0


def test_non_reducing_pattern_names_its_rank_offset_and_seed():
    dtype = get_dtype("bfloat16")
    m = pattern_modulus(dtype)
    mine = pattern(3, 0, 1000, m, seed=1)
    assert mine.min() >= 1 and mine.max() <= m <= dtype.exact_int_limit
    for other in (pattern(4, 0, 1000, m, 1), pattern(3, 1000, 1000, m, 1), pattern(3, 0, 1000, m, 2)):
        assert count_wrong(other, mine, dtype) > 900  # wrong peer, wrong chunk, previous point
    nan = mine.copy()
    nan[5] = np.nan
    assert count_wrong(nan, mine, dtype) == 1


def test_pairwise_on_a_backend_without_device_sum_is_refused_in_one_line():
    from collectives import get_collective
    from collectives.grad_reduce_scatter import resolve_impl
    from commbench.errors import CommbenchError

    for impl in ("pairwise", "duplex"):
        with pytest.raises(CommbenchError) as caught:
            get_collective("grad_reduce_scatter").check_params({"rs_impl": impl}, "cupy-nccl")
        assert "\n" not in str(caught.value) and impl in str(caught.value)
    assert resolve_impl("auto", "cupy-nccl") == "native" and resolve_impl("pairwise", "gloo") == "pairwise"
