"""One clear cause for a point a peer's exit broke, in place of the transport's raw words.

gloo says a peer's exit as its tcp transport's error, e.g. "[.../gloo/transport/tcp/pair.cc:537] Read error
[127.0.0.1]:60065: Connection reset by peer. This is typically caused by a remote worker hanging or bugs in the
application. Check the logs of the remote worker before reporting an error. GLHF!" (probe P8, session 45: a rank
killed mid-point under torchrun): the failed record carried that. The record now says which rank left, where the
group tells (its only other member), and keeps the raw text in `error_detail`."""

from __future__ import annotations

from typing import Sequence

# gloo's words for a peer's closed socket (sweep.isolation.PEER_GONE_TEXTS) -> how the cause names it
CLOSED_WORDS = {"Connection reset by peer": "connection reset", "Connection closed by peer": "connection closed",
                "Broken pipe": "broken pipe"}


def peer_left_cause(reason: str, rank: int, group_ranks: Sequence[int]) -> str | None:
    """'rank N left mid-point (connection reset)' where `reason` (this rank's error) is a peer's closed connection and
    the group (`group_ranks`, world ranks) has one other member; 'a peer of rank R in its group of G left mid-point
    (...; gloo does not say which)' in a larger group; None where `reason` says no such thing."""
    words = next((said for text, said in CLOSED_WORDS.items() if text in reason), None)
    if words is None:
        return None
    others = [r for r in group_ranks if r != rank]
    if len(others) == 1:
        return f"rank {others[0]} left mid-point ({words})"
    return f"a peer of rank {rank} in its group of {len(group_ranks)} left mid-point ({words}; gloo does not say which)"
