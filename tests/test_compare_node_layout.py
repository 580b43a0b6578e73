"""Probe O-4: a NEW measured on another node layout with the same rank count (2 nodes x 4 -> 1 x 8) was judged
with only a note naming the hosts, so a regression up to the NVLink/network gap was invisible. Refused in one line
naming both layouts (exit 2) unless --allow-layout-change; other host names on the same layout (CI runners) are
still only noted."""

from __future__ import annotations

from commbench.results.run_setup import layout_changes, node_layout
from tests.test_compare import write
from tests.test_compare_gate_notes import _run
from tests.test_compare_runs import run_cli


def _file(tmp_path, name, run_id, seed, hosts, topology=None):
    return write(tmp_path / f"{name}.jsonl", _run(run_id, seed, hostnames=list(hosts), topology=topology))


def test_another_node_layout_with_the_same_ranks_is_refused_unless_allowed(tmp_path):
    base = _file(tmp_path, "base", "b", 1, ["nA", "nB"])          # 2 hosts x 1 rank
    one_node = _file(tmp_path, "one", "n", 2, ["nC", "nC"])       # 1 host x 2 ranks: never crosses the network
    refused = run_cli(base, one_node)
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2 and said.startswith("error:") and "another node layout" in said, said
    assert "base: 2 host(s) x 1 rank(s)" in said and "new: 1 host(s) x 2 rank(s)" in said and "Traceback" not in said
    allowed = run_cli(base, one_node, "--allow-layout-change")
    assert allowed.exit_code == 0 and "allowed" in allowed.output and "--allow-layout-change" in allowed.output
    runners = _file(tmp_path, "runners", "r", 3, ["ci7", "ci9"])  # other hosts, same layout: a note, judged
    noted = run_cli(base, runners)
    assert noted.exit_code == 0 and "other hosts" in " ".join(noted.output.split()), noted.output
    history = tmp_path / "h"
    history.mkdir()
    _file(history, "h1", "h", 4, ["nD", "nD"])
    later = run_cli(base, _file(tmp_path, "fresh", "f", 5, ["nE", "nF"]), "--history", history)
    assert later.exit_code == 2 and "history: 1 host(s) x 2 rank(s)" in " ".join(later.output.split()), later.output


def test_racks_are_compared_only_where_both_sides_record_them():
    def header(hosts, racks=None):
        return _run("x", 0, hostnames=hosts, topology=None if racks is None else {"racks": racks})[0]

    two = header(["a", "b"], [[0], [1]])
    assert node_layout(two) == ("2 host(s) x 1 rank(s)", "2 rack(s) x 1 rank(s)")
    assert layout_changes([two], [header(["c", "d"])]) == []                 # no racks on one side: no change
    assert layout_changes([two], [header(["c", "d"], [[0, 1]])])             # one NVLink domain of 2 hosts
    assert layout_changes([two], [header(["unknown", "unknown"])]) == []     # hosts unknown: not a change
    assert node_layout(header(["a", "a"])) == ("1 host(s) x 2 rank(s)", None)
