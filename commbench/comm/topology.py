"""Which ranks share a scale-up domain ("rack"): two tiers, scale-up inside a rack, scale-out across.

A GB300 NVL72 rack joins 72 GPUs over NVLink (one scale-up domain); an HGX node joins 8. Racks
join over the scale-out network. A Topology lists the world ranks of each rack; it comes from
`--ranks-per-rack R` (ranks r*R .. r*R+R-1 share rack r), a preset (`nvl72`, `hgx8`), an explicit
rank list (`0-3;4-7`), or the launch itself: GPU ranks grouped by the NVLink fabric NVML reports
(comm/nvlink_domains.py), else by hostname = node, nodes grouped into racks by a size or a list of
host names. `commbench emulate` tells the ranks it starts their
rack size through COMMBENCH_RANKS_PER_RACK.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from commbench.errors import CommbenchError, invalid

TIERS = ("scale-up", "scale-out")
PRESETS = {"nvl72": 72, "hgx8": 8}  # ranks per scale-up domain
# the hosts one domain of a preset spans: an NVL72 rack is 18 compute trays of 4 GPUs; an HGX domain is one node
PRESET_HOSTS = {"nvl72": (18, "an NVL72 rack is 18 trays"), "hgx8": (1, "an HGX domain is one node")}
RANKS_PER_RACK_ENV = "COMMBENCH_RANKS_PER_RACK"


@dataclass(frozen=True, kw_only=True)
class Topology:
    """`racks[k]` holds the world ranks of rack k (each rank in exactly one rack)."""

    racks: tuple[tuple[int, ...], ...]
    source: str = "given"

    def __post_init__(self) -> None:
        ranks = sorted(r for rack in self.racks for r in rack)
        if not self.racks or any(len(rack) == 0 for rack in self.racks):
            raise invalid("racks", format_racks(self.racks), "every rack needs at least one rank")
        if ranks != list(range(len(ranks))):
            raise invalid("racks", format_racks(self.racks),
                          f"must list every rank 0..{len(ranks) - 1} exactly once")

    @property
    def world_size(self) -> int:
        return sum(len(rack) for rack in self.racks)

    @property
    def num_racks(self) -> int:
        return len(self.racks)

    @property
    def ranks_per_rack(self) -> int | None:
        """R when every rack has the same number of ranks, else None."""
        sizes = {len(rack) for rack in self.racks}
        return sizes.pop() if len(sizes) == 1 else None

    @property
    def is_contiguous(self) -> bool:
        """True when rack k holds ranks k*R .. k*R+R-1 (what --ranks-per-rack gives)."""
        r = self.ranks_per_rack
        return r is not None and all(rack == tuple(range(k * r, k * r + r)) for k, rack in enumerate(self.racks))

    def rack_of(self, rank: int) -> int:
        return self._rack_index()[rank]

    def _rack_index(self) -> dict[int, int]:
        return {rank: k for k, rack in enumerate(self.racks) for rank in rack}

    def describe(self) -> str:
        r = self.ranks_per_rack
        shape = f"{self.num_racks} rack(s) x {r} rank(s)" if r else f"{self.num_racks} rack(s) of {'/'.join(str(len(x)) for x in self.racks)} rank(s)"
        return f"topology: {shape} per scale-up domain (from {self.source}): {format_racks(self.racks, limit=4)}"

    def to_dict(self) -> dict[str, Any]:
        return {"tiers": list(TIERS), "num_racks": self.num_racks, "ranks_per_rack": self.ranks_per_rack,
                "racks": [list(rack) for rack in self.racks], "source": self.source}

    def to_params(self) -> dict[str, Any]:
        """The compact form workloads receive in PointSpec.params."""
        if self.is_contiguous:
            return {"ranks_per_rack": self.ranks_per_rack}
        return {"racks": format_racks(self.racks)}

    @classmethod
    def from_params(cls, params: dict[str, Any], world_size: int) -> "Topology":
        if "racks" in params:
            return parse_rack_list(str(params["racks"]), world_size)
        return from_ranks_per_rack(world_size, int(params.get("ranks_per_rack", world_size)))


def from_ranks_per_rack(world_size: int, ranks_per_rack: int, source: str = "--ranks-per-rack") -> Topology:
    if ranks_per_rack < 1 or world_size % ranks_per_rack:
        raise invalid("--ranks-per-rack", ranks_per_rack, f"must be >= 1 and divide the {world_size} ranks")
    return Topology(racks=tuple(tuple(range(k, k + ranks_per_rack)) for k in range(0, world_size, ranks_per_rack)),
                    source=source)


def from_preset(name: str, world_size: int) -> Topology:
    """A preset's domain size; a job smaller than one domain is one (partial) rack."""
    if name not in PRESETS:
        raise invalid("--topology", name, f"allowed presets: {', '.join(PRESETS)}")
    size = PRESETS[name]
    if world_size <= size:
        return from_ranks_per_rack(world_size, world_size, source=f"preset {name}, one partial domain")
    if world_size % size:
        raise invalid("--topology", name, f"{size} ranks per domain must divide the {world_size} ranks")
    return from_ranks_per_rack(world_size, size, source=f"preset {name}")


class _RepeatedRank(Exception):
    """A rank that two racks (or one rack twice) list."""


def _parse_ranks(text: str, world_size: int, budget: list[int], seen: set[int]) -> list[int]:
    """Ranks of one rack; `budget[0]` counts down the ranks all racks may still list (the world),
    so no range is expanded past the world it must tile; `seen` holds the ranks listed so far (a repeat
    raises _RepeatedRank naming it, before it could read as a range past the world)."""
    ranks: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d{1,9})\s*(?:-\s*(\d{1,9})\s*)?", part)
        if not match:
            raise ValueError(part)
        lo, hi = int(match.group(1)), int(match.group(2) or match.group(1))
        if hi < lo:
            raise ValueError(part)
        if hi >= world_size:
            raise OverflowError(part)
        repeated = next((r for r in range(lo, hi + 1) if r in seen), None)   # hi < world: a bounded scan
        if repeated is not None:
            raise _RepeatedRank(repeated)
        if hi - lo + 1 > budget[0]:
            raise OverflowError(part)
        budget[0] -= hi - lo + 1
        seen.update(range(lo, hi + 1))
        ranks.extend(range(lo, hi + 1))
    return ranks


RANK_LIST_FORM = "racks separated by ';' of ranks like 0-3 or 0,2,5"
_RANKS_RE = re.compile(r"\s*\d{1,9}\s*(?:-\s*\d{1,9}\s*)?")


def is_rank_list(text: str) -> bool:
    """Whether `text` has the form of a rack list (parse_rack_list's), whatever the world: a check before the
    world is known, so an option that takes either a count or a list can name itself when it is neither."""
    parts = [part for part in re.split(r"[;/]", text) if part.strip()]
    return bool(parts) and all(_RANKS_RE.fullmatch(ranks) for part in parts for ranks in part.split(","))


def parse_rack_list(text: str, world_size: int, option: str = "--rack-ranks") -> Topology:
    """'0-3;4-7' or '0,2/1,3': racks separated by ';' or '/', ranks by ',' with a-b ranges (`bench --rack-ranks`,
    a sweep file's racks)."""
    budget, seen = [world_size], set()
    try:
        racks = tuple(tuple(_parse_ranks(part, world_size, budget, seen)) for part in re.split(r"[;/]", text)
                      if part.strip())
    except _RepeatedRank as exc:
        raise invalid(option, text, f"rank {exc.args[0]} is listed twice: must list every rank 0..{world_size - 1} "
                                       f"exactly once") from None
    except OverflowError as exc:
        raise invalid(option, text, f"{str(exc).strip()!r} goes past the {world_size} ranks: must list every rank "
                                       f"0..{world_size - 1} exactly once") from None
    except ValueError:
        raise invalid(option, text, RANK_LIST_FORM) from None
    if len(seen) != world_size:   # no repeats and none past the world: some rank is missing
        missing = next(r for r in range(world_size) if r not in seen)
        raise invalid(option, text, f"rank {missing} is in no rack: must list every rank 0..{world_size - 1} "
                                    f"exactly once")
    return Topology(racks=racks, source=option)


def format_racks(racks: Sequence[Sequence[int]], limit: int | None = None) -> str:
    def span(rack: Sequence[int]) -> str:
        if len(rack) > 1 and list(rack) == list(range(rack[0], rack[0] + len(rack))):
            return f"{rack[0]}-{rack[-1]}"
        return ",".join(str(r) for r in rack)

    shown = [span(rack) for rack in (racks if limit is None else racks[:limit])]
    more = f";...(+{len(racks) - limit})" if limit is not None and len(racks) > limit else ""
    return ";".join(shown) + more


def from_hostnames(hostnames: Sequence[str], nodes_per_rack: int = 1,
                   rack_nodes: str | None = None) -> Topology:
    """Ranks grouped by host (in order of first appearance), hosts grouped into racks by size or list."""
    nodes = list(dict.fromkeys(hostnames))
    if rack_nodes is not None:
        groups = [[h.strip() for h in part.split(",") if h.strip()] for part in re.split(r"[;/]", rack_nodes)]
        listed = [h for g in groups for h in g]
        if sorted(listed) != sorted(nodes):
            raise invalid("--rack-nodes", rack_nodes, f"must list every host exactly once: {', '.join(nodes)}")
        rack_of_node = {h: k for k, g in enumerate(groups) for h in g}
        source = "hostnames grouped by --rack-nodes"
    else:
        if nodes_per_rack < 1 or len(nodes) % nodes_per_rack:
            raise invalid("--nodes-per-rack", nodes_per_rack, f"must be >= 1 and divide the {len(nodes)} host(s)")
        rack_of_node = {h: i // nodes_per_rack for i, h in enumerate(nodes)}
        source = "hostnames" if nodes_per_rack == 1 else f"hostnames, {nodes_per_rack} node(s) per rack"
    num_racks = max(rack_of_node.values()) + 1
    racks = [[r for r, h in enumerate(hostnames) if rack_of_node[h] == k] for k in range(num_racks)]
    return Topology(racks=tuple(tuple(rack) for rack in racks if rack), source=source)


@dataclass(frozen=True, kw_only=True)
class TopologySpec:
    """How the user described racks; resolved into a Topology once the world (and hosts) are known."""

    ranks_per_rack: int | None = None
    preset: str | None = None
    racks: str | None = None
    nodes_per_rack: int | None = None
    rack_nodes: str | None = None
    # the option that gave `racks` as typed: bench's --racks also takes a rank list (the old spelling of --rack-ranks)
    racks_option: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        given = [name for name, value in (("--ranks-per-rack", self.ranks_per_rack), ("--topology", self.preset),
                                          (self._racks_option, self.racks), ("--nodes-per-rack", self.nodes_per_rack),
                                          ("--rack-nodes", self.rack_nodes)) if value is not None]
        if len(given) > 1:
            raise CommbenchError(f"{' and '.join(given)} conflict: give one way to describe racks")
        if self.preset is not None and self.preset not in PRESETS:
            raise invalid("--topology", self.preset, f"allowed presets: {', '.join(PRESETS)}")
        if self.ranks_per_rack is not None and self.ranks_per_rack < 1:
            raise invalid("--ranks-per-rack", self.ranks_per_rack, "must be >= 1")
        if self.nodes_per_rack is not None and self.nodes_per_rack < 1:
            raise invalid("--nodes-per-rack", self.nodes_per_rack, "must be >= 1")

    @property
    def _racks_option(self) -> str:
        """The option as typed (`racks_option`), else: --racks counts racks, a rank list is --rack-ranks."""
        if self.racks_option is not None:
            return self.racks_option
        return "--racks" if self.racks is None or self.racks.strip().isdecimal() else "--rack-ranks"

    @property
    def declared(self) -> str | None:
        """The option that declares racks by rank, as given (`--ranks-per-rack=4`, `--topology=nvl72`, `--racks=2`,
        `--rack-ranks='0,2;1,3'`): racks the hosts and the fabric can contradict; None where the racks are taken from
        them (host names, --nodes-per-rack, --rack-nodes, NVML) or from commbench emulate."""
        if self.ranks_per_rack is not None:
            return f"--ranks-per-rack={self.ranks_per_rack}"
        if self.preset is not None:
            return f"--topology={self.preset}"
        if self.racks is not None:
            return f"{self._racks_option}={self.racks.strip() if self.racks.strip().isdecimal() else repr(self.racks)}"
        return None

    @property
    def needs_hostnames(self) -> bool:
        return self.ranks_per_rack is None and self.preset is None and self.racks is None and \
            os.environ.get(RANKS_PER_RACK_ENV) is None

    def check_world(self, world_size: int) -> None:
        """The checks possible before ranks start (everything but hostname grouping)."""
        if not self.needs_hostnames:
            self.resolve(world_size, [])

    def resolve(self, world_size: int, hostnames: Sequence[str]) -> Topology:
        if self.ranks_per_rack is not None:
            return from_ranks_per_rack(world_size, self.ranks_per_rack)
        if self.preset is not None:
            return from_preset(self.preset, world_size)
        if self.racks is not None and self.racks.strip().isdecimal():  # a count, as --racks means elsewhere
            count = int(self.racks)
            if count < 1 or world_size % count:
                raise invalid("--racks", count, f"a number of racks that divides the {world_size} ranks "
                              "(a rank list goes in --rack-ranks)")
            return from_ranks_per_rack(world_size, world_size // count, source=f"--racks {count}")
        if self.racks is not None:
            return parse_rack_list(self.racks, world_size, option=self._racks_option)
        from_env = os.environ.get(RANKS_PER_RACK_ENV)
        if from_env is not None and self.nodes_per_rack is None and self.rack_nodes is None:
            try:
                size = int(from_env)
            except ValueError:
                raise invalid(RANKS_PER_RACK_ENV, from_env, "an integer") from None
            return from_ranks_per_rack(world_size, size, source=f"{RANKS_PER_RACK_ENV} (commbench emulate)")
        return from_hostnames(hostnames, self.nodes_per_rack or 1, self.rack_nodes)


def declared_conflict(spec: TopologySpec, topology: Topology, hostnames: Sequence[str], *,
                      allowed: str | None = None) -> str | None:
    """One line where racks the user declared (`spec.declared`) contradict the hosts the ranks are on, else None: a
    host's ranks in more than one rack (a host's GPUs share one scale-up domain: an HGX node, an NVL72 tray; ranks
    placed round-robin over the hosts, srun --distribution=cyclic, under a count that assumes them rack by rack), or
    a preset's rack holding ranks of more hosts than its domain spans (PRESET_HOSTS). Runs on one host are not
    checked (racks emulated on one machine: commbench emulate, tests), nor unknown hosts."""
    option = spec.declared
    hosts = list(hostnames)
    if option is None or len(hosts) != topology.world_size or len(set(hosts)) < 2 or "unknown" in hosts:
        return None
    allowed = allowed or ("racks that keep each host whole (--nodes-per-rack, --rack-nodes, or --rack-ranks listing "
                          "them), or no rack option: the NVLink fabric's domains, else one per host")
    for host in dict.fromkeys(hosts):
        ranks = [r for r, h in enumerate(hosts) if h == host]
        racks = sorted({topology.rack_of(r) for r in ranks})
        if len(racks) > 1:
            return (f"{option} is invalid on these hosts: host {host}'s ranks {format_racks([ranks])} fall in "
                    f"{len(racks)} racks ({', '.join(map(str, racks[:4]))}{', ...' if len(racks) > 4 else ''} of "
                    f"{format_racks(topology.racks, limit=4)}), but a host's GPUs share one scale-up domain (ranks "
                    f"placed round-robin over the hosts?); allowed: {allowed}")
    most, why = PRESET_HOSTS.get(spec.preset or "", (None, ""))
    for k, rack in enumerate(topology.racks if most is not None else ()):
        on = list(dict.fromkeys(hosts[r] for r in rack))
        if len(on) > most:
            return (f"{option} is invalid on these hosts: rack {k} (ranks {format_racks([rack])}) holds ranks of "
                    f"{len(on)} hosts ({', '.join(on[:4])}{', ...' if len(on) > 4 else ''}), but {why}; allowed: "
                    f"{allowed}")
    return None


def resolve_on_ranks(spec: TopologySpec | None, backend) -> Topology:
    """Every rank calls this together (it may gather host names over the world). Racks the user declared are
    checked against the hosts (declared_conflict) and, on GPU ranks whose NVLink fabric NVML reads on every rank,
    against the fabric: refused in one line where they contradict them."""
    import socket

    from commbench.comm.backend import gather_strings

    spec = spec or TopologySpec()
    hostnames: list[str] = []
    if spec.needs_hostnames:
        hostnames = gather_strings(backend, socket.gethostname())
        if spec.nodes_per_rack is None and spec.rack_nodes is None:
            from commbench.comm.nvlink_domains import gather_topology

            return gather_topology(backend, hostnames)  # NVLink domains from NVML; hostnames as the fallback
    topology = spec.resolve(backend.world_size, hostnames)
    if spec.declared is None or backend.world_size < 2:
        return topology
    # every rank gathers the same names and keys, so every rank takes the same branch and says the same line
    problem = declared_conflict(spec, topology, gather_strings(backend, socket.gethostname()))
    if problem is None and str(backend.device).startswith("cuda"):
        from commbench.comm.nvlink_domains import gather_fabric

        fabric = gather_fabric(backend)
        if fabric is not None and {frozenset(r) for r in fabric.racks} != {frozenset(r) for r in topology.racks}:
            problem = (f"{spec.declared} is invalid on these GPUs: it declares racks {format_racks(topology.racks, 4)}, "
                       f"but their NVLink fabric (NVML clusterUuid+cliqueId) joins {format_racks(fabric.racks, 4)}; "
                       "allowed: no rack option (the fabric's domains are taken)")
        elif fabric is not None:
            topology = Topology(racks=topology.racks, source=f"{topology.source}; the NVML GPU fabric agrees")
    if problem is not None:
        raise CommbenchError(problem)
    return topology


def resolve_before_launch(spec: TopologySpec | None, world_size: int) -> Topology:
    """The topology to plan with before ranks start (--dry-run, checks): racks described by host
    names are unknown until launch, so they plan as one rack (the launch resolves them on the ranks)."""
    spec = spec or TopologySpec()
    if spec.needs_hostnames:
        return Topology(racks=(tuple(range(world_size)),), source="host names, known at launch: planned as one rack")
    return spec.resolve(world_size, [])
