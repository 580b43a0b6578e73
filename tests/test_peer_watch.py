"""The peer watch (commbench.comm.peer_watch) in one process: rank 0's watch and a rank 1 joined to it."""

from __future__ import annotations

from commbench.comm.peer_watch import PeerWatch


def _pair():
    zero, one = PeerWatch(0, 2), PeerWatch(1, 2)
    published = zero.listen("127.0.0.1")
    zero.start(published)
    one.start(published)
    return zero, one


def test_a_rank_whose_connection_closes_without_bye_is_named_dead_on_rank_0():
    zero, one = _pair()
    try:
        one.close(bye=False)   # what the kernel does for a killed process
        assert zero.died.wait(10), "rank 0 never learnt that rank 1 was gone"
        assert zero.dead == [1] and zero.dead_text() == "rank 1"
    finally:
        zero.close()


def test_a_rank_that_says_bye_is_not_dead_and_rank_0_gone_is_seen_by_the_others():
    zero, one = _pair()
    other_zero, other_one = _pair()
    try:
        one.close()
        assert not zero.died.wait(1.0)
        other_zero.close(bye=False)
        assert other_one.died.wait(10) and other_one.dead == [0]
    finally:
        zero.close()
        other_one.close()
