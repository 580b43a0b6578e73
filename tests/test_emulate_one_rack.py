"""`commbench emulate --racks 1`: one rack has no uplink (no veth, no tbf: fabric.py makes none), yet the header
recorded the --scale-out-rate (its 1gbit default, or the 5mbit given) and every artifact repeated it: 'EMULATED
fabric: 1 racks joined at 0.005 Gbit/s' over a run that measured 0.27 GB/s (found from outside, probe AM F6). Now a
--scale-out-rate with one rack is refused in one line, and one rack records and says no scale-out link."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.emulate.fabric import FabricSpec
from commbench.emulate.ranks import rank_env
from commbench.results.emulated import fabric_text, from_text
from tests.emulate_stub import no_fabric


def test_a_rate_for_one_rack_is_refused_in_one_line(monkeypatch):
    seen = no_fabric(monkeypatch)
    result = CliRunner().invoke(app, ["emulate", "--racks", "1", "--ranks-per-rack", "2", "--scale-out-rate", "5mbit",
                                      "--", "env"])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "--scale-out-rate" in errors[0] and "--racks" in errors[0], result.output
    assert "spec" not in seen


def test_one_rack_records_and_says_no_scale_out_link(monkeypatch):
    seen = no_fabric(monkeypatch)
    result = CliRunner().invoke(app, ["emulate", "--racks", "1", "--ranks-per-rack", "2", "--", "env"],
                                env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "Gbit/s" not in result.output and "tbf" not in result.output and "no scale-out link" in result.output
    emulated = json.loads(rank_env(seen["spec"], 0)["COMMBENCH_EMULATED"])
    assert emulated["num_racks"] == 1 and emulated["scale_out_rate_bits_per_s"] is None
    assert "tbf" not in emulated["scale_out"]
    text = fabric_text(emulated)
    assert text == "EMULATED fabric: 1 rack x 2 ranks, no scale-out link" and "Gbit/s" not in text
    assert from_text(f"# commbench 0.1.0: ...; {text}", 2) == emulated   # the intro line reads back


def test_two_racks_keep_the_default_rate(monkeypatch):
    seen = no_fabric(monkeypatch)
    result = CliRunner().invoke(app, ["emulate", "--racks", "2", "--ranks-per-rack", "1", "--", "env"])
    assert result.exit_code == 0, result.output
    assert seen["spec"].scale_out_rate_bits_per_s == 1e9
    assert FabricSpec(num_racks=1, ranks_per_rack=1, scale_out_rate_bits_per_s=None, prefix="cb1").num_racks == 1
