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


def test_step_factor_one_names_an_option_predict_has():
    """`predict -f 1` said 'for steps of a fixed size give --step-bytes (-i SIZE, or -f 1 -i SIZE as nccl-tests)',
    and then '-i' was 'No such option: -i'. predict now takes -i/--step-bytes as bench does (nccl-tests' -i)."""
    import json

    result = CliRunner().invoke(app, ["predict", "-c", "all_reduce", "-g", "8", "--system", "h100-hgx", "-b", "1M",
                                      "-e", "4M", "-i", "1M", "--json"])
    assert result.exit_code == 0, result.output
    assert [row["size_bytes"] for row in json.loads(result.output)["rows"]] == [1 << 20, 2 << 20, 3 << 20, 4 << 20]
    result = CliRunner().invoke(app, ["predict", "-c", "all_reduce", "-g", "8", "--system", "h100-hgx", "-b", "1M",
                                      "-e", "4M", "-f", "4", "-i", "1M", "--json"])   # both: -f > 1 wins, as nccl-tests
    assert [row["size_bytes"] for row in json.loads(result.output)["rows"]] == [1 << 20, 4 << 20]


def test_moe_prediction_says_it_is_the_mean_of_dispatch_and_combine():
    """`predict -c moe_all_to_all` without --algorithm was titled 'the fastest algorithm per size' while each row
    is the mean of one dispatch and one combine (h800-hgx 64 MiB: 399.22 us between dispatch 405.29 and combine
    393.15, formulas.moe_all_to_all_time_s); the title now says so."""
    result = CliRunner().invoke(app, ["predict", "-c", "moe_all_to_all", "-g", "8", "--system", "h800-hgx", "-b",
                                      "64M", "-e", "64M"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    title = result.output.splitlines()[0]
    assert "fastest" not in title and "mean of one dispatch and one combine" in title


def test_moe_on_a_profile_without_all_to_all_names_what_was_asked(tmp_path):
    """`predict -c moe_all_to_all` on a profile fitted on all_reduce alone said "collective='all_to_all' is not
    covered by fabric 'fitted'": a collective the user never named. Now the line names --collective moe_all_to_all
    and the all_to_all curve it would fall back on."""
    from commbench.costmodel import load_preset

    import dataclasses

    fabric = load_preset("h100-hgx", num_gpus=8)

    only_ar = dataclasses.replace(fabric, curves=tuple(c for c in fabric.curves if c.collective == "all_reduce"),
                                  nccl=None)
    path = tmp_path / "ar.json"
    path.write_text(only_ar.to_json())
    result = CliRunner().invoke(app, ["predict", "-c", "moe_all_to_all", "-g", "8", "--fabric", str(path)])
    assert result.exit_code == 2, result.output
    assert "--collective='moe_all_to_all'" in result.output and "all_to_all" in result.output
    assert "collective='all_to_all'" not in result.output


def test_moe_json_rows_say_they_are_the_mean_of_dispatch_and_combine():
    """`predict -c moe_all_to_all --json` gave every row `"algorithm": null` (h100-hgx 1 MiB: 24.12 us) while the
    table's title said the mean of one dispatch and one combine; the rows now say `mean(dispatch,combine)`, a
    forced phase keeps its name, and the rows still match predict.schema.json."""
    import json

    import jsonschema

    from tests.test_json_output import schema

    base = ["predict", "-c", "moe_all_to_all", "-g", "8", "--system", "h100-hgx", "-b", "1M", "-e", "2M", "--json"]
    for extra, name in (([], "mean(dispatch,combine)"), (["--algorithm", "combine"], "combine")):
        result = CliRunner().invoke(app, base + extra)
        assert result.exit_code == 0, result.output
        doc = json.loads(result.output)
        assert [row["algorithm"] for row in doc["rows"]] == [name, name]
        jsonschema.validate(doc, schema("predict"))
