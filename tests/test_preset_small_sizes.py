"""Whose runs set each preset's small-size NCCL terms (launch_us, fill_us_per_rank), said where they are used.

h100-hgx's were the 8x H200, NCCL 2.20.5 curve's (Azure ND H200 v5), so it predicted H200's small-message curve
(11-39% optimistic from 64 KiB to 16 MiB against 8x H100 at NCCL 2.18.5, Azure ND H100 v5) without a word: the preset's
source, `systems` and `predict` now say whose terms these are, "borrowed" where another GPU's run set them, and
the H100 curve is a held-out curve of benchmarks/data/published-curves.json (never used to set a parameter)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.costmodel.presets import preset_names
from commbench.data.reference import hardware_toml

WIDE = {"COLUMNS": "400"}
H200_RUN = "8x H200 (Azure ND H200 v5), NCCL 2.20.5"


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args), env=WIDE)


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_says_whose_runs_set_its_small_size_terms(name):
    fabric = load_preset(name)
    said = fabric.nccl.small_sizes
    row = hardware_toml()["nccl_model"][name]
    for term in ("launch_us", "fill_us_per_rank"):
        gpu, run = row["small_sizes_from"][term]
        clause = next(c for c in said.split("; ") if term in c.split(" ", 2)[0] + " " + c.split(" ", 2)[1])
        assert run in clause, (term, said)
        # "borrowed" exactly where another GPU's run set the term
        assert ("borrowed from" in clause) == (gpu != fabric.gpu.name), (term, said)


def test_h100_small_sizes_are_h200s_at_nccl_2_20_5_in_the_preset_systems_and_predict():
    said = load_preset("h100-hgx").nccl.small_sizes
    assert f"launch_us, fill_us_per_rank borrowed from {H200_RUN}" in said and "not measured on h100" in said
    assert "H200" in load_preset("h100-hgx").nccl.source and "2.20.5" in load_preset("h100-hgx").nccl.source
    assert "borrowed" not in load_preset("h200-hgx").nccl.small_sizes   # its own GPU's run

    text = " ".join(_invoke("systems").output.split())
    assert f"h100-hgx small sizes: launch_us, fill_us_per_rank borrowed from {H200_RUN}" in text
    rows = {r["preset"]: r for r in json.loads(_invoke("systems", "--json").output)["presets"]}
    assert rows["h100-hgx"]["small_sizes"] == said

    args = ["predict", "--system", "h100-hgx", "-c", "all_reduce", "-g", "8", "-b", "1K", "-e", "64M"]
    text = " ".join(_invoke(*args).output.split())
    assert f"small sizes: launch_us, fill_us_per_rank borrowed from {H200_RUN}" in text
    assert json.loads(_invoke(*args, "--json").output)["small_sizes"] == said
    # a collective not predicted by the NCCL model has no such terms
    assert json.loads(_invoke("predict", "--system", "h100-hgx", "-c", "all_to_all", "-g", "8", "-b", "1K", "-e", "1M",
                              "--json").output)["small_sizes"] is None


def test_the_azure_h100_curve_is_held_out_with_its_setup():
    curves = json.loads((Path(__file__).parents[1] / "benchmarks" / "data" / "published-curves.json").read_text())
    h100 = [c for c in curves["curves"] if c["preset"] == "h100-hgx" and c.get("algorithm") == "nvls"]
    assert len(h100) == 1
    curve = h100[0]
    assert curve["role"] == "heldout" and curve["nccl_version"] == "2.18.5" and curve["group_size"] == 8
    assert "github.com/Azure/AI-benchmarking-guide" in curve["source"] and "ND_H100_v5_results.md" in curve["source"]
    assert "NCCL_ALGO=NVLS" in curve["source"] and len(curve["points"]) == 24
