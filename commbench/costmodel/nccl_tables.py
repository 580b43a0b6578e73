"""NCCL's own cost-model constants: base latency, per-hop latency per link type, protocol caps.

Facts from ONE NCCL release: NVIDIA/nccl v2.27.7-1 src/graph/tuning.cc (`git show v2.27.7-1:src/graph/tuning.cc`;
line numbers below are that file's), latencies in microseconds, bandwidths in GB/s. v2.27.7-1 is the last release
whose NVLS model is the one nccl_model.py implements (algBw = 5/6 of busBw, tuning.cc:324); v2.28 changed NVLS
bandwidth (nRanks/nsteps, nvlsEfficiency), not modelled, and the Blackwell tree caps, which commbench's timing takes
as what the tree achieves (TREE_ACHIEVED_*) while NCCL's own pick keeps this tag's. Values NCCL changed
between releases, at this tag: tree/Simple base 8.4 and NVLink hop 4.0 (<= 2.22: base 0 and hop 28), NVLS NVLink
hop 25 (<= 2.22: 23), ring LL at half the bus bandwidth (<= 2.21: 1/4 or 1/3). Our own code in nccl_model.py combines
them (nccl_own.py adds ncclTopoGetAlgoTime's size corrections); nothing here is fitted.
"""

from __future__ import annotations

from commbench.comm.nccl_tuning import NCCL_ALGORITHMS_FOR, SIMPLE_ONLY_ALGORITHMS

NCCL_RELEASE = "v2.27.7-1"  # the one NVIDIA/nccl tag every constant of this file is read at

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

# baseLat[algorithm][protocol] (tuning.cc:134-137; PAT's base 8 is written into its latency, tuning.cc:374)
BASE_LAT_US = {
    "tree": {"LL": 6.8, "LL128": 14.0, "Simple": 8.4},
    "ring": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4},
    "collnet_direct": {"Simple": 0.0}, "collnet_chain": {"Simple": 0.0},
    "nvls": {"Simple": 0.0}, "nvls_tree": {"Simple": 0.0},
    "pat": {"Simple": 8.0},
}
# hwLat[link][algorithm][protocol]: latency of one hop over NVLink or the network (tuning.cc:143-156; PAT has no
# hwLat row at this tag: its NVLink hop is unused, its network hop is the tree's, tuning.cc:332 with ppn 1)
HW_LAT_US = {
    "nvlink": {
        "tree": {"LL": 0.6, "LL128": 1.25, "Simple": 4.0},
        "ring": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4},
        "collnet_direct": {"Simple": 3.7}, "collnet_chain": {"Simple": 2.8},
        "nvls": {"Simple": 25.0}, "nvls_tree": {"Simple": 25.0},
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
# Per-architecture caps, indexed by nodes: (1 node, 2 nodes, 3+ nodes) (tuning.cc:165-189, index2 = nNodes <= 2 ?
# nNodes-1 : 2). llMaxBws is read at the GPU's row on one node only: on several nodes NCCL reads the CPU vendor's row
# (tuning.cc:234-236), Intel or any non-AMD CPU (Grace) {39.0, 39.0, 20.4}; AMD hosts ({22.5, 19.0}) are not modelled.
LL_MAX_BW_GBPS = {"hopper": (141.0, 39.0, 20.4), "blackwell": (2 * 141.0, 39.0, 20.4)}
RING_LL128_MAX_PER_CHANNEL_GBPS = {"hopper": (36.7, 36.7, 36.7), "blackwell": (2 * 36.7, 2 * 36.7, 2 * 36.7)}
TREE_LL128_MAX_PER_CHANNEL_GBPS = {"hopper": (36.7, 36.7, 29.0), "blackwell": (2 * 36.7, 2 * 36.7, 2 * 29.0)}
TREE_MAX_PER_CHANNEL_GBPS = {"hopper": (38.7, 41.4, 36.0), "blackwell": (2 * 38.7, 2 * 41.4, 2 * 36.0)}
# What a tree achieves on Blackwell, as NVIDIA retuned it from v2.28.3-1 ("NVLSTree Tuning Fixes. Update tuning data
# for H100, GB200-NV72", its release notes; perChMaxTreeLL128Bws / perChMaxTreeBws at v2.28.3-1 src/graph/tuning.cc:185,
# 191, unchanged at v2.30.7-1 :196, 203; Hopper's rows unchanged). commbench's timing uses these; NCCL's own pick at
# NCCL_RELEASE (nccl_own) still rates the tree by the caps above (v2.26.2-1 :168, 174 has the same), as the releases
# that ran the published GB200 curves did. On 3+ GB200 NVL72 racks the tree's 16 channels x 24 GB/s give 384 GB/s
# busBw where the NICs in use would give ~690: CoreWeave's 20-rack curve (NCCL 2.26.2, NVLS off) reaches ~405.
TREE_ACHIEVED_LL128_PER_CHANNEL_GBPS = {**TREE_LL128_MAX_PER_CHANNEL_GBPS, "blackwell": (55.6, 31.67, 20.0)}
TREE_ACHIEVED_PER_CHANNEL_GBPS = {**TREE_MAX_PER_CHANNEL_GBPS, "blackwell": (70.0, 42.8, 24.0)}
ARCHITECTURES = tuple(LL_MAX_BW_GBPS)

# Protocol efficiencies (tuning.cc:278-285, "Various model refinements")
RING_LL_SHARE = 0.5  # every collective, any node count (tuning.cc:279)
RING_LL128_SHARE = 0.92
TREE_SHARE = 0.92
TREE_LL_SHARE = 1 / 3.8
TREE_LL128_SHARE = (7 / 9, 120 / 128)  # one node, several nodes
PAT_SHARE = 0.75
# Bus bandwidth -> algorithm bandwidth of non-ring algorithms ("Convert bus BW to algorithm BW", tuning.cc:320-327)
NVLS_ALGBW_RATIO = 5 / 6
# The NVLS graph (NVLS and NVLS tree both run on it: src/init.cc:687) has at most this many channels, its "heads",
# each a GPU of the domain with its NIC: `graph->maxChannels = std::min(NCCL_MAX_NVLS_ARITY, system->nodes[GPU].count)`
# (src/graph/search.cc:1014), NCCL_MAX_NVLS_ARITY 32 (src/include/device.h:206; the same at v2.26.2-1 and v2.30.7-1)
NVLS_MAX_HEADS = 32
TREE_ALGBW_RATIO = 0.5
NET_OVERHEAD_US = 1.0  # getNetOverhead (x3 for Simple), inter-node rings (tuning.cc:204-209, 347-353)

# ncclTopoGetAlgoTime (tuning.cc:555-577): all-reduce trees' bandwidth x treeCorrectionFactor[protocol][log2(bytes/64)]
# for 64 B to 256 MiB ("trees are not perfectly sticking to the model for medium sizes"), and an inter-node Simple
# ring all-reduce's latency x 1.4 ("plateau effect of ring", compute capability >= 8.0) once bytes / (channels x
# ranks) >= 64.
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
}
RING_PLATEAU_FACTOR = 1.4
RING_PLATEAU_BYTES_PER_CHANNEL_RANK = 64
