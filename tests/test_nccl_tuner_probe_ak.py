"""Probe AK's findings on `commbench nccl-tuner`.

F1: NCCL's example plugin sets *nChannels = 1 and skips a rule whose pair NCCL marked NCCL_ALGO_PROTO_IGNORE. NCCL
keeps only ring LL/Simple, and tree LL/Simple for all-reduce, in every call's table (src/graph/tuning.cc
ncclTopoTuneModel, v2.18.6-1 to v2.30.7-1): its defaults turn LL128 off for a communicator without NVLink between
its GPUs (and more), and it never gives tree a bandwidth outside all-reduce. A `--for example-plugin` file whose
only rule at a size named ring/ll128 (an L40S, 8 ranks) ran every all-reduce on one channel; now each rule on a pair
NCCL may leave out is followed by a FALLBACK rule on a pair it never leaves out. Records of tree on all-gather (NCCL
2.18-2.23 ran ring for them) make no tree rule.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.comm.nccl_tuning import TuningCombo
from commbench.results.records import JsonlWriter, Measurement, RunHeader
from tests.test_nccl_tuner import reproduced_plugin_load

DEFAULT = TuningCombo()
RING_LL128 = TuningCombo(algo="ring", proto="ll128", channels=16)
RING_SIMPLE = TuningCombo(algo="ring", proto="simple", channels=16)
TREE_LL = TuningCombo(algo="tree", proto="ll", channels=16)
TREE_SIMPLE = TuningCombo(algo="tree", proto="simple", channels=16)
L40S_SIZES = [65536, 131072, 262144, 524288, 1048576]
# what NCCL leaves out of an L40S communicator's calls under its defaults: LL128 (no NVLink), tree outside all-reduce
LL128_OFF = (("ring", "ll128"), ("tree", "ll128"))


def write_results(path, runs: dict[TuningCombo, list[float]], *, collective="all_reduce", sizes=L40S_SIZES,
                  version="2.28.9", gpu="NVIDIA L40S", env: dict | None = None) -> str:
    """One 8-rank run per combination, median per size as given, 1% noise (p99 = 1.01 x median, 50 iterations)."""
    hosts = ["n1"] * 8
    with JsonlWriter(str(path)) as writer:
        for i, (combo, times) in enumerate(runs.items()):
            run_id = f"r{i}"
            writer.write(RunHeader(run_id=run_id, started_at="2026-01-01T00:00:00+00:00", argv=[],
                                   commbench_version="0", python_version="3", torch_version="2.6", nccl_version=version,
                                   cuda_version="12.4", cupy_version=None, backend="nccl", world_size=8,
                                   hostnames=hosts, devices=[gpu] * 8, nccl_env={**(env or {}), **combo.env()},
                                   launcher="torchrun"))
            for size, median in zip(sizes, times):
                writer.write(Measurement(run_id=run_id, collective=collective, backend="nccl", size_bytes=size,
                                         # one rank's chunk for all_gather (nccl-tests' count; checked on read)
                                         count=size // (4 * (8 if collective == "all_gather" else 1)),
                                         dtype="float32", op="sum", in_place=False, world_size=8,
                                         group_size=8, num_groups=1, iters=50, warmup_iters=5, time_us_median=median,
                                         time_us_p99=median * 1.01, time_us_max=median * 1.01,
                                         time_us_min=median * 0.995, time_us_mean=median, status="ok",
                                         params=combo.params(), num_wrong=0))
    return str(path)


def tune(*args):
    return CliRunner().invoke(app, ["nccl-tuner", *args])


def walk(configs: list[dict], coll: str, nbytes: int, ignored) -> tuple[int, dict | None]:
    """plugins/tuner/example/plugin.c (v2.30.7-1) pluginGetCollInfo: *nChannels = 1; the first matching rule whose
    pair is not IGNORE applies (its channels unless -1); a rule on an ignored pair is skipped."""
    for c in configs:
        if c["coll"] == coll and c["min"] <= nbytes <= c["max"] and c["nodes"] in (-1, 1) and c["ranks"] in (-1, 8) \
                and c["pipe_ops"] in (-1, 1) and c["reg_buff"] in (-1, 0):
            if (c["algo"], c["proto"]) in ignored:
                continue
            return (1 if c["channels"] == -1 else c["channels"]), c
    return 1, None


# --- the one rule: which pairs NCCL has, and which it never leaves out ----------------------------------------------

def test_nccl_keeps_only_ring_and_all_reduce_tree_with_ll_or_simple_in_every_call():
    from commbench.comm.nccl_tuning import nccl_has, never_left_out

    assert never_left_out("all_reduce", "ring", "ll") and never_left_out("all_reduce", "tree", "simple")
    assert never_left_out("all_gather", "ring", "simple") and never_left_out("broadcast", "ring", "ll")
    assert not never_left_out("all_reduce", "ring", "ll128")      # LL128: off where NCCL's defaults turn it off
    assert not never_left_out("all_gather", "tree", "ll")         # tree: all-reduce only
    assert not never_left_out("all_reduce", "nvls", "simple")     # per call
    assert not nccl_has("all_gather", "tree", "ll") and not nccl_has("reduce", "nvls", None)
    assert not nccl_has("all_reduce", "nvls", "ll") and nccl_has("all_gather", "pat", "simple")
    assert nccl_has("all_gather", None, "ll128")


def test_cost_model_and_tuner_read_one_table():
    from commbench.comm.nccl_tuning import NCCL_ALGORITHMS_FOR, SIMPLE_ONLY_ALGORITHMS
    from commbench.costmodel import nccl_tables

    assert nccl_tables.SIMPLE_ONLY is SIMPLE_ONLY_ALGORITHMS
    assert all(nccl_tables.ALGORITHMS_FOR[name] == NCCL_ALGORITHMS_FOR[name] for name in nccl_tables.ALGORITHMS_FOR)


# --- F1: an LL128 rule is followed by a fallback NCCL never leaves out ------------------------------------------------

def test_an_ll128_winner_on_a_gpu_without_nvlink_never_leaves_a_call_on_one_channel(tmp_path):
    """The probe's L40S case: ring/ll128/16 beats NCCL's default at every size. Before, the file's only rules were
    ring/ll128: NCCL leaves LL128 out there, and the example plugin ran every all-reduce (0 B .. 2^64-1) on ONE
    channel."""
    path = write_results(tmp_path / "l40s.jsonl", {DEFAULT: [40, 60, 90, 150, 260],
                                                   RING_LL128: [25, 35, 55, 90, 160],
                                                   RING_SIMPLE: [45, 65, 95, 155, 265]})
    conf = tmp_path / "e.conf"
    out = tune(path, "-O", str(conf), "--for", "example-plugin")
    assert out.exit_code == 0, out.output
    configs, problems = reproduced_plugin_load(conf.read_text())
    assert problems == []
    for size in (0, 1024, *L40S_SIZES, 1 << 26, 2 ** 64 - 1):
        channels, chosen = walk(configs, "allreduce", size, LL128_OFF)
        assert chosen is not None and (chosen["algo"], chosen["proto"]) == ("ring", "simple"), size
        assert channels != 1, size
        _, first = walk(configs, "allreduce", size, ())    # where NCCL keeps LL128, the winner applies
        assert (first["algo"], first["proto"]) == ("ring", "ll128"), size
    # the fallback was measured slower than NCCL's default: where NCCL leaves LL128 out, that is slower than no config
    assert "FALLBACK ring/simple/16 (for ring/ll128) up to 1.12x slower than NCCL's default" in " ".join(
        out.output.split())


def test_a_fill_in_on_ll128_gets_a_fallback_too(tmp_path):
    """No combination beats NCCL's default; the fill-in (closest to winning) is ring/ll128/16, which NCCL may leave
    out: it is followed by the ring/simple fallback, not left alone."""
    path = write_results(tmp_path / "f.jsonl", {DEFAULT: [40, 60, 90, 150, 260], RING_LL128: [40, 60, 90, 150, 260],
                                                RING_SIMPLE: [40.2, 60.3, 90.4, 150.5, 261]})
    conf = tmp_path / "f.conf"
    out = tune(path, "-O", str(conf), "--for", "example-plugin")
    assert out.exit_code == 0, out.output
    configs, _ = reproduced_plugin_load(conf.read_text())
    assert any(c["proto"] == "ll128" for c in configs)
    for size in (0, *L40S_SIZES, 2 ** 64 - 1):
        channels, chosen = walk(configs, "allreduce", size, LL128_OFF)
        assert chosen is not None and chosen["proto"] == "simple" and channels != 1, size
    assert "slower than NCCL's default" not in out.output   # within the noise: nothing to say


def test_an_ll128_rule_without_a_measured_fallback_pair_is_refused_in_one_line(tmp_path):
    path = write_results(tmp_path / "n.jsonl", {DEFAULT: [40, 60, 90, 150, 260], RING_LL128: [25, 35, 55, 90, 160]})
    conf = tmp_path / "n.conf"
    out = tune(path, "-O", str(conf), "--for", "example-plugin")
    assert out.exit_code == 2 and not conf.exists(), out.output
    assert out.output.startswith("error: ") and len(out.output.strip().splitlines()) == 1, out.output
    assert "ring/ll128" in out.output and "LL128 off" in out.output and "ONE channel" in out.output
    # commbench's plugin leaves a left-out pair to NCCL: the same results are fine for it
    assert tune(path, "-O", str(tmp_path / "c.conf")).exit_code == 0


def test_fallback_is_never_an_ll128_pair(tmp_path):
    """An NVLS winner's fallback was the fastest ring/tree pair, ring/ll128 here: NCCL may leave that out too."""
    nvls = TuningCombo(algo="nvls", proto="simple", channels=16)
    path = write_results(tmp_path / "v.jsonl", {DEFAULT: [100] * 5, nvls: [50] * 5, RING_SIMPLE: [95] * 5,
                                                RING_LL128: [90] * 5}, gpu="NVIDIA H100 80GB HBM3")
    conf = tmp_path / "v.conf"
    out = tune(path, "-O", str(conf), "--for", "example-plugin")
    assert out.exit_code == 0, out.output
    configs, _ = reproduced_plugin_load(conf.read_text())
    denied = (("nvls", "simple"), *LL128_OFF)
    for size in (0, *L40S_SIZES, 2 ** 64 - 1):
        channels, chosen = walk(configs, "allreduce", size, denied)
        assert (chosen["algo"], chosen["proto"]) == ("ring", "simple") and channels in (0, 16), size


# --- F1: tree outside all-reduce never ran as tree ----------------------------------------------------------------

@pytest.mark.parametrize("target", ["commbench", "example-plugin"])
def test_tree_records_of_all_gather_make_no_tree_rule(tmp_path, target):
    """NCCL has no tree for all-gather: NCCL_ALGO=Tree ran ring there (2.18-2.23) or failed (2.24+). Before, such
    records wrote tree rules, which the example plugin skips (IGNORE), leaving one channel."""
    path = write_results(tmp_path / "ag.jsonl", {DEFAULT: [100, 200, 300, 400, 500], TREE_LL: [50, 100, 150, 200, 250],
                                                 RING_SIMPLE: [60, 120, 180, 240, 300]},
                         collective="all_gather")
    conf = tmp_path / "ag.conf"
    out = tune(path, "-O", str(conf), "--for", target)
    assert out.exit_code == 0, out.output
    configs, _ = reproduced_plugin_load(conf.read_text())
    assert configs and all(c["algo"] == "ring" for c in configs)
    assert "tree/ll points of all_gather: NCCL has no such pair for it" in " ".join(out.output.split())


def test_only_tree_records_of_all_gather_are_refused_for_the_example_plugin_saying_why(tmp_path):
    path = write_results(tmp_path / "ag.jsonl", {DEFAULT: [100, 200, 300, 400, 500], TREE_LL: [50, 100, 150, 200, 250]},
                         collective="all_gather")
    out = tune(path, "-O", str(tmp_path / "x.conf"), "--for", "example-plugin")
    assert out.exit_code == 2 and len(out.output.strip().splitlines()) == 1, out.output
    assert "NCCL has no such pair" in out.output and not (tmp_path / "x.conf").exists()


# --- NCCL's example plugin itself (v2.30.7-1, built from the NCCL mirror) -----------------------------------------

def test_nccl_example_plugin_runs_an_ll128_left_out_call_on_the_fallback(tmp_path, monkeypatch):
    from tests.test_nccl_tuner_probe_w import EXAMPLE_TAG, NCCL_MIRROR, find_compiler
    from tests.test_tuner_plugin import Driver, picked
    import os
    import subprocess

    compiler = find_compiler()
    if compiler is None or not os.path.isdir(NCCL_MIRROR):
        pytest.skip("no C compiler or no NCCL mirror")
    archive = subprocess.run(["git", "--git-dir", NCCL_MIRROR, "archive", EXAMPLE_TAG, "plugins/tuner/example/plugin.c",
                              "plugins/tuner/example/nccl"], capture_output=True, check=False)
    if archive.returncode != 0:
        pytest.skip(f"NCCL mirror has no {EXAMPLE_TAG} example plugin")
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive.stdout, check=True)
    source = tmp_path / "plugins" / "tuner" / "example"
    library = source / "libnccl-tuner-example.so"
    subprocess.run([*compiler, "-I", str(source / "nccl"), "-fPIC", "-shared", "-o", str(library),
                    str(source / "plugin.c")], check=True, capture_output=True)
    monkeypatch.setenv("NCCL_TUNER_CONFIG_FILE", "")
    path = write_results(tmp_path / "l40s.jsonl", {DEFAULT: [40, 60, 90, 150, 260],
                                                   RING_LL128: [25, 35, 55, 90, 160],
                                                   RING_SIMPLE: [45, 65, 95, 155, 265]})
    assert tune(path, "-O", str(tmp_path / "e.conf"), "--for", "example-plugin").exit_code == 0
    driver = Driver(str(library), str(tmp_path / "e.conf"), ranks=8, nodes=1)
    for size in (1024, 65536, 1 << 26):
        channels, table = driver.call("allreduce", size, ignored=LL128_OFF)
        assert channels != 1 and picked(table) == ("ring", "simple"), (size, channels, picked(table))
        channels, table = driver.call("allreduce", size)
        assert picked(table) == ("ring", "ll128"), size
    driver.close()


# --- F1: an exported NCCL_PROTO (NVIDIA's ^LL128 workaround) was dropped by every combination, unsaid ---------------

def test_an_exported_nccl_proto_is_dropped_for_the_baseline_but_recorded_and_said(tmp_path, monkeypatch, capsys):
    """bench --nccl-proto with NCCL_PROTO=^LL128 exported: every combination ran without it, NCCL's default too, and
    nothing said so nor could a header show it; the job still exports it, so its NCCL default is not the one measured."""
    from commbench.cli.bench import run_bench_axes
    from commbench.comm.nccl_tuning import parse_axes
    from commbench.results.records import headers, read_records
    from commbench.sweep import tuned_bench
    from tests.test_nccl_tuning_axes import ENV_LOG, _config, fake_rank

    monkeypatch.setenv(ENV_LOG, str(tmp_path / "env.log"))
    monkeypatch.setenv("NCCL_PROTO", "^LL128")
    config = _config(tmp_path)
    real = tuned_bench.run_tuned_bench
    monkeypatch.setattr(tuned_bench, "run_tuned_bench", lambda config, combos, nproc: real(
        config, combos, nproc=nproc, start_method="fork", rank_fn=fake_rank))
    run_bench_axes(config, parse_axes(None, "ll,simple", None), 1)
    err = " ".join(capsys.readouterr().err.split())
    assert "NCCL_PROTO=^LL128 was exported where the tuning launch started, and every combination ran without it" \
        in err, err
    found = headers(read_records([config.output_path]))
    assert len(found) == 3 and all(h.nccl_tuning["inherited"] == {"NCCL_PROTO": "^LL128"} for h in found)
    assert "NCCL_PROTO" not in found[0].nccl_env   # NCCL's default: still NCCL's own choice, as documented


def test_nccl_tuner_says_the_default_was_measured_without_the_exported_setting(tmp_path):
    path = write_results(tmp_path / "i.jsonl", {DEFAULT: [40, 60, 90, 150, 260], RING_SIMPLE: [25, 35, 55, 90, 160]})
    lines = (tmp_path / "i.jsonl").read_text().splitlines()
    import json

    records = [json.loads(line) for line in lines]
    for record in records:
        if record["record_type"] == "header":
            record["nccl_tuning"] = {"plan": "p", "combinations": ["NCCL default", "ring/simple/16"],
                                     "combination": "x", "inherited": {"NCCL_PROTO": "^LL128"}}
    (tmp_path / "i.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    conf = tmp_path / "i.conf"
    out = tune(path, "-O", str(conf))
    assert out.exit_code == 0, out.output
    said = "NCCL_PROTO=^LL128 was exported where the tuning launch started"
    assert said in " ".join(out.output.split()) and said in conf.read_text()


# --- F2: a config the results' own NCCL cannot load ---------------------------------------------------------------

@pytest.mark.parametrize("version, target, first, remedy", [
    ("2.21.5", "commbench", "2.24", "measure with NCCL 2.24 or later"),      # looks for ncclTunerPlugin_v2
    ("2.23.4", "commbench", "2.24", "measure with NCCL 2.24 or later"),      # _v3, _v2
    ("2.19.4", "commbench", "2.24", "measure with NCCL 2.24 or later"),      # _v1
    ("2.27.7", "example-plugin", "2.28", "write the file for commbench's plugin (leave --for out)"),  # v4 at most
    ("2.21.5", "example-plugin", "2.28", "measure with NCCL 2.28 or later"),
])
def test_a_config_its_own_nccl_cannot_load_is_refused_in_one_line(tmp_path, version, target, first, remedy):
    """commbench's plugin exports tuner v4-v6 (NCCL 2.24+ loads v4); NCCL's example plugin of 2.30 exports v5/v6
    (NCCL 2.28+). Before, such files were written with exit 0 and 'Load it: ...', and did nothing."""
    path = write_results(tmp_path / "v.jsonl", {DEFAULT: [40, 60, 90, 150, 260], RING_SIMPLE: [25, 35, 55, 90, 160]},
                         version=version)
    conf = tmp_path / "v.conf"
    out = tune(path, "-O", str(conf), "--for", target)
    assert out.exit_code == 2 and not conf.exists(), out.output
    assert out.output.startswith("error: ") and len(out.output.strip().splitlines()) == 1, out.output
    said = " ".join(out.output.split())
    assert f"measured with NCCL {version}" in said and f"loads under NCCL {first} or later only" in said, said
    assert remedy in said


@pytest.mark.parametrize("version, target", [("2.24.3", "commbench"), ("2.27.7", "commbench"),
                                             ("2.28.9", "example-plugin"), ("2.30.7+cuda13.0", "example-plugin")])
def test_a_config_its_nccl_loads_is_written(tmp_path, version, target):
    path = write_results(tmp_path / "v.jsonl", {DEFAULT: [40, 60, 90, 150, 260], RING_SIMPLE: [25, 35, 55, 90, 160]},
                         version=version)
    assert tune(path, "-O", str(tmp_path / "v.conf"), "--for", target).exit_code == 0


@pytest.mark.parametrize("target, first", [("commbench", "2.24"), ("example-plugin", "2.28")])
def test_an_unknown_nccl_version_is_said_with_the_range_the_plugin_needs(tmp_path, target, first):
    path = write_results(tmp_path / "v.jsonl", {DEFAULT: [40, 60, 90, 150, 260], RING_SIMPLE: [25, 35, 55, 90, 160]},
                         version=None)
    conf = tmp_path / "v.conf"
    out = tune(path, "-O", str(conf), "--for", target)
    assert out.exit_code == 0, out.output
    said = "NCCL version unknown (the run headers give none): "
    assert said in out.output and f"loads under NCCL {first} or later only" in " ".join(out.output.split())
    assert f"loads under NCCL {first} or later only" in conf.read_text()
