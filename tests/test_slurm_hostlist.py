"""Slurm node lists in Slurm's hostlist syntax (probe Q 7): the rendezvous host was the text before the first
bracket plus the group's first number, so a suffix or a second group was dropped: node[1-2]-ib -> node1 (the
Ethernet name, or nothing), rack[1-2]-gpu[01-08] -> rack1 (no such host), and the launch hung to --timeout."""

from __future__ import annotations

import pytest

from commbench.comm.hostlist import expand_hostlist
from commbench.comm.launch import detect_rank_env, first_slurm_host
from commbench.errors import CommbenchError


@pytest.mark.parametrize("nodelist, first", [
    ("node[1-2]-ib", "node1-ib"),
    ("rack[1-2]-gpu[01-08]", "rack1-gpu01"),
    ("gpu[03-05,09],cpu1", "gpu03"),
    ("login1,node[1-2]-ib", "login1"),
    ("n[09-11]x,d[1-2]", "n09x"),
    ("node7", "node7"),
    (" a[1-3],b2 ", "a1"),
])
def test_first_host_of_a_hostlist(nodelist, first):
    assert first_slurm_host(nodelist) == first


def test_expansion_follows_the_hostlist_syntax():
    """Every group and suffix, zero-padding from the low bound, comma lists at both levels, the leftmost group
    outermost."""
    assert list(expand_hostlist("rack[1-2]-gpu[01-02,07]-ib,login[08-10]")) == [
        "rack1-gpu01-ib", "rack1-gpu02-ib", "rack1-gpu07-ib", "rack2-gpu01-ib", "rack2-gpu02-ib", "rack2-gpu07-ib",
        "login08", "login09", "login10"]
    assert next(expand_hostlist("big[1-999999999]")) == "big1"   # the first host does not build the rest


@pytest.mark.parametrize("nodelist, why", [
    ("node[1-2", "never closed"), ("node[1-2]]-ib", "']' without '['"), ("node[a-b]", "holds 'a-b'"),
    ("node[3-1]", "runs backwards"), ("a,,b", "empty host name"), ("node[1-2]-ib,x[2-", "never closed"),
])
def test_an_unparsed_list_is_refused_in_one_line(nodelist, why):
    env = {"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2", "SLURM_LOCALID": "0", "SLURM_STEP_ID": "0",
           "SLURM_STEP_NODELIST": nodelist}
    with pytest.raises(CommbenchError) as info:
        detect_rank_env(env)
    message = str(info.value)
    assert message.startswith(f"SLURM_STEP_NODELIST: Slurm node list {nodelist!r} cannot be parsed") and why in message
    assert "set MASTER_ADDR" in message and "\n" not in message, message
    assert detect_rank_env({**env, "MASTER_ADDR": "10.0.0.1"}).master_addr == "10.0.0.1"


def test_slurm_step_rendezvous_at_the_first_hosts_full_name():
    env = {"SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_LOCALID": "0",
           "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "node[1-2]-ib", "SLURM_JOB_NODELIST": "other1"}
    assert detect_rank_env(env).init_method == "tcp://node1-ib:15010"   # job 1 step 0's port (launch.slurm_default_port)
    del env["SLURM_STEP_NODELIST"]
    assert detect_rank_env(env).master_addr == "other1"
