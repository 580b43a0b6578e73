"""Racks from --ranks-per-rack, presets, rank lists and hostnames; bad input is a one-line error."""

from __future__ import annotations

import pytest

from commbench.errors import CommbenchError
from commbench.comm.topology import (Topology, TopologySpec, from_hostnames, from_preset, from_ranks_per_rack,
                                parse_rack_list)


def test_ranks_per_rack_gives_contiguous_racks():
    topo = from_ranks_per_rack(8, 4)
    assert topo.racks == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert topo.num_racks == 2 and topo.ranks_per_rack == 4 and topo.is_contiguous
    assert topo.rack_of(5) == 1
    assert topo.to_params() == {"ranks_per_rack": 4}
    assert Topology.from_params(topo.to_params(), 8) == topo
    assert "2 rack(s) x 4 rank(s)" in topo.describe() and "0-3;4-7" in topo.describe()
    assert topo.to_dict()["racks"] == [[0, 1, 2, 3], [4, 5, 6, 7]]


@pytest.mark.parametrize("world,rpr", [(6, 4), (8, 0), (8, 3)])
def test_ranks_per_rack_must_divide(world, rpr):
    with pytest.raises(CommbenchError, match=f"--ranks-per-rack={rpr}"):
        from_ranks_per_rack(world, rpr)


def test_presets():
    assert from_preset("nvl72", 144).racks[1][0] == 72
    assert from_preset("hgx8", 16).ranks_per_rack == 8
    assert from_preset("nvl72", 4).num_racks == 1  # a job smaller than one domain
    with pytest.raises(CommbenchError, match="--topology='hgx8'"):
        from_preset("hgx8", 12)
    with pytest.raises(CommbenchError, match="allowed presets: nvl72, hgx8"):
        TopologySpec(preset="dgx")


def test_rack_list_may_be_non_contiguous_and_must_cover_all_ranks():
    topo = parse_rack_list("0,2;1,3", 4)
    assert topo.racks == ((0, 2), (1, 3)) and not topo.is_contiguous
    assert Topology.from_params(topo.to_params(), 4) == topo
    assert parse_rack_list("0-2/3-5", 6).racks == ((0, 1, 2), (3, 4, 5))
    with pytest.raises(CommbenchError, match="--rack-ranks='0-2;4-5'.*every rank 0..5"):
        parse_rack_list("0-2;4-5", 6)
    with pytest.raises(CommbenchError, match="--rack-ranks='0-x'"):
        parse_rack_list("0-x", 2)


def test_hostnames_group_ranks_into_nodes_and_nodes_into_racks():
    hosts = ["a", "a", "b", "b", "c", "c", "d", "d"]
    assert from_hostnames(hosts).racks == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert from_hostnames(hosts, nodes_per_rack=2).racks == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert from_hostnames(hosts, rack_nodes="a,c;b,d").racks == ((0, 1, 4, 5), (2, 3, 6, 7))
    with pytest.raises(CommbenchError, match="--nodes-per-rack=3"):
        from_hostnames(hosts, nodes_per_rack=3)
    with pytest.raises(CommbenchError, match="--rack-nodes='a,b;c'"):
        from_hostnames(hosts, rack_nodes="a,b;c")


def test_spec_rejects_two_descriptions_and_reads_the_emulate_env(monkeypatch):
    with pytest.raises(CommbenchError, match="--ranks-per-rack and --topology conflict"):
        TopologySpec(ranks_per_rack=2, preset="hgx8")
    monkeypatch.setenv("COMMBENCH_RANKS_PER_RACK", "2")
    spec = TopologySpec()
    assert not spec.needs_hostnames
    assert spec.resolve(4, []).racks == ((0, 1), (2, 3))
    monkeypatch.delenv("COMMBENCH_RANKS_PER_RACK")
    assert TopologySpec().needs_hostnames
    assert TopologySpec().resolve(2, ["h", "h"]).racks == ((0, 1),)


def test_topology_validates_cover():
    with pytest.raises(CommbenchError, match="exactly once"):
        Topology(racks=((0, 1), (1, 2)))


def test_a_rank_list_is_named_rack_ranks_as_given_and_racks_in_a_sweep_file(tmp_path):
    """bench --rack-ranks '0-1;3' was refused as --racks='0-1;3' (README: bad input names the option); a sweep
    file's racks key keeps its own name."""
    from typer.testing import CliRunner

    from commbench.cli.app import app

    runner = CliRunner()
    result = runner.invoke(app, ["bench", "all_reduce", "--nproc", "4", "--rack-ranks", "0-1;3", "-e", "64",
                                 "-J", str(tmp_path / "r.jsonl")])
    assert result.exit_code == 2 and "--rack-ranks='0-1;3' is invalid" in result.output, result.output
    result = runner.invoke(app, ["bench", "all_reduce", "--rack-ranks", "0-1;2-3", "--topology", "hgx8",
                                 "-J", str(tmp_path / "r.jsonl")])
    assert result.exit_code == 2 and "--topology and --rack-ranks conflict" in result.output, result.output
    assert TopologySpec(racks="0-1;2-3").resolve(4, []).source == "--rack-ranks"
    assert TopologySpec(racks="2").resolve(4, []).source == "--racks 2"
    sweep = tmp_path / "s.toml"
    sweep.write_text('[[run]]\ncollective = "all_reduce"\nsizes = [1024]\nracks = "0-1;3"\n')
    result = runner.invoke(app, ["sweep", str(sweep), "--dry-run", "--world-size", "4"])
    assert result.exit_code == 2 and "racks='0-1;3'" in result.output and "--rack" not in result.output, result.output
