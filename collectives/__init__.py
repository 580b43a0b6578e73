"""Collective workloads, one module each; adding one = one file + one line in REGISTRY."""

from __future__ import annotations

from collectives.all_gather import AllGather
from collectives.all_reduce import AllReduce
from collectives.all_to_all import AllToAll
from collectives.base import Collective, PointSpec, PreparedPoint
from collectives.broadcast import Broadcast
from collectives.grad_reduce_scatter import GradReduceScatter
from collectives.moe_all_to_all import MoeAllToAll
from collectives.reduce import Reduce
from collectives.reduce_scatter import ReduceScatter
from collectives.sendrecv import SendRecv
from commbench.errors import invalid

REGISTRY: dict[str, Collective] = {
    c.name: c
    for c in (AllReduce(), ReduceScatter(), AllGather(), AllToAll(), SendRecv(), Broadcast(), Reduce(), MoeAllToAll())
}
REGISTRY[GradReduceScatter.name] = GradReduceScatter()


def get_collective(name: str) -> Collective:
    if name not in REGISTRY:
        raise invalid("collective", name, f"allowed: {', '.join(REGISTRY)}")
    return REGISTRY[name]


__all__ = ["Collective", "PointSpec", "PreparedPoint", "REGISTRY", "get_collective"]
