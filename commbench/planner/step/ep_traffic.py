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


def _distinct_uniform(bins: np.ndarray, draws: float) -> np.ndarray:
    """Expected distinct bins hit by `draws` uniform picks (with replacement) over `bins` bins."""
    return bins * (1.0 - (1.0 - 1.0 / bins) ** draws)


def _distinct_domains_grouped(domains: int, groups: int, groups_picked: int) -> float:
    """Expected distinct domains when a token picks `groups_picked` of `groups` expert groups
    (uniformly, without replacement) and the groups lie contiguously, groups/domains per domain."""
    if domains <= 1:
        return 1.0
    if groups % domains:
        return float(domains)  # groups straddle domains: no cap from the grouping
    per_domain = groups // domains
    missed = comb(groups - per_domain, groups_picked) / comb(groups, groups_picked)
    return domains * (1.0 - missed)


def distinct_domains_per_token(model: ModelSpec, domains: np.ndarray) -> np.ndarray:
    """Expected scale-up domains one token's top-k experts lie in, EP spread over `domains`."""
    d = np.maximum(np.asarray(domains, dtype=np.float64), 1.0)
    out = _distinct_uniform(d, float(model.top_k))
    groups, picked = model.router_groups
    if groups and 0 < picked < groups:
        counts = RowGroups(d)   # few distinct domain counts per search
        capped = np.array([_distinct_domains_grouped(int(x), groups, picked) if x <= groups else np.inf
                           for x in counts.of(d).tolist()])
        out = np.minimum(out, counts.expand(capped))
    return out


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
