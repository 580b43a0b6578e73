"""commbench emulate: bad input and missing privileges are one-line errors; on a real emulated fabric
(netns, root), hierarchical sends 1/R of flat's bytes over the rack uplinks (veth counters) and spends less time on
them (its cross-rack stage; the whole operation's timing, which host load moves: benchmarks/emulate_hierarchical.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.emulate import fabric as fabric_mod

HAS_NETNS = os.geteuid() == 0 and shutil.which("ip") is not None and shutil.which("tc") is not None
MIB = 1 << 20


def _namespaces(prefix: str) -> set[str]:
    """Network namespaces of the fabric named `prefix` (`<prefix>-r<k>`, this test's own: other runs on a shared
    host come and go, and 'cbt12-' must not see 'cbt123-r0')."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip() and line.startswith(prefix + "-")}


def test_needs_root(monkeypatch):
    monkeypatch.setattr(fabric_mod.shutil, "which", lambda name: "/usr/sbin/" + name)
    monkeypatch.setattr(fabric_mod.os, "geteuid", lambda: 1000)
    result = CliRunner().invoke(app, ["emulate", "--racks", "2", "--", "bench", "all_reduce"])
    assert result.exit_code == 2 and "needs root" in result.output


def test_needs_iproute2(monkeypatch):
    monkeypatch.setattr(fabric_mod.shutil, "which", lambda name: None)
    result = CliRunner().invoke(app, ["emulate", "--", "bench", "all_reduce"])
    assert result.exit_code == 2 and "apt-get install -y iproute2" in result.output


@pytest.mark.parametrize("args,match", [
    (["--scale-out-rate", "fast", "--", "env"], "--scale-out-rate='fast'"),
    (["--racks", "0", "--", "env"], "--racks=0"),
    ([], "no command given"),
])
def test_bad_input(args, match):
    result = CliRunner().invoke(app, ["emulate", *args])
    assert result.exit_code == 2 and match in result.output


@pytest.mark.netns
@pytest.mark.skipif(not HAS_NETNS, reason="needs root and iproute2")
def test_namespace_in_use_and_failed_setup_leave_nothing(monkeypatch):
    used, failing = f"cbu{os.getpid()}", f"cbf{os.getpid()}"   # this run's own (another run may share the host)
    subprocess.run(["ip", "netns", "add", f"{used}-r1"], check=True)
    try:
        result = CliRunner().invoke(app, ["emulate", "--netns-prefix", used, "--", "env"])
        assert result.exit_code == 2 and f"already in use: {used}-r1" in result.output
    finally:
        subprocess.run(["ip", "netns", "del", f"{used}-r1"], check=True)
    before = _namespaces(failing)
    monkeypatch.setattr(fabric_mod, "tbf_args", lambda rate: ["no-such-qdisc"])
    result = CliRunner().invoke(app, ["emulate", "--netns-prefix", failing, "--", "env"])
    assert result.exit_code == 2 and "failed" in result.output
    assert _namespaces(failing) == before


def _emulate(tmp_path, algorithm: str) -> tuple[dict, dict, dict]:
    counters, out = tmp_path / f"{algorithm}.json", tmp_path / f"{algorithm}.jsonl"
    cmd = [sys.executable, "-m", "commbench", "emulate", "--racks", "2", "--ranks-per-rack", "2",
           "--scale-out-rate", "1gbit", "--counters-out", str(counters), "--netns-prefix", f"cbt{os.getpid()}",
           "--", "bench", "grad_reduce_scatter", "--algorithm", algorithm, "-b", "64M", "-e", "64M",
           "-n", "3", "-w", "1", "--timeout", "60", "-J", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    header, record = [json.loads(line) for line in out.read_text().splitlines()]
    return header, record, json.loads(counters.read_text())


@pytest.mark.netns
@pytest.mark.skipif(not HAS_NETNS, reason="needs root and iproute2")
def test_hierarchical_beats_flat_on_an_emulated_two_rack_fabric(tmp_path):
    started = time.monotonic()
    before = _namespaces(f"cbt{os.getpid()}")
    flat_header, flat, flat_counters = _emulate(tmp_path, "flat")
    _, hier, hier_counters = _emulate(tmp_path, "hierarchical")
    assert _namespaces(f"cbt{os.getpid()}") == before  # torn down
    assert flat_header["emulated"]["emulated"] is True and flat_header["topology"]["racks"] == [[0, 1], [2, 3]]
    assert flat["num_wrong"] == 0 and hier["num_wrong"] == 0
    flat_iterations = 1 + 1 + 3 + 1  # data check + warm-up + timed loop + data check after it
    hier_iterations = flat_iterations + 3  # + the per-stage loop (each stage timed again behind a barrier)
    flat_sent = max(u["tx_bytes"] for u in flat_counters["uplinks"]) / flat_iterations
    hier_sent = max(u["tx_bytes"] for u in hier_counters["uplinks"]) / hier_iterations
    # per iteration, the veth counters agree with the accounting (TCP/IP headers and control traffic on top)
    assert 1.0 <= flat_sent / flat["metrics"]["scale_out_bytes_per_rack"] < 1.05
    assert 1.0 <= hier_sent / hier["metrics"]["scale_out_bytes_per_rack"] < 1.05
    # flat sends exactly R x hierarchical's data across; on top: rendezvous/control and, on a loaded
    # host, TCP retransmissions, which veth tx_bytes also count (seen up to 0.13% in CI; 1% allowed)
    assert hier_sent <= flat_sent / 2 * 1.01, (hier_sent, flat_sent)
    # Hierarchical's time on the emulated uplinks (its cross-rack stage: half flat's bytes over the same
    # rate-limited links) is well below flat's time: at link rate half of it; 0.75 leaves the 25% the per-byte
    # check below allows. Its whole time also counts the intra-rack stage on loopback, which is CPU-bound: on a
    # loaded host that stage, not the fabric, can make it slower overall (684 vs 598 ms seen with two test suites
    # running), so the whole-operation comparison is printed here and measured with repeats by
    # benchmarks/emulate_hierarchical.py, not asserted.
    cross_us = hier["stages_us_median"]["cross_rack_rs"]
    assert cross_us < 0.75 * flat["time_us_median"], (cross_us, flat["time_us_median"])
    print(f"\nwhole operation hierarchical/flat (informational, host-load dependent): "
          f"{hier['time_us_median'] / flat['time_us_median']:.3f}")
    predicted_flat_us = flat["metrics"]["scale_out_bytes_per_rack"] * 8 / 1e9 * 1e6
    predicted_cross_us = hier["metrics"]["scale_out_bytes_per_rack"] * 8 / 1e9 * 1e6
    print(f"\nemulated 2x2 @1gbit, 64 MiB: flat {flat['time_us_median'] / 1e3:.0f} ms (predicted "
          f"{predicted_flat_us / 1e3:.0f}), hierarchical {hier['time_us_median'] / 1e3:.0f} ms, stages "
          f"{hier['stages_us_median']}, uplink bytes hier/flat = {hier_sent / flat_sent:.5f}, "
          f"cross stage predicted {predicted_cross_us / 1e3:.0f} ms, test {time.monotonic() - started:.1f} s")
    # gloo moves one direction at a time on a rank pair's connection (sendrecv of 16 MiB each way over
    # this fabric: 267 ms vs 134 ms at link rate), so on gloo the reduce-scatter runs `duplex` (each
    # direction on its own communicator), which reaches the link rate (seen on an idle host: flat +5%,
    # cross-rack stage +8%; 754 ms vs 537 predicted on a loaded one: the link-rate ratio is printed, not
    # asserted). The bar, load-proof: both runs cross the same emulated uplinks on the same host, so the
    # time per scale-out byte of flat and of hierarchical's cross-rack stage agree within 25%.
    assert flat["params"]["rs_impl"] == hier["params"]["rs_impl"] == "duplex"
    link_ratios = {"flat": flat["time_us_median"] / predicted_flat_us,
                   "cross_rack_rs": hier["stages_us_median"]["cross_rack_rs"] / predicted_cross_us}
    print(f"measured/predicted at link rate (informational): {link_ratios}")
    per_byte_ratio = link_ratios["flat"] / link_ratios["cross_rack_rs"]
    assert abs(per_byte_ratio - 1) <= 0.25, f"flat vs cross-rack stage, time per scale-out byte: {per_byte_ratio:.3f}"


def test_nproc_other_than_the_fabric_is_one_line_before_the_fabric(monkeypatch):
    """`emulate --racks 2 --ranks-per-rack 1 -- bench ... --nproc 4` built the fabric, then every rank printed
    'error: --nproc=4 conflicts with the torchrun launch of 2 ranks' (one line per rank, naming a torchrun the
    user never ran) and the uplink counters followed; now one line, before any namespace is made."""
    import commbench.cli.emulate as emulate_cli

    class Reached(Exception):
        pass

    def fabric(spec):
        raise Reached()

    monkeypatch.setattr(emulate_cli, "Fabric", fabric)
    for nproc in (["--nproc", "4"], ["--nproc=4"]):
        result = CliRunner().invoke(app, ["emulate", "--racks", "2", "--ranks-per-rack", "1", "--",
                                          "bench", "all_reduce", *nproc])
        assert result.exit_code == 2, result.output
        errors = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "--nproc=4" in errors[0] and "2 ranks" in errors[0], result.output
        assert "--racks 2 x --ranks-per-rack 1" in errors[0] and "torchrun" not in errors[0]
    result = CliRunner().invoke(app, ["emulate", "--racks", "2", "--ranks-per-rack", "1", "--",
                                      "bench", "all_reduce", "--nproc", "2"])
    assert isinstance(result.exception, Reached)   # the fabric's own count: let through


def test_ranks_stderr_lines_print_once_across_ranks():
    """Every emulated rank checks its own arguments: `emulate -- bench all_reduce -b foo` on 2 racks x 2 printed
    "error: --min-bytes='foo' is invalid: ..." four times. Now a line many ranks print comes once; a line of one
    rank alone (the rank that failed first), and a line one rank prints twice, still come."""
    import io

    from commbench.emulate.ranks import OnceAcrossRanks

    out = io.StringIO()
    once = OnceAcrossRanks(out)
    error = b"error: --min-bytes='foo' is invalid\n"
    for rank_lines in ([error, b"note: a\n", b"note: a\n"], [error, b"note: a\n"], [error, b"rank 2 failed: boom\n"]):
        once.forward(io.BytesIO(b"".join(rank_lines)))
    assert out.getvalue().splitlines() == ["error: --min-bytes='foo' is invalid", "note: a", "note: a",
                                           "rank 2 failed: boom"]


def test_a_ranks_error_line_looks_like_this_processes():
    """A rank's stderr is a pipe, so under `commbench emulate -- bench all_reduce -b 64K -e 32K` on a terminal its
    "error: --min-bytes=65536 is invalid: ..." came without the bold red 'error:' the same command prints alone.
    The parent now prints such lines (and warning:/note:) as base.fail does; other lines pass as they are."""
    import io

    from rich.console import Console

    from commbench.cli.base import ERROR_LINE
    from commbench.cli.emulate import rank_line_printer
    from commbench.emulate.ranks import OnceAcrossRanks
    from commbench.results.render import styled

    def terminal() -> Console:
        return Console(file=io.StringIO(), force_terminal=True, color_system="standard", markup=False)

    message = "--min-bytes=65536 is invalid: must be <= --max-bytes (32768)"
    parent = terminal()
    parent.print(styled(ERROR_LINE, message), highlight=False, soft_wrap=True)   # as base.fail prints it
    ranks, raw = terminal(), io.StringIO()
    once = OnceAcrossRanks(raw, restyle=rank_line_printer(ranks))
    for _ in range(2):   # two ranks, one line
        once.forward(io.BytesIO(f"error: {message}\nTraceback-free other line\n".encode()))
    assert ranks.file.getvalue() == parent.file.getvalue() and "\x1b[1;31merror:" in parent.file.getvalue()
    assert raw.getvalue() == "Traceback-free other line\n"
