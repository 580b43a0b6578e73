"""Probe O's findings on `commbench nccl-tuner` (2, 6, 7, 8): the bar is that a tuner config never makes NCCL slower
than no config. min/max/p99 are compared over as many iterations on every side; GB200 runs whose NVLink domains
are unknown make no rule keyed on hosts; the docs say which NCCL example plugin to build; the report's rule label
is the one the config holds."""

from __future__ import annotations

import random

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.comm.nccl_tuning import TuningCombo
from commbench.errors import CommbenchError
from commbench.results.records import JsonlWriter, Measurement, RunHeader

SIZES = [2 ** k for k in range(16, 23)]


def write_runs(path, seed: int, runs: list[tuple[TuningCombo, int, float]], *, devices="NVIDIA H100 80GB HBM3",
               hosts=("n1",) * 8, topology: dict | None = None, sort_samples=False, keep_samples=True) -> str:
    """One 8-rank run per (combination, -n, true time in us): all_reduce at SIZES, n samples of N(time, 5%), in
    draw order as a run records them (probe O's tm.py kept them sorted: nccl-tuner now reads sorted samples as a
    drift, lag-1 correlation ~1, no independent samples and so no rule; results.nccl_tuner_noise)."""
    rng = random.Random(seed)
    world = len(hosts)
    with JsonlWriter(str(path)) as writer:
        for i, (combo, n, true_us) in enumerate(runs):
            writer.write(RunHeader(run_id=f"r{i}", started_at=f"2026-12-05T10:0{i}:00+00:00", argv=[],
                                   commbench_version="0", python_version="3", torch_version=None,
                                   nccl_version="2.28.9", cuda_version=None, cupy_version=None, backend="nccl",
                                   world_size=world, hostnames=list(hosts), devices=[devices] * world,
                                   nccl_env=combo.env(), launcher="local", topology=topology))
            for size in SIZES:
                s = [rng.gauss(true_us, 0.05 * true_us) for _ in range(n)]
                o = sorted(s)
                kept = (o if sort_samples else s) if keep_samples else []
                writer.write(Measurement(run_id=f"r{i}", collective="all_reduce", backend="nccl", size_bytes=size,
                                         count=size // 4, dtype="float32", op="sum", in_place=True, world_size=world,
                                         group_size=world, iters=n, warmup_iters=5, time_us_median=o[n // 2],
                                         time_us_mean=sum(s) / n, time_us_min=o[0], time_us_max=o[-1],
                                         time_us_p99=None, status="ok", num_wrong=0, params=combo.params(),
                                         iter_times_us=kept))
    return str(path)


RING = TuningCombo(algo="ring", proto="simple", channels=16)
TREE = TuningCombo(algo="tree", proto="simple", channels=16)


def rules_of(path, statistic):
    from commbench.workflows.nccl_tuner import from_results

    return from_results([path], statistic=statistic, min_gain=0.0)


# --- finding 2: --statistic min over unequal -n --------------------------------------------------------------

def test_min_of_500_iterations_is_not_a_win_over_the_min_of_20_of_one_distribution(tmp_path):
    """NCCL's default with -n 20, two combinations with -n 500, one distribution N(100 us, 5%): the fastest of 500
    is ~1.06x below the fastest of 20 by chance alone. Before, 4 of these 10 seeds wrote a rule; now each record's
    min is over 20 of its iterations and none does, and a note says so."""
    with_rules, notes = [], []
    for seed in range(10):
        path = write_runs(tmp_path / f"s{seed}.jsonl", seed, [(TuningCombo(), 20, 100.0), (RING, 500, 100.0),
                                                               (TREE, 500, 100.0)])
        result = rules_of(path, "min")
        if result.rules:
            with_rules.append(seed)
        notes.append(any("20 iteration(s) drawn at random" in note and "-n 20, 500" in note for note in result.notes))
    assert with_rules == []
    assert all(notes)


def test_a_real_win_measured_with_more_iterations_is_still_a_rule(tmp_path):
    path = write_runs(tmp_path / "win.jsonl", 3, [(TuningCombo(), 20, 100.0), (RING, 500, 80.0), (TREE, 500, 100.0)])
    result = rules_of(path, "min")
    assert result.rules and all(r.algo == "ring" for r in result.rules)


def test_the_draw_is_deterministic_and_leaves_median_alone(tmp_path):
    from commbench.results.nccl_tuner import points_from_records
    from commbench.results.records import read_records

    path = write_runs(tmp_path / "d.jsonl", 1, [(TuningCombo(), 20, 100.0), (RING, 500, 100.0)], sort_samples=False)
    records = read_records([path])
    once, twice = points_from_records(records, "min")[0], points_from_records(records, "min")[0]
    assert [p.time_us for p in once] == [p.time_us for p in twice]
    ring_500 = {r.size_bytes: r for r in records if isinstance(r, Measurement) and r.iters == 500}
    ring_points = [p for p in once if p.combo == RING]
    assert all(p.time_us >= ring_500[p.size_bytes].time_us_min for p in ring_points)
    assert any(p.time_us > ring_500[p.size_bytes].time_us_min for p in ring_points)   # not the min of all 500
    medians = points_from_records(records, "median")
    assert not any("drawn at random" in note for note in medians[1])
    assert {(p.size_bytes, p.time_us) for p in medians[0] if p.combo == RING} == \
        {(s, r.time_us_median) for s, r in ring_500.items()}


def test_more_iterations_without_samples_are_refused_in_one_line(tmp_path):
    path = write_runs(tmp_path / "ns.jsonl", 2, [(TuningCombo(), 20, 100.0), (RING, 500, 100.0)], keep_samples=False)
    with pytest.raises(CommbenchError) as caught:
        rules_of(path, "min")
    text = str(caught.value)
    assert "\n" not in text and "-n 20, 500" in text and "--statistic min" in text and "median" in text
    out = CliRunner().invoke(app, ["nccl-tuner", path, "-O", str(tmp_path / "c.conf"), "--statistic", "min"])
    assert out.exit_code == 2 and out.output.startswith("error: ") and len(out.output.splitlines()) == 1, out.output
    assert rules_of(path, "median") is not None   # the median needs no cut: its n sets only its noise


# --- finding 6: GB200 without a known topology ---------------------------------------------------------------

GB200_HOSTS = ("n1",) * 4 + ("n2",) * 4


@pytest.mark.parametrize("topology", [None, {}, {"racks": [[0, 1, 2, 3], [4, 5, 6, 7]], "source": "?"},
                                      {"racks": [list(range(8))], "source": "host names, known at launch: planned "
                                                                          "as one rack"}])
def test_gb200_runs_whose_domains_are_unknown_make_no_rule_keyed_on_hosts(tmp_path, topology):
    """Probe O's gb.py: 8 GB200 ranks on 2 trays, the combinations 2x faster, the header without a topology. Before,
    `allreduce,...,2,8,...` rules were written (nNodes = 2 hosts), which NCCL never matches on the one NVL72 rack
    measured (nNodes 1) but does on a 2-rack communicator. Now the points are left out, saying why in one line."""
    runs = [(TuningCombo(), 20, 100.0), (RING, 20, 50.0), (TREE, 20, 50.0)]
    path = write_runs(tmp_path / "gb.jsonl", 0, runs, devices="NVIDIA GB200", hosts=GB200_HOSTS, topology=topology)
    conf = tmp_path / "gb.conf"
    out = CliRunner().invoke(app, ["nccl-tuner", path, "-O", str(conf)])
    assert out.exit_code == 2 and out.output.startswith("error: ") and len(out.output.splitlines()) == 1, out.output
    assert "NVLink domains were not detected or described" in out.output and "--ranks-per-rack" in out.output
    assert not conf.exists()


def test_gb200_runs_with_described_or_detected_domains_are_keyed_as_nccl_counts_nodes(tmp_path):
    for case, (source, nodes) in enumerate((("--ranks-per-rack", 1), ("preset nvl72, one partial domain", 1),
                          ("NVML GPU fabric info (clusterUuid+cliqueId): 1 NVLink domain(s) over 2 host(s)", 1))):
        topology = {"racks": [list(range(8))], "source": source}
        # a file per case: JsonlWriter appends, and one file held every case's runs r0, r1 under different headers
        path = write_runs(tmp_path / f"gbk{case}.jsonl", 0, [(TuningCombo(), 20, 100.0), (RING, 20, 50.0)],
                          devices="NVIDIA GB200", hosts=GB200_HOSTS, topology=topology)
        result = rules_of(path, "median")
        assert result.rules and {r.nodes for r in result.rules} == {nodes}, (source, result.rules)


def test_h100_and_b200_runs_without_a_topology_still_count_hosts(tmp_path):
    """An 8-GPU baseboard's NVLink domain is one host: the host count is NCCL's nNodes (B200 is no GB200)."""
    for case, device in enumerate(("NVIDIA H100 80GB HBM3", "NVIDIA B200")):
        # a file per case: JsonlWriter appends, and one file held both cases' runs r0, r1 under different headers
        path = write_runs(tmp_path / f"h{case}.jsonl", 0, [(TuningCombo(), 20, 100.0), (RING, 20, 50.0)],
                          devices=device, hosts=GB200_HOSTS, topology=None)
        result = rules_of(path, "median")
        assert result.rules and {r.nodes for r in result.rules} == {2}


# --- finding 8: the report's rule column is the config's line --------------------------------------------------

def test_the_reports_rule_column_names_what_the_config_writes(tmp_path):
    """Probe O: ring/ll/16 wins at 1 KiB on 8 ranks; the config says `...,ring,ll,0,...` there (NCCL may have lowered
    the 16 channels measured: results.nccl_channels) but the report's rule column said ring/ll/16. Now every size's
    rule column is the algorithm/protocol/channels of the config line covering it; where 16 stands, it says 16."""
    ring_ll = TuningCombo(algo="ring", proto="ll", channels=16)
    path = tmp_path / "t.jsonl"
    write_runs(path, 5, [(TuningCombo(), 50, 100.0), (ring_ll, 50, 50.0)])
    conf = tmp_path / "t.conf"
    out = CliRunner().invoke(app, ["nccl-tuner", str(path), "-O", str(conf)])
    assert out.exit_code == 0, out.output
    lines = [line.split(",") for line in conf.read_text().splitlines() if line.startswith("allreduce,")]
    in_config = {}
    for size in SIZES:
        (line,) = [f for f in lines if int(f[1]) <= size <= int(f[2])]
        in_config[size] = f"{line[3]}/{line[4]}/{line[5]}" + (" (NCCL's count)" if line[5] == "0" else "")
    assert "0" in {label.split("/")[2][0] for label in in_config.values()}      # the lowered sizes say 0 ...
    assert any(label == "ring/ll/16" for label in in_config.values())          # ... the large ones 16
    report = CliRunner().invoke(app, ["report", str(path), "--out", str(tmp_path / "rep")])
    assert report.exit_code == 0, report.output
    text = (tmp_path / "rep" / "README.md").read_text()
    from commbench.units import format_size

    for size, label in in_config.items():
        (row,) = [line for line in text.splitlines() if line.startswith(f"| {format_size(size)} |")]
        assert row.rstrip(" |").split(" | ")[-1] == label, (row, label)


# --- finding 7: which NCCL example plugin to build ----------------------------------------------------------

NCCL_MIRROR = "/work/.mirror/NVIDIA+nccl/repo"


def _nccl_file(tag: str, path: str) -> str | None:
    import subprocess

    done = subprocess.run(["git", "--git-dir", NCCL_MIRROR, "show", f"{tag}:{path}"], capture_output=True, text=True,
                          check=False)
    return done.stdout if done.returncode == 0 else None


def test_example_plugin_files_and_docs_say_to_build_it_from_nccl_2_30(tmp_path):
    """NCCL's config-file example plugin of v2.27.5-1..v2.29.7-1 crashes on the first matching rule; a file written
    --for example-plugin, the command's output and docs/nccl-tuner.md name v2.30.3-1 (commit 14bf4df7)."""
    from pathlib import Path

    ring8 = TuningCombo(algo="ring", proto="simple", channels=8)
    path = write_runs(tmp_path / "e.jsonl", 0, [(TuningCombo(), 20, 100.0), (ring8, 20, 50.0)])
    conf = tmp_path / "e.conf"
    out = CliRunner().invoke(app, ["nccl-tuner", path, "-O", str(conf), "--for", "example-plugin"])
    assert out.exit_code == 0, out.output
    header = [line for line in conf.read_text().splitlines() if line.startswith("#")]
    assert any("from NCCL v2.30.3-1 or later (commit 14bf4df7)" in line and "v2.29.7-1 crashes" in line
               for line in header), header
    assert all(len(line.encode()) < 255 for line in header)   # the plugin's fgets reads 255 bytes a line
    assert "v2.30.3-1 or later" in " ".join(out.output.split())
    docs = (Path(__file__).resolve().parents[1] / "docs" / "nccl-tuner.md").read_text()
    assert "git clone -b v2.30.7-1 https://github.com/NVIDIA/nccl" in docs and "14bf4df7" in docs
    refused = CliRunner().invoke(app, ["nccl-tuner", "--build-plugin", str(tmp_path / "p"), "--for", "example-plugin"])
    assert refused.exit_code == 2 and "v2.30.3-1 or later" in refused.output


def test_the_cited_nccl_sources_say_what_the_docs_say():
    """Read from the NCCL mirror where there is one: the example's cost-table indexing before and after 14bf4df7."""
    bad = _nccl_file("v2.29.7-1", "plugins/tuner/example/plugin.c")
    if bad is None:
        pytest.skip("no NCCL mirror with tags here")
    for tag, path in (("v2.27.5-1", "ext-tuner/example/plugin.c"), ("v2.28.3-1", "ext-tuner/example/plugin.c"),
                      ("v2.29.7-1", "plugins/tuner/example/plugin.c")):
        text = _nccl_file(tag, path)
        assert "collCostTable[config->algorithm][config->protocol] = 0.0" in text, tag
        assert "float (*)[NCCL_NUM_PROTOCOLS]" not in text, tag
    fixed = _nccl_file("v2.30.3-1", "plugins/tuner/example/plugin.c")
    assert "(float (*)[NCCL_NUM_PROTOCOLS])collCostTable" in fixed and "ncclTunerPlugin_v5" in fixed
    assert "(float **)collCostTable" in _nccl_file("v2.29.7-1", "src/enqueue.cc")   # NCCL passes a flat table
