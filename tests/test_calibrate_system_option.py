"""`calibrate LOG --system fab.json` (a fitted fabric profile) said 'GPU has no preset: field 'gpu' =
'fab.json'' for the log's row, naming a field the user never wrote instead of the --system they gave (found from
outside, probe AM F8). Now a --system that is no preset is refused in one line naming --system."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from commbench.cli.app import app

LOG = Path(__file__).parent / "data" / "megatron_deepseek_v3_gb300.log"


def test_a_system_that_is_no_preset_is_named_as_the_option_given(tmp_path):
    profile = tmp_path / "fab.json"
    profile.write_text("{}")
    for value in (str(profile), "nosuch"):
        result = CliRunner().invoke(app, ["calibrate", "--evaluate", str(LOG), "--model", "deepseek-v3",
                                          "--system", value])
        assert result.exit_code == 2, result.output
        errors = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and errors[0].startswith(f"error: --system={value!r} is invalid"), result.output
        assert "field 'gpu'" not in errors[0] and "gb300-nvl72" in errors[0]
