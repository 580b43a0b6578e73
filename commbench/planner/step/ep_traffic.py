"""Copies of a token that cross the scale-up boundary in an MoE dispatch (and come back in the
combine), vectorised over layouts.

The alltoall dispatcher (NCCL all-to-all) sends one copy per routed expert (top-k), so the NIC
carries every copy bound for another domain. The flex dispatcher's internode kernels (DeepEP
normal kernels; HybridEP across NVLink domains) forward hierarchically: a token goes over RDMA
once to each *domain* holding one of its experts (to the GPU with the same local index), and is
fanned out to the experts' GPUs over NVLink there; the combine reduces inside the domain first
and sends one partial sum back per domain (DeepSeek-V3 technical report, arXiv 2412.19437
sec. 3.2.2: "first transmitted via IB to the GPUs with the same in-node index on each target node
... instantly forwarded via NVLink"; deepseek-ai/DeepEP README: kernels "for asymmetric-domain
bandwidth forwarding, such as forwarding data from NVLink domain to RDMA domain"). HybridEP is
taken to use the same scheme across domains (assumed: its internode path is documented as
RDMA between domains + NVLink inside them, Megatron-LM MoE docs).

Node-limited routing (DeepSeek-V3: experts in n_group=8 groups, each token picks topk_group=4
groups; models.toml) caps the domains a token reaches: with EP over D domains and G groups of
contiguous experts, each domain holds G/D groups when D <= G.
"""

from __future__ import annotations

from math import comb

import numpy as np

from commbench.row_groups import RowGroups

from commbench.planner.models.spec import ModelSpec


def expected_distinct_bins(experts: int, bins, picks: int) -> np.ndarray:
    """Expected bins (EP ranks, or scale-up domains) holding at least one of a token's `picks` experts, the
    `experts` spread evenly over `bins` (experts/bins each) and routing uniform: bins x (1 - C(E - E/bins, k) / C(E, k)),
    the probability that a hypergeometric draw of k distinct experts misses a bin's E/bins (a bin is missed when all
    k lie in the other E - E/bins). The k experts are distinct: Megatron's router takes torch.topk over the experts'
    scores (megatron-core 0.16.1 moe_utils.topk_routing_with_score_function, :697 and :788; group_limited_topk,
    :568), so a token never draws an expert twice; the with-replacement form bins x (1 - (1 - 1/bins)^k) overcounts
    the misses (Mixtral, 8 experts top-2 on EP8: 1.875 ranks, where exactly 2). Computed as the product
    prod_{i<k} (E - E/bins - i) / (E - i) (= C(E - m, k) / C(E, k) for integer m = E/bins, factors clipped at 0: a
    bin whose complement holds fewer than k experts is always hit); where bins does not divide E (a domain count
    that splits EP unevenly) the same product at m = E/bins interpolates between the neighbouring integer cases."""
    b = np.maximum(np.asarray(bins, dtype=np.float64), 1.0)
    per_bin = float(experts) / b
    missed = np.ones_like(b)
    for i in range(int(picks)):
        missed = missed * np.clip((experts - per_bin - i) / (experts - i), 0.0, None)
    return b * (1.0 - missed)


def _distinct_bins_grouped(bins: int, groups: int, groups_picked: int) -> float:
    """Expected distinct bins (ranks or domains) holding the `groups_picked` of `groups` expert groups a token picks
    (uniformly, without replacement), the groups contiguous, groups/bins per bin."""
    if bins <= 1:
        return 1.0
    if groups % bins:
        return float(bins)  # groups straddle bins: no cap from the grouping
    per_bin = groups // bins
    missed = comb(groups - per_bin, groups_picked) / comb(groups, groups_picked)
    return bins * (1.0 - missed)


def distinct_bins_per_token(model: ModelSpec, bins: np.ndarray) -> np.ndarray:
    """Expected bins (EP ranks, or scale-up domains) one token's top-k (distinct) experts lie in, the experts spread
    evenly over `bins` (expected_distinct_bins), capped by group-limited routing where whole groups sit in each bin:
    at most the bins holding the token's picked groups (megatron-core 0.16.1 moe_utils.group_limited_topk: experts
    only of the topk_group groups with the highest top-(k/topk_group) score sums; its docstring: n_group = EP is
    device-limited, = nodes node-limited routing). The cap counts every picked group as hit, as a group is picked
    for its top experts' scores."""
    b = np.maximum(np.asarray(bins, dtype=np.float64), 1.0)
    counts = RowGroups(b)   # few distinct bin counts per search
    each = counts.of(b)
    out = expected_distinct_bins(model.num_routed_experts, each, model.top_k)
    groups, picked = model.router_groups
    if groups and 0 < picked < groups:
        out = np.minimum(out, [_distinct_bins_grouped(int(x), groups, picked) if x <= groups else np.inf
                               for x in each.tolist()])
    return counts.expand(out)


def distinct_domains_per_token(model: ModelSpec, domains: np.ndarray) -> np.ndarray:
    """Expected scale-up domains one token's top-k experts lie in, EP spread over `domains` (distinct_bins_per_token)."""
    return distinct_bins_per_token(model, domains)


def dispatch_copies(model: ModelSpec, ep: np.ndarray, domains: np.ndarray, rank_fanout: np.ndarray,
                    flex: np.ndarray) -> np.ndarray:
    """Copies of each token a rank's dispatch moves, as the fabric model's all-to-all counts them
    (bytes per rank = tokens x copies x hidden x element size).

    Inside one domain: `rank_fanout` (top-k, or distinct destination ranks with flex). Across
    domains with flex: one copy per distinct domain, so the NIC (the cost model's inter-domain share,
    (D-1)/D of the bytes) carries tokens x distinct domains x (D-1)/D, the hierarchical forwarding's
    RDMA traffic. The NVLink fan-out inside each domain is the other leg of the forwarding, charged
    beside it by moe_comm.py."""
    crossing = flex & (domains > 1) & (ep > 1)
    if not np.any(crossing):
        return rank_fanout
    return np.where(crossing, np.minimum(distinct_domains_per_token(model, domains), rank_fanout), rank_fanout)
