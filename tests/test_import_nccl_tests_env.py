"""An nccl-tests text log's NCCL_* settings, as NCCL prints them under NCCL_DEBUG=INFO ("NCCL_X set by environment to
V": NCCL src/misc/param.cc, src/graph/paths.cc; "NCCL_X set to V": src/misc/socket.cc, src/transport/net_ib/init.cc),
are its run header's nccl_env, as a -J file's env: fit refuses runs of different settings from text logs too. And a
fit of runs that disagree at the same sizes says so (their median per size hid it: '0.0% held-out error')."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel.fit_records import fit_all
from commbench.results.importers.nccl_tests import parse_text
from commbench.results.records import RunHeader
from tests.nccl_tests_inputs import text_log
from tests.test_fit_cross_domain import _records

P2P_OFF = ("node-a:1000:1000 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.",
           "node-a:1000:1000 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0:1",
           "node-a:1000:1000 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
           "node-a:1000:1000 [0] NCCL INFO comm 0x55d0 rank 0 nranks 2 cudaDev 0 busId 18000 - Init COMPLETE")


def test_nccl_info_settings_become_the_run_headers_nccl_env():
    result = parse_text(text_log(extra_banner_lines=P2P_OFF), "all_reduce_perf.log")
    (header,) = [r for r in result.records if isinstance(r, RunHeader)]
    assert result.problems == []
    assert header.nccl_env == {"NCCL_P2P_DISABLE": "1", "NCCL_IB_HCA": "mlx5_0:1", "NCCL_SOCKET_IFNAME": "eth0"}
    plain = parse_text(text_log(), "all_reduce_perf.log")
    assert [r.nccl_env for r in plain.records if isinstance(r, RunHeader)] == [{}]


def test_fit_refuses_text_logs_of_different_nccl_settings(tmp_path):
    paths = []
    for name, extra in (("p2p_on", ()), ("p2p_off", P2P_OFF)):
        log = tmp_path / f"{name}.log"
        log.write_text(text_log(extra_banner_lines=extra))
        out = tmp_path / f"{name}.jsonl"
        result = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "-O", str(out)])
        assert result.exit_code == 0, result.output
        paths.append(str(out))
    result = CliRunner().invoke(app, ["fit", *paths, "-O", str(tmp_path / "f.json")])
    assert result.exit_code != 0
    assert "mix NCCL_* settings" in result.output and "NCCL_P2P_DISABLE=1" in result.output


def test_runs_that_disagree_at_the_same_sizes_are_warned():
    """Two runs of 8 ranks, one 3.3x slower at 1 GiB: fitted to their median per size with 0% held-out error and no
    word of the disagreement."""
    (apart,), _ = fit_all(_records("all_reduce", 8, 10.0, 100.0, "a") + _records("all_reduce", 8, 33.0, 30.0, "b"), {})
    assert any("repeated measurements disagree" in w and "3.33x" in w for w in apart.warnings)
    (same,), _ = fit_all(_records("all_reduce", 8, 10.0, 100.0, "a") + _records("all_reduce", 8, 10.0, 100.0, "b"), {})
    assert not any("disagree" in w for w in same.warnings)


# Another rank's NCCL lines, as an mpirun/srun job of 2 processes (pids 1000 and 1001 on node-a) can write them before
# nccl-tests' header of their own process: each process buffers its stdout apart (NCCL src/debug.cc at v2.27.7-1:388
# fwrite()s unflushed) and NCCL prints the forced pair at its tuning (src/graph/tuning.cc at v2.27.7-1:398,403)
RING_FIRST = ("node-a:1001:1001 [1] NCCL INFO NCCL version 2.28.4+cuda12.9",
              "node-a:1001:1001 [1] NCCL INFO NCCL_PROTO set by environment to Simple",
              "node-a:1001:1001 [1] NCCL INFO NCCL_ALGO set by environment to Ring")


def _headers(text: str) -> list[RunHeader]:
    result = parse_text(text, "all_reduce_perf.log")
    assert result.problems == []
    return [r for r in result.records if isinstance(r, RunHeader)]


def test_nccl_lines_before_their_process_header_are_its_run_settings():
    """A forced Ring/Simple run whose NCCL lines came before nccl-tests' version line read as NCCL's default
    (nccl_env {}): fit, compare and nccl-tuner took its times for the default curve."""
    (header,) = _headers("\n".join(RING_FIRST) + "\n" + text_log())
    assert header.nccl_env == {"NCCL_PROTO": "Simple", "NCCL_ALGO": "Ring"}
    assert header.notes == [n for n in header.notes if "two values" not in n]


def test_nccl_lines_join_the_process_they_name_only():
    """Two runs one after the other: the second's ranks (pids 2000, 2001) said Ring before its header; the first's
    (pids 1000, 1001) said nothing. Only the second is Ring."""
    second = text_log().replace("Pid   100", "Pid   200")
    lines = tuple(line.replace(":1001:1001", ":2001:2001") for line in RING_FIRST)
    first, ring = _headers(text_log() + "\n".join(lines) + "\n" + second)
    assert first.nccl_env == {} and ring.nccl_env == {"NCCL_PROTO": "Simple", "NCCL_ALGO": "Ring"}


def test_processes_that_disagree_are_noted():
    """Rank 1 said Ring before the header, rank 0 Tree in its own header: the run keeps rank 0's, and says so."""
    tree = ("node-a:1000:1000 [0] NCCL INFO NCCL_ALGO set by environment to Tree",)
    (header,) = _headers("\n".join(RING_FIRST) + "\n" + text_log(extra_banner_lines=tree))
    assert header.nccl_env["NCCL_ALGO"] == "Tree"
    assert any("NCCL_ALGO two values: Ring (node-a pid 1001) and Tree" in note for note in header.notes)
