"""Probe P8: `predict --system gb200-nvl72 -g 1440 --racks 20` said "extrapolated": false and "fitted_range": null,
the same on b200-hgx, b300-hgx and gb300-nvl72 at any size or scale, while the presets were calibrated on at most 72
GPUs in one domain and 2- or 4-node Hopper figures; and b200-hgx's efficiencies, all borrowed from Hopper presets,
read as "from its [[measured]] figures". A preset prediction now says where its published figures (own or borrowed,
and from which preset) span it and where it extrapolates, as a fitted profile does."""

from __future__ import annotations

import json

import jsonschema
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel.calibration import preset_calibration
from commbench.costmodel.checks import PUBLISHED_FIGURES
from commbench.costmodel.formulas import COLLECTIVES
from commbench.costmodel.presets import PRESETS
from tests.test_json_output import schema

WIDE = {"COLUMNS": "250"}


def _predict(*args: str, as_json: bool = True):
    result = CliRunner().invoke(app, ["predict", *args, *(["--json"] if as_json else [])], env=WIDE)
    assert result.exit_code == 0, result.output
    if not as_json:
        return " ".join(result.output.split())
    doc = json.loads(result.output)
    jsonschema.validate(doc, schema("predict"))
    return doc


def test_a_preset_beyond_its_figures_says_extrapolated():
    args = ("--system", "gb200-nvl72", "-c", "all_reduce", "-g", "1440", "--racks", "20", "-b", "8G", "-e", "8G")
    doc = _predict(*args)
    assert doc["fitted_range"] is None and doc["calibration"]["curve"] == "all_reduce (scale_out)"
    assert [row["extrapolated"] for row in doc["rows"]] == [True]
    assert {f["group_size"] for f in doc["calibration"]["figures"]} == {2}   # 2 nodes x 1 GPU (nccl-tests 290)
    text = _predict(*args, as_json=False)
    assert "extrapolated: 1 of 1 size(s) (1440 ranks, 20 domain(s))" in text
    assert "calibrated on: all_reduce (scale_out): published figures at 2 ranks on 2 domains 8 GiB (borrowed from h100-hgx)" in text


def test_sizes_outside_the_figures_at_that_group_are_extrapolated():
    """gb200-nvl72's own 72-GPU figures are 512 MiB..8 GiB: 1 MiB on 72 GPUs is no figure's."""
    doc = _predict("--system", "gb200-nvl72", "-c", "all_reduce", "-g", "72", "-b", "1M", "-e", "8G", "-f", "8192")
    assert [(r["size_bytes"], r["extrapolated"], r["borrowed_from"]) for r in doc["rows"]] == [
        (1 << 20, True, []), (8 << 30, False, [])]


def test_b200_says_its_figures_are_borrowed_and_from_which_preset():
    doc = _predict("--system", "b200-hgx", "-c", "all_reduce", "-g", "8", "-b", "1M", "-e", "8G", "-f", "8192")
    assert not any(r["extrapolated"] for r in doc["rows"])
    assert [r["borrowed_from"] for r in doc["rows"]] == [["h200-hgx"], ["h100-hgx", "h200-hgx"]]
    assert doc["calibration"]["borrowed_from"] == ["h100-hgx", "h200-hgx"]
    assert "b200-hgx" not in {f["preset"] for f in doc["calibration"]["figures"]}
    text = _predict("--system", "b200-hgx", "-c", "all_reduce", "-g", "8", "-b", "1M", "-e", "1M", as_json=False)
    assert "borrowed (h200-hgx)" in text
    assert "borrowed: 1 of 1 size(s) rest only on figures measured on h200-hgx, not on b200-hgx" in text


def test_a_forced_algorithm_reads_only_the_figures_that_ran_it():
    """8x H100 ring: one figure at 8 GiB; the NVLS ones (1 KiB..8 GiB on H200) do not calibrate a forced ring."""
    doc = _predict("--system", "h100-hgx", "-c", "all_reduce", "-g", "8", "--algorithm", "ring", "-b", "1M",
                   "-e", "8G", "-f", "8192")
    assert [r["extrapolated"] for r in doc["rows"]] == [True, False]


def test_a_collective_without_a_figure_is_extrapolated_everywhere():
    text = _predict("--system", "gb300-nvl72", "-c", "broadcast", "-g", "8", "-b", "1M", "-e", "1M", as_json=False)
    assert "calibrated on: broadcast (scale_up): no published figure" in text and "extrapolated: 1 of 1" in text


def test_systems_names_the_borrowed_figures():
    result = CliRunner().invoke(app, ["systems", "--json"])
    doc = json.loads(result.output)
    jsonschema.validate(doc, schema("systems"))
    rows = {r["preset"]: r for r in doc["presets"]}
    for name in ("b200-hgx", "b300-hgx", "gb300-nvl72"):   # no [[measured]] row of their own
        assert rows[name]["own_figures"] == 0 and "all_reduce" in rows[name]["borrowed_figures"]["h200-hgx"]
    assert rows["gb200-nvl72"]["own_figures"] == sum(f.preset == "gb200-nvl72" for f in PUBLISHED_FIGURES)
    text = " ".join(CliRunner().invoke(app, ["systems"], env=WIDE).output.split())
    assert "b200-hgx calibrated on: no published figure measured on it; borrowed from" in text


def test_calibrated_on_names_presets_and_collectives():
    for spec in PRESETS.values():
        for entry in spec.calibrated_on:
            preset, _, collective = entry.partition(":")
            assert preset in PRESETS and (not collective or collective in COLLECTIVES), entry


def test_every_own_figure_spans_itself():
    """Each published figure, predicted on its own preset at its own point, is in range and not borrowed."""
    for f in PUBLISHED_FIGURES:
        cal = preset_calibration(f.preset, f.collective, f.group_size, f.num_domains, [f.size_bytes], f.algorithm)
        assert cal["rows"] == [{"extrapolated": False, "borrowed_from": []}], f
