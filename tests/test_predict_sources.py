"""`commbench predict --system PRESET` printed a curve with 'predicted by the cost model, not measured' and no
word of where the preset's figures come from, while `commbench systems` names them for the same curves (the
preset's link rates and their GPU datasheet, hardware.toml's [[measured]] efficiencies). Now predict cites them."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.cli.systems import preset_rows


def test_preset_prediction_cites_the_systems_sources():
    result = CliRunner().invoke(app, ["predict", "-c", "all_reduce", "-g", "8", "--system", "h100-hgx", "-b", "8G",
                                      "-e", "8G"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    row = next(r for r in preset_rows() if r["preset"] == "h100-hgx")
    line = " ".join(result.output[result.output.index("\nsources:"):].split())   # wrapped at the width
    assert row["description"] in line and row["gpu_source"] in line
    assert "commbench/data/hardware.toml" in line and "commbench systems --checks" in line
    # the curve is the one systems states (8 GiB busbw in one domain)
    assert f"{row['all_reduce_domain_busbw_gbps']:.3f}" in result.output
