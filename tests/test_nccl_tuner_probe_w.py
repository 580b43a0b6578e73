"""Probe W's findings on `commbench nccl-tuner --for example-plugin`: NCCL's example plugin sets *nChannels = 1, then
walks its rules and applies the first that matches AND whose pair NCCL left in the call's cost table; NCCL leaves
NVLS (and CollNet, PAT) out per call (src/enqueue.cc updateCollCostTable: ncclNvlsSupported refuses int8, fp8, prod,
avg, max on fp32; NVLS across nodes without CollNet). A file whose only rule at a size named nvls ran those calls on
one channel; now each such rule is followed by a FALLBACK rule of ring or tree with a channel count, or refused."""

from __future__ import annotations

import os
import subprocess

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.comm.nccl_tuning import TuningCombo
from commbench.results.nccl_tuner_targets import PER_CALL_ALGORITHMS
from commbench.tuner_plugin import find_compiler
from tests.test_nccl_tuner import reproduced_plugin_load
from tests.test_nccl_tuner_probe_o import NCCL_MIRROR, write_runs

NVLS = TuningCombo(algo="nvls", proto="simple", channels=16)
RING = TuningCombo(algo="ring", proto="simple", channels=16)
RING_LL128 = TuningCombo(algo="ring", proto="ll128", channels=16)
SIZES = [2 ** k for k in range(10, 34)]   # 1 KiB .. 8 GiB


def example_plugin_walk(configs: list[dict], coll: str, nbytes: int, *, nodes: int, ranks: int,
                        ignored_algorithms=PER_CALL_ALGORITHMS) -> tuple[int, dict | None]:
    """plugins/tuner/example/plugin.c (v2.30.7-1) pluginGetCollInfo: *nChannels = 1; the first rule that matches
    (pipeOps 1, regBuff 0) whose cost-table entry is not NCCL_ALGO_PROTO_IGNORE sets the entry to 0 and, unless
    its channels are -1, *nChannels; a rule on an ignored entry is skipped and later rules are tried."""
    for c in configs:
        if (c["coll"] == coll and c["min"] <= nbytes <= c["max"] and c["nodes"] in (-1, nodes)
                and c["ranks"] in (-1, ranks) and c["pipe_ops"] in (-1, 1) and c["reg_buff"] in (-1, 0)):
            if c["algo"] in ignored_algorithms:
                continue
            return (1 if c["channels"] == -1 else c["channels"]), c
    return 1, None


def _write(tmp_path, *args) -> tuple[object, str]:
    conf = tmp_path / "e.conf"
    out = CliRunner().invoke(app, ["nccl-tuner", *args, "--for", "example-plugin", "-O", str(conf)])
    return out, (conf.read_text() if conf.exists() else "")


def test_predicted_nvls_rules_have_a_fallback_so_a_denied_call_never_runs_on_one_channel(tmp_path):
    """Probe W's case: h100-hgx, 8 ranks, --channels 16. Before, allreduce from 768 KiB up had one rule, nvls/simple:
    a call NCCL denies NVLS (int8, avg, ...) kept the plugin's one channel."""
    out, text = _write(tmp_path, "--system", "h100-hgx", "--gpus", "8", "--channels", "16")
    assert out.exit_code == 0, out.output
    configs, problems = reproduced_plugin_load(text)
    assert problems == []
    assert any(c["algo"] == "nvls" for c in configs)   # the case: NVLS rules are written
    for size in SIZES:
        allowed_channels, chosen = example_plugin_walk(configs, "allreduce", size, nodes=1, ranks=8)
        assert chosen is not None and chosen["algo"] in ("ring", "tree"), size
        assert allowed_channels != 1, size      # 16, or 0 (NCCL's own count)
        # calls that NVLS serves still get the NVLS rule first
        _, first = example_plugin_walk(configs, "allreduce", size, nodes=1, ranks=8, ignored_algorithms=())
        assert first is not None
    # each rule's comment says whether it is a FALLBACK (NCCL's own next picks, which may be NVLS behind LL128)
    lines = text.splitlines()
    said = [next(c for c in reversed(lines[:i]) if c.startswith("# ") and " nodes=" in c and "]: " in c)
            for i, line in enumerate(lines) if line and not line.startswith("#")]
    fallbacks = [i for i, comment in enumerate(said) if ": FALLBACK at " in comment]
    primary = [i for i, comment in enumerate(said) if ": FALLBACK at " not in comment]
    assert fallbacks and min(fallbacks) > max(primary)   # after every rule they stand in for
    assert any(configs[i]["algo"] in PER_CALL_ALGORITHMS for i in primary)
    assert "FALLBACK" in text


def test_measured_nvls_winner_gets_the_fastest_measured_ring_pair_as_its_fallback(tmp_path):
    path = write_runs(tmp_path / "m.jsonl", 0, [(TuningCombo(), 20, 100.0), (NVLS, 20, 50.0), (RING, 20, 95.0),
                                                (RING_LL128, 20, 90.0)])
    out, text = _write(tmp_path, path)
    assert out.exit_code == 0, out.output
    configs, problems = reproduced_plugin_load(text)
    assert problems == [] and configs[0]["algo"] == "nvls"
    for size in (0, 65536, 1 << 22, 2 ** 64 - 1):
        channels, chosen = example_plugin_walk(configs, "allreduce", size, nodes=1, ranks=8)
        # ring/ll128's 90 us is faster, but NCCL may leave LL128 out too (probe AK): the fallback is one it never does
        assert (chosen["algo"], chosen["proto"]) == ("ring", "simple"), size
        assert channels in (0, 16), size


def test_a_per_call_winner_without_a_measured_ring_or_tree_pair_is_refused_in_one_line(tmp_path):
    path = write_runs(tmp_path / "n.jsonl", 0, [(TuningCombo(), 20, 100.0), (NVLS, 20, 50.0)])
    out, text = _write(tmp_path, path)
    assert out.exit_code == 2 and text == ""
    assert out.output.startswith("error: ") and len(out.output.strip().splitlines()) == 1, out.output
    assert "nvls/simple" in out.output and "ONE channel" in out.output
    # commbench's plugin leaves a denied call to NCCL: the same results are fine for it
    conf = tmp_path / "c.conf"
    assert CliRunner().invoke(app, ["nccl-tuner", path, "-O", str(conf)]).exit_code == 0


# --- NCCL's example plugin itself, built from the NCCL mirror with the system C compiler -------------------------

EXAMPLE_TAG = "v2.30.7-1"


@pytest.fixture(scope="module")
def example_plugin(tmp_path_factory):
    compiler = find_compiler()
    if compiler is None:
        pytest.skip("no C compiler (cc/gcc/clang) on PATH")
    if not os.path.isdir(NCCL_MIRROR):
        pytest.skip(f"no NCCL mirror at {NCCL_MIRROR}")
    where = tmp_path_factory.mktemp("example")
    archive = subprocess.run(["git", "--git-dir", NCCL_MIRROR, "archive", EXAMPLE_TAG, "plugins/tuner/example/plugin.c",
                              "plugins/tuner/example/nccl"], capture_output=True, check=False)
    if archive.returncode != 0:
        pytest.skip(f"NCCL mirror has no {EXAMPLE_TAG} example plugin")
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive.stdout, check=True)
    source = where / "plugins" / "tuner" / "example"
    library = source / "libnccl-tuner-example.so"
    subprocess.run([*compiler, "-I", str(source / "nccl"), "-fPIC", "-shared", "-o", str(library),
                    str(source / "plugin.c")], check=True, capture_output=True)
    return str(library)


def test_nccl_example_plugin_runs_a_call_denied_nvls_on_the_fallback_not_one_channel(example_plugin, tmp_path,
                                                                                     monkeypatch):
    from tests.test_tuner_plugin import ALGORITHMS, Driver, picked

    monkeypatch.setenv("NCCL_TUNER_CONFIG_FILE", "")
    out, _ = _write(tmp_path, "--system", "h100-hgx", "--gpus", "8", "--channels", "16")
    assert out.exit_code == 0, out.output
    driver = Driver(example_plugin, str(tmp_path / "e.conf"), ranks=8, nodes=1)
    denied = tuple((algo, proto) for algo in ALGORITHMS if algo in PER_CALL_ALGORITHMS
                   for proto in ("ll", "ll128", "simple"))
    saw_nvls = False
    for size in SIZES:
        channels, table = driver.call("allreduce", size, ignored=denied)
        assert channels != 1 and picked(table)[0] in ("ring", "tree"), (size, channels, picked(table))
        channels, table = driver.call("allreduce", size)
        saw_nvls |= picked(table) == ("nvls", "simple")
    assert saw_nvls   # where NCCL allows NVLS, the NVLS rule still applies
    driver.close()


# --- finding 2: --nodes N is the scale the rules are predicted for -----------------------------------------------

@pytest.mark.parametrize("nodes", [1, 2, 4, 8])
def test_predicted_rules_are_the_cost_models_choice_at_the_given_node_count(nodes):
    """8 h100-hgx ranks over `nodes` hosts (NCCL's nodes: one NVLink domain each). Before, every --nodes got the
    one-host rules (nvls/simple from 1 MiB), only stamped nNodes=N: at 8 nodes the model itself offers no NVLS."""
    import numpy as np

    from commbench.costmodel import algorithm_protocol_times_s, load_preset
    from commbench.workflows.nccl_tuner import from_fabric

    fabric = load_preset("h100-hgx", num_gpus=8)
    result = from_fabric(fabric, ranks=8, nodes=nodes, sizes_bytes=SIZES[:20])
    assert result.rules and {r.nodes for r in result.rules} == {nodes}
    spread = load_preset("h100-hgx", num_racks=nodes)   # as many hosts as nodes: the model's own inputs
    for rule in result.rules:
        times = algorithm_protocol_times_s(spread, "all_reduce" if rule.collective == "allreduce" else
                                           {"allgather": "all_gather", "reducescatter": "reduce_scatter"}.get(
                                               rule.collective, rule.collective),
                                           np.asarray(rule.sizes_bytes, dtype=float), 8, nodes)
        for i, size in enumerate(rule.sizes_bytes):
            fastest = min(times, key=lambda pair: float(np.broadcast_to(times[pair], (len(rule.sizes_bytes),))[i]))
            assert (fastest[0], fastest[1].lower()) == (rule.algo, rule.proto), (nodes, rule, size)


def test_node_counts_no_placement_can_hold_are_refused_in_one_line(tmp_path):
    out = CliRunner().invoke(app, ["nccl-tuner", "--system", "h100-hgx", "--gpus", "16", "--nodes", "1",
                                   "-O", str(tmp_path / "x.conf")])
    assert out.exit_code == 2 and len(out.output.strip().splitlines()) == 1, out.output
    assert "--nodes=1" in out.output and "8 GPUs" in out.output and "from 2 to 16" in out.output
    assert not (tmp_path / "x.conf").exists()
