"""Router models: which `top_k` experts every token of every rank picks (pure numpy, seeded).

Every rank calls `route` with the same arguments and gets the same global routing, so each rank
knows every rank's split sizes (the timed iteration still exchanges the counts, as a real layer does).

Models (`--routing`):
- `balanced`: every expert receives the same number of token copies (within one when the total
  does not divide). Token g takes the window (g*k .. g*k+k-1) mod E of a random expert permutation
  that changes every lcm(E, k)/k tokens, so each full block of tokens loads every expert equally
  (exact balance, without always pairing the same experts; not what Megatron's forced balancing does: below).
- `uniform`: independent top-k without replacement, every expert equally likely: what Megatron's
  --moe-router-force-load-balancing (published "force-balanced" benchmarks) routes, its router's logits replaced by
  random normal values with a per-rank seed (megatron-core core_v0.16.1 transformer/moe/router.py:655-657,
  moe_utils.py:1110-1131 RandomSTE: "used to generate random logits of router for load-balanced benchmark").
- `zipf:<alpha>`: expert popularity p_e ∝ 1 / (1 + rank_e)^alpha over a seeded random order of the
  experts; a token's k experts are drawn without replacement ∝ p (Gumbel-top-k, Kool et al. 2019,
  "Stochastic Beams and Where to Find Them"). alpha = 0 is `uniform`.
- `group-limited:<groups>:<topk_groups>`: DeepSeek-V3's node-limited routing (arXiv:2412.19437
  §2.1.2): experts form `groups` contiguous groups; a token scores each group by the sum of its two
  highest expert affinities, keeps the best `topk_groups` groups, and takes its top-k experts there.
- `trace:<file>`: recorded router output: an integer `.npy` (or whitespace/comma text) array of
  expert ids, shape (tokens, top_k) or (ranks, tokens, top_k). A (tokens, top_k) trace's tokens are dealt to
  ranks in order (rank r takes tokens r*T .. r*T+T-1), repeating the trace cyclically when it is shorter than
  ranks x T; a (ranks, tokens, top_k) trace replays on that many ranks only (refused on others), rank r taking its
  own recorded tokens, cyclically when fewer than T. A recycled trace is recorded (`trace_replay`: the params
  trace_rows / trace_recycled and a note), never silent. The file is identified by its bytes, not its path
  (`trace_sha256`): the path as typed names neither one trace (two traces saved under one name) nor only one (the
  same trace from another folder), so `compare` matches trace points on the digest.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from commbench.errors import CommbenchError, invalid

ROUTING_FORMS = "balanced, uniform, zipf:<alpha>, group-limited:<groups>:<topk_groups>, trace:<file>"
_CHUNK_ELEMENTS = 1 << 22  # scores materialised per chunk of tokens (bounds memory at large E)


@dataclass(frozen=True, kw_only=True)
class RoutingSpec:
    kind: str  # balanced | uniform | zipf | group-limited | trace
    alpha: float = 0.0
    num_groups: int = 0
    topk_groups: int = 0
    trace_path: str = ""


def parse_routing(text: str) -> RoutingSpec:
    """Parse a `--routing` value; raise CommbenchError naming the allowed forms."""
    kind, _, rest = text.strip().partition(":")
    try:
        if kind in ("balanced", "uniform") and not rest:
            return RoutingSpec(kind=kind)
        if kind == "zipf":
            alpha = float(rest)
            if not (math.isfinite(alpha) and alpha >= 0):
                raise ValueError
            return RoutingSpec(kind="zipf", alpha=alpha)
        if kind == "group-limited":
            groups, topk_groups = (int(part) for part in rest.split(":"))
            if groups < 1 or topk_groups < 1:
                raise ValueError
            return RoutingSpec(kind="group-limited", num_groups=groups, topk_groups=topk_groups)
        if kind == "trace" and rest:
            return RoutingSpec(kind="trace", trace_path=rest)
    except ValueError:
        pass
    raise invalid("--routing", text, f"allowed: {ROUTING_FORMS} (alpha >= 0, groups >= 1)")


def check_routing(spec: RoutingSpec, *, num_experts: int, top_k: int) -> None:
    """Reject a routing that cannot produce `top_k` distinct experts of `num_experts`."""
    if spec.kind != "group-limited":
        return
    if spec.topk_groups > spec.num_groups:
        raise CommbenchError(f"--routing=group-limited:{spec.num_groups}:{spec.topk_groups} is invalid: "
                             f"topk_groups must be <= groups ({spec.num_groups})")
    if num_experts % spec.num_groups:
        raise CommbenchError(f"--routing=group-limited:{spec.num_groups}:{spec.topk_groups} is invalid: "
                             f"--experts={num_experts} must be divisible by groups ({spec.num_groups})")
    reachable = spec.topk_groups * (num_experts // spec.num_groups)
    if top_k > reachable:
        raise CommbenchError(f"--top-k={top_k} is invalid with --routing=group-limited:{spec.num_groups}:"
                             f"{spec.topk_groups}: at most {reachable} experts lie in {spec.topk_groups} groups")


def route(spec: RoutingSpec, *, num_ranks: int, tokens_per_rank: int, num_experts: int, top_k: int,
          seed: int) -> np.ndarray:
    """Expert ids, int64 of shape (num_ranks, tokens_per_rank, top_k); a token's ids are distinct."""
    check_routing(spec, num_experts=num_experts, top_k=top_k)
    num_tokens = num_ranks * tokens_per_rank
    rng = np.random.default_rng(seed)
    if spec.kind == "balanced":
        flat = _balanced(rng, num_tokens, num_experts, top_k)
    elif spec.kind == "uniform":
        flat = _gumbel_top_k(rng, np.zeros(num_experts), num_tokens, top_k)
    elif spec.kind == "zipf":
        popularity = (1.0 + rng.permutation(num_experts)) ** -spec.alpha
        flat = _gumbel_top_k(rng, np.log(popularity / popularity.sum()), num_tokens, top_k)
    elif spec.kind == "group-limited":
        flat = _group_limited(rng, num_tokens, num_experts, top_k, spec.num_groups, spec.topk_groups)
    else:
        trace = load_trace(spec.trace_path, num_experts=num_experts, top_k=top_k, per_rank=True)
        return _replay(trace, spec.trace_path, num_ranks, tokens_per_rank)
    return flat.reshape(num_ranks, tokens_per_rank, top_k)


def _balanced(rng: np.random.Generator, num_tokens: int, num_experts: int, top_k: int) -> np.ndarray:
    tokens_per_block = math.lcm(num_experts, top_k) // top_k
    num_blocks = -(-num_tokens // tokens_per_block)
    perms = rng.permuted(np.tile(np.arange(num_experts), (num_blocks, 1)), axis=1)
    slots = np.arange(num_tokens, dtype=np.int64)[:, None] * top_k + np.arange(top_k)
    return perms[np.arange(num_tokens)[:, None] // tokens_per_block, slots % num_experts]


def _gumbel_top_k(rng: np.random.Generator, log_p: np.ndarray, num_tokens: int, top_k: int) -> np.ndarray:
    num_experts = log_p.size
    out = np.empty((num_tokens, top_k), dtype=np.int64)
    step = max(1, _CHUNK_ELEMENTS // num_experts)
    for start in range(0, num_tokens, step):
        rows = min(step, num_tokens - start)
        keys = log_p + rng.gumbel(size=(rows, num_experts))
        out[start:start + rows] = np.argpartition(-keys, top_k - 1, axis=1)[:, :top_k]
    return out


def _group_limited(rng: np.random.Generator, num_tokens: int, num_experts: int, top_k: int, num_groups: int,
                   topk_groups: int) -> np.ndarray:
    per_group = num_experts // num_groups
    best_in_group = min(2, per_group)
    out = np.empty((num_tokens, top_k), dtype=np.int64)
    step = max(1, _CHUNK_ELEMENTS // num_experts)
    for start in range(0, num_tokens, step):
        rows = min(step, num_tokens - start)
        affinity = rng.random((rows, num_groups, per_group), dtype=np.float32)
        group_score = np.partition(affinity, per_group - best_in_group, axis=2)[:, :, -best_in_group:].sum(axis=2)
        dropped = np.argpartition(-group_score, topk_groups - 1, axis=1)[:, topk_groups:]
        np.put_along_axis(affinity, dropped[:, :, None], -1.0, axis=1)  # affinities lie in [0, 1)
        out[start:start + rows] = np.argpartition(-affinity.reshape(rows, num_experts), top_k - 1, axis=1)[:, :top_k]
    return out


def check_trace_ranks(trace: np.ndarray, path: str, num_ranks: int) -> None:
    """A (ranks, tokens, top_k) trace replays on its own number of ranks only: dealt to another, one rank would
    replay another rank's tokens (or some recorded ranks none). ValueError (a failed point of a sub-group), which
    the plan's check turns into one line for the world."""
    if trace.ndim == 3 and trace.shape[0] != num_ranks:
        raise ValueError(f"--routing=trace:{path} holds a per-rank trace of {trace.shape[0]} ranks: it replays on "
                         f"{trace.shape[0]} ranks only, not {num_ranks} (a (tokens, top_k) trace replays on any)")


def _replay(trace: np.ndarray, path: str, num_ranks: int, tokens_per_rank: int) -> np.ndarray:
    """(num_ranks, tokens_per_rank, top_k) ids from a (tokens, top_k) or (ranks, tokens, top_k) trace (module
    docstring), cycling where the trace is shorter."""
    check_trace_ranks(trace, path, num_ranks)
    if trace.ndim == 3:
        return trace[:, np.arange(tokens_per_rank) % trace.shape[1]]
    flat = trace[np.arange(num_ranks * tokens_per_rank) % trace.shape[0]]
    return flat.reshape(num_ranks, tokens_per_rank, trace.shape[-1])


def trace_replay(trace: np.ndarray, num_ranks: int, tokens_per_rank: int) -> tuple[dict[str, object], list[str]]:
    """(params, notes) a point replaying `trace` records: trace_rows (token rows it holds; per rank for a per-rank
    trace), trace_recycled (whether its tokens repeat to fill ranks x tokens per rank) and, when recycled, a note."""
    per_rank = trace.ndim == 3
    rows, needed = (trace.shape[1], tokens_per_rank) if per_rank else (trace.shape[0], num_ranks * tokens_per_rank)
    recycled = needed > rows
    params: dict[str, object] = {"trace_rows": int(rows), "trace_recycled": bool(recycled)}
    if not recycled:
        return params, []
    where = "per rank" if per_rank else f"for {num_ranks} ranks x {tokens_per_rank} tokens"
    return params, [f"routing trace of {rows} token rows{' per rank' if per_rank else ''} replayed cyclically: "
                    f"{needed} tokens needed {where}, so each recorded token is used up to {-(-needed // rows)} times"]


TRACE_DIGEST_HEX_DIGITS = 16   # 64 bits of the SHA-256: a collision between two traces is not a concern


def trace_sha256(path: str) -> str:
    """The first TRACE_DIGEST_HEX_DIGITS hex digits of the SHA-256 of the trace file's bytes: what a record's params
    name the trace by (`trace_sha256`), whatever path it was read from. CommbenchError if unreadable."""
    try:
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as exc:
        raise CommbenchError(f"--routing=trace:{path} cannot be read: {exc}") from None
    return digest[:TRACE_DIGEST_HEX_DIGITS]


def load_trace(path: str, *, num_experts: int, top_k: int, per_rank: bool = False) -> np.ndarray:
    """A recorded routing as int64 (tokens, top_k) -- or, with `per_rank`, a (ranks, tokens, top_k) file kept in its
    shape; CommbenchError if unreadable or ill-shaped."""
    field = f"--routing=trace:{path}"
    try:
        # numpy warns of an empty text file (UserWarning) before returning no rows: the size check below says so
        # in one line, so its warning would only print a library's words before the user's error
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if Path(path).suffix == ".npy":
                raw = np.load(path, allow_pickle=False)
            else:
                raw = np.loadtxt(path, delimiter="," if path.endswith(".csv") else None, ndmin=2)
    except (OSError, ValueError, EOFError) as exc:   # EOFError: an empty .npy
        raise CommbenchError(f"{field} cannot be read: {exc} (allowed: an integer .npy, or text of expert ids)") from None
    if not isinstance(raw, np.ndarray):   # np.load opens an .npz archive under any name
        raise CommbenchError(f"{field} cannot be read: it is an .npz archive, not one array (allowed: an integer .npy, "
                             "or text of expert ids)")
    if raw.size == 0:
        raise CommbenchError(f"{field} holds no expert ids (an empty file): allowed (tokens, top_k) or "
                             f"(ranks, tokens, top_k) expert ids with top_k = --top-k = {top_k}")
    if raw.ndim not in (2, 3) or raw.shape[-1] != top_k:
        raise CommbenchError(f"{field} has shape {raw.shape}: allowed (tokens, top_k) or (ranks, tokens, top_k) "
                             f"with top_k = --top-k = {top_k}")
    if not (np.issubdtype(raw.dtype, np.integer) or (np.issubdtype(raw.dtype, np.floating)
                                                       and np.all(np.isfinite(raw)) and np.all(raw == np.round(raw)))):
        raise CommbenchError(f"{field} holds {raw.dtype} values: allowed integer expert ids")
    trace = raw.reshape(-1, top_k).astype(np.int64)
    if trace.min() < 0 or trace.max() >= num_experts:
        raise CommbenchError(f"{field} has expert ids {trace.min()}..{trace.max()}: allowed 0..{num_experts - 1} "
                             f"(--experts={num_experts})")
    ordered = np.sort(trace, axis=1)
    if np.any(ordered[:, 1:] == ordered[:, :-1]):
        raise CommbenchError(f"{field} repeats an expert within a token: allowed {top_k} distinct ids per token")
    return trace.reshape(raw.shape) if per_rank else trace
