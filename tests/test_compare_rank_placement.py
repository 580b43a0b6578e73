"""`compare` judged a NEW whose ranks sat on the hosts another way (Slurm's cyclic placement: hosts a,b,a,b) against a
block BASE (a,a,b,b) as the same layout, because only the counts were compared (2 hosts x 2 ranks each): its g=2
contiguous groups crossed the network where the base's stayed inside a node, and the run passed with no word. The
rank-to-host (and rank-to-rack) mapping is the layout: refused as another node layout unless
--allow-layout-change; the same mapping on other host names (CI runners) is still only noted."""

from __future__ import annotations

import dataclasses

from commbench.results.run_setup import layout_changes
from tests.test_compare import write
from tests.test_compare_gate_notes import _run
from tests.test_compare_runs import run_cli

BLOCK = {"racks": [[0, 1], [2, 3]], "num_racks": 2, "ranks_per_rack": 2, "source": "hostnames"}
CYCLIC = {"racks": [[0, 2], [1, 3]], "num_racks": 2, "ranks_per_rack": 2, "source": "hostnames"}


def _file(tmp_path, name, run_id, seed, hosts, topology=None):
    """A run on len(hosts) ranks (a header's per-rank lists and racks agree with its world size: record_checks)."""
    header, *points = _run(run_id, seed, hostnames=list(hosts), topology=topology)
    n = len(hosts)
    points = [dataclasses.replace(m, world_size=n, group_size=n, busbw_gbps=m.algbw_gbps * 2 * (n - 1) / n)
              for m in points]
    return write(tmp_path / f"{name}.jsonl", [dataclasses.replace(header, world_size=n, devices=["cpu"] * n),
                                              *points])


def test_a_cyclic_placement_against_a_block_one_is_another_layout(tmp_path):
    base = _file(tmp_path, "block", "b", 1, ["hA", "hA", "hB", "hB"], BLOCK)
    cyclic = _file(tmp_path, "cyclic", "c", 2, ["hA", "hB", "hA", "hB"], CYCLIC)
    refused = run_cli(base, cyclic)
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2 and "another node layout" in said, said
    assert "0,2;1,3" in said and "Traceback" not in said, said
    assert run_cli(base, cyclic, "--allow-layout-change").exit_code == 0
    runners = _file(tmp_path, "runners", "r", 3, ["ci1", "ci1", "ci2", "ci2"], BLOCK)   # same mapping, other names
    assert run_cli(base, runners).exit_code == 0


def test_the_mapping_is_compared_with_or_without_racks():
    def header(hosts, topology=None):
        return _run("x", 0, hostnames=hosts, topology=topology)[0]

    assert layout_changes([header(["a", "a", "b", "b"])], [header(["a", "b", "a", "b"])])   # hosts alone
    assert layout_changes([header(["a", "a", "b", "b"])], [header(["c", "c", "d", "d"])]) == []
    assert layout_changes([header(["a", "a", "b", "b"])], [header(["d", "d", "c", "c"])]) == []   # hosts renamed
    # racks recorded on one side only: the hosts decide
    assert layout_changes([header(["a", "a", "b", "b"], BLOCK)], [header(["a", "a", "b", "b"])]) == []
    # the same hosts, racks placed otherwise (--rack-ranks '0,2;1,3' on one host each side): another layout
    assert layout_changes([header(["h"] * 4, BLOCK)], [header(["h"] * 4, CYCLIC)])
