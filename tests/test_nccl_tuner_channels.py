"""A rule never forces more channels than were measured: NCCL lowers the communicator's count for small calls
(src/enqueue.cc topoGetAlgoInfo), a tuner's count skips that (ncclGetAlgoInfo), so where the measurement was
lowered a rule says channels 0 and NCCL lowers its own count as it did then. Checked against a reproduction of
NCCL's loop, not against the code under test."""

from __future__ import annotations

import dataclasses

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.comm.nccl_tuning import TuningCombo
from commbench.results.nccl_channels import lowering_bound_bytes, thread_threshold
from commbench.results.records import JsonlWriter
from tests.test_nccl_tuner import (DEFAULT, RING_LL, TREE_SIMPLE_8, _header, _record, _results_file,
                                   reproduced_plugin_load, reproduced_plugin_select)

RING_SIMPLE_8 = TuningCombo(algo="ring", proto="simple", channels=8)
NVLS_16 = TuningCombo(algo="nvls", proto="simple", channels=16)


# --- reproduced, not imported: NVIDIA/nccl src/enqueue.cc v2.30.7-1 (the same in v2.24.3-1, v2.27.3-1, v2.28.9-1)
def reproduced_topo_channels(nbytes: int, comm_channels: int, threads: int, threshold: int) -> int:
    """topoGetAlgoInfo, ring/tree: nc = comm->nChannels; while (nBytes < nc * nt * threadThreshold) { if (nc >= 2)
    nc--; else break; }"""
    nc = comm_channels
    while nbytes < nc * threads * threshold:
        if nc >= 2:
            nc -= 1
        else:
            break
    return nc


def reproduced_call_channels(nbytes: int, comm_channels: int, threads: int, threshold: int, tuner_channels: int) -> int:
    """ncclGetAlgoInfo: getCollInfo, then topoGetAlgoInfo, then info->nMaxChannels = nMaxChannels == 0 ?
    info->nMaxChannels : nMaxChannels; the scheduler caps it at comm->nChannels (scheduleCollTasksToPlan)."""
    own = reproduced_topo_channels(nbytes, comm_channels, threads, threshold)
    return min(comm_channels, own if tuner_channels == 0 else tuner_channels)
# --- end of the reproduction --------------------------------------------------------------------------------------


# threads and thresholds NCCL uses by default (src/graph/tuning.cc, src/include/device.h and comm.h): 4 ranks
NCCL_DEFAULTS = {("ring", "ll"): (512, 8 * 4), ("ring", "simple"): (512, 64), ("tree", "simple"): (512, 64)}


def _write(tmp_path, points, name="r.jsonl", ranks=4, nccl_env=None):
    path = tmp_path / name
    with JsonlWriter(path) as writer:
        header = _header("a", ["h"] * ranks)
        if nccl_env:
            header = dataclasses.replace(header, nccl_env=nccl_env)
        writer.write(header)
        for size, combo, median in points:
            writer.write(_record("a", size, combo, median, world=ranks))
    return str(path)


def _rules(tmp_path, path, *args):
    conf = tmp_path / "c.conf"
    result = CliRunner().invoke(app, ["nccl-tuner", path, "-O", str(conf), *args])
    assert result.exit_code == 0, result.output
    configs, problems = reproduced_plugin_load(conf.read_text())
    assert problems == []
    return configs, conf.read_text()


def _check_every_rule_runs_as_measured(configs, measured: dict[tuple[str, str], int], comm_channels: int = 64):
    """At each rule's bounds and midpoint, the call runs on the channels the measurement ran it on: the
    communicator at the measured count, no tuner -- given a communicator with at least as many (comm_channels)."""
    for c in configs:
        n = measured[(c["algo"], c["proto"])]
        threads, threshold = NCCL_DEFAULTS[(c["algo"], c["proto"])]
        for nbytes in (c["min"], (c["min"] + c["max"]) // 2, c["max"]):
            as_measured = reproduced_call_channels(nbytes, n, threads, threshold, 0)
            with_rule = reproduced_call_channels(nbytes, comm_channels, threads, threshold, c["channels"])
            assert with_rule == as_measured, (c, nbytes)


def test_a_small_call_measured_on_lowered_channels_is_left_to_nccl_and_a_large_one_keeps_its_count(tmp_path):
    """ring/ll/16 wins at 1 KiB and 4 KiB on 4 ranks: NCCL ran them on 1 channel (1024 < 16 x 512 x 32); a rule
    saying 16 would run them on 16. tree/simple/8 at 16 MiB ran on all 8 and keeps 8."""
    path, sizes = _results_file(tmp_path)
    configs, text = _rules(tmp_path, str(path))
    small = reproduced_plugin_select(configs, "allreduce", 1024, nodes=2, ranks=4)
    assert (small["algo"], small["proto"], small["channels"]) == ("ring", "ll", 0)
    large = reproduced_plugin_select(configs, "allreduce", 16 << 20, nodes=2, ranks=4)
    assert (large["algo"], large["proto"], large["channels"]) == ("tree", "simple", 8)
    assert reproduced_call_channels(1024, 16, 512, 32, 0) == 1  # what was measured
    _check_every_rule_runs_as_measured(configs, {("ring", "ll"): 16, ("tree", "simple"): 8})
    assert "measured with 16 channels, which NCCL may lower below 262144 B" in text
    assert "NCCL_MIN_NCHANNELS=16 would give it 16 but changes NCCL's default for EVERY call without a rule" in text
    assert "set it only after a new tuner-on vs tuner-off measurement" in text


def test_a_rule_across_the_size_where_nccl_stops_lowering_becomes_two(tmp_path):
    """ring/simple/8 wins from 64 KiB to 1 MiB: below 8 x 512 x 64 = 256 KiB NCCL lowered the 8 channels, from
    there it ran all 8. One rule becomes 0 below 256 KiB and 8 from it, contiguous, and each size runs as measured."""
    points = [(size, combo, t) for size in (1 << 16, 1 << 18, 1 << 20)
              for combo, t in ((DEFAULT, 100.0), (RING_SIMPLE_8, 50.0))]
    configs, _ = _rules(tmp_path, _write(tmp_path, points))
    assert [(c["min"], c["max"], c["channels"]) for c in configs] == [(1 << 16, (1 << 18) - 1, 0),
                                                                      (1 << 18, 1 << 20, 8)]
    _check_every_rule_runs_as_measured(configs, {("ring", "simple"): 8})


def test_pat_keeps_its_count_and_nccl_lowers_no_nvls_count(tmp_path):
    """NVLS takes comm->nvlsChannels whatever the size, PAT's maxThreads is never set (0): no lowering."""
    assert lowering_bound_bytes(NVLS_16, 8, {}) == 0
    assert lowering_bound_bytes(TuningCombo(algo="pat", proto="simple", channels=8), 8, {}) == 0
    assert lowering_bound_bytes(TuningCombo(algo="collnet_direct", proto="simple", channels=8), 8, {}) is None
    pat = TuningCombo(algo="pat", proto="simple", channels=8)
    path = tmp_path / "pat.jsonl"   # NCCL has PAT for all-gather and reduce-scatter only (src/graph/tuning.cc)
    with JsonlWriter(path) as writer:
        writer.write(_header("a", ["h"] * 4))
        for combo, median in ((DEFAULT, 100.0), (pat, 50.0)):
            writer.write(_record("a", 1024, combo, median, coll="all_gather"))
    configs, _ = _rules(tmp_path, str(path))
    assert [(c["coll"], c["algo"], c["channels"]) for c in configs] == [("allgather", "pat", 8)]


def test_nvls_on_one_node_ran_on_nccls_nvls_count_so_its_rule_says_zero(tmp_path):
    """NCCL_MIN/MAX_NCHANNELS set comm->nChannels, not nvlsChannels (src/transport/nvls.cc), and one-node NVLS and
    NVLS tree run on nvlsChannels (src/enqueue.cc topoGetAlgoInfo): the measured 16 was never the count, and a rule
    saying 16 would cap a 24- or 32-channel NVLS (SM100) at 16. Across nodes NVLS ran on min(nvlsChannels, N) from
    NCCL 2.28 (N kept) and on nvlsChannels before (v2.27.7-1 topoGetAlgoInfo: nc = comm->nvlsChannels for every NVLS
    call): a rule measured with 2.27 said N, a count never run (found from outside), and says 0 now."""
    nvls_tree = TuningCombo(algo="nvls_tree", proto="simple", channels=16)
    points = [(1024, DEFAULT, 100.0), (1024, NVLS_16, 50.0), (1 << 20, DEFAULT, 100.0), (1 << 20, nvls_tree, 50.0)]
    configs, text = _rules(tmp_path, _write(tmp_path, points))
    assert [(c["algo"], c["channels"]) for c in configs] == [("nvls", 0), ("nvls_tree", 0)]
    assert "measured with NCCL_MIN/MAX_NCHANNELS=16, which nvls does not run on here" in text
    for version, channels in (("2.27.3", 0), ("2.28.3", 16), ("2.30.7+cuda13.0", 16)):
        path = tmp_path / f"two-{version}.jsonl"
        with JsonlWriter(path) as writer:
            writer.write(dataclasses.replace(_header("a", ["n1", "n1", "n2", "n2"]), nccl_version=version))
            for size, combo, median in points[:2]:
                writer.write(_record("a", size, combo, median))
        configs, _ = _rules(tmp_path, str(path))
        assert [(c["algo"], c["nodes"], c["channels"]) for c in configs] == [("nvls", 2, channels)], version


@pytest.mark.parametrize("env, combo, ranks, expected", [
    ({}, RING_LL, 4, 16 * 512 * 8 * 4),  # ring LL's threshold times nRanks
    ({}, RING_LL, 72, 16 * 512 * 8 * 72),
    ({}, TREE_SIMPLE_8, 4, 8 * 512 * 64),
    ({}, TuningCombo(algo="tree", proto="ll128", channels=4), 4, 4 * 640 * 8),
    ({"NCCL_NTHREADS": "256"}, RING_SIMPLE_8, 4, 8 * 256 * 64),
    ({"NCCL_NTHREADS": "100"}, RING_SIMPLE_8, 4, 8 * 512 * 64),  # not a multiple of 32: NCCL takes the maximum
    ({"NCCL_LL128_NTHREADS": "64"}, TuningCombo(algo="ring", proto="ll128", channels=2), 4, 2 * 160 * 8),
    ({"NCCL_THREAD_THRESHOLDS": "1 2 3 4"}, RING_LL, 4, 16 * 512 * 4),  # replaces ring LL's, not times nRanks
    ({"NCCL_THREAD_THRESHOLDS": "-1 -1 100"}, TREE_SIMPLE_8, 4, 8 * 512 * 100),
    ({"NCCL_THREAD_THRESHOLDS": "-1 -1 x 9"}, RING_LL, 4, 16 * 512 * 32),  # sscanf stops at x
])
def test_the_size_nccl_stops_lowering_follows_nccl_sources_and_the_runs_settings(env, combo, ranks, expected):
    assert lowering_bound_bytes(combo, ranks, env) == expected


def test_the_runs_nccl_settings_move_the_size(tmp_path):
    """A run with NCCL_THREAD_THRESHOLDS raising ring Simple's to 1024: NCCL lowered 8 channels up to 4 MiB."""
    assert thread_threshold("ring", "simple", 4, {"NCCL_THREAD_THRESHOLDS": "0 0 0 0 0 1024"}) == 1024
    points = [(size, combo, t) for size in (1 << 20, 1 << 23) for combo, t in ((DEFAULT, 100.0), (RING_SIMPLE_8, 50.0))]
    env = {"NCCL_THREAD_THRESHOLDS": "-1 -1 -1 -1 -1 1024"}
    configs, _ = _rules(tmp_path, _write(tmp_path, points, nccl_env=env))
    assert [(c["min"], c["max"], c["channels"]) for c in configs] == [(1 << 20, (1 << 22) - 1, 0),
                                                                      (1 << 22, 1 << 23, 8)]


def test_example_plugin_rules_leave_lowered_counts_to_nccl_and_never_mean_one_channel(tmp_path):
    """NCCL's example plugin copies any channels but -1 into nChannels (plugins/tuner/example/plugin.c), so 0
    is NCCL's own count there too; the file still covers every size."""
    path, _ = _results_file(tmp_path)
    configs, _ = _rules(tmp_path, str(path), "--for", "example-plugin")
    assert all(c["channels"] >= 0 for c in configs)
    spans = sorted((c["min"], c["max"]) for c in configs)
    assert spans[0][0] == 0 and all(a[1] + 1 == b[0] for a, b in zip(spans, spans[1:]))
    assert reproduced_plugin_select(configs, "allreduce", 1024, nodes=2, ranks=4)["channels"] == 0
    assert reproduced_plugin_select(configs, "allreduce", 16 << 20, nodes=2, ranks=4)["channels"] == 8
    _check_every_rule_runs_as_measured(configs, {("ring", "ll"): 16, ("tree", "simple"): 8})
