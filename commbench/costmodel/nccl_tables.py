"""NCCL's own cost-model constants: base latency, per-hop latency per link type, protocol caps.

Facts from NVIDIA/nccl src/graph/tuning.cc (ncclTopoTuneModel; read at commit b6475625, NCCL 2.19,
and the Blackwell / PAT rows of NCCL 2.23-2.25): latencies in microseconds, bandwidths in GB/s.
Our own code in nccl_model.py combines them; nothing here is fitted.
"""

from __future__ import annotations

from commbench.comm.nccl_tuning import NCCL_ALGORITHMS_FOR, SIMPLE_ONLY_ALGORITHMS

ALGORITHMS = ("ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pat")
PROTOCOLS = ("LL", "LL128", "Simple")
# NCCL_ALGO / NCCL_PROTO spellings, for reports and tuner rules
NCCL_ALGO_NAMES = {"ring": "Ring", "tree": "Tree", "nvls": "NVLS", "nvls_tree": "NVLSTree",
                   "collnet_direct": "CollnetDirect", "collnet_chain": "CollnetChain", "pat": "PAT"}



def canonical_name(name: str, names) -> str:
    """`name` as `names` spell it, matched case-insensitively as NCCL matches NCCL_ALGO / NCCL_PROTO tokens
    (strcasecmp in parseList, NVIDIA/nccl src/graph/tuning.cc), NCCL's own algorithm spellings included
    (NCCL_ALGO_NAMES: NVLSTree for nvls_tree); `name` unchanged when none matches, for the caller to refuse
    with what it allows."""
    names = tuple(names)
    folded = {NCCL_ALGO_NAMES[n].casefold(): n for n in names if n in NCCL_ALGO_NAMES}
    folded |= {n.casefold(): n for n in names}
    return folded.get(name.strip().casefold(), name)


# Which algorithms NCCL tunes per collective, and which run Simple only: one table for the cost model and the tuner
# (comm.nccl_tuning.NCCL_ALGORITHMS_FOR, after tuning.cc); the cost model has no reduce.
ALGORITHMS_FOR = {name: algorithms for name, algorithms in NCCL_ALGORITHMS_FOR.items() if name != "reduce"}
SIMPLE_ONLY = SIMPLE_ONLY_ALGORITHMS

# baseLat[algorithm][protocol]
BASE_LAT_US = {
    "tree": {"LL": 6.8, "LL128": 14.0, "Simple": 0.0},
    "ring": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4},
    "collnet_direct": {"Simple": 0.0}, "collnet_chain": {"Simple": 0.0},
    "nvls": {"Simple": 0.0}, "nvls_tree": {"Simple": 0.0},
    "pat": {"Simple": 8.0},
}
# hwLat[link][algorithm][protocol]: latency of one hop over NVLink or the network
HW_LAT_US = {
    "nvlink": {
        "tree": {"LL": 0.6, "LL128": 1.25, "Simple": 4.0},  # Simple 28 before NCCL 2.23
        "ring": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4},
        "collnet_direct": {"Simple": 3.7}, "collnet_chain": {"Simple": 2.8},
        "nvls": {"Simple": 23.0}, "nvls_tree": {"Simple": 23.0},
        "pat": {"Simple": 4.0},
    },
    "net": {
        "tree": {"LL": 5.0, "LL128": 8.5, "Simple": 14.0},
        "ring": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
        "collnet_direct": {"Simple": 31.0}, "collnet_chain": {"Simple": 30.0},
        "nvls": {"Simple": 18.0}, "nvls_tree": {"Simple": 14.0},
        "pat": {"Simple": 14.0},
    },
}
# Per-architecture caps, indexed by nodes: (1 node, 2 nodes, 4+ nodes)
LL_MAX_BW_GBPS = {"hopper": (141.0, 45.0, 35.0), "blackwell": (282.0, 90.0, 70.0)}
RING_LL128_MAX_PER_CHANNEL_GBPS = {"hopper": (36.7, 36.7, 36.7), "blackwell": (73.4, 73.4, 73.4)}
TREE_LL128_MAX_PER_CHANNEL_GBPS = {"hopper": (36.7, 36.7, 29.0), "blackwell": (73.4, 73.4, 58.0)}
TREE_MAX_PER_CHANNEL_GBPS = {"hopper": (38.7, 41.4, 36.0), "blackwell": (77.4, 82.8, 72.0)}
ARCHITECTURES = tuple(LL_MAX_BW_GBPS)

# Protocol efficiencies (tuning.cc "model refinements")
RING_LL_SHARE = (1 / 4, 1 / 3)  # all-reduce or multi-node; single-node reduce-scatter / all-gather
RING_LL128_SHARE = 0.92
TREE_SHARE = 0.92
TREE_LL_SHARE = 1 / 3.8
TREE_LL128_SHARE = (7 / 9, 120 / 128)  # one node, several nodes
PAT_SHARE = 0.75
# Bus bandwidth -> algorithm bandwidth of non-ring algorithms ("Convert bus BW to algorithm BW")
NVLS_ALGBW_RATIO = 5 / 6
TREE_ALGBW_RATIO = 0.5
NET_OVERHEAD_US = 1.0  # getNetOverhead (x3 for Simple), inter-node rings
