"""nNodes as NCCL counts it, which is what a tuner plugin rule must match.

NCCL hands its tuner `comm->nNodes` (src/init.cc, ncclTunerPlugin init), counted from the topology
graphs: ranks whose ring starts at the same rank form one node ("Determine nNodes, firstRanks": a
node per distinct `topoRanks.ringRecv[0]`). On a multi-node NVLink system (GB200/GB300 NVL72) the
graph spans the whole NVLink domain, so the 18 hosts of one NVL72 rack are ONE node (and NCCL also
reports `nvlDomainInfo.nNvlDomains = comm->nNodes`). Elsewhere a node is a host.

Measured runs: the run header's topology (its racks are scale-up domains) decides: a domain whose
ranks sit on several hosts means multi-node NVLink, so nNodes = domains; otherwise distinct hosts.
An emulated fabric (commbench emulate) is not NVLink: hosts. Predicted rules: a preset's scale-up
domain larger than one host (MAX_GPUS_PER_HOST) spans hosts: nNodes = domains.
"""

from __future__ import annotations

import math

MAX_GPUS_PER_HOST = 8  # HGX/DGX baseboards hold 8 GPUs, GB200/GB300 compute trays 4: a bigger domain spans hosts
HOSTS = "hosts"
NVLINK_DOMAINS = "NVLink domains"


def header_node_count(header) -> tuple[int, str, str]:
    """(nNodes, HOSTS or NVLINK_DOMAINS, why) for a RunHeader."""
    hostnames = list(header.hostnames or [])
    num_hosts = len(set(hostnames)) or 1
    topology = header.topology or {}
    source = _source_name(topology)
    if header.emulated:
        return num_hosts, HOSTS, "emulated fabric: NCCL counts hosts"
    racks = _racks(topology, header.world_size)
    if racks:
        if len(hostnames) == header.world_size:  # one host name per rank: look at each domain's hosts
            spanning = any(len({hostnames[r] for r in rack if 0 <= r < len(hostnames)}) > 1 for rack in racks)
        else:  # more hosts than domains: some domain holds ranks of two hosts
            spanning = num_hosts > len(racks)
        if spanning:
            return (len(racks), NVLINK_DOMAINS,
                    f"{len(racks)} NVLink domain(s) over {num_hosts} host(s) (topology from {source}): multi-node "
                    "NVLink, NCCL counts one node per domain")
    return num_hosts, HOSTS, f"{num_hosts} host(s) in the run header, no NVLink domain spans hosts (topology from {source})"


def _source_name(topology: dict) -> str:
    """What decided the topology, without its details ("hostnames (NVLink domains not detected: no pynvml)" ->
    "hostnames (NVLink domains not detected)"): parentheses balanced."""
    name = str(topology.get("source", "?")).split(":")[0].strip()
    return name + ")" * max(0, name.count("(") - name.count(")"))


# GPUs whose racks join hosts in one NVLink domain (GB200/GB300 NVL72: 18 trays of 4 GPUs): there a host is not
# NCCL's node, and the domains must have been detected (NVML fabric info) or described (--ranks-per-rack, ...)
MULTI_NODE_NVLINK_GPUS = ("gb200", "gb300")
# topology sources that took hosts for domains without knowing (comm/nvlink_domains.py topology_from_fabric;
# importers/nccl_tests.py HOST_DOMAINS: an nccl-tests log imported without --ranks-per-rack)
_UNDETECTED = ("NVLink domains not detected", "nccl-tests log host names")


def unknown_node_count(header) -> str | None:
    """Why nNodes cannot be told for a run, or None: GPU ranks of a multi-node NVLink system (GB200/GB300) on
    several hosts whose NVLink domains were neither detected nor described. NCCL counts one node per domain
    there, so the 18 hosts of one NVL72 are ONE node to NCCL, and a rule keyed on the host count would never
    match that rack but would match a communicator over as many racks (another fabric)."""
    topology = header.topology or {}
    source = str(topology.get("source", ""))
    gpus = " ".join(header.devices or []).lower()
    hosts = len(set(header.hostnames or []))
    if header.emulated or hosts < 2 or not any(g in gpus for g in MULTI_NODE_NVLINK_GPUS) \
            or not any(mark in source for mark in _UNDETECTED):
        return None
    return (f"{hosts} hosts of {header.devices[0]} GPUs whose NVLink domains were not detected ({source}): NCCL "
            "counts one node per NVLink domain (an NVL72 rack is one node), so nNodes is unknown; measure again with "
            "pynvml installed (NVML fabric info), or describe the racks (bench --ranks-per-rack / --topology nvl72; "
            "import nccl-tests --ranks-per-rack)")


def _racks(topology: dict, world_size: int) -> list[list[int]]:
    """The topology's racks; from ranks_per_rack (contiguous) when a header lists no racks."""
    if topology.get("racks"):
        return [list(rack) for rack in topology["racks"]]
    per_rack = topology.get("ranks_per_rack")
    if isinstance(per_rack, int) and per_rack > 0 and world_size > 0:
        return [list(range(k, min(k + per_rack, world_size))) for k in range(0, world_size, per_rack)]
    return []


def predicted_node_count(fabric, ranks: int) -> tuple[int, str, str]:
    """(nNodes, kind, why) for `ranks` GPUs of a fabric placed contiguously."""
    domains = math.ceil(ranks / fabric.domain_size)
    if fabric.domain_size > MAX_GPUS_PER_HOST:
        return (domains, NVLINK_DOMAINS,
                f"{domains} NVLink domain(s) of {fabric.domain_size} GPUs ({fabric.name}): a domain spans hosts "
                "(multi-node NVLink), NCCL counts one node per domain")
    return (domains, HOSTS, f"{domains} host(s) of {fabric.domain_size} GPUs ({fabric.name}): one NVLink domain per host")
