"""import nccl-tests: nccl-tests prints at most MAX_LINE = 2048 characters of '#  Rank' lines per process (src/util.cu
writeDeviceReport: `if (len >= MAX_LINE) strcpy(line+MAX_LINE-5, "...\\n")`; before v2.17 snprintf stops at the cap
with no marker), about 21 lines of a single-process `-t 4 -g 8` run. The importer took the lines left (21) as the
world size of a 32-rank run: records, busbw and the fitted profile said 21 ranks. The log states the count otherwise
(nThread x nGpus x processes): that is used, and a list the cap cannot explain, disagreeing with the banner, is
refused in one line."""

from __future__ import annotations

import pytest

from commbench.errors import CommbenchError
from commbench.results.importers.nccl_tests import parse_text, world_size_warnings
from commbench.results.records import Measurement, RunHeader

MAX_LINE = 2048
DEVICE = "NVIDIA A100-SXM4-80GB"
HEADER = ["#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   "
          "busbw  #wrong",
          "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  "
          "(GB/s)"]
FOOTER = ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 100.0 ", "#"]


def _block(proc: int, per_proc: int, host: str, old: bool = False) -> str:
    """One process's device block as nccl-tests prints it, cut at MAX_LINE (the v2.17+ marker, or none before)."""
    text = ""
    for i in range(per_proc):
        rank = proc * per_proc + i
        text += (f"#   Rank {rank:2d} Pid {4242 + proc:6d} on {host:>10s} device {i:2d} [0x{7 + i:02x}] {DEVICE}\n" if old
                 else f"#  Rank {rank:2d} Group  0 Pid {4242 + proc:6d} on {host:>10s} device {i:2d} "
                      f"[0000:{7 + i:02x}:00] {DEVICE}\n")
    if len(text) >= MAX_LINE:
        text = text[:MAX_LINE - 1] if old else text[:MAX_LINE - 5] + "...\n"
    return text


def _row(collective: str, size: int, ranks: int) -> str:
    time_us = 20 + size / 300e3
    algbw = size / time_us / 1e3
    busbw = algbw * (2 * (ranks - 1) / ranks if collective == "all_reduce" else (ranks - 1) / ranks)
    count = size // 4 // (ranks if collective == "all_gather" else 1)
    cell = f"  {time_us:7.2f}  {algbw:6.2f}  {busbw:6.2f}       0"
    return f"{size:12d}  {count:12d}     float     sum      -1{cell}{cell}"


def _log(collective: str, threads: int, gpus: int, hosts: list[str], old: bool = False, blocks: str | None = None
         ) -> str:
    per_proc, ranks = threads * gpus, threads * gpus * len(hosts)
    if blocks is None:
        blocks = "".join(_block(p, per_proc, host, old) for p, host in enumerate(hosts))
    banner = [f"# Collective test starting: {collective}_perf",
              f"# nThread {threads} nGpus {gpus} minBytes {1 << 20} maxBytes {1 << 28} step: 16(factor) warmup iters: 5 "
              "iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    sizes = [1 << 20, 1 << 24, 1 << 28]
    # printf("%s") of each block, then "#\n": a block cut without its newline runs into the next line
    return "\n".join(banner) + "\n" + blocks + "\n".join(["#", *HEADER, *[_row(collective, s, ranks) for s in sizes],
                                                         *FOOTER]) + "\n"


def _headers(result) -> list[RunHeader]:
    return [r for r in result.records if isinstance(r, RunHeader)]


@pytest.mark.parametrize("old", [False, True], ids=["marker", "no-marker-before-2.17"])
def test_a_device_list_cut_at_the_cap_does_not_set_the_world_size(old):
    log = _log("all_reduce", 4, 8, ["dgx-a100-node-017"], old=old)
    assert log.count("Rank ") < 32   # the cap left 20-odd of the 32 lines
    result = parse_text(log, "all_reduce_perf.log")
    header, = _headers(result)
    points = [r for r in result.records if isinstance(r, Measurement)]
    assert result.problems == [] and header.world_size == 32 and len(header.hostnames) == len(header.devices) == 32
    assert set(header.hostnames) == {"dgx-a100-node-017"} and set(header.devices) == {DEVICE}
    assert {(p.world_size, p.group_size) for p in points} == {(32, 32)}
    big = max(points, key=lambda p: p.size_bytes)   # busbw at 32 ranks, as printed
    assert big.busbw_gbps == pytest.approx(big.metrics["nccl_tests_printed_busbw_gbps"], abs=0.01)
    assert any("2048-character" in note and "32" in note for note in header.notes), header.notes
    assert world_size_warnings(result.records) == []


def test_cut_blocks_of_several_processes_give_each_unlisted_rank_its_process_host():
    """Two MPI processes of -t 4 -g 8 on two hosts, each block cut: 64 ranks, ranks 32-63 on the second host (a
    per-rank count: all_gather's rows were refused as not 'count x 4 B x 42 ranks')."""
    result = parse_text(_log("all_gather", 4, 8, ["node-a", "node-b"]), "all_gather_perf.log")
    header, = _headers(result)
    assert result.problems == [] and header.world_size == 64
    assert header.hostnames == ["node-a"] * 32 + ["node-b"] * 32
    assert [len(rack) for rack in header.topology["racks"]] == [32, 32]
    assert len([r for r in result.records if isinstance(r, Measurement)]) == 6


def test_a_short_device_list_that_no_cap_explains_is_refused_in_one_line():
    """5 '#  Rank' lines beside 'nThread 1 nGpus 8' (one process), far below the 2048-character cap and no '...':
    the two sources disagree and nothing in the log says which is right."""
    blocks = "".join(_block(0, 8, "node-a").splitlines(keepends=True)[:5])
    with pytest.raises(CommbenchError) as refused:
        parse_text(_log("all_reduce", 1, 8, ["node-a"], blocks=blocks), "all_reduce_perf.log")
    message = str(refused.value)
    assert "\n" not in message and "5" in message and "nThread 1 x nGpus 8" in message and "8 ranks" in message
