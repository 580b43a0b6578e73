"""nccl-tuner configs that are safe as written: no rule that means one channel with NCCL's example plugin,
full coverage (or a refusal) for it, nNodes as NCCL counts it, and choices that switch back explained."""

from __future__ import annotations

import dataclasses

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.comm.nccl_tuning import TuningCombo
from commbench.results.nccl_nodes import header_node_count
from commbench.results.nccl_tuner import TunedPoint, choose_cells
from commbench.results.nccl_tuner_targets import SIZE_MAX_BYTES, always_in_table, switch_backs
from commbench.results.records import JsonlWriter
from tests.test_nccl_tuner import (DEFAULT, RING_LL, _header, _record, _results_file,
                                   reproduced_plugin_load, reproduced_plugin_select)

RING_LL_ANY = TuningCombo(algo="ring", proto="ll")  # NCCL's own channel count


def example_plugin_channels(configs, coll, nbytes, nodes, ranks):
    """What NCCL's example plugin leaves in *nChannels: 1 first, a matching rule's count unless -1."""
    chosen = reproduced_plugin_select(configs, coll, nbytes, nodes=nodes, ranks=ranks)
    return 1 if chosen is None or chosen["channels"] == -1 else chosen["channels"]


def invoke(*args):
    return CliRunner().invoke(app, ["nccl-tuner", *args])


@pytest.mark.parametrize("args", [("--system", "gb300-nvl72", "--gpus", "72"), ("--system", "gb300-nvl72", "--gpus", "144"),
                                  ("--system", "h100-hgx", "--gpus", "16"), ("--system", "h100-hgx", "--gpus", "8")])
def test_default_predicted_output_has_no_rule_meaning_one_channel(tmp_path, args):
    conf = tmp_path / "p.conf"
    result = invoke(*args, "-O", str(conf))
    assert result.exit_code == 0, result.output
    configs, problems = reproduced_plugin_load(conf.read_text())
    assert problems == [] and configs
    assert all(c["channels"] == 0 for c in configs)  # NCCL's own count: the example plugin copies 0, NCCL keeps its own
    for c in configs:
        assert example_plugin_channels(configs, c["coll"], c["max"], c["nodes"], c["ranks"]) != 1


def test_default_measured_output_lets_nccl_own_channel_count_win_as_zero(tmp_path):
    path = tmp_path / "r.jsonl"
    with JsonlWriter(path) as writer:
        writer.write(_header("a", ["h"] * 4))
        for size in (1024, 4096):
            writer.write(_record("a", size, DEFAULT, 20.0))
            writer.write(_record("a", size, RING_LL_ANY, 10.0))
    conf = tmp_path / "c.conf"
    assert invoke(str(path), "-O", str(conf)).exit_code == 0
    configs, _ = reproduced_plugin_load(conf.read_text())
    assert [(c["algo"], c["proto"], c["channels"]) for c in configs] == [("ring", "ll", 0)]
    refused = invoke(str(path), "-O", str(tmp_path / "e.conf"), "--for", "example-plugin")
    assert refused.exit_code == 2 and "--nccl-channels" in refused.output
    assert len(refused.output.strip().splitlines()) == 1 and not (tmp_path / "e.conf").exists()


def test_example_plugin_output_leaves_no_gap_at_the_measured_scale(tmp_path):
    path, sizes = _results_file(tmp_path)
    conf = tmp_path / "e.conf"
    result = invoke(str(path), "-O", str(conf), "--for", "example-plugin")
    assert result.exit_code == 0, result.output
    text = conf.read_text()
    configs, problems = reproduced_plugin_load(text)
    assert problems == [] and all(c["channels"] >= 0 for c in configs)  # 0: NCCL's own count, lowered by size
    spans = sorted((c["min"], c["max"]) for c in configs)
    assert spans[0][0] == 0 and spans[-1][1] == SIZE_MAX_BYTES
    assert all(a[1] + 1 == b[0] for a, b in zip(spans, spans[1:]))  # contiguous: no gap, no overlap
    winners = {1024: ("ring", "ll", 0), 4096: ("ring", "ll", 0), 16 << 20: ("tree", "simple", 8)}
    for size in sizes:
        chosen = reproduced_plugin_select(configs, "allreduce", size, nodes=2, ranks=4)
        if size in winners:
            assert (chosen["algo"], chosen["proto"], chosen["channels"]) == winners[size]
        else:  # NCCL's default kept: the fastest measured combination with a channel count, said so
            assert (chosen["algo"], chosen["proto"], chosen["channels"]) in {("ring", "ll", 0), ("tree", "simple", 8)}
    assert "FILL-IN at 64 KiB, no winner (none beat NCCL default" in text
    assert "within the noise of NCCL's default there): the fastest with channels; measured" in text   # whole: not cut at the line limit and "covered (collective/nNodes/nRanks): allreduce/2/4" in text


def test_predicted_example_plugin_output_needs_a_channel_count(tmp_path):
    refused = invoke("--system", "gb300-nvl72", "--gpus", "72", "-O", str(tmp_path / "x"), "--for", "example-plugin")
    assert refused.exit_code == 2 and "--channels" in refused.output and len(refused.output.strip().splitlines()) == 1
    conf = tmp_path / "p.conf"
    assert invoke("--system", "gb300-nvl72", "--gpus", "72", "-O", str(conf), "--for", "example-plugin",
                  "--channels", "24").exit_code == 0
    configs, _ = reproduced_plugin_load(conf.read_text())
    assert {c["channels"] for c in configs} <= {0, 24} and any(c["channels"] == 24 for c in configs)
    for coll in {c["coll"] for c in configs}:
        ours = [c for c in configs if c["coll"] == coll]
        # the rules the plugin reaches first tile 0..SIZE_MAX; FALLBACK rules (after them) overlap only rules of pairs
        # NCCL may leave out of a call, and such rules' sizes are covered again by fallbacks
        first = [c for i, c in enumerate(ours) if not any(o["min"] <= c["max"] and c["min"] <= o["max"]
                                                          for o in ours[:i])]
        later = [c for c in ours if c not in first]
        mine = sorted((c["min"], c["max"]) for c in first)
        assert mine[0][0] == 0 and mine[-1][1] == SIZE_MAX_BYTES
        assert all(a[1] + 1 == b[0] for a, b in zip(mine, mine[1:]))
        def kept(rule):
            return always_in_table(coll, TuningCombo(algo=rule["algo"], proto=rule["proto"]))

        for c in first:   # every pair NCCL may leave out (NVLS per call, LL128 per communicator) has FALLBACKs: at each
            if not kept(c):   # size the later rules, in file order, end at the first pair NCCL never leaves out
                ends = {c["min"], c["max"], *(x for o in later for x in (o["min"], o["max"]) if c["min"] <= x <= c["max"])}
                for size in ends:
                    walk = [o for o in later if o["min"] <= size <= o["max"]]
                    assert walk and kept(walk[-1]) and not any(kept(o) for o in walk[:-1]), (coll, size, walk)
    assert invoke("x.jsonl", "--for", "nccl").output.count("--for='nccl' is invalid") == 1


def nvl72_header(run_id, *, racks, source="NVML GPU fabric info (clusterUuid+cliqueId)", emulated=None):
    hosts = [f"tray{r // 4:02d}" for r in range(sum(len(rack) for rack in racks))]
    header = _header(run_id, hosts)
    return dataclasses.replace(header, topology={"racks": racks, "source": source, "num_racks": len(racks)},
                               emulated=emulated)


def test_an_nvl72_rack_of_18_hosts_is_one_nccl_node():
    assert header_node_count(nvl72_header("a", racks=[list(range(72))]))[:2] == (1, "NVLink domains")
    assert header_node_count(nvl72_header("b", racks=[list(range(72)), list(range(72, 144))]))[:2] == (2, "NVLink domains")
    per_host = [list(range(k, k + 4)) for k in range(0, 72, 4)]  # racks from hostnames: each its own host
    assert header_node_count(nvl72_header("c", racks=per_host, source="hostnames"))[:2] == (18, "hosts")
    assert header_node_count(nvl72_header("d", racks=[list(range(72))], emulated={"x": 1}))[:2] == (18, "hosts")
    assert header_node_count(_header("e", ["n1", "n1", "n2", "n2"]))[:2] == (2, "hosts")  # no topology: hosts
    sparse = dataclasses.replace(_header("f", [f"tray{k:02d}" for k in range(18)]), world_size=72,
                                 topology={"ranks_per_rack": 72, "num_racks": 1})  # host list, no rank lists
    assert header_node_count(sparse)[:2] == (1, "NVLink domains")


def test_measured_rules_on_an_nvl72_rack_match_nccl_node_count(tmp_path):
    path = tmp_path / "nvl72.jsonl"
    with JsonlWriter(path) as writer:
        writer.write(nvl72_header("a", racks=[list(range(72))]))
        writer.write(_record("a", 1024, DEFAULT, 20.0, world=72))
        writer.write(_record("a", 1024, RING_LL, 10.0, world=72))
    conf = tmp_path / "c.conf"
    assert invoke(str(path), "-O", str(conf)).exit_code == 0
    text = conf.read_text()
    configs, _ = reproduced_plugin_load(text)
    assert [(c["nodes"], c["ranks"]) for c in configs] == [(1, 72)]
    assert "nNodes = NVLink domains: 1 NVLink domain(s) over 18 host(s)" in text


def test_predicted_node_count_says_which():
    from commbench.cli.predict import resolve_fabric
    from commbench.results.nccl_nodes import predicted_node_count

    assert predicted_node_count(resolve_fabric(None, "gb300-nvl72", None, 144), 144)[:2] == (2, "NVLink domains")
    assert predicted_node_count(resolve_fabric(None, "h100-hgx", None, 16), 16)[:2] == (2, "hosts")


def pt(size, combo, time_us):
    return TunedPoint(collective="allreduce", nodes=1, ranks=8, size_bytes=size, combo=combo, time_us=time_us,
                      predicted=True)


def test_a_choice_that_switches_back_is_explained_with_its_times():
    nvls, tree = TuningCombo(algo="nvls", proto="simple"), TuningCombo(algo="tree", proto="ll128")
    ring_ll128, ring_ll = TuningCombo(algo="ring", proto="ll128"), TuningCombo(algo="ring", proto="ll")
    fastest = {1: nvls, 2: tree, 4: ring_ll128, 8: nvls, 16: ring_ll128, 32: ring_ll}
    points = [pt(size, combo, 10.0 if combo == fastest[size] else 12.0)
              for size in fastest for combo in (nvls, tree, ring_ll128, ring_ll)]
    cells = choose_cells(points, need_baseline=False, any_channels=True)
    notes = switch_backs(cells, points, "time")
    assert len(notes) == 3
    assert notes[0].startswith("allreduce nNodes=1 nRanks=8: nvls/simple/* again at 8 B after ring/ll128/* up to 4 B")
    assert "predicted 10.0 us vs 12.0 us" in notes[0]
    assert "ring/ll128/* again at 16 B after nvls/simple/*" in notes[1]
    assert "ring/ll/* again at 32 B after ring/ll128/*" in notes[2]  # a protocol back toward LL
    monotone = [pt(size, combo, 10.0 if combo == (nvls if size < 8 else ring_ll128) else 12.0)
                for size in fastest for combo in (nvls, ring_ll128)]
    assert switch_backs(choose_cells(monotone, need_baseline=False, any_channels=True), monotone, "time") == []


def test_the_gb300_predicted_file_explains_its_allreduce_switch_back(tmp_path):
    conf = tmp_path / "p.conf"
    assert invoke("--system", "gb300-nvl72", "--gpus", "72", "-O", str(conf)).exit_code == 0
    configs, _ = reproduced_plugin_load(conf.read_text())
    order = [c["algo"] for c in sorted(configs, key=lambda c: c["min"]) if c["coll"] == "allreduce"]
    returns = [a for i, a in enumerate(order) if a in order[:i] and order[i - 1] != a]
    notes = [line for line in conf.read_text().splitlines() if line.startswith("# switches back: allreduce")]
    assert len(notes) == len(returns)  # every return is explained (none, if the model turns monotone)


def test_example_plugin_leaves_out_a_collective_measured_without_channel_counts_and_says_so(tmp_path):
    path, _ = _results_file(tmp_path)
    extra = tmp_path / "plain.jsonl"
    with JsonlWriter(extra) as writer:  # a plain all_gather bench: NCCL's default only
        writer.write(_header("plain", ["n1", "n1", "n2", "n2"]))
        writer.write(_record("plain", 4096, DEFAULT, 30.0, coll="all_gather"))
    conf = tmp_path / "e.conf"
    result = invoke(str(path), str(extra), "-O", str(conf), "--for", "example-plugin")
    assert result.exit_code == 0, result.output
    configs, _ = reproduced_plugin_load(conf.read_text())
    assert {c["coll"] for c in configs} == {"allreduce"}
    assert "allgather nNodes=2 nRanks=4: not covered, no measurement names a channel count" in conf.read_text()
