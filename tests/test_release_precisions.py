"""A release runs a precision only where its megatron-core has the flags the precision's launch takes (probe AV
finding 3): 25.09 is Megatron-Bridge v0.1.0rc3, which pins megatron-core>=0.14.0a0,<0.15.0, and --fp4-format /
--fp4-recipe first appear in core_v0.15.0; its recipes, mixed-precision configs and perf scripts have no NVFP4."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.planner.layout import recipes
from commbench.planner.layout.spec import PRECISIONS
from tests.test_titan_probe_n import _one_line_error

runner = CliRunner()
BASE = ["--model", "llama3-8b", "--system", "gb200-nvl72", "--gpus", "8"]


def test_every_release_names_its_megatron_core_and_its_source():
    for release, info in recipes.recipes_json_releases().items():
        core = info["megatron_core"]
        assert core["version"][0].isdigit() and core["source"], release
    assert recipes.core_version("25.09") == (0, 14)
    assert "pyproject.toml:88 megatron-core>=0.14.0a0,<0.15.0" in \
        recipes.recipes_json_releases()["25.09"]["megatron_core"]["source"]


@pytest.mark.parametrize("release", recipes.releases())
@pytest.mark.parametrize("precision", PRECISIONS)
def test_the_core_rule_agrees_with_the_release_s_recipes_for_every_pair(release, precision):
    """Every (release, precision) of the table: the release runs it by its megatron-core's flags exactly where its
    Megatron-Bridge has a performance recipe at that precision (25.09: bf16, fp8, mxfp8)."""
    table = recipes.recipes_json_releases()
    stand = table[release].get("same_as", release)
    has_recipe = any(e["release"] == stand and e["precision"] == precision for e in recipes._usable())
    assert recipes.release_runs_precision(release, precision) == has_recipe


def test_the_rule_s_flags_are_the_ones_the_megatron_launch_takes():
    from commbench.planner.emit.megatron import PRECISION_ARGS
    for precision, (_, flags, _) in recipes.CORE_PRECISION_FLAGS.items():
        assert set(flags.split()) <= set(PRECISION_ARGS[precision]) | {"--bf16"}, precision
    assert set(recipes.CORE_PRECISION_FLAGS) == set(PRECISIONS)


def test_nvfp4_with_25_09_is_refused_in_one_line_naming_the_releases_that_run_it():
    line = _one_line_error(runner.invoke(app, ["plan", *BASE, "--layout", "tp=1,pp=1,vp=1,ep=1,mbs=1", "--precision",
                                         "nvfp4", "--software", "25.09"]),
                     "--precision", "nvfp4", "--software 25.09", "megatron-core 0.14", "--fp4-format",
                     "core_v0.15.0", "25.11, 26.02")
    assert "26.08" in line
    _one_line_error(runner.invoke(app, ["plan", *BASE, "--layout", "tp=1,pp=1,vp=1,ep=1,mbs=1,precision=nvfp4",
                                  "--software", "25.09"]), "nvfp4", "--software 25.09")
    _one_line_error(runner.invoke(app, ["plan", *BASE, "--precision", "nvfp4", "--software", "25.09"]),
              "nvfp4", "--software 25.09")   # the search
    # a release the table lacks reads 25.09's recipes and megatron-core: refused the same way
    _one_line_error(runner.invoke(app, ["plan", *BASE, "--precision", "nvfp4", "--software", "25.10"]),
              "nvfp4", "25.09")
    ok = runner.invoke(app, ["plan", *BASE, "--layout", "tp=1,pp=1,vp=1,ep=1,mbs=1", "--precision", "nvfp4",
                             "--software", "25.11"])
    assert ok.exit_code == 0, ok.output


def test_tune_refuses_it_before_the_sweep(tmp_path):
    _one_line_error(runner.invoke(app, ["tune", *BASE, "--precision", "nvfp4", "--software", "25.09", "--out",
                                  str(tmp_path / "t")]), "nvfp4", "--software 25.09")
    assert not (tmp_path / "t").exists()


def test_the_library_check_refuses_it_too():
    recipes.check_precision_in_release("mxfp8", "25.09")
    with pytest.raises(CommbenchError, match=r"--precision='nvfp4' is invalid: .*--software 25.09"):
        recipes.check_precision_in_release("nvfp4", "25.09")


def test_calibrate_refuses_a_row_whose_release_cannot_run_its_precision(tmp_path):
    # probe BL 2: a Qwen3-30B row given as 25.09 + NVFP4 was fitted (exit 0, fp4_gemm_ratio moved 0.7556 -> 0.8137)
    # while plan refuses --software 25.09 --precision nvfp4: the same rule (check_precision_in_release) now refuses the
    # row, naming its fields; a release the table lacks reads its stand-in's (26.03 -> 26.02.01: runs it)
    import json

    from importlib import resources

    from commbench.planner.calibrate.published import check_row

    shipped = json.loads(resources.files("commbench.data").joinpath("calibration-runs.json").read_text())
    rows = [shipped[i] for i in (14, 16, 17, 39, 42)]   # Qwen3-30B-A3B rows, the probe's
    one = rows[0]
    rows[0] = dict(one, release="25.09", precision="NVFP4")
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(rows))
    for args in (["--evaluate", str(path)], [str(path), "-O", str(tmp_path / "cal.json"), "--no-loo"]):
        result = runner.invoke(app, ["calibrate", *args])
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        text = " ".join(result.output.split())
        assert "row 1: field 'precision'='nvfp4' is invalid: field 'release' 25.09 runs megatron-core 0.14" in text
        assert "the releases that run nvfp4: 25.11" in text
    assert not (tmp_path / "cal.json").exists()
    check_row(dict(one, release="26.03", precision="NVFP4"), "row 1")
    check_row(dict(one, release="25.09", precision="MXFP8"), "row 1")
    check_row(dict(one, release="user", precision="NVFP4"), "row 1")
