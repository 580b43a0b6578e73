"""The data-check arithmetic as pure functions (no processes): every dtype's reduced result is exact at
any rank count, whatever the reduction order (avg within its bound, in NCCL's pre-multiply order too,
at 72 and 288 emulated ranks); NaN, all-zeros, stale, narrowed and max-for-prod results are caught."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collectives.base import POISON, avg_rel_bound, count_wrong, pattern, reduction_data
from collectives.patterns import integer_avg_check_problem
from commbench.dtypes import dtype_names, get_dtype

COUNT = 96
OPS = ("sum", "max", "min", "prod", "avg")


def _reduce(op: str, inputs: list[np.ndarray], torch_dtype, order) -> np.ndarray:
    """Reduce rank inputs in `order`, rounding to the dtype after every step (as any ring or tree may)."""
    acc = torch.tensor(inputs[order[0]]).to(torch_dtype)
    for r in order[1:]:
        x = torch.tensor(inputs[r]).to(torch_dtype)
        acc = {"sum": torch.add, "avg": torch.add, "max": torch.maximum, "min": torch.minimum, "prod": torch.mul}[op](acc, x)
    if op == "avg" and torch_dtype.is_floating_point:
        acc = acc / len(inputs)
    elif op == "avg":  # NCCL's integer avg: the sum, then one division truncating toward zero (FuncSumPostDiv)
        acc = torch.div(acc, len(inputs), rounding_mode="trunc")
    return acc.to(torch.float64).numpy()


def _nccl_avg(inputs: list[np.ndarray], torch_dtype, order) -> np.ndarray:
    """avg as NCCL computes it (enqueue.cc): the scalar 1/n in the dtype, every input pre-multiplied by
    it, then summed (rounded to the dtype at every step)."""
    scalar = torch.tensor(1.0 / len(inputs), dtype=torch.float64).to(torch_dtype)
    acc = None
    for r in order:
        term = torch.tensor(inputs[r]).to(torch_dtype) * scalar
        acc = term if acc is None else acc + term
    return acc.to(torch.float64).numpy()


NARROWER = {"float64": torch.float32, "float32": torch.bfloat16, "float16": torch.bfloat16,
            "bfloat16": torch.float8_e5m2, "int32": torch.uint8, "int64": torch.uint8}


def _narrowed(values: np.ndarray, name: str) -> np.ndarray:
    """Values passed through the narrower type, back in the dtype (as a narrowing bug leaves them)."""
    wide = getattr(torch, get_dtype(name).torch_name)
    return torch.tensor(values).to(wide).to(NARROWER[name]).to(wide).to(torch.float64).numpy()

def _cases():
    for name in dtype_names():
        for op in OPS:
            for n in (2, 3, 288, 4096):
                if op == "avg" and integer_avg_check_problem(get_dtype(name), n):
                    continue  # refused by bench's validation (test_integer_avg_is_checked_only_where_it_can_fail)
                yield name, op, n


@pytest.mark.parametrize("name,op,n", list(_cases()))
def test_reduced_pattern_is_exact_and_never_zero(name, op, n):
    dtype = get_dtype(name)
    torch_dtype = getattr(torch, dtype.torch_name)
    seed = 12345
    inputs = [reduction_data(op, dtype, r, n, 7, COUNT, seed)[0] for r in range(n)]
    _, expected, rel_tol = reduction_data(op, dtype, 0, n, 7, COUNT, seed)
    assert rel_tol == (avg_rel_bound(dtype, n) if op == "avg" else 0.0)  # integers and non-dividing ops: exact
    assert np.all(expected != 0) and np.all(np.isfinite(expected))  # POISON (0) is never a right answer
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
    if name in NARROWER:  # full width: data that passed through a narrower type fails (many elements;
        # avg's bound hides the narrowing where it rounds to within a few ulp: fp16 via bf16 is only 3 bits
        # narrower, its rounding up to 8 u against avg's (terms + 1) u = 5 u at 4 terms; sum catches it exactly)
        share = 16 if op == "avg" and name == "float16" else 4 if op == "avg" else 2
        assert count_wrong(_narrowed(expected, name), expected, dtype, rel_tol) > COUNT // share


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("n", [72, 288])
def test_avg_in_nccl_order_passes_at_72_and_288_ranks(name, n):
    dtype = get_dtype(name)
    torch_dtype = getattr(torch, dtype.torch_name)
    inputs = [reduction_data("avg", dtype, r, n, 0, COUNT, 9)[0] for r in range(n)]
    _, expected, rel_tol = reduction_data("avg", dtype, 0, n, 0, COUNT, 9)
    for order in (range(n), np.random.default_rng(n).permutation(n)):
        assert count_wrong(_nccl_avg(inputs, torch_dtype, list(order)), expected, dtype, rel_tol) == 0
        assert count_wrong(_reduce("avg", inputs, torch_dtype, list(order)), expected, dtype, rel_tol) == 0
    if name in ("float32", "float64"):  # the bound is tight enough that a narrowed avg still fails
        assert count_wrong(_narrowed(expected, name), expected, dtype, rel_tol) > COUNT // 2


@pytest.mark.parametrize("n", [2, 3, 288, 4096])
def test_max_cannot_pass_for_prod(n):
    dtype = get_dtype("int8")
    inputs = [reduction_data("prod", dtype, r, n, 0, COUNT)[0] for r in range(n)]
    _, expected, _ = reduction_data("prod", dtype, 0, n, 0, COUNT)
    assert count_wrong(np.max(inputs, axis=0), expected, dtype) == COUNT
    assert count_wrong(np.sum(inputs, axis=0), expected, dtype) > 0


@pytest.mark.parametrize("name", dtype_names())
def test_non_reducing_pattern_is_full_width_and_names_its_rank_offset_and_seed(name):
    dtype = get_dtype(name)
    mine = pattern(3, 0, 1000, dtype, seed=1)
    assert np.all(mine != 0) and np.abs(mine).max() <= dtype.exact_int_limit
    assert np.abs(mine).max() > dtype.exact_int_limit // 2 * 1.9  # the top of the range is used
    for other in (pattern(4, 0, 1000, dtype, 1), pattern(3, 1000, 1000, dtype, 1), pattern(3, 0, 1000, dtype, 2)):
        assert count_wrong(other, mine, dtype) > 900  # wrong peer, wrong chunk, previous point
    if name in NARROWER:
        assert count_wrong(_narrowed(mine, name), mine, dtype) > 500
    if dtype.is_float:
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


@pytest.mark.parametrize("num_ranks", [2, 3, 4, 8, 16])
def test_the_check_after_the_timed_loop_draws_its_lead_ranks_afresh(num_ranks):
    # the lead rank was (index + seed) mod n and `salted` keeps the seed mod 16: at 2, 4, 8 and 16 ranks both checks of
    # a point had the same leads, so an in-place max/min reduce whose root kept its own input at an element where it
    # leads (its input is then the answer) passed both checks alike, missed 1/n of the time, not 1/n^2 (found from
    # outside); each index must draw its lead per seed, every role still held by one rank
    from collectives.patterns import _roles, salted
    seeds = range(1, 4001)
    both = np.mean([_roles(0, num_ranks, 0, 1, salted(s, 0))[0] == 0 and _roles(0, num_ranks, 0, 1, salted(s, 1))[0] == 0
                    for s in seeds])
    assert both < 1.6 / num_ranks ** 2 + 0.01 and both > 0.5 / num_ranks ** 2 - 0.01
    roles = np.stack([_roles(rank, num_ranks, 5, 64, 12345) for rank in range(num_ranks)])
    assert (np.sort(roles, axis=0) == np.arange(num_ranks)[:, None]).all()   # a permutation of the roles per index


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("n", [2, 3, 4, 288])
def test_avg_sees_every_term(name, n):
    # found from outside: avg's inputs were one full-width lead and one 1, so an avg that dropped every rank but the
    # lead (max/n) passed the bound; now each of min(n, 4) terms per index is far above it
    from collectives.patterns import avg_terms
    dtype = get_dtype(name)
    inputs = np.stack([reduction_data("avg", dtype, r, n, 0, COUNT, 9)[0] for r in range(n)])
    _, expected, rel_tol = reduction_data("avg", dtype, 0, n, 0, COUNT, 9)
    assert np.all((inputs != 0).sum(axis=0) == avg_terms(n)) and (n > 4 or np.all(inputs != 0))
    assert count_wrong(inputs.max(axis=0) / n, expected, dtype, rel_tol) == COUNT
    assert count_wrong(inputs.sum(axis=0), expected, dtype, rel_tol) == COUNT
    for dropped in range(n):  # one rank's input lost: wrong wherever it holds a term, by >= 1/(2 terms)
        rest = np.delete(inputs, dropped, axis=0).sum(axis=0) / n
        assert count_wrong(rest, expected, dtype, rel_tol) == np.count_nonzero(inputs[dropped])
        assert np.all(np.abs(rest - expected)[inputs[dropped] != 0] > 5 * rel_tol * expected[inputs[dropped] != 0])


UNSIGNED = {"int8": np.uint8, "int32": np.uint32, "int64": np.uint64}


@pytest.mark.parametrize("name", dtype_names())
@pytest.mark.parametrize("n", [2, 3, 4, 288])
def test_signed_types_reduce_negative_values(name, n):
    # found from outside: max/min/prod inputs were all >= 0, so a signed type reduced as unsigned (int8 as uint8,
    # an ncclInt8 -> ncclUint8 mix-up) passed max and min; signs now mix at every index (prod: either sign, exact)
    dtype = get_dtype(name)
    signed = dtype.is_float or not name.startswith("u")
    for op in ("max", "min", "prod"):
        inputs = np.stack([reduction_data(op, dtype, r, n, 0, COUNT, 4)[0] for r in range(n)])
        expected = reduction_data(op, dtype, 0, n, 0, COUNT, 4)[1]
        assert np.abs(inputs).max() <= dtype.exact_int_limit and np.abs(expected).max() <= dtype.exact_int_limit
        assert (inputs < 0).any() == signed and (expected < 0).any() == (signed and op != "max")
        if name in UNSIGNED and op != "prod":  # the mix-up: compared as unsigned, reinterpreted back
            as_unsigned = getattr(inputs.astype(getattr(np, name)).view(UNSIGNED[name]), op)(axis=0)
            assert count_wrong(as_unsigned.view(getattr(np, name)).astype(np.int64), expected, dtype) == COUNT


@pytest.mark.parametrize("name", ["int8", "uint8", "int32", "int64"])
def test_integer_avg_is_checked_only_where_it_can_fail(name):
    """NCCL averages integers (the sum, then a truncating division): exact, so a lost rank must move the result by
    at least 1 and the result is never the poison. Where the dtype cannot hold such terms the check is refused."""
    dtype = get_dtype(name)
    for n in range(2, 300):
        problem = integer_avg_check_problem(dtype, n)
        if problem:
            assert name in ("int8", "uint8") and f"over {n} ranks" in problem
            continue
        inputs = [reduction_data("avg", dtype, r, n, 0, COUNT, 5)[0] for r in range(n)]
        _, expected, rel_tol = reduction_data("avg", dtype, 0, n, 0, COUNT, 5)
        assert rel_tol == 0.0 and np.all(expected != POISON)
        total = np.sum(np.stack(inputs).astype(np.int64), axis=0)
        assert count_wrong(total // n, expected, dtype) == 0
        dropped = total - inputs[n - 1].astype(np.int64)  # the last rank's input lost
        assert count_wrong(dropped // n, expected, dtype) == np.count_nonzero(inputs[n - 1])
    if name in ("int32", "int64"):
        assert integer_avg_check_problem(dtype, 4096) is None


def test_bench_refuses_only_what_cannot_run_or_be_checked():
    """Integer avg: gloo cannot run it (one line naming NCCL); NCCL backends run it, checked where the check can
    fail, else refused under -c 1 with the way out (-c 0 or a wider dtype)."""
    from commbench.errors import CommbenchError
    from commbench.measure.bench import BenchConfig, validate
    from commbench.measure.harness import LoopOptions

    def config(backend, dtype, check=True):
        return BenchConfig(collective="all_reduce", sizes_bytes=(1024,), dtype=dtype, op="avg", backend=backend,
                           loop=LoopOptions(iters=2, warmup_iters=1, check=check))

    with pytest.raises(CommbenchError, match="--op=avg with --dtype int32 is not possible on gloo.*nccl or cupy-nccl backend"):
        validate(config("gloo", "int32"), 2)
    validate(config("gloo", "float32"), 2)
    validate(config("cupy-nccl", "int32"), 4096)
    validate(config("cupy-nccl", "int8"), 16)
    with pytest.raises(CommbenchError, match=r"--check: the average of int8 values over 64 ranks cannot be checked.*-c 0"):
        validate(config("cupy-nccl", "int8"), 64)
    validate(config("cupy-nccl", "int8", check=False), 64)
