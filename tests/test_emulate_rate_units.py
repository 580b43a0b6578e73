"""--scale-out-rate says 'tc syntax', and tc(8) (RATES) reads `bps`, `kbps`, `mbps`, `gbps`, `tbps` as BYTES per
second and `bit`, `kbit`, ... (or a bare number) as bits, with IEC prefixes (kibit, mibit, ..., KiBps, ...) too
(iproute2 tc/tc_util.c's suffix table, matched without case). commbench read `100mbps` as 100 Mbit/s: the link was 8x
slower than asked while the banner echoed '100mbps' (found from outside, probe AM F2). Now a rate means what tc makes
of it; what tc refuses (a bare prefix such as `100m`) is refused in one line, and the banner says the rate set."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.units import parse_rate_bits_per_s
from tests.emulate_stub import no_fabric


@pytest.mark.parametrize("text,bits", [
    ("1gbit", 1e9), ("800mbit", 8e8), ("100", 100), ("5bit", 5), ("1.5gbit", 1.5e9), ("10GBIT", 1e10),
    ("100mbps", 8e8), ("1gbps", 8e9), ("2MBps", 1.6e7), ("1kbps", 8e3), ("1tbps", 8e12), ("3bps", 24),
    ("1kibit", 1024), ("1Kibit", 1024), ("1mibit", 2**20), ("1gibit", 2**30), ("1tibit", 2**40),
    ("1KiBps", 8 * 1024), ("1mibps", 8 * 2**20), ("2GiBps", 16 * 2**30),
])
def test_rates_are_read_as_tc_reads_them(text, bits):
    assert parse_rate_bits_per_s(text) == bits


@pytest.mark.parametrize("text", ["100m", "1g", "100mb", "1gb", "1 gbit s", "1e9", "fast", "", "-1gbit", "0", "1%"])
def test_what_tc_refuses_is_one_line_naming_its_units(text):
    with pytest.raises(CommbenchError) as caught:
        parse_rate_bits_per_s(text, "--scale-out-rate")
    message = str(caught.value)
    assert "--scale-out-rate" in message and "\n" not in message
    if text in ("100m", "100mb"):
        assert "mbit" in message and "mbps" in message, message   # both readings offered, as tc names them


def test_the_banner_says_the_rate_set_not_only_the_text_given(monkeypatch):
    seen = no_fabric(monkeypatch)
    result = CliRunner().invoke(app, ["emulate", "--racks", "2", "--ranks-per-rack", "1", "--scale-out-rate",
                                      "100mbps", "--", "env"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert seen["spec"].scale_out_rate_bits_per_s == 8e8
    assert "0.8 Gbit/s" in result.output, result.output
