"""`commbench predict` as a user acting on it: on a fitted profile, sizes and groups beyond what was measured are
said extrapolated (table and JSON); an option the collective does not take is refused in one line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from tests.test_costmodel_cli import _write_sweep


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    """all_reduce measured on 4 gloo ranks from 1 KiB to 16 MiB (tests.test_costmodel_cli._write_sweep)."""
    folder = tmp_path_factory.mktemp("fit")
    _write_sweep(folder / "ar.jsonl", "all_reduce", 4, 200e-6, 2e9)
    result = CliRunner().invoke(app, ["fit", str(folder / "ar.jsonl"), "-O", str(folder / "fabric.json")])
    assert result.exit_code == 0, result.output
    return folder / "fabric.json"


def _json(args):
    result = CliRunner().invoke(app, ["predict", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_sizes_beyond_the_fitted_range_are_extrapolated(profile):
    """256 B and 64 MiB lie outside the 1 KiB..16 MiB measured: they were printed like the rest."""
    doc = _json(["--fabric", str(profile), "-c", "all_reduce", "-g", "4", "-b", "256", "-e", "64M", "-f", "4"])
    marks = {row["size_bytes"]: row["extrapolated"] for row in doc["rows"]}
    assert marks[256] and marks[64 << 20] and not marks[1 << 10] and not marks[16 << 20] and not marks[1 << 20]
    assert doc["fitted_range"]["min_size_bytes"] == 1 << 10 and doc["fitted_range"]["max_size_bytes"] == 16 << 20
    table = CliRunner().invoke(app, ["predict", "--fabric", str(profile), "-c", "all_reduce", "-g", "4", "-b", "256",
                                     "-e", "64M", "-f", "4"], env={"COLUMNS": "160"})
    assert table.exit_code == 0
    assert "extrapolated" in table.output and "1 KiB..16 MiB" in table.output


def test_a_group_never_measured_is_extrapolated_at_every_size(profile):
    doc = _json(["--fabric", str(profile), "-c", "all_reduce", "-g", "2", "-b", "1M", "-e", "1M"])
    assert all(row["extrapolated"] for row in doc["rows"])
    assert doc["fitted_range"]["group_sizes"] == [4]


def test_a_preset_has_no_fitted_range():
    doc = _json(["--system", "gb300-nvl72", "-c", "all_reduce", "-g", "8", "-b", "1M", "-e", "1M"])
    assert doc["fitted_range"] is None and not any(row["extrapolated"] for row in doc["rows"])


def test_imbalance_is_refused_where_it_would_be_ignored():
    """--imbalance 2 with all_reduce printed the same sweep as without it."""
    result = CliRunner().invoke(app, ["predict", "--system", "gb300-nvl72", "-c", "all_reduce", "-g", "8",
                                      "--imbalance", "2"])
    assert result.exit_code == 2 and "--imbalance" in result.output and "moe_all_to_all" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_fit_warnings_shown_are_those_of_the_collective_predicted(profile, tmp_path):
    """A profile fitted on all_gather and all_reduce lists all_gather's warnings first: predict -c all_reduce showed
    the first five (all all_gather's) and hid 'all_reduce ... poor fit ... unreliable'; --json had none."""
    doc = json.loads(profile.read_text())
    other = [f"all_gather gloo n={n} world (1 domain): only 2 sizes: no held-out error (need >= 4)" for n in range(2, 8)]
    poor = "all_reduce gloo n=4 world (1 domain): poor fit: median held-out error 23% (> 10%); unreliable"
    doc["warnings"] = other + list(doc["warnings"]) + [poor, "emulated fabric: not on a real network"]
    edited = tmp_path / "fabric.json"
    edited.write_text(json.dumps(doc))
    args = ["predict", "--fabric", str(edited), "-c", "all_reduce", "-g", "4", "-b", "1M", "-e", "1M"]
    table = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
    assert table.exit_code == 0, table.output
    assert "poor fit" in table.output and "emulated fabric" in table.output and "all_gather" not in table.output
    listed = _json(args[1:])["fit_warnings"]
    assert poor in listed and not any(w.startswith("all_gather") for w in listed)
    assert _json(["--system", "gb300-nvl72", "-c", "all_reduce", "-g", "8", "-b", "1M", "-e", "1M"])["fit_warnings"] == []


@pytest.mark.parametrize("scale, named", [(["--racks", "2", "--gpus", "12"], "--racks=2 and --gpus=12 conflict"),
                                          (["--racks", "-1"], "--racks=-1"), (["--gpus", "0"], "--gpus=0")])
def test_a_profiles_scale_is_checked_as_a_presets(profile, scale, named):
    """--fabric with --racks 2 --gpus 12 predicted on 12 GPUs, --racks unread (a preset refuses both); --racks -1 was
    refused as 'num_gpus=-3', a field the user never typed."""
    result = CliRunner().invoke(app, ["predict", "--fabric", str(profile), "-c", "all_reduce", "-g", "2", *scale])
    assert result.exit_code == 2 and result.output.startswith(f"error: {named}"), result.output
    assert len(result.output.strip().splitlines()) == 1


def test_algorithm_and_protocol_refused_on_a_profile_name_the_options(profile):
    """--protocol LL on a fitted profile was refused as 'protocol=' (a library argument); --algorithm ring read
    'all_reduce on fitted has fitted' (the profile and its one algorithm are both named fitted)."""
    base = ["predict", "--fabric", str(profile), "-c", "all_reduce", "-g", "4"]
    protocol = CliRunner().invoke(app, [*base, "--protocol", "LL"])
    assert protocol.exit_code == 2 and protocol.output.startswith("error: --protocol='LL' is invalid"), protocol.output
    algorithm = CliRunner().invoke(app, [*base, "--algorithm", "ring"], env={"COLUMNS": "200"})
    assert algorithm.exit_code == 2 and "the algorithms fabric 'fitted' has for all_reduce: fitted" in algorithm.output


def test_a_results_file_given_as_the_profile_is_named(tmp_path):
    """--fabric results.jsonl (the file fit reads, not the profile it writes) said only 'fabric profile is not valid
    JSON: Extra data: line 2 column 1', naming no file."""
    results = tmp_path / "ar.jsonl"
    _write_sweep(results, "all_reduce", 4, 200e-6, 2e9)
    result = CliRunner().invoke(app, ["predict", "--fabric", str(results), "-c", "all_reduce", "-g", "4"],
                                env={"COLUMNS": "300"})
    assert result.exit_code == 2 and str(results) in result.output and "commbench fit -O" in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("group", ["1", "0"])
def test_a_group_of_one_rank_is_refused_not_predicted_at_zero(group):
    # -g 1 printed 0.00 us and 0.000 GB/s as a prediction: a group of one communicates nothing
    result = CliRunner().invoke(app, ["predict", "-c", "all_reduce", "--system", "gb200-nvl72", "-g", group,
                                      "-b", "1M", "-e", "1M"])
    assert result.exit_code == 2 and result.output.startswith("error: --group=")
    assert "an integer from 2 (a group of one communicates nothing)" in result.output
