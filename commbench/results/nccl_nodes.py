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
    source = _source_text(topology)
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
                    f"{len(racks)} NVLink domain(s) over {num_hosts} host(s) ({source}): multi-node "
                    "NVLink, NCCL counts one node per domain")
    return num_hosts, HOSTS, f"{num_hosts} host(s) in the run header, no NVLink domain spans hosts ({source})"


def _source_text(topology: dict) -> str:
    """'topology from SOURCE' (_source_name), or 'topology unknown: ...' where the header records no topology (an older
    or hand-written header, an import of a log that names no hosts' domains): never a bare '?'."""
    if not str(topology.get("source") or "").strip():
        return "topology unknown: the run header records none"
    return f"topology from {_source_name(topology)}"


def _source_name(topology: dict) -> str:
    """What decided the topology, without its details ("hostnames (NVLink domains not detected: no pynvml)" ->
    "hostnames (NVLink domains not detected)"): parentheses balanced."""
    name = str(topology.get("source", "?")).split(":")[0].strip()
    return name + ")" * max(0, name.count("(") - name.count(")"))


def multi_node_nvlink_gpus() -> tuple[str, ...]:
    """The GPUs of data/hardware.toml whose scale-up domain is larger than a host holds (MAX_GPUS_PER_HOST): gb200
    and gb300 (NVL72: 18 trays of 4 GPUs in one NVLink domain). There a host is not NCCL's node, and the domains must
    have been detected (NVML fabric info) or described (--ranks-per-rack, --topology nvl72, ...)."""
    from commbench.data.reference import hardware_toml

    return tuple(sorted(name for name, row in hardware_toml()["gpu"].items()
                        if int(row.get("scale_up_domain", 0)) > MAX_GPUS_PER_HOST))


# Topology sources that know the NVLink domains: detected from NVML fabric info (comm/nvlink_domains.py
# FABRIC_SOURCE), or described by the user (comm/topology.py: --ranks-per-rack, --racks N, --rack-ranks, --topology's
# "preset NAME", "hostnames" with --nodes-per-rack 1, "hostnames, N node(s) per rack", "hostnames grouped by
# --rack-nodes"; COMMBENCH_RANKS_PER_RACK; import nccl-tests --ranks-per-rack). Every other source -- none at all
# (an older or hand-written header), "hostnames (NVLink domains not detected: ...)", an nccl-tests log's host names,
# "host names, known at launch", or one this list does not know -- took hosts for domains or says nothing of them.
def _known_domain_sources() -> tuple[str, ...]:
    from commbench.comm.nvlink_domains import FABRIC_SOURCE
    from commbench.comm.topology import RANKS_PER_RACK_ENV

    return (FABRIC_SOURCE, "--", "preset ", "hostnames, ", "hostnames grouped by", RANKS_PER_RACK_ENV)


def domains_known(topology: dict, world_size: int) -> bool:
    """Whether a header's topology names NVLink domains that were detected or described (_known_domain_sources)."""
    source = str(topology.get("source") or "")
    return bool(_racks(topology, world_size)) and (source == "hostnames" or source.startswith(_known_domain_sources()))


def unknown_node_count(header) -> str | None:
    """Why nNodes cannot be told for a run, or None: GPU ranks of a multi-node NVLink system (a GPU whose scale-up
    domain spans hosts: multi_node_nvlink_gpus) on several hosts whose NVLink domains were neither detected nor
    described (domains_known: no topology in the header counts as not). NCCL counts one node per domain there, so
    the 18 hosts of one NVL72 are ONE node to NCCL, and a rule keyed on the host count would never match that rack
    but would match a communicator over as many racks (another fabric)."""
    import re

    topology = header.topology or {}
    hosts = len(set(header.hostnames or []))
    devices = [d.lower() for d in header.devices or []]
    # the model as a name of its own ("NVIDIA GB200"; profile.device_is_gpu's match: a B200 is no GB200)
    spanning = [g for g in multi_node_nvlink_gpus()
                if any(re.search(rf"(?<![a-z0-9]){re.escape(g)}(?![0-9])", d) for d in devices)]
    if header.emulated or hosts < 2 or not spanning or domains_known(topology, header.world_size):
        return None
    source = str(topology.get("source") or "") or "no topology in the run header"
    return (f"{hosts} hosts of {header.devices[0]} GPUs whose NVLink domains were not detected or described "
            f"({_source_name({'source': source})}): a {spanning[0]} NVLink domain spans hosts and NCCL counts one "
            "node per domain (an NVL72 rack is one node), so nNodes is unknown; measure again with pynvml installed "
            "(NVML fabric info), or describe the racks (bench --ranks-per-rack / --topology nvl72; import nccl-tests "
            "--ranks-per-rack)")


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
