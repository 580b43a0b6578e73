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
