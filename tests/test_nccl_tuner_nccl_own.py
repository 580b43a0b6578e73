"""Predicted nccl-tuner rules against NCCL's own model (probe BI, finding 1).

`nccl-tuner --system h100-hgx --gpus 2` wrote `allreduce,1048576,1048576,tree,simple` on every preset at 2 GPUs:
nccl_tables mixed NCCL releases (tree/Simple base latency 0 from <= 2.22 with the NVLink hop 4.0 from >= 2.23) and
the tuner never priced NCCL's tree correction factor. The tables are now one release's (NVIDIA/nccl v2.27.7-1
src/graph/tuning.cc), costmodel.nccl_own prices a pair as NCCL's ncclTopoGetAlgoTime does, and the emitter drops
every predicted choice that model rates slower than NCCL's own pick, saying how many in the file's header.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset, preset_names
from commbench.costmodel.nccl_own import check_sizes, own_times_us, slower_than_nccl_pick, tree_correction
from commbench.results.nccl_tuner import PLUGIN_COLLECTIVES
from commbench.units import PREDICTED_MAX_BYTES, parse_size_bytes, size_range
from commbench.workflows import nccl_tuner as flow
from tests.test_nccl_tuner_probe_w import example_plugin  # noqa: F401  (fixture: NCCL's example plugin, built)

SIZES = size_range(1024, parse_size_bytes(PREDICTED_MAX_BYTES, "--max-bytes"), 2.0, None)  # nccl-tuner's default
GPUS = (2, 3, 4, 8, 16, 72, 144)


def test_two_ranks_priced_as_nccl_2_27_does():
    """Hand-worked at v2.27.7-1 tuning.cc: h100-hgx, 2 ranks on NVLink, 1 MiB. Ring/Simple latency 8.4 + 2 x 3.4,
    bandwidth 0.8222 x 450 x nRanks/nsteps (1); tree/Simple latency 8.4 + 2 x 1 x 4.0, bandwidth 0.92 x that x 1/2
    x treeCorrectionFactor[Simple][log2(1 MiB / 64) = 14] = 0.5."""
    fabric = load_preset("h100-hgx")
    ring_bw = 0.8222 * 450
    times = own_times_us(fabric, "all_reduce", [1 << 20], 2, 1)
    assert times["ring", "Simple"][0] == pytest.approx(8.4 + 2 * 3.4 + (1 << 20) / (1000 * ring_bw), rel=1e-6)
    assert times["tree", "Simple"][0] == pytest.approx(8.4 + 2 * 4.0 + (1 << 20) / (1000 * ring_bw * 0.92 * 0.5 * 0.5),
                                                       rel=1e-6)
    assert ("nvls", "Simple") not in times   # NCCL: no NVLS with <= 2 GPUs (src/transport/nvls.cc:160)
    slower = slower_than_nccl_pick(fabric, "all_reduce", ("tree", "Simple"), 1 << 20, 1 << 20, 2, 1)
    assert slower is not None and slower[2] != ("tree", "Simple")


def test_tree_correction_steps_where_nccl_steps():
    assert list(tree_correction(np.array([0, 63, 64, 127, 128, 1 << 20, (64 << 23) - 1, 64 << 23]), "Simple")) == \
        [1.0, 1.0, .9, .9, .9, .5, .9, 1.0]
    # both sides of every step of the correction and of the ring plateau (64 B x channels x ranks) are checked
    sizes = set(check_sizes(100, 1 << 20, 16, 2))
    assert {100, 127, 128, 2047, 2048, (1 << 20) - 1, 1 << 20} <= sizes


@pytest.mark.parametrize("system", preset_names())
def test_no_predicted_rule_nccl_rates_slower_than_its_own_pick(system):
    """Every preset x --gpus x collective, at the fewest nodes and (to 16 GPUs) one rank per node: no rule names a
    pair NCCL's own model rates slower than NCCL's pick anywhere in the rule's sizes, and the header counts drops."""
    for gpus in GPUS:
        fabric = load_preset(system, num_gpus=gpus)
        fewest = math.ceil(gpus / fabric.domain_size)
        for nodes in sorted({fewest, gpus if gpus <= 16 else fewest}):
            result = flow.from_fabric(fabric, ranks=gpus, nodes=nodes, sizes_bytes=SIZES)
            checked, domains = flow.node_domains(fabric, ranks=gpus, nodes=nodes)
            header = [note for note in result.notes if note.startswith("checked against NCCL's own model")]
            assert len(header) == 1 and "v2.27.7-1" in header[0]
            dropped = [note for note in result.notes if note.startswith("  dropped: ")]
            assert f"dropped {len(dropped)} predicted choice(s)" in header[0]
            names = {plugin: name for name, plugin in PLUGIN_COLLECTIVES.items()}
            for rule in result.rules:
                loss = slower_than_nccl_pick(checked, names[rule.collective], (rule.algo, rule.proto.replace(
                    "simple", "Simple").replace("ll128", "LL128").replace("ll", "LL")), rule.min_bytes,
                    rule.max_bytes, gpus, domains)
                assert loss is None, (system, gpus, nodes, rule, loss)
                if gpus == 2:
                    assert (rule.algo, rule.proto) != ("tree", "simple"), (system, rule)


def test_the_probes_two_gpu_config_has_no_tree_rule(tmp_path):
    out = tmp_path / "p.conf"
    result = CliRunner().invoke(app, ["nccl-tuner", "--system", "h100-hgx", "--gpus", "2", "-O", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    rules = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert not [line for line in rules if ",tree," in line]
    assert "# checked against NCCL's own model (NVIDIA/nccl v2.27.7-1" in text


def test_a_dropped_choice_is_left_to_nccl_and_counted():
    """16 ranks one per node (b300-hgx): the cost model's tree/LL at 256-384 KiB loses to NCCL's tree/LL128 once
    NCCL's tree correction factor (LL 0.4 there) is priced: no rule there, and the header says why."""
    fabric = load_preset("b300-hgx", num_gpus=16)
    result = flow.from_fabric(fabric, ranks=16, nodes=16, sizes_bytes=SIZES)
    dropped = [note for note in result.notes if note.startswith("  dropped: ")]
    assert dropped and all("NCCL's own model" in note and "left to NCCL" in note for note in dropped)
    assert not [rule for rule in result.rules if rule.collective == "allreduce" and rule.algo == "tree"
                and rule.proto == "ll" and rule.min_bytes <= 262144 <= rule.max_bytes]



def test_a_dropped_line_names_the_range_the_plugin_leaves_to_nccl(tmp_path):
    """h100-hgx, 16 GPUs: the header's `# dropped:` line said [196609-393216] (the 256 KiB point's midpoint cell, as
    checked) while the cell's own comment said [131073-393216]: the tree/LL rule below stops at its measured 128 KiB
    beside a kept cell (hold_to_measured), so no rule covers 131073 B up and NCCL decides from there. Both say the
    range the plugin reads, and no rule covers a byte of it."""
    import re

    out = tmp_path / "t.conf"
    result = CliRunner().invoke(app, ["nccl-tuner", "--system", "h100-hgx", "--gpus", "16", "-O", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    dropped = re.findall(r"^# dropped: (\w+) nNodes=(\d+) nRanks=(\d+) \[(\d+)-(\d+)\]", text, re.M)
    assert ("allreduce", "2", "16", "131073", "393216") in dropped, dropped
    rules = [line.split(",") for line in text.splitlines() if line and not line.startswith("#")]
    for collective, nodes, ranks, lo, hi in dropped:
        assert f"# {collective} nodes={nodes} ranks={ranks} [{lo}-{hi}]: NCCL default kept at " in text
        assert not [r for r in rules if r[0] == collective and r[6] == nodes and r[7] == ranks
                    and int(r[1]) <= int(hi) and int(r[2]) >= int(lo)], (collective, lo, hi)

# --- every rule of both targets, fill-ins and FALLBACKs included (probe CF) -----------------------------------------
# `--for example-plugin` wrote fill-ins over sizes where NCCL's own pick changes (ring/ll up to 6 MiB where NCCL takes
# ring/ll128 from 4.3 MiB: h100-hgx, 8 GPUs) and FALLBACK rules of the fastest ring/tree pair by commbench's model,
# never checked against NCCL's (ring/simple where NCCL's next pick is ring/ll or tree/simple). Each fill-in is now cut
# where NCCL's own order changes and names NCCL's pick where its choice loses; FALLBACKs are NCCL's next picks.

PROTOCOL = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}


def losses_in_walk(rules, fabric, ranks: int, domains: int) -> list:
    """Per (collective, scale), per range of sizes where the same rules match: each matching rule, in file order, is
    reached only where the call left the pairs of the rules before it out (NCCL's example plugin; commbench's plugin
    stops at the first): none may be slower, by NCCL's own model, than NCCL's pick among the pairs left in, each rule
    priced at the channel count it names (0: NCCL's own)."""
    from commbench.costmodel.choice import uses_nccl_model

    names = {plugin: name for name, plugin in PLUGIN_COLLECTIVES.items()}
    found = []
    for coll in {r.collective for r in rules}:
        if not uses_nccl_model(fabric, names[coll]):
            continue
        mine = [r for r in rules if r.collective == coll]
        cuts = sorted({r.min_bytes for r in mine} | {r.max_bytes + 1 for r in mine})
        for lo, end in zip(cuts, cuts[1:]):
            walk = [r for r in mine if r.min_bytes <= lo and end - 1 <= r.max_bytes]
            for k, rule in enumerate(walk):
                left_out = [(r.algo, PROTOCOL[r.proto]) for r in walk[:k]]
                loss = slower_than_nccl_pick(fabric, names[coll], (rule.algo, PROTOCOL[rule.proto]), lo, end - 1,
                                             ranks, domains, excluded=left_out, channels=rule.channels or None)
                if loss is not None:
                    found.append((rule.csv_fields(), left_out, loss))
    return found


@pytest.mark.parametrize("system", preset_names())
def test_no_size_of_any_rule_is_slower_than_nccls_own_pick_for_either_plugin(system):
    for gpus in GPUS:
        fabric = load_preset(system, num_gpus=gpus)
        fewest = math.ceil(gpus / fabric.domain_size)
        for nodes in sorted({fewest, gpus if gpus <= 16 else fewest}):
            checked, domains = flow.node_domains(fabric, ranks=gpus, nodes=nodes)
            for target, channels in (("commbench", None), ("example-plugin", 16)):
                result = flow.from_fabric(fabric, ranks=gpus, nodes=nodes, sizes_bytes=SIZES, target=target,
                                          channels=channels)
                assert result.rules or target == "commbench"
                losses = losses_in_walk(result.rules, checked, gpus, domains)
                assert losses == [], (system, gpus, nodes, target, losses[:3])


def test_own_rankings_cut_where_nccls_order_changes():
    """Inside each range the order NCCL's own model gives its pairs holds at every size (both ends and inside), and
    the ranges tile the sizes asked for."""
    from commbench.costmodel.nccl_own import own_rankings

    fabric = load_preset("h100-hgx", num_gpus=16)
    for ranks, domains in ((8, 1), (16, 2)):
        ranges = own_rankings(fabric, "all_reduce", 0, 2**64 - 1, ranks, domains)
        assert ranges[0][0] == 0 and ranges[-1][1] == 2**64 - 1
        assert all(a[1] + 1 == b[0] for a, b in zip(ranges, ranges[1:])) and len(ranges) > 3
        sizes = [x for lo, hi, _ in ranges if hi < 2**40 for x in (lo, hi, (lo + hi) // 2)]
        times = own_times_us(fabric, "all_reduce", np.array(sizes, dtype=np.float64), ranks, domains)
        for k, size in enumerate(sizes):
            order = next(r for lo, hi, r in ranges if lo <= size <= hi)
            mine = [times[pair][k] for pair in order]
            assert mine == sorted(mine), (size, order)


@pytest.mark.parametrize("system,gpus", [("h100-hgx", 8), ("gb200-nvl72", 72), ("b200-hgx", 16)])
def test_nccl_example_plugin_runs_nccls_own_pick_whatever_a_call_leaves_out(example_plugin, tmp_path, monkeypatch,
                                                                           system, gpus):
    """NCCL's example plugin (v2.30.7-1, built with the system compiler) on a predicted file, NCCL's cost table holding
    NCCL's own times: with LL128 left out of the communicator, NVLS left out of the call, both, or nothing, every size
    runs NCCL's own pick among the pairs left in (by its own model), never on one channel."""
    from tests.test_tuner_plugin import ALGORITHMS, Driver, picked

    monkeypatch.setenv("NCCL_TUNER_CONFIG_FILE", "")
    fabric = load_preset(system, num_gpus=gpus)
    nodes = math.ceil(gpus / fabric.domain_size)
    conf = tmp_path / "e.conf"
    out = CliRunner().invoke(app, ["nccl-tuner", "--system", system, "--gpus", str(gpus), "--channels", "16",
                                   "--for", "example-plugin", "-O", str(conf)])
    assert out.exit_code == 0, out.output
    checked, domains = flow.node_domains(fabric, ranks=gpus, nodes=nodes)
    driver = Driver(example_plugin, str(conf), ranks=gpus, nodes=nodes)
    names = {plugin: name for name, plugin in PLUGIN_COLLECTIVES.items()}
    ll128 = tuple((a, "ll128") for a in ALGORITHMS)
    nvls = tuple((a, p) for a in ("nvls", "nvls_tree") for p in ("ll", "ll128", "simple"))
    sizes = sorted({*(1 << k for k in range(4, 40)), *(3 << k for k in range(4, 38)), 2**64 - 1})
    for coll in ("allreduce", "allgather", "reducescatter", "broadcast"):
        times = own_times_us(checked, names[coll], np.array(sizes, dtype=np.float64), gpus, domains)
        for ignored in ((), ll128, nvls, ll128 + nvls):
            left = {pair: t for pair, t in times.items() if (pair[0], pair[1].lower()) not in ignored}
            for k, size in enumerate(sizes):
                costs = {(a, p.lower()): float(t[k]) for (a, p), t in left.items()}
                channels, table = driver.call(coll, size, ignored=ignored, costs=costs)
                algo, proto = picked(table)
                best = min(t[k] for t in left.values())
                assert channels != 1 and times[algo, PROTOCOL[proto]][k] <= best * (1 + 1e-9), \
                    (coll, size, ignored, (algo, proto), channels)
    driver.close()


# --- predict names the pair NCCL's own model picks (probe CF, lead 3) ------------------------------------------------
# predict picked the fastest pair by commbench's model, which leaves out NCCL's tree correction factor and ring plateau
# (and adds its own pipeline ramp), while nccl-tuner checks its rules against NCCL's own model: 131 of 6076 preset
# queries named another pair than NCCL takes (gb300-nvl72, 8 GPUs, all_reduce 128 MiB: ring/Simple, NCCL nvls/Simple).

@pytest.mark.parametrize("system", preset_names())
def test_predict_names_the_pair_nccls_own_model_picks(system):
    from commbench.costmodel.choice import best_algorithm_protocol, uses_nccl_model

    sizes = np.array(size_range(8, 8 << 30, 2.0, None), dtype=np.float64)
    for gpus in GPUS:
        fabric = load_preset(system, num_gpus=gpus)
        for domains in sorted({math.ceil(gpus / fabric.domain_size), min(gpus, fabric.num_domains)}):
            for collective in PLUGIN_COLLECTIVES:
                if not uses_nccl_model(fabric, collective):
                    continue
                choice = best_algorithm_protocol(fabric, collective, sizes, gpus, domains)
                own = own_times_us(fabric, collective, sizes, gpus, domains)
                for k, size in enumerate(sizes):
                    pair = (str(choice.algorithm[k]), str(choice.protocol[k]))
                    least = min(t[k] for t in own.values())
                    assert own[pair][k] <= least * (1 + 1e-9), (system, gpus, domains, collective, int(size), pair)


def test_predict_cli_prints_nccls_own_pick_with_our_time():
    """gb300-nvl72, 8 GPUs, all_reduce 128 MiB: NCCL's own model takes nvls/Simple (commbench's ramp made ring/Simple
    the fastest); predict says so, timed by commbench's model of that pair."""
    from commbench.costmodel import algorithm_protocol_times_s

    result = CliRunner().invoke(app, ["predict", "-c", "all_reduce", "-g", "8", "--system", "gb300-nvl72", "--gpus", "8",
                                      "-b", "128M", "-e", "128M", "--json"])
    assert result.exit_code == 0, result.output
    import json

    row = json.loads(result.output)["rows"][0]
    assert (row["algorithm"], row["protocol"]) == ("nvls", "Simple")
    ours = algorithm_protocol_times_s(load_preset("gb300-nvl72", num_gpus=8), "all_reduce", np.array([128 << 20]), 8, 1)
    assert row["time_us"] == pytest.approx(float(ours["nvls", "Simple"][0]) * 1e6)
