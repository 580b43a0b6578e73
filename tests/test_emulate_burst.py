"""The emulated uplink's tbf lets a burst through at loopback speed once its bucket has refilled (burst = max(32 KiB,
2 ms of line rate): 250,000 B at 1 Gbit/s), so messages up to about that size are not rate-limited: single
iterations ran 1.6-4x the configured rate and fit noted +36% to +125% above it, while no artifact said why; and
`--scale-out-rate 10bit` was taken (every message under 32 KiB unthrottled, larger ones for hours), `100000tbit` died
on tc's "illegal value for burst" (found from outside, probe AM F7, F8). Now the header records the burst
(tbf_burst_bytes), the texts naming the fabric state it, and rates outside 1 Mbit/s .. 1 Tbit/s are refused in one line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.emulate.fabric import FabricSpec, tbf_args, tbf_burst_bytes
from commbench.emulate.ranks import emulated_description
from commbench.results.emulated import fabric_text, from_text
from tests.emulate_stub import no_fabric


def test_the_header_and_its_text_state_the_tbf_burst():
    spec = FabricSpec(num_racks=2, ranks_per_rack=1, scale_out_rate_bits_per_s=1e9, prefix="cb1")
    burst = tbf_burst_bytes(1e9)
    assert tbf_args(1e9)[tbf_args(1e9).index("burst") + 1] == str(burst) == "250000"
    emulated = emulated_description(spec)
    assert emulated["tbf_burst_bytes"] == burst
    text = fabric_text(emulated)
    assert "tbf burst 250000 B" in text, text
    assert from_text(f"# commbench 0.1.0: all_reduce on gloo, ...; {text}", 2) == emulated   # reads back


def _no_fabric(monkeypatch) -> None:
    import commbench.cli.emulate as emulate_cli

    def fabric(spec):
        raise AssertionError("no fabric is made for a refused rate")

    monkeypatch.setattr(emulate_cli, "Fabric", fabric)


@pytest.mark.parametrize("rate", ["10bit", "999kbit", "100000tbit", "2tbit"])
def test_absurd_rates_are_refused_in_one_line(monkeypatch, rate):
    _no_fabric(monkeypatch)
    result = CliRunner().invoke(app, ["emulate", "--racks", "2", "--scale-out-rate", rate, "--", "env"])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"--scale-out-rate='{rate}'" in errors[0] and "1 Mbit/s" in errors[0], result.output
    assert "tc " not in errors[0]


def test_the_banner_says_what_crosses_unthrottled(monkeypatch):
    seen = no_fabric(monkeypatch)
    result = CliRunner().invoke(app, ["emulate", "--racks", "2", "--ranks-per-rack", "1", "--scale-out-rate",
                                      "1mbit", "--", "env"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "burst 32768 B" in result.output and "unthrottled" in result.output, result.output
    assert json.loads(json.dumps(emulated_description(seen["spec"])))["tbf_burst_bytes"] == 32768
