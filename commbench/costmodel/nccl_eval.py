"""Evaluating nccl_model's (algorithm, protocol) pairs over a million queries at once.

The size-independent terms (latency, seconds per byte, pipeline ramp) depend only on the group
(ranks, domains), and a batch holds few distinct groups: they are computed once per group in a
small table and gathered per query. For the fastest time alone, pairs that another pair beats on
every term for every group (pointwise dominance: never faster at any size) are skipped exactly.
"""

from __future__ import annotations

import math

import numpy as np

from commbench.costmodel.nccl_model import ArrayLike, Combo, NcclSystem, GroupTerms, check_group
from commbench.errors import invalid

_MAX_TABLE = 1 << 20


def _full(x, shape: tuple[int, ...]) -> np.ndarray:
    """`x` at `shape` (np.broadcast_to's values; the array itself where it has that shape already, a filled copy of a
    scalar): a table row's terms are built per pair, per call, where np.broadcast_to's own cost outweighs the math."""
    x = np.asarray(x)
    if x.shape == shape:
        return x
    if x.ndim == 0:
        out = np.empty(shape, dtype=x.dtype)
        out[...] = x
        return out
    return np.broadcast_to(x, shape)


def _group_table(n: np.ndarray, d: np.ndarray, group_size: ArrayLike, num_domains: ArrayLike):
    """(key per query or None, table of ranks, table of domains): one table row per distinct group."""
    if np.size(group_size) == 1 and np.size(num_domains) == 1:
        return None, n.reshape(-1)[:1], d.reshape(-1)[:1]
    n_max, d_max = int(n.max()), int(d.max())
    if (n_max + 1) * (d_max + 1) <= max(4096, min(n.size, _MAX_TABLE)):
        rows = np.arange((n_max + 1) * (d_max + 1))
        # rows no query uses may be invalid groups (d > n); only used rows are checked and computed
        table_n = np.maximum(rows // (d_max + 1), 1).astype(np.float64)
        table_d = np.maximum(rows % (d_max + 1), 1).astype(np.float64)
        key = n.astype(np.intp) * (d_max + 1)
        key += d.astype(np.intp)
        return key, table_n, table_d
    if min(n.min(), d.min()) >= 0 and max(n_max, d_max) < 1 << 31:
        # integral groups (as they are): one int per (ranks, domains), ordered as the pairs, so np.unique of it is
        # the pairs' own (a plain sort, not a sort of records)
        n_int, d_int = n.astype(np.int64), d.astype(np.int64)
        if np.array_equal(n_int, n) and np.array_equal(d_int, d):
            n_int *= d_max + 1
            n_int += d_int
            codes, key = np.unique(n_int.ravel(), return_inverse=True)
            return (key.reshape(n.shape), (codes // (d_max + 1)).astype(np.float64),
                    (codes % (d_max + 1)).astype(np.float64))
    pairs, key = np.unique(np.stack([n.ravel(), d.ravel()]), axis=1, return_inverse=True)
    return key.reshape(n.shape), pairs[0], pairs[1]


def _terms(fabric, system: NcclSystem, collective: str, table_n: np.ndarray, table_d: np.ndarray,
           pairs: list[Combo], channels: int | None = None) -> dict[Combo, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """{pair: (latency s, s per byte, ramp s per unit of size/(size+half)) per table row}; latency
    is inf where NCCL does not offer the pair. `channels`: the count a tuner rule forces (GroupTerms)."""
    group = GroupTerms(fabric, system, collective, table_n, table_d, channels=channels)
    out = {}
    for algorithm, protocol in pairs:
        allowed = _full(group.allowed(algorithm), table_n.shape)
        if not allowed.any():
            continue
        latency_s, per_byte_s, fill_s = group.fixed_and_rate(algorithm, protocol)
        latency_s = np.where(allowed, _full(latency_s, table_n.shape), np.inf)
        out[algorithm, protocol] = (latency_s, _full(per_byte_s, table_n.shape), fill_s * table_n)
    return out


_TERMS_CACHE: dict[tuple, tuple] = {}
_TERMS_CACHE_SIZE = 1024


def _table_terms(fabric, system: NcclSystem, collective: str, table_n: np.ndarray, table_d: np.ndarray,
                 pairs: list[Combo], fastest_only: bool,
                 channels: int | None = None) -> dict[Combo, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """_terms, less the pairs that can never be the fastest where `fastest_only` (_undominated), remembered per
    (fabric, collective, pairs, table): a search prices the same few groups in every chunk, and these terms, not the
    per-query arithmetic, are most of a small call's cost. Frozen fabrics (Fabric, NcclSystem): the same objects give
    the same terms; the cache holds them, so an id is never reused while its entry lives."""
    key = (id(fabric), id(system), collective, tuple(pairs), fastest_only, channels, table_n.dtype.str,
           table_d.dtype.str, table_n.tobytes(), table_d.tobytes())
    hit = _TERMS_CACHE.get(key)
    if hit is not None and hit[0] is fabric and hit[1] is system:
        return hit[2]
    terms = _terms(fabric, system, collective, table_n, table_d, pairs, channels)
    if fastest_only and len(terms) > 1:
        terms = {name: terms[name] for name in _undominated(terms)}
    for arrays in terms.values():
        for x in arrays:
            if isinstance(x, np.ndarray):
                x.flags.writeable = False   # shared by every later call with this table
    if len(_TERMS_CACHE) >= _TERMS_CACHE_SIZE:
        _TERMS_CACHE.clear()
    _TERMS_CACHE[key] = (fabric, system, terms)
    return terms


def _undominated(terms: dict[Combo, tuple[np.ndarray, np.ndarray, np.ndarray]]) -> list[Combo]:
    """Pairs not beaten on latency, rate and ramp together by one other pair, for every group (all pairs against all
    at once: [other, pair, group])."""
    names = list(terms)
    shape = np.broadcast_shapes(*(np.shape(t) for term in terms.values() for t in term))
    lat, rate, fill = (np.stack([_full(terms[name][k], shape) for name in names])[:, None] for k in range(3))
    no_worse = (lat <= lat[:, 0][None]) & (rate <= rate[:, 0][None]) & (fill <= fill[:, 0][None])
    better = (lat < lat[:, 0][None]) | (rate < rate[:, 0][None]) | (fill < fill[:, 0][None])
    num = len(names)
    later = np.arange(num)[:, None] > np.arange(num)[None, :]   # [other, pair]: an exact tie keeps the first of two
    no_worse &= better | ~later.reshape(later.shape + (1,) * len(shape))
    no_worse[np.arange(num), np.arange(num)] = False   # not against itself
    dominated = no_worse.any(axis=0).reshape(num, math.prod(shape)).all(axis=1)
    return [name for name, gone in zip(names, dominated) if not gone]


def pair_times_s(fabric, collective: str, size_bytes: ArrayLike, group_size: ArrayLike, num_domains: ArrayLike,
                 pairs: list[Combo], *, fastest_only: bool = False,
                 channels: int | None = None) -> tuple[dict[Combo, np.ndarray], np.ndarray]:
    """({pair: seconds per query, inf where NCCL does not offer it}, ranks per query). With
    `fastest_only`, pairs that can never be the fastest are left out. `channels`: the count a tuner rule forces on the
    call (nccl_model.GroupTerms; None: NCCL's own)."""
    system: NcclSystem = fabric.nccl
    size, n, d = np.broadcast_arrays(np.asarray(size_bytes, dtype=np.float64),
                                     np.asarray(group_size, dtype=np.float64),
                                     np.asarray(num_domains, dtype=np.float64))
    if n.size == 0:
        return {pair: np.zeros(n.shape) for pair in pairs}, n
    check_group(fabric.num_gpus, fabric.num_domains, fabric.domain_size, fabric.name, n, d)
    if size.min() < 0:
        raise invalid("size_bytes", float(size.min()), "sizes must be >= 0")
    key, table_n, table_d = _group_table(n, d, group_size, num_domains)
    terms = _table_terms(fabric, system, collective, table_n, table_d, pairs, fastest_only, channels)
    ramp = None
    if system.fill_us_per_rank:
        ramp = size / (size + system.fill_half_bytes)
    out: dict[Combo, np.ndarray] = {}
    for name, (lat, rate, fill) in terms.items():
        if key is None:
            lat, rate, fill = lat[0], rate[0], fill[0]
        else:
            lat, rate, fill = lat.take(key), rate.take(key), fill.take(key) if ramp is not None and fill.any() else 0.0
        time_s = np.multiply(size, rate)
        time_s += lat
        if ramp is not None and np.any(fill):
            time_s += ramp * fill
        out[name] = np.asarray(time_s, dtype=np.float64)
    return out, n


BINS_PER_OCTAVE = 8


def fastest_time_s(fabric, collective: str, size_bytes: ArrayLike, group_size: ArrayLike, num_domains: ArrayLike,
                   pairs: list[Combo]) -> tuple[np.ndarray, np.ndarray]:
    """(least seconds over `pairs`, ranks) per query. Per group and 1/8-octave size bin, only the
    pairs fastest at the bin's two edges are evaluated (a third pair winning strictly inside a bin
    without winning at either edge is not seen; tests/test_costmodel_nccl.py bounds the effect)."""
    system: NcclSystem = fabric.nccl
    size, n, d = np.broadcast_arrays(np.asarray(size_bytes, dtype=np.float64),
                                     np.asarray(group_size, dtype=np.float64),
                                     np.asarray(num_domains, dtype=np.float64))
    if n.size < 4096:
        times, n = pair_times_s(fabric, collective, size_bytes, group_size, num_domains, pairs, fastest_only=True)
        return _least(times, n), n
    if n.min() < 1 or d.min() < 1:
        check_group(fabric.num_gpus, fabric.num_domains, fabric.domain_size, fabric.name, n, d)  # raises
    if size.min() < 0:
        raise invalid("size_bytes", float(size.min()), "sizes must be >= 0")
    key, table_n, table_d = _group_table(n, d, group_size, num_domains)
    if key is None:
        key = np.zeros(n.shape, dtype=np.intp)
    else:
        used = np.flatnonzero(np.bincount(key.ravel(), minlength=len(table_n)))
        compact = np.zeros(len(table_n), dtype=np.intp)
        compact[used] = np.arange(len(used))
        key, table_n, table_d = compact.take(key), table_n[used], table_d[used]
    # every distinct group once: the same one-line errors as checking each query
    check_group(fabric.num_gpus, fabric.num_domains, fabric.domain_size, fabric.name, table_n, table_d)
    terms = _table_terms(fabric, system, collective, table_n, table_d, pairs, True)
    if not terms:
        return np.full(n.shape, np.inf), n
    lat, rate, fill = (np.stack([_full(t[i], table_n.shape) for t in terms.values()]) for i in range(3))
    num_rows = len(table_n)
    # size bins: bin j covers [2^((lo+j)/R), 2^((lo+j+1)/R)); sizes below 1 byte fall in bin 0
    octave = np.log2(np.maximum(size, 1.0))
    octave *= BINS_PER_OCTAVE
    bins = octave.astype(np.intp)
    lo, hi = int(bins.min()), int(bins.max())
    bins -= lo
    edges = 2.0 ** (np.arange(lo, hi + 2) / BINS_PER_OCTAVE)
    if size.min() < 1.0:
        edges[0] = 0.0
    half = system.fill_half_bytes
    at_edges = (lat[..., None] + rate[..., None] * edges + fill[..., None] * (edges / (edges + half)))
    winners = np.argmin(at_edges, axis=0)  # (rows, edges)
    first, second = winners[:, :-1], winners[:, 1:]
    flat = key * (hi - lo + 1)
    flat += bins
    ramp = size / (size + half) if fill.any() else None
    lat, rate, fill = lat.ravel(), rate.ravel(), fill.ravel()

    def times_of(winner: np.ndarray, flat: np.ndarray, key: np.ndarray, size: np.ndarray, ramp) -> np.ndarray:
        index = winner.ravel().take(flat)
        index *= num_rows
        index += key
        time_s = np.multiply(size, rate.take(index))
        time_s += lat.take(index)
        if ramp is not None:
            time_s += ramp * fill.take(index)
        return time_s

    best = times_of(first, flat, key, size, ramp)
    # the bins whose two edges have different winners: evaluate the second there only
    differs = (first != second).ravel().take(flat)
    if differs.any():
        where = np.flatnonzero(differs)
        flat_key_size = (flat.ravel()[where], key.ravel()[where], size.ravel()[where])
        other = times_of(second, *flat_key_size, None if ramp is None else ramp.ravel()[where])
        best = best.reshape(-1)
        best[where] = np.minimum(best[where], other)
        best = best.reshape(n.shape)
    return best, n


def _least(times: dict[Combo, np.ndarray], n: np.ndarray) -> np.ndarray:
    best = None
    for time_s in times.values():
        best = np.array(time_s, dtype=np.float64) if best is None else np.minimum(best, time_s, out=best)
    return np.full(n.shape, np.inf) if best is None else best
