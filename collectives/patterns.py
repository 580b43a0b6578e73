"""Checkable data for the workloads: full-width seeded patterns, exact reductions, avg's bound."""

from __future__ import annotations

import numpy as np

from commbench.dtypes import DType

# --- checkable data -------------------------------------------------------------------------
# Patterns use each dtype's full width: integers draw from the whole range (sign bit included), floats
# are integers in [2^(p-1), 2^p] (p = significand bits), so every significand bit is random and data
# that passed through a narrower type (fp32 via bf16, fp16, fp64 via fp32, int32/int64 via uint8)
# differs. Reductions: per index one lead rank (drawn per index from the seed) holds a full-width
# value and the others small ones, so every partial result is an integer the dtype holds exactly
# whatever the rank count or reduction order: sum, max, min and prod are compared exactly.
# - sum: `ones` other ranks hold 1 (the sum counts every rank's contribution), the rest 0.
# - max/min (signed types, floats included): the lead is positive (max) or negative (min) and the others
#   hold -1/+1 or 0, so signs mix at every index: a signed type reduced as unsigned (int8 as uint8, an
#   ncclInt8 -> ncclUint8 mix-up) takes the other sign's value. Unsigned: min mirrors max (limit - v).
# - prod: the lead (either sign for signed types) times 2 or 3 (either sign) held by the next rank.
# - avg: min(n, AVG_TERMS) ranks per index each hold a value of one binade-wide range [H/2, H] with
#   H = limit / terms (the exact sum stays within the exact range), so every term moves the result by
#   at least 1/(2 terms) of it, far above the bound: an avg that drops a rank, or is a max/n, or a sum
#   without /n, fails. avg divides: its bound is derived from NCCL's order (enqueue.cc: the scalar 1/n
#   in the dtype, every input pre-multiplied by it, then summed), see `avg_rel_bound`.
# Outputs are poisoned with POISON (0) before a checked run and no expected value is 0,
# so a skipped or half-written output fails; NaN/inf never equal. Patterns depend on a per-point seed
# (nccl-tests seeds initData with the repetition) and, after the timed loop, a salted one (`salted`),
# so the previous point's or the first call's data fails.

# Ranks holding a nonzero avg term per index (the rest hold 0; roles cycle with the index, so at more
# ranks each rank is a term at some indices). 4 keeps the bf16 bound (5 u = 2 %) far under the smallest
# term's share (1/8): see `avg_rel_bound`.
AVG_TERMS = 4

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


def _sum_shape(dtype: DType, num_ranks: int) -> tuple[int, int]:
    """(ones, lead_high): `ones` ranks hold 1 (-1/+1 for max/min) and the lead at most lead_high, so
    every partial sum is within the dtype's exact range."""
    limit = dtype.exact_int_limit
    ones = min(num_ranks - 1, limit // 4)
    return ones, limit - ones


def _signed(dtype: DType) -> bool:
    return dtype.is_float or not dtype.name.startswith("u")


def avg_terms(num_ranks: int) -> int:
    """Ranks holding a nonzero avg term at each index."""
    return min(num_ranks, AVG_TERMS)


def _avg_range(dtype: DType, num_ranks: int) -> tuple[int, int]:
    """[low, high] of every avg term: high = limit // terms (the sum of the terms stays exact), low just
    above high / 2 (each term is at least 1/(2 terms) of the sum)."""
    high = dtype.exact_int_limit // avg_terms(num_ranks)
    return high // 2 + 1, high


def _avg_term(dtype: DType, num_ranks: int, start: int, count: int, seed: int, role: int) -> np.ndarray:
    return _lead(dtype, start, count, seed, *_avg_range(dtype, num_ranks), salt=8 + role)


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
    if op == "sum":
        ones, _ = _sum_shape(dtype, num_ranks)
        lead[lead == -ones] += 1
    elif op == "prod" and _signed(dtype):  # either sign
        lead = np.where(_lead(dtype, start, count, seed, 0, 1, salt=2) == 1, -lead, lead)
    return lead


def _prod_second(dtype: DType, start: int, count: int, seed: int) -> np.ndarray:
    """The second prod factor: 2 or 3, of either sign for signed types (-3, -2, 2, 3)."""
    if not _signed(dtype):
        return _lead(dtype, start, count, seed, 2, 3, salt=1)
    drawn = _lead(dtype, start, count, seed, 0, 3, salt=1)
    return np.where(drawn < 2, drawn - 3, drawn)


def _lead_range(op: str, dtype: DType, num_ranks: int) -> tuple[int, int]:
    """[low, high] of the lead rank's value for `op`: the top half of the exact range (full width; with
    the sign for signed integers' sums), a quarter of it for prod (times 2 or 3 stays exact; its sign is
    drawn apart, `_lead_values`)."""
    limit, signed = dtype.exact_int_limit, not dtype.is_float and not dtype.name.startswith("u")
    ones, high = _sum_shape(dtype, num_ranks)
    if op == "prod":
        return limit // 8, limit // 4
    if op == "sum" and signed:
        return -high, high
    return limit // 2, high if op == "sum" else limit - 1


def reduction_inputs(op: str, dtype: DType, rank: int, num_ranks: int, start: int, count: int,
                     seed: int = 0) -> np.ndarray:
    """This rank's input at elements start..start+count for reducing with `op` over num_ranks."""
    if op not in ("sum", "prod", "max", "min", "avg"):
        raise ValueError(f"op={op!r}: allowed sum, prod, max, min, avg")
    role = _roles(rank, num_ranks, start, count, seed)
    if op == "avg":  # roles 0..terms-1 hold a term each, the rest 0
        values = np.zeros(count, dtype=np.int64)
        for term in range(avg_terms(num_ranks)):
            values = np.where(role == term, _avg_term(dtype, num_ranks, start, count, seed, term), values)
        return values.astype(_carrier(dtype))
    lead = _lead_values(op, dtype, num_ranks, start, count, seed)
    if op == "prod":  # the lead and the next rank (+-2 or +-3) differ from 1: a max or sum instead fails
        values = np.where(role == 0, lead, np.where(role == 1, _prod_second(dtype, start, count, seed), 1))
    else:
        ones, _ = _sum_shape(dtype, num_ranks)
        small = (role <= ones).astype(np.int64)
        if op != "sum" and _signed(dtype):
            small = -small  # max: a positive lead over -1s; min (its negation): a negative lead under +1s
        values = np.where(role == 0, lead, small)
        if op == "min":  # mirror of max: the lead is the smallest
            values = -values if _signed(dtype) else dtype.exact_int_limit - values
    return values.astype(_carrier(dtype))


def reduced_expected(op: str, dtype: DType, num_ranks: int, start: int, count: int, seed: int = 0) -> np.ndarray:
    """The exact result of reducing `reduction_inputs` over ranks 0..n-1 (O(count), any rank count)."""
    if op not in ("sum", "prod", "max", "min", "avg"):
        raise ValueError(f"op={op!r}: allowed sum, prod, max, min, avg")
    if op == "avg":
        total = sum(_avg_term(dtype, num_ranks, start, count, seed, term) for term in range(avg_terms(num_ranks)))
        if not dtype.is_float:  # NCCL's integer avg: the sum, then divided truncating (the terms are positive)
            return (total // num_ranks).astype(_carrier(dtype))
        return total.astype(np.float64) / num_ranks
    lead = _lead_values(op, dtype, num_ranks, start, count, seed)
    if op == "prod":
        result = lead * _prod_second(dtype, start, count, seed) if num_ranks > 1 else lead
    else:
        ones, _ = _sum_shape(dtype, num_ranks)
        mirror = -lead if _signed(dtype) else dtype.exact_int_limit - lead
        result = {"sum": lead + ones, "max": lead, "min": mirror}[op]
    return result.astype(_carrier(dtype))


def avg_rel_bound(dtype: DType, num_ranks: int) -> float:
    """Relative error bound of avg over `num_ranks` in NCCL's order: 1/n rounded to the dtype (u), each
    nonzero input times it rounded (u), the k = avg_terms(n) nonzero (all positive) products summed in
    any order (gamma_{k-1}; Higham, Accuracy and Stability of Numerical Algorithms, sec. 4.2); u = eps/2:
    (k + 1) u. It also covers sum-then-divide (exact sum, one rounding). 1% slack for the bound's
    second-order terms. Each term is at least 1/(2k) of the result (`_avg_range`): 1/8 against
    5 u = 2.0 % for bf16, 0.24 % fp16, 3e-7 fp32 at k = 4. Integers: exact (0): NCCL averages them as the sum
    then one truncating division (ncclAvg on integral types is FuncSumPostDiv, src/device/reduce_kernel.h)."""
    if not dtype.is_float:
        return 0.0
    unit = dtype.eps / 2
    return (avg_terms(num_ranks) + 1) * unit * 1.01


def integer_avg_check_problem(dtype: DType, num_ranks: int) -> str | None:
    """Why an integer avg over `num_ranks` cannot be checked (None: it can). Every term is at least `low`
    (`_avg_range`); a lost term moves the truncated average by at least floor(low / n), and the result is at least
    terms * low / n: both need low >= n (else a dropped rank, or an untouched poisoned output, can pass)."""
    if dtype.is_float:
        return None
    low, high = _avg_range(dtype, num_ranks)
    if low >= num_ranks:
        return None
    return (f"the average of {dtype.name} values over {num_ranks} ranks cannot be checked: each rank's term is at most "
            f"{high}, so a lost rank need not move the truncated average by 1")


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
