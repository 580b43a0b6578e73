"""An IPv6 literal as MASTER_ADDR (probe P8, session 46): torch's env:// joins with MASTER_ADDR=::1, commbench's
tcp:// init_method `tcp://::1:29626` failed to parse ("Port could not be cast to integer value as ':1:29626'"), so
both ranks of a valid launch exited 1."""

from __future__ import annotations

import pytest

from commbench.comm.launch import RankEnv, detect_rank_env, tcp_url


@pytest.mark.parametrize("host, url", [("::1", "tcp://[::1]:29626"), ("[::1]", "tcp://[::1]:29626"),
                                       ("fd00::2", "tcp://[fd00::2]:29626"), ("10.0.0.1", "tcp://10.0.0.1:29626"),
                                       ("node01", "tcp://node01:29626")])
def test_an_ipv6_literal_is_bracketed_in_the_tcp_url(host, url):
    assert tcp_url(host, 29626) == url


def test_a_launch_with_an_ipv6_master_addr_gives_a_url_torch_parses():
    from urllib.parse import urlparse

    env = detect_rank_env({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "::1", "MASTER_PORT": "29626"})
    assert isinstance(env, RankEnv)
    parsed = urlparse(env.init_method)
    assert parsed.hostname == "::1" and parsed.port == 29626


def test_rank_0_on_a_port_in_use_is_refused_with_the_exit_of_the_other_refusals(monkeypatch):
    """A second launch's rank 0 on a busy port exited 1 ("port ... is in use", a failed run) while its rank 1 exited
    2 ("two launches met"): both are refusals before anything is measured (probe P8, session 46)."""
    from commbench.comm import rank_checkin

    def busy(**_):
        raise RuntimeError("The server socket has failed to listen on any local network address. port: 29500, "
                           "useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use")

    monkeypatch.setattr(rank_checkin, "launch_store", busy)
    with pytest.raises(rank_checkin.LaunchesMet, match=r"port 29500 is in use on this host") as caught:
        rank_checkin.checked_in_launch_store(master_addr="127.0.0.1", master_port=29500, rank=0, world_size=2,
                                             join_s=5, timeout_s=5, where="at tcp://127.0.0.1:29500 as rank 0 of 2")
    assert caught.value.exit_code == 2
