"""The busiest EP rank's load under Megatron's forced load balancing (published "force-balanced" benchmark runs).

Megatron-Bridge's performance scripts run a token-dropless MoE with `moe_router_force_load_balancing = True`
(Megatron-Bridge v0.6.0 scripts/performance/utils/overrides.py:458-462), and megatron-core then replaces the router's
logits with random normal values, seeded per rank (core_v0.16.1 megatron/core/transformer/moe/router.py:655-657,
moe_utils.py:1110-1131 RandomSTE: "used to generate random logits of router for load-balanced benchmark"). Each
token's top-k is therefore a uniform random k-subset of the E experts (commbench's `uniform` routing, moe/routing.py),
and the copies an EP rank receives are random, not equal: every all-to-all and grouped GEMM waits for the busiest
rank of its EP group.

Counts, for N = tokens_rank x ep tokens in one EP group, each drawing k of E experts without replacement, and a rank
holding L = E / ep of them: the local experts one token picks are hypergeometric (population E, L successes, k draws;
Feller, An Introduction to Probability Theory, vol. 1, II.6), mean k / ep, variance k (1/ep)(1 - 1/ep)(E - k)/(E - 1);
tokens draw independently, so a rank's count has mean m = N k / ep and variance N times that. The ep counts sum to
N k exactly, so their correlation is -1 / (ep - 1); approximated as normal (m is thousands of copies in every run
modelled), they are sigma sqrt(ep / (ep - 1)) (Z_i - mean Z) with Z_i iid standard normal, whose expected maximum is
m + sigma sqrt(ep / (ep - 1)) e_ep, e_n the expected largest of n iid standard normals (its integral below; Royston
1982, Algorithm AS 177, "Expected normal order statistics (exact and approximate)", Applied Statistics 31:161-165).
Checked against a Monte Carlo of the routing (tests/test_force_balanced_routing.py).

Not modelled: DeepSeek-V3's group-limited routing (random logits still pass through it: a few % more variance, so
a few % of this small excess), and expert TP's gather of etp EP groups' tokens (which averages etp draws).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np


@lru_cache(maxsize=None)
def expected_max_std_normal(n: int) -> float:
    """E[max of n iid standard normals] = integral of x n phi(x) Phi(x)^(n-1) dx (Royston 1982), by the trapezoid rule
    on [-9, 9] (the tails beyond contribute < 1e-15 for n <= 1e6); 0 for n = 1."""
    if n <= 1:
        return 0.0
    x = np.linspace(-9.0, 9.0, 4001)
    cdf = 0.5 * (1.0 + np.array([math.erf(v / math.sqrt(2.0)) for v in x]))
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    y = x * n * pdf * cdf ** (n - 1)
    return float(np.sum((y[1:] + y[:-1]) * np.diff(x)) / 2.0)


def force_balanced_imbalance(tokens_rank, ep, num_experts: int, top_k: int) -> np.ndarray:
    """Expected busiest EP rank's received token copies / the mean, under uniform random top-k routing (module
    docstring): 1 + sigma sqrt(ep/(ep-1)) e_ep / m; 1 where ep is 1. `tokens_rank`, `ep`: arrays (broadcast)."""
    ep = np.asarray(ep, dtype=np.int64)
    tokens = np.asarray(tokens_rank, dtype=np.float64) * ep
    share = 1.0 / np.maximum(ep, 1)
    per_token_var = top_k * share * (1.0 - share) * (num_experts - top_k) / max(num_experts - 1, 1)
    mean = tokens * top_k * share
    sizes, where = np.unique(ep, return_inverse=True)
    e_max = np.array([expected_max_std_normal(int(n)) for n in sizes])[where].reshape(ep.shape)
    spread = np.sqrt(ep / np.maximum(ep - 1, 1)) * e_max
    excess = np.sqrt(tokens * per_token_var) * spread / np.maximum(mean, 1e-300)
    return np.where(ep > 1, 1.0 + excess, 1.0)
