"""import nccl-tests: the world size read from a log is checked against busbw/algbw = 2(n-1)/n (all_reduce) at its
largest-bandwidth point, the printed 2-decimal bandwidths taken within their rounding. A 512-rank log whose 512
'#  Rank' lines agree (4.99 / 9.96 GB/s: the point estimate 499, the digits allow 286-1994) was warned as "world size
read as 512 (the log has no '# Rank' lines or they disagree) but busbw/algbw implies 499 ranks" (probe P2)."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.importers.nccl_tests import implied_world_sizes, parse_text, world_size_warnings

_ROW = ("      524288        131072     float     sum      -1   105.11    4.99    9.96      0   106.16    4.94    9.86"
        "      0\n")


def _log(world: int, rank_lines: bool, row: str = _ROW) -> str:
    banner = (f"# nccl-tests version 2.17.6 nccl-headers=23007 nccl-library=23007\n"
              f"# Collective test starting: all_reduce_perf\n"
              f"# nThread 1 nGpus {world if not rank_lines else 8} minBytes 524288 maxBytes 524288 step: 4(factor) "
              "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n")
    ranks = "".join(f"#  Rank {r:3d} Group  0 Pid {4000 + r // 8:6d} on node{r // 8:03d} device  {r % 8} "
                    f"[0000:18:00] NVIDIA H100 80GB HBM3\n" for r in range(world)) if rank_lines else ""
    table = ("#\n#                                                              out-of-place                       "
             "in-place          \n"
             "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
             "busbw #wrong\n"
             "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  "
             "(GB/s)       \n")
    return banner + ranks + table + row + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 9.9\n#\n"


def test_the_interval_allows_the_print_rounding():
    low, high = implied_world_sizes("all_reduce", 4.99, 9.96, 0.005, 0.005)
    assert low < 512 < high and round(low) == 285 and round(high) == 1994
    assert implied_world_sizes("broadcast", 4.99, 4.99, 0.005, 0.005) is None


def test_a_large_world_whose_rank_lines_agree_is_not_warned(tmp_path):
    result = parse_text(_log(512, rank_lines=True), "all_reduce_perf.log")
    assert result.problems == []
    assert world_size_warnings(result.records) == []
    log = tmp_path / "default_64n.log"
    log.write_text(_log(512, rank_lines=True))
    out = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "-O", str(tmp_path / "x.jsonl")])
    assert out.exit_code == 0, out.output
    assert "world size read" not in out.stderr


def test_a_world_outside_the_interval_is_warned_saying_where_it_came_from():
    # a banner of 2 GPUs and no '#  Rank' lines, while 4.99 / 9.96 GB/s need 286 ranks or more
    result = parse_text(_log(2, rank_lines=False), "all_reduce_perf.log")
    warning, = world_size_warnings(result.records)
    assert "world size read as 2 (from the banner's nThread x nGpus: the log has no '#  Rank' lines)" in warning
    assert "implies 286-1994 ranks" in warning
