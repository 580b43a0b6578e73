"""An nccl-tests log over several hosts: each host is a scale-up domain (as a launch without NVLink fabric information
groups its ranks), so its curves are the scale-out network's, not one NVLink domain of all the ranks (found from
outside: a 16-rank log over two 8-GPU H100 hosts was fitted as 'n=16 world (1 domain)', predicted at 1 GiB 8x faster
than the log itself measured, and its IB curve replaced the NVLink one for 8 ranks)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel.fit_records import host_racks, num_domains_of
from commbench.errors import CommbenchError
from commbench.results.importers.nccl_tests import HOST_DOMAINS, log_topology, parse_text
from commbench.results.records import Measurement, RunHeader, read_records

SIZES = (1 << 20, 1 << 24, 1 << 28, 1 << 30)


def two_host_log(device: str = "NVIDIA H100 80GB HBM3", hosts=("nodeA", "nodeB"), per_host: int = 8) -> str:
    """An all_reduce_perf log of len(hosts) x per_host ranks at 45 GB/s busbw and 40 us latency (the IB rate)."""
    world = len(hosts) * per_host
    lines = ["# Collective test starting: all_reduce_perf",
             "# nccl-tests version 2.17.4 nccl-headers=22703 nccl-library=22703",
             "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1073741824 step: 16(factor) warmup iters: 5 iters: 20 "
             "agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    for rank in range(world):
        lines.append(f"#  Rank {rank:2d} Group  0 Pid  {1000 + rank} on {hosts[rank // per_host]:>9} device  "
                     f"{rank % per_host} [0000:18:00] {device}")
    lines += ["#", "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
              "algbw   busbw #wrong", "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
              "            (us)  (GB/s)  (GB/s)"]
    factor = 2 * (world - 1) / world
    for size in SIZES:
        time_us = 40 + size * factor / 45e9 * 1e6
        algbw = size / time_us / 1e3
        cells = f"{time_us:8.2f} {algbw:7.2f} {algbw * factor:7.2f}      0"
        lines.append(f"{size:12d} {size // 4:13d}     float     sum      -1 {cells} {cells}")
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 40.0", "#", ""]
    return "\n".join(lines)


def test_a_log_over_two_hosts_records_a_domain_per_host_and_one_host_none():
    header = next(r for r in parse_text(two_host_log(), "ar16.log").records if isinstance(r, RunHeader))
    assert header.topology["racks"] == [list(range(8)), list(range(8, 16))]
    assert header.topology["source"] == HOST_DOMAINS and header.topology["ranks_per_rack"] == 8
    one = next(r for r in parse_text(two_host_log(hosts=("nodeA",), per_host=8), "ar8.log").records
               if isinstance(r, RunHeader))
    assert one.topology is None
    assert log_topology(["a", "a", "b"], 3, None)["racks"] == [[0, 1], [2]]   # uneven hosts: their racks
    assert log_topology(["a", "b"], 4, None) is None   # not a host per rank: nothing said
    assert log_topology(["a"] * 4 + ["b"] * 4, 8, 8)["num_racks"] == 1   # --ranks-per-rack wins over the hosts
    with pytest.raises(CommbenchError, match=r"--ranks-per-rack=3 is invalid for a log of 8 ranks"):
        log_topology(["a"] * 8, 8, 3)


def _measurement(world: int, group: int, layout: str = "world") -> Measurement:
    return Measurement(run_id="r", collective="all_reduce", backend="nccl", size_bytes=1 << 20, count=1 << 18,
                       dtype="float32", op="sum", in_place=True, world_size=world, group_size=group,
                       group_layout=layout, num_groups=world // group, iters=20, warmup_iters=5,
                       loop_time_us={"avg": 100.0}, algbw_gbps=1.0, busbw_gbps=1.0, num_wrong=0, params={},
                       metrics={}, notes=[])


def test_domains_come_from_racks_or_hosts_where_no_rack_size_is_recorded():
    header = next(r for r in parse_text(two_host_log(hosts=("a", "b", "c"), per_host=4), "x.log").records
                  if isinstance(r, RunHeader))
    assert num_domains_of(_measurement(12, 12), header) == 3
    assert num_domains_of(_measurement(12, 4, "contiguous"), header) == 1
    # a file imported before the import recorded domains (no topology): its hosts say the same
    old = RunHeader(**{**header.__dict__, "topology": None})
    assert host_racks(old) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert num_domains_of(_measurement(12, 12), old) == 3
    uneven = RunHeader(**{**header.__dict__, "topology": {"racks": [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11]]}})
    assert num_domains_of(_measurement(12, 12), uneven) == 2
    assert host_racks(RunHeader(**{**header.__dict__, "topology": None, "hostnames": ["a"] * 12})) == []


def test_fit_of_a_two_host_log_is_a_scale_out_curve_and_predicts_its_own_points(tmp_path):
    log = tmp_path / "ar16.log"
    log.write_text(two_host_log())
    runner = CliRunner()
    out = tmp_path / "ar16.jsonl"
    assert runner.invoke(app, ["import", "nccl-tests", str(log), "-O", str(out)]).exit_code == 0
    fitted = runner.invoke(app, ["fit", str(out), "--system", "h100-hgx", "--racks", "2", "--json",
                                 "-O", str(tmp_path / "fab.json")])
    assert fitted.exit_code == 0, fitted.output
    curve = json.loads(fitted.stdout)["curves"][0]
    assert (curve["num_domains"], curve["tier"]) == (2, "scale_out")
    predicted = runner.invoke(app, ["predict", "--fabric", str(tmp_path / "fab.json"), "-c", "all_reduce", "-g", "16",
                                    "-b", "1G", "-e", "1G", "--json"])
    assert predicted.exit_code == 0, predicted.output
    measured = 40 + (1 << 30) * 2 * 15 / 16 / 45e9 * 1e6
    assert json.loads(predicted.stdout)["rows"][0]["time_us"] == pytest.approx(measured, rel=0.02)
    inside = runner.invoke(app, ["predict", "--fabric", str(tmp_path / "fab.json"), "-c", "all_reduce", "-g", "8",
                                 "-b", "1G", "-e", "1G", "--json"])
    assert json.loads(inside.stdout)["rows"][0]["time_us"] < measured / 4   # NVLink inside a host, not the IB curve
    same = tmp_path / "one.jsonl"   # the same log said to be one NVLink domain: one curve of one domain
    assert runner.invoke(app, ["import", "nccl-tests", str(log), "-O", str(same), "--ranks-per-rack", "16"]
                         ).exit_code == 0
    assert next(r for r in read_records([same]) if isinstance(r, RunHeader)).topology["num_racks"] == 1


def test_gb200_hosts_taken_as_domains_are_warned_with_the_option_that_says_otherwise(tmp_path):
    log = tmp_path / "gb.log"
    log.write_text(two_host_log(device="NVIDIA GB200", per_host=4))
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "-O", str(tmp_path / "gb.jsonl")])
    assert result.exit_code == 0, result.output
    assert "2 hosts of NVIDIA GB200 GPUs, each taken as a scale-up domain" in result.stderr
    assert "--ranks-per-rack" in result.stderr
    quiet = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "-O", str(tmp_path / "gb2.jsonl"),
                                     "--ranks-per-rack", "8"])
    assert quiet.exit_code == 0 and "each taken as a scale-up domain" not in quiet.stderr
    h100 = tmp_path / "h.log"
    h100.write_text(two_host_log())
    plain = CliRunner().invoke(app, ["import", "nccl-tests", str(h100), "-O", str(tmp_path / "h.jsonl")])
    assert plain.exit_code == 0 and "each taken as a scale-up domain" not in plain.stderr
