"""NCCL's algorithm x protocol cost structure on a tiered fabric (predicted, vectorised).

Per collective, algorithm (ring, tree, NVLS, NVLS-tree, CollNet, PAT) and protocol (LL, LL128,
Simple), as NCCL's ncclTopoTuneModel (src/graph/tuning.cc) and ncclTopoGetAlgoTime (src/enqueue.cc)
structure it:

    latency_us  = baseLat[a][p] + hops inside the domain x hwLat[NVLink][a][p]
                                + hops between domains x hwLat[NET][a][p]
    busbw_gbps  = link rate x the system's efficiency (NCCL: channels x per-channel bandwidth; a tuner rule's
                  count N scales ring, tree and PAT by min(N, channels) / channels: GroupTerms),
                  x the protocol's share (ring LL 1/2, LL128 0.92, tree 0.92...), capped per channel
    time_s      = latency + size_bytes / algbw,  algbw = busbw x the algorithm's ratio
                  (ring n/nsteps, NVLS 5/6, tree 1/2)

and NCCL's choice is the minimum over the (algorithm, protocol) pairs it allows there: NVLS only
with NVSwitch multicast inside one domain (NVLS-tree across domains), CollNet only with SHARP, PAT
for reduce-scatter / all-gather with one rank per domain. Two per-system terms are ours and are
calibrated on published figures (hardware.toml [nccl_model.*], each with its source):
`launch_us`, what nccl-tests measures above NCCL's table at the smallest sizes (kernel launch and
timing), and a pipeline ramp `fill_us_per_rank` x n x size / (size + fill_half_bytes): the
measured extra time large messages pay to fill NCCL's chunk pipeline (NCCL itself corrects trees
for the same effect with treeCorrectionFactor). The constants are one NCCL release's (nccl_tables.NCCL_RELEASE).
Not modelled here: ncclTopoGetAlgoTime's size corrections (the tree correction factor, the inter-node ring plateau);
nccl_own.py adds them to price a pair as NCCL's own model does, which the tuner checks its rules against.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from commbench.costmodel import nccl_tables as T
from commbench.errors import invalid

ArrayLike = float | int | np.ndarray
Combo = tuple[str, str]


@dataclass(frozen=True, kw_only=True)
class NcclSystem:
    """Per-system NCCL parameters; bandwidths are fractions of the fabric's tier link rates, so a
    what-if on the link rate (planner explain) moves them too."""

    arch: str  # "hopper" or "blackwell": NCCL's per-architecture protocol caps
    channels: int  # ring/tree channels: caps LL128 and tree per channel
    ring_efficiency: float  # Simple ring busbw / scale-up link rate
    nvls_efficiency: float = 0.0  # NVLS busBw (NCCL's, before the 5/6) / link rate; 0: no multicast
    net_efficiency: float  # busbw across domains / NIC rate
    sharp: bool = False  # in-network reduction (CollNet) on the scale-out network
    launch_us: float = 0.0
    fill_us_per_rank: dict[str, float] = field(default_factory=dict)
    fill_half_bytes: float = 64 * 2**20
    source: str = ""
    # whose runs set launch_us and fill_us_per_rank (the small-message curve), "borrowed" where another GPU's:
    # said by `systems` and `predict` (presets.nccl_system builds it from hardware.toml's small_sizes_from)
    small_sizes: str = ""

    def __post_init__(self) -> None:
        if self.arch not in T.ARCHITECTURES:
            raise invalid("arch", self.arch, f"one of {', '.join(T.ARCHITECTURES)}")
        if self.channels < 1:
            raise invalid("channels", self.channels, "at least 1 NCCL channel")
        for name in ("ring_efficiency", "net_efficiency"):
            if not 0 < getattr(self, name) <= 2:
                raise invalid(name, getattr(self, name), "a fraction of the link rate in (0, 2]")
        if not 0 <= self.nvls_efficiency <= 2:
            raise invalid("nvls_efficiency", self.nvls_efficiency, "0 (no NVLS) or a fraction in (0, 2]")
        if self.launch_us < 0 or self.fill_half_bytes <= 0:
            raise invalid("launch_us/fill_half_bytes", (self.launch_us, self.fill_half_bytes), "launch >= 0, half > 0")
        unknown = set(self.fill_us_per_rank) - set(T.ALGORITHMS)
        if unknown or any(v < 0 for v in self.fill_us_per_rank.values()):
            raise invalid("fill_us_per_rank", self.fill_us_per_rank, f">= 0 us per rank for algorithms {', '.join(T.ALGORITHMS)}")


def check_group(num_gpus: int, num_domains_total: int, domain_size: int, name: str,
                n: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Ranks per domain; raises a one-line error naming the bad group size or domain count."""
    n_min, n_max, d_min, d_max = n.min(), n.max(), d.min(), d.max()
    if n_min < 1:
        raise invalid("group_size", int(n_min), "groups need >= 1 rank")
    if n_max > num_gpus:
        raise invalid("group_size", int(n_max), f"at most the {num_gpus} GPUs of {name}")
    if d_min < 1 or (d_max > 1 and np.any(d > n)):
        raise invalid("num_domains", int(d_min if d_min < 1 else d_max), "between 1 and the group size")
    if d_max > num_domains_total:
        raise invalid("num_domains", int(d_max), f"at most the {num_domains_total} domains of {name}")
    ranks_per_domain = np.ceil(n / d)
    if ranks_per_domain.max() > domain_size:
        raise invalid("group_size", int(n_max),
                      f"a group on one domain holds at most {domain_size} ranks; pass num_domains")
    return ranks_per_domain


def _node_index(d: np.ndarray) -> np.ndarray:
    """NCCL's caps are tabulated for 1, 2 and 4+ nodes."""
    return np.minimum(d, 3).astype(np.intp) - 1


def _log2i(x: np.ndarray) -> np.ndarray:
    return np.floor(np.log2(np.maximum(x, 1)))


def call_channels(system: NcclSystem, channels: int | None) -> int:
    """The channels a call runs on when a tuner plugin names `channels` (None or 0: NCCL's own count, the system's):
    NCCL takes the plugin's count as the call's (`info->nMaxChannels = nMaxChannels == 0 ? info->nMaxChannels :
    nMaxChannels`, NVIDIA/nccl v2.27.7-1 src/enqueue.cc:1935) and schedules at most the communicator's channels
    (scheduleCollTasksToPlan, src/enqueue.cc:549-550), which the model takes as `system.channels`."""
    if not channels:
        return system.channels
    if channels < 0:
        raise invalid("channels", channels, "a channel count >= 1, or None/0 for NCCL's own")
    return min(int(channels), system.channels)


# pairs whose bandwidth the model scales with the call's channels (busBw = nChannels x per-channel bw, tuning.cc:276);
# NVLS and NVLS tree run on nvlsChannels (not the communicator's count) and CollNet on a count of its own, neither of
# which the model knows: it prices them at NCCL's own count only (a tuner rule forcing one on them is not priced)
CHANNEL_SCALED = ("ring", "tree", "pat")


class GroupTerms:
    """Size-independent terms of one batch of queries: group, domains, link rates. `channels`: the count a tuner rule
    forces on the call (call_channels; None: NCCL's own), which scales the bus bandwidth of ring, tree and PAT as
    NCCL's `busBw = graphs[a]->nChannels * bw` does (NVIDIA/nccl v2.27.7-1 src/graph/tuning.cc:276) before the
    protocols' caps, those per channel counting the same channels (:279-283); latency does not depend on it."""

    def __init__(self, fabric, system: NcclSystem, collective: str, n: np.ndarray, d: np.ndarray,
                 channels: int | None = None, *, nccl_own: bool = False):
        self.system, self.collective, self.n, self.d = system, collective, n, d
        # NCCL's own rating (nccl_own: the tree caps of NCCL_RELEASE, by which NCCL picks) or what the tree achieves
        # (nccl_tables.TREE_ACHIEVED_*: NVIDIA's later Blackwell tuning data), which commbench times with
        self.tree_caps = (T.TREE_MAX_PER_CHANNEL_GBPS, T.TREE_LL128_MAX_PER_CHANNEL_GBPS) if nccl_own else \
            (T.TREE_ACHIEVED_PER_CHANNEL_GBPS, T.TREE_ACHIEVED_LL128_PER_CHANNEL_GBPS)
        self.channels = call_channels(system, channels)
        self.channel_share = self.channels / system.channels   # of the bandwidth the preset's efficiencies give
        self.m = np.ceil(n / d)
        self.cross = d > 1
        self.any_cross, self.all_cross = bool(self.cross.any()), bool(self.cross.all())
        self.node = _node_index(d)
        up_gbps = fabric.tiers["scale_up"].link_gbps_per_gpu
        net_gbps = fabric.tiers["scale_out"].link_gbps_per_gpu if "scale_out" in fabric.tiers else np.inf
        self.up_ring = system.ring_efficiency * up_gbps
        self.net = system.net_efficiency * net_gbps
        # one NIC across domains: PAT, which NCCL runs with one rank per domain only
        self.base = np.where(self.cross, min(self.up_ring, self.net), self.up_ring) if self.any_cross else self.up_ring
        # Across domains a ring's channels leave each domain through the NICs of its m ranks there (NCCL
        # spreads channels over NICs: busBw = nChannels x per-channel bw, src/graph/tuning.cc; "if we use
        # ring, the busbw is going to reflect exactly what's going through the NICs ... the total NIC
        # bandwidth", nccl-tests issue 160), so a ring's bus bandwidth is the m NICs together, up to the
        # in-domain ring's; one NIC only when m = 1; at most one NIC per channel.
        nics = np.minimum(self.m, system.channels)
        self.ring_base = np.where(self.cross, np.minimum(self.up_ring, nics * self.net), self.up_ring) \
            if self.any_cross else self.up_ring
        # A tree's channels spread over the same NICs (each tree channel enters and leaves a domain on one
        # NIC: NVIDIA/nccl v2.20.3-1 src/graph/search.cc), and NCCL prices a tree at nChannels x (nNodes <= 2
        # ? bwIntra : bwInter) (tuning.cc ncclTopoTuneModel, line 175), where on 2 nodes the search raises
        # bwIntra up to 2 x bwInter ("increase bwIntra for trees (2 nodes or collnet)", search.cc 1014-1016:
        # a 2-node tree sends each byte across once each way, half a ring's bytes), bounded by the in-domain
        # links. So beyond 2 domains the NICs in use, on 2 domains twice that, both up to the in-domain ring's
        # rate ("On two nodes, NCCL uses the tree ... which can indeed go beyond the network bottleneck",
        # NVIDIA/nccl-tests issue 196).
        self.tree_base = np.where(self.cross, np.minimum(self.up_ring, np.where(d <= 2, 2.0, 1.0) * nics * self.net),
                                  self.up_ring) if self.any_cross else self.up_ring
        self.nvls = system.nvls_efficiency * up_gbps
        # Across domains NVLS and NVLS tree move the reduced data through the NICs of the NVLS graph's heads, one NIC
        # per channel: NCCL prices NVLS tree at nChannels x min(bwIntra, nNodes <= 2 ? bwInter : bwInter / 2) (NVIDIA/nccl
        # v2.27.7-1 src/graph/tuning.cc:275-276; v2.26.2-1 :252-253; v2.30.7-1 :320-324 keeps the factor 2 between
        # 2 nodes and more), the graph's channels at most min(32, GPUs of the domain) (nccl_tables.NVLS_MAX_HEADS):
        # a domain of more than 32 ranks still crosses on 32 NICs.
        self.nvls_net = np.minimum(self.m, T.NVLS_MAX_HEADS) * self.net
        reduce_like = collective == "all_reduce"
        self.nsteps = {"all_reduce": 2 * (n - 1), "reduce_scatter": n - 1, "all_gather": n - 1}.get(collective, n)
        self.ninter = np.where(self.cross, 2 * d if reduce_like else d - 1, 0) if self.any_cross else 0.0
        self.ll_share = T.RING_LL_SHARE

    def allowed(self, algorithm: str) -> np.ndarray | bool:
        """Where NCCL offers `algorithm` for these queries (a bool, or a bool per query)."""
        s = self.system
        if algorithm not in T.ALGORITHMS_FOR.get(self.collective, ()):
            return False
        # NVLS needs more than 2 GPUs of the communicator in the domain (NVIDIA/nccl v2.27.7-1 src/transport/nvls.cc:160,
        # "gpuCount <= 2": no NVLS nor NVLS-tree)
        if algorithm == "nvls":
            return s.nvls_efficiency > 0 and (self.m > 2) & (not self.any_cross or s.sharp or ~self.cross)
        if algorithm == "nvls_tree":
            return s.nvls_efficiency > 0 and (self.m > 2) & self.cross
        if algorithm.startswith("collnet"):
            return s.sharp and self.cross
        if algorithm == "pat":
            return self.m == 1
        return True

    def cap(self, table: dict[str, tuple[float, float, float]]) -> np.ndarray:
        return np.asarray(table[self.system.arch])[self.node]

    def busbw_gbps(self, algorithm: str, protocol: str) -> np.ndarray:
        """NCCL's busBw for (algorithm, protocol), before the conversion to algorithm bandwidth."""
        channels, share = self.channels, self.channel_share
        base = self.base * share if share != 1 else self.base
        if algorithm == "ring":
            base = self.ring_base * share if share != 1 else self.ring_base
            if protocol == "LL":
                return np.minimum(self.cap(T.LL_MAX_BW_GBPS), base * self.ll_share)
            if protocol == "LL128":
                return np.minimum(base * T.RING_LL128_SHARE, channels * self.cap(T.RING_LL128_MAX_PER_CHANNEL_GBPS))
            return base
        if algorithm == "tree":
            tree_base = self.tree_base * share if share != 1 else self.tree_base
            tree_cap, tree_ll128_cap = self.tree_caps
            tree = np.minimum(tree_base * T.TREE_SHARE, channels * self.cap(tree_cap))
            if protocol == "LL":
                return np.minimum(tree * T.TREE_LL_SHARE, self.cap(T.LL_MAX_BW_GBPS))
            if protocol == "LL128":
                ll128_share = np.where(self.cross, T.TREE_LL128_SHARE[1], T.TREE_LL128_SHARE[0])
                return np.minimum(tree * ll128_share, channels * self.cap(tree_ll128_cap))
            return tree
        if algorithm == "nvls":  # across domains (with SHARP) over the heads' NICs together, as NVLS-tree
            return np.where(self.cross, np.minimum(self.nvls, self.nvls_net), self.nvls) if self.any_cross else self.nvls
        if algorithm == "nvls_tree":  # the heads' NICs together carry the reduced data between domains
            return np.minimum(self.nvls, np.where(self.d <= 2, self.nvls_net, self.nvls_net / 2))
        if algorithm.startswith("collnet"):  # SHARP: each GPU's bytes cross its NIC once
            return np.minimum(self.up_ring, 2 * self.net) * (0.85 if algorithm == "collnet_direct" else 1.0)
        if algorithm == "pat":
            return base * T.PAT_SHARE
        raise invalid("algorithm", algorithm, f"one of {', '.join(T.ALGORITHMS)}")

    def algbw_gbps(self, algorithm: str, protocol: str) -> np.ndarray:
        bus = self.busbw_gbps(algorithm, protocol)
        if algorithm in ("ring", "pat"):
            return bus * self.n / np.maximum(self.nsteps, 1)
        if algorithm in ("nvls", "nvls_tree"):
            return bus * T.NVLS_ALGBW_RATIO
        return bus * T.TREE_ALGBW_RATIO

    def latency_us(self, algorithm: str, protocol: str) -> np.ndarray:
        """NCCL's latency for (algorithm, protocol): base + hops x per-hop latency per link type."""
        base = T.BASE_LAT_US[algorithm][protocol]
        intra = T.HW_LAT_US["nvlink"][algorithm][protocol]
        inter = T.HW_LAT_US["net"][algorithm][protocol]
        m, d, cross = self.m, self.d, self.cross
        if algorithm == "ring":
            if self.collective == "broadcast":
                hop = T.HW_LAT_US["nvlink" if not self.any_cross else "net"]["tree" if protocol == "Simple" else "ring"][protocol]
                if self.any_cross and not self.all_cross:
                    hop = np.where(cross, hop, T.HW_LAT_US["nvlink"]["tree" if protocol == "Simple" else "ring"][protocol])
                return base + self.nsteps * hop
            if self.any_cross:
                overhead = T.NET_OVERHEAD_US * (3 if protocol == "Simple" else 1)
                intra = np.where(cross, max(intra, overhead), intra)
            return base + (self.nsteps - self.ninter) * intra + self.ninter * inter
        if algorithm == "tree":
            return base + 2 * ((m - 1) * intra + _log2i(d) * inter)
        if algorithm == "nvls":
            return intra + np.where(cross, inter, 0.0) if self.any_cross else np.full_like(m, intra)
        if algorithm == "nvls_tree":
            return base + intra + 2 * _log2i(d) * inter
        if algorithm == "collnet_direct":
            return base + 2 * (np.minimum(1, m - 1) * intra + (m - 1) * 0.4) + inter
        if algorithm == "collnet_chain":
            return base + 2 * (m - 1) * intra + inter
        # pat
        return base + _log2i(self.n) * (inter / 3.5) + self.n * 2.8

    def fixed_and_rate(self, algorithm: str, protocol: str) -> tuple[np.ndarray, np.ndarray, float]:
        """(seconds paid by every call, seconds per byte, ramp seconds per rank) of one pair."""
        latency_s = (self.latency_us(algorithm, protocol) + self.system.launch_us) * 1e-6
        per_byte_s = 1.0 / (self.algbw_gbps(algorithm, protocol) * 1e9)
        return latency_s, per_byte_s, self.system.fill_us_per_rank.get(algorithm, 0.0) * 1e-6


def combos(collective: str, algorithm: str | None = None, protocol: str | None = None) -> list[Combo]:
    """(algorithm, protocol) pairs NCCL tunes for `collective`, optionally narrowed to one of each."""
    algorithms = T.ALGORITHMS_FOR.get(collective)
    if algorithms is None:
        raise invalid("collective", collective, f"NCCL's algorithms cover {', '.join(T.ALGORITHMS_FOR)}")
    if algorithm is not None:   # any case, as NCCL_ALGO / NCCL_PROTO (nccl_tables.canonical_name)
        algorithm = T.canonical_name(algorithm, algorithms)
    if protocol is not None:
        protocol = T.canonical_name(protocol, T.PROTOCOLS)
    if algorithm is not None and algorithm not in algorithms:
        raise invalid("algorithm", algorithm, f"{collective} runs {', '.join(algorithms)}")
    if protocol is not None and protocol not in T.PROTOCOLS:
        raise invalid("protocol", protocol, f"one of {', '.join(T.PROTOCOLS)}")
    return [(a, p) for a in algorithms if algorithm in (None, a) for p in T.PROTOCOLS
            if protocol in (None, p) and (p == "Simple" or a not in T.SIMPLE_ONLY)]
