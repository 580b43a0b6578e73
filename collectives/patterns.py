"""Checkable data for the workloads: full-width seeded patterns, exact reductions, avg's bound."""

from __future__ import annotations

import numpy as np

from commbench.dtypes import DType

# --- checkable data -------------------------------------------------------------------------
# Patterns use each dtype's full width: integers draw from the whole range (sign bit included), floats
# are integers in [2^(p-1), 2^p] (p = significand bits), so every significand bit is random and data
# that passed through a narrower type (fp32 via bf16/fp16, fp64 via fp32, int32/int64 via uint8)
# differs. Reductions: per index one lead rank (drawn per index from the seed) holds a full-width
# value, `ones` other ranks hold 1 (the sum counts every rank's contribution), the rest 0, so every
# partial sum is an integer the dtype holds exactly whatever the rank count or reduction order: sum,
# max, min and prod are compared exactly. avg divides: its bound is derived from NCCL's order
# (enqueue.cc: the scalar 1/n in the dtype, every input pre-multiplied by it, then summed), see
# `avg_rel_bound`. Outputs are poisoned with POISON (0) before a checked run and no pattern value is 0,
# so a skipped or half-written output fails; NaN/inf never equal. Patterns depend on a per-point seed
# (nccl-tests seeds initData with the repetition) and, after the timed loop, a salted one (`salted`),
# so the previous point's or the first call's data fails.

POISON = 0.0


def salted(seed: int, salt: int) -> int:
    """The pattern seed of the `salt`-th check of a point (0: the seed itself)."""
    return seed if salt == 0 else (seed * 0x9E3779B1 + salt * 0x7F4A7C15 + 0x632BE5AB) & 0x7FFFFFFF


def per_seed(make):
    """`make(seed)`, remembered for the last seed (a check fills, then counts, with the same data)."""
    cache: dict = {}

    def get(seed: int):
        if seed not in cache:
            cache.clear()
            cache[seed] = make(seed)
        return cache[seed]
    return get


def _mix(key: np.ndarray) -> np.ndarray:
    """A cheap integer hash (the splitmix64 finaliser), elementwise on uint64."""
    x = key.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(29)
    return x


def _index_hash(start: int, count: int, rank: int, seed: int) -> np.ndarray:
    idx = np.arange(start, start + count, dtype=np.uint64)
    salt = ((rank * 0x100000001B3) ^ ((seed & 0xFFFFFFFF) * 0xC2B2AE3D27D4EB4F)) & 0xFFFFFFFFFFFFFFFF
    return _mix(idx ^ np.uint64(salt))


def _carrier(dtype: DType):
    """The numpy type that holds every value of `dtype` exactly (what backend.write takes)."""
    return np.float64 if dtype.is_float else np.int64


def _draw(hashes: np.ndarray, low: int, high: int) -> np.ndarray:
    """Integers in [low, high] (inclusive, any int64 range) from uint64 hashes, as int64."""
    span = high - low + 1
    offset = hashes if span >= 1 << 64 else hashes % np.uint64(span)
    return (offset + np.uint64(low % (1 << 64))).view(np.int64)


def value_range(dtype: DType) -> tuple[int, int]:
    """[low, high] of a non-reducing pattern: the full range of an integer type; [2^(p-1), 2^p] for a
    float with p significand bits."""
    limit = dtype.exact_int_limit
    if dtype.is_float:
        return limit // 2, limit
    return (1, limit) if dtype.name.startswith("u") else (-limit, limit)


def pattern(rank: int, start: int, count: int, dtype: DType, seed: int = 0) -> np.ndarray:
    """What rank `rank` sends at elements start..start+count: a full-width value hashed from (rank,
    index, seed), never 0, so data from a wrong rank, offset or point differs almost everywhere."""
    values = _draw(_index_hash(start, count, rank, seed), *value_range(dtype))
    values[values == 0] = 1
    return values.astype(_carrier(dtype))


def _sum_shape(dtype: DType, num_ranks: int, op: str = "sum") -> tuple[int, int]:
    """(ones, lead_high): `ones` ranks hold 1 and the lead at most lead_high, so every partial sum is
    within the dtype's exact range. avg: one rank holds 1 (its rounding bound grows with the nonzero
    terms; each rank is still the 1 at some indices, as roles cycle with the index)."""
    limit = dtype.exact_int_limit
    ones = min(num_ranks - 1, 1 if op == "avg" else limit // 4)
    return ones, limit - ones


def _roles(rank: int, num_ranks: int, start: int, count: int, seed: int) -> np.ndarray:
    """Per index, this rank's position after the index's lead rank (0 = lead): the lead is drawn per index from the
    seed's hash, and the other roles follow it cyclically (each role held by one rank). Drawn, not (index + seed) mod n:
    `salted` keeps the seed mod 16, so at 2, 4, 8 or 16 ranks the check after the timed loop had the same leads as the
    one before it, and an in-place max/min reduce whose root kept its own input where it leads passed both alike."""
    lead_rank = _draw(_index_hash(start, count, 1 << 21, seed), 0, num_ranks - 1)
    return (rank - lead_rank) % num_ranks


def _lead(dtype: DType, start: int, count: int, seed: int, low: int, high: int, salt: int = 0) -> np.ndarray:
    return _draw(_index_hash(start, count, 1 << 20 | salt, seed), low, high)


def _lead_values(op: str, dtype: DType, num_ranks: int, start: int, count: int, seed: int) -> np.ndarray:
    """The lead rank's value per index; a signed sum's lead is never -ones (the result would be 0,
    the poison)."""
    lead = _lead(dtype, start, count, seed, *_lead_range(op, dtype, num_ranks))
    if op in ("sum", "avg"):
        ones, _ = _sum_shape(dtype, num_ranks, op)
        lead[lead == -ones] += 1
    return lead


def _lead_range(op: str, dtype: DType, num_ranks: int) -> tuple[int, int]:
    """[low, high] of the lead rank's value for `op`: the top half of the exact range (full width; with
    the sign for signed integers' sums), a quarter of it for prod (times 2 or 3 stays exact)."""
    limit, signed = dtype.exact_int_limit, not dtype.is_float and not dtype.name.startswith("u")
    ones, high = _sum_shape(dtype, num_ranks, op)
    if op == "prod":
        return limit // 8, limit // 4
    if op in ("sum", "avg") and signed:
        return -high, high
    return limit // 2, high if op in ("sum", "avg") else limit - 1


def reduction_inputs(op: str, dtype: DType, rank: int, num_ranks: int, start: int, count: int,
                     seed: int = 0) -> np.ndarray:
    """This rank's input at elements start..start+count for reducing with `op` over num_ranks."""
    if op not in ("sum", "prod", "max", "min", "avg"):
        raise ValueError(f"op={op!r}: allowed sum, prod, max, min, avg")
    role = _roles(rank, num_ranks, start, count, seed)
    lead = _lead_values(op, dtype, num_ranks, start, count, seed)
    if op == "prod":  # the lead and the next rank (2 or 3) differ from 1: a max or sum instead fails
        second = _lead(dtype, start, count, seed, 2, 3, salt=1)
        values = np.where(role == 0, lead, np.where(role == 1, second, 1))
    else:
        ones, _ = _sum_shape(dtype, num_ranks, op)
        values = np.where(role == 0, lead, (role <= ones).astype(np.int64))
        if op == "min":  # mirror of max: the lead is the smallest
            values = dtype.exact_int_limit - values
    return values.astype(_carrier(dtype))


def reduced_expected(op: str, dtype: DType, num_ranks: int, start: int, count: int, seed: int = 0) -> np.ndarray:
    """The exact result of reducing `reduction_inputs` over ranks 0..n-1 (O(count), any rank count)."""
    if op not in ("sum", "prod", "max", "min", "avg"):
        raise ValueError(f"op={op!r}: allowed sum, prod, max, min, avg")
    lead = _lead_values(op, dtype, num_ranks, start, count, seed)
    if op == "prod":
        result = lead * _lead(dtype, start, count, seed, 2, 3, salt=1) if num_ranks > 1 else lead
    else:
        ones, _ = _sum_shape(dtype, num_ranks, op)
        result = {"sum": lead + ones, "avg": lead + ones, "max": lead, "min": dtype.exact_int_limit - lead}[op]
    if op == "avg":
        return result.astype(np.float64) / num_ranks
    return result.astype(_carrier(dtype))


def avg_rel_bound(dtype: DType, num_ranks: int) -> float:
    """Relative error bound of avg over `num_ranks` in NCCL's order: 1/n rounded to the dtype (u), each
    nonzero input times it rounded (u), the k = ones + 1 nonzero products summed in any order
    (gamma_{k-1}; Higham, Accuracy and Stability of Numerical Algorithms, sec. 4.2); u = eps/2. It also
    covers sum-then-divide (exact sum, one rounding). 1% slack for the bound's second-order terms."""
    ones, _ = _sum_shape(dtype, num_ranks, "avg")
    unit = dtype.eps / 2
    return (ones + 2) * unit * 1.01


def count_wrong(actual: np.ndarray, expected: np.ndarray, dtype: DType, rel_tol: float = 0.0) -> int:
    """Elements that differ from `expected`; NaN and inf always count as wrong."""
    if rel_tol == 0.0:
        wrong = actual != expected
    else:
        wrong = ~(np.abs(actual - expected) <= rel_tol * np.abs(expected))
    if actual.dtype.kind == "f":
        wrong |= ~np.isfinite(actual)
    return int(np.count_nonzero(wrong))


def reduction_data(op: str, dtype: DType, rank: int, num_ranks: int, start: int,
                   count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, float]:
    """(this rank's input, the exact reduced result, relative tolerance) for elements start..start+count.
    Every op but avg is exact (tolerance 0); avg gets `avg_rel_bound`."""
    rel_tol = avg_rel_bound(dtype, num_ranks) if op == "avg" else 0.0
    return (reduction_inputs(op, dtype, rank, num_ranks, start, count, seed),
            reduced_expected(op, dtype, num_ranks, start, count, seed), rel_tol)
