"""Racks a user declares (--topology hgx8/nvl72, --ranks-per-rack, --racks, --rack-ranks, a sweep's topology /
ranks_per_rack, import nccl-tests --ranks-per-rack) are checked against the hosts the ranks are on, and on GPUs
against the NVLink fabric NVML reports. A host's GPUs share one scale-up domain (an HGX node; an NVL72 tray), and an
HGX domain is one node: `--topology hgx8` over 2 hosts, or `--ranks-per-rack 2` on a cyclic launch (host a's ranks
0 and 2 in two racks), were recorded as racks and fitted as scale_up with no word."""

from __future__ import annotations

import json
import types

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.comm import nvlink_domains
from commbench.comm.topology import TopologySpec, declared_conflict, resolve_on_ranks
from commbench.errors import CommbenchError
from tests.launched import launch_cli

BENCH = ["bench", "all_reduce", "-b", "1K", "-e", "1K", "-n", "2", "-w", "1", "-T", "30"]


def _one_line(results):
    codes = {code for code, _, _ in results}
    lines = [line for _, _, out in results for line in out.strip().splitlines() if line.startswith("error:")]
    assert codes == {2}, results
    assert lines and "Traceback" not in "".join(out for _, _, out in results)
    return lines[0]


@pytest.mark.timeout(120)
def test_an_hgx_domain_over_two_hosts_is_refused(tmp_path):
    line = _one_line(launch_cli([*BENCH, "--topology", "hgx8", "-J", str(tmp_path / "x.jsonl")], ("a", "a", "b", "b")))
    assert "--topology=hgx8" in line and "2 hosts (a, b)" in line and "one node" in line, line


@pytest.mark.timeout(120)
def test_a_host_split_over_declared_racks_is_refused_and_a_block_launch_is_not(tmp_path):
    line = _one_line(launch_cli([*BENCH, "--ranks-per-rack", "2", "-J", str(tmp_path / "c.jsonl")],
                                ("a", "b", "a", "b"), launcher="slurm"))
    assert "--ranks-per-rack=2" in line and "host a" in line and "ranks 0,2" in line, line
    ok = launch_cli([*BENCH, "--ranks-per-rack", "2", "-J", str(tmp_path / "b.jsonl")], ("a", "a", "b", "b"))
    assert [code for code, _, _ in ok] == [0] * 4, ok
    header = json.loads((tmp_path / "b.jsonl").read_text().splitlines()[0])
    assert header["topology"]["racks"] == [[0, 1], [2, 3]]


@pytest.mark.timeout(120)
def test_a_sweep_files_racks_are_checked_in_its_own_words(tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text('[sweep]\nname = "s"\n[defaults]\nranks_per_rack = 2\n[[run]]\ncollective = "all_reduce"\n'
                     'sizes = ["1K"]\niters = 2\nwarmup_iters = 1\n')
    line = _one_line(launch_cli(["sweep", str(sweep), "-O", str(tmp_path / "s.jsonl")], ("a", "b", "a", "b")))
    assert "ranks_per_rack=2" in line and "--ranks-per-rack" not in line and "host a" in line, line


def test_the_rule_on_hosts():
    hgx = TopologySpec(preset="hgx8")
    assert declared_conflict(hgx, hgx.resolve(16, []), ["a"] * 8 + ["b"] * 8) is None   # a node per domain
    nvl = TopologySpec(preset="nvl72")
    trays = [f"t{r // 4:02d}" for r in range(144)]
    assert declared_conflict(nvl, nvl.resolve(144, []), trays) is None                    # 18 trays per rack
    cyclic = [f"t{r % 36:02d}" for r in range(144)]                                        # srun --distribution=cyclic
    assert "host t00" in declared_conflict(nvl, nvl.resolve(144, []), cyclic)
    one_per_host = [f"n{r:03d}" for r in range(144)]
    assert "72 hosts" in declared_conflict(nvl, nvl.resolve(144, []), one_per_host)
    rpr = TopologySpec(ranks_per_rack=8)   # a count declares no domain kind: hosts may share a rack (NVL72 trays)
    assert declared_conflict(rpr, rpr.resolve(16, []), ["a"] * 4 + ["b"] * 4 + ["c"] * 4 + ["d"] * 4) is None
    one_host = TopologySpec(ranks_per_rack=2)   # racks on one host are an emulation (commbench emulate, tests)
    assert declared_conflict(one_host, one_host.resolve(4, []), ["h"] * 4) is None
    ranks = TopologySpec(racks="0,2;1,3")   # a rank list that follows a cyclic placement is right
    assert declared_conflict(ranks, ranks.resolve(4, []), ["a", "b", "a", "b"]) is None


def test_import_ranks_per_rack_is_checked_against_the_logs_hosts(tmp_path):
    from commbench.results.importers.nccl_tests import log_topology
    from tests.nccl_tests_inputs import text_log

    with pytest.raises(CommbenchError, match=r"--ranks-per-rack=2 .*host a"):
        log_topology(["a", "b", "a", "b"], 4, 2)
    assert log_topology(["a", "a", "b", "b"], 4, 2)["racks"] == [[0, 1], [2, 3]]
    for hosts, code in ((("a", "b", "a", "b"), 2), (("a", "a", "b", "b"), 0)):
        log = tmp_path / "ar.log"
        log.write_text(text_log(hosts=hosts))
        result = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "--ranks-per-rack", "2", "-O",
                                          str(tmp_path / f"{code}.jsonl")])
        assert result.exit_code == code, result.output
        if code:
            assert "--ranks-per-rack=2" in result.output and "Traceback" not in result.output


def test_declared_racks_on_gpus_are_checked_against_the_nvlink_fabric(monkeypatch):
    """GPU ranks whose fabric NVML reads: a preset that agrees stands (and says so), one that does not is refused."""
    hosts = [f"t{r // 4:02d}" for r in range(144)]
    fabric = {f"GPU-{r}": (bytes(range(1, 17)), r % 2) for r in range(144)}   # two cliques, interleaved ranks

    def answers(keys):
        return iter([hosts, keys, [""] * 144])

    from tests.test_nvlink_domains import fake_nvml
    nvml = fake_nvml(fabric)
    keys = [nvlink_domains.fabric_key(nvml, uuid=f"GPU-{r}")[0] for r in range(144)]
    monkeypatch.setattr(nvlink_domains, "local_fabric_key", lambda index: (keys[0], ""))
    gpu = types.SimpleNamespace(device="cuda:0", world_size=144, local_rank=0, rank=0)
    stream = answers(keys)
    monkeypatch.setattr("commbench.comm.backend.gather_strings", lambda backend, value: next(stream))
    with pytest.raises(CommbenchError, match=r"--topology=nvl72 .*NVLink fabric"):
        resolve_on_ranks(TopologySpec(preset="nvl72"), gpu)
    block = [nvlink_domains.fabric_key(fake_nvml({f"GPU-{r}": (bytes(range(1, 17)), r // 72)
                                                  for r in range(144)}), uuid=f"GPU-{r}")[0] for r in range(144)]
    stream = answers(block)
    topology = resolve_on_ranks(TopologySpec(preset="nvl72"), gpu)
    assert topology.ranks_per_rack == 72 and "NVML" in topology.source
