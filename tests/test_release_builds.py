"""A release whose Megatron-LM cannot build the model is refused in one line, as a precision its megatron-core has no
flags for is (probe CH F1): a hybrid Mamba-MoE model (Nemotron-3-Nano, 'E' in --hybrid-override-pattern) planned for
--software 25.11 or 25.09 exited 0 with a line that fails in that container: its hybrid layer allocator knows only
M, *, - (megatron/core/ssm/mamba_hybrid_layer_allocation.py Symbols.VALID) and its validate_args asserts "Model Spec
must be None when using MoEs". MoE layers in hybrid models came with Megatron-LM 9a1c0d05c9 (#2259), first in
core_v0.16.0, after 25.11's 0d8e0714 (megatron-core 0.16.0rc0). The symbols each release takes are read from its
tree (tools/megatron_release_flags.py, commbench/data/megatron-release-flags.json hybrid_symbols)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.planner.layout.release_flags import check_model_in_release, release_cannot_build
from commbench.planner.layout.recipes import releases
from commbench.planner.models.zoo import load_model
from tests.test_titan_probe_n import _one_line_error

runner = CliRunner()
NANO = ["--model", "nemotron-3-nano-30b-a3b", "--system", "b200-hgx", "--gpus", "32"]
PIN = ["--layout", "tp=1,pp=1,ep=8,mbs=1,dispatcher=alltoall"]
HF_NANO = "hf:tests/data/hf/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"


@pytest.mark.parametrize("release,core", [("25.11", "megatron-core 0.16.0rc0"), ("25.09", "megatron-core 0.14")])
def test_a_hybrid_moe_plan_for_a_release_without_moe_layers_in_hybrid_models_is_refused_in_one_line(release, core):
    for extra in (PIN, []):   # pinned and searched
        line = _one_line_error(runner.invoke(app, ["plan", *NANO, "--software", release, *extra]),
                               f"--software='{release}' is invalid", core, "'E'", "MoE layers",
                               "mamba_hybrid_layer_allocation.py", "core_v0.16.0", "9a1c0d05c9", "26.02")
        assert "25.11," not in line and "25.09," not in line


def test_an_hf_config_with_moe_layers_in_its_hybrid_pattern_is_refused_too():
    _one_line_error(runner.invoke(app, ["plan", "--model", HF_NANO, "--system", "b200-hgx", "--gpus", "32",
                                        "--software", "25.11", *PIN]), "--software='25.11'", "'E'")


def test_the_releases_whose_tree_has_the_symbol_plan_it():
    for release in ("26.02", "26.08"):
        res = runner.invoke(app, ["plan", *NANO, "--software", release, *PIN, "--json"])
        assert res.exit_code == 0, res.output
        assert "--hybrid-override-pattern" in json.loads(res.stdout)["megatron_args"]


def test_a_hybrid_dense_model_still_plans_in_25_09():
    """Nemotron-H (M, *, - only) builds in every release's allocator."""
    from commbench.planner.models.hf_config import load_hf_model
    model = load_hf_model("tests/data/hf/Nemotron-H-8B-Base-8K")
    assert model.is_hybrid and not model.is_moe
    for release in releases():
        assert release_cannot_build(model, release) is None, release
    res = runner.invoke(app, ["plan", "--model", "hf:tests/data/hf/Nemotron-H-8B-Base-8K", "--system", "h100-hgx",
                              "--gpus", "8", "--software", "25.09", "--layout", "tp=1,pp=1,mbs=1"])
    assert res.exit_code == 0, res.output


def test_tune_refuses_it_before_the_sweep(tmp_path):
    _one_line_error(runner.invoke(app, ["tune", *NANO, "--software", "25.11", *PIN, "--out", str(tmp_path / "t")]),
                    "--software='25.11'", "'E'")
    assert not (tmp_path / "t").exists()


def test_verify_plan_flags_a_plan_edited_to_such_a_release():
    from commbench.workflows.verify import plan_context
    res = runner.invoke(app, ["plan", *NANO, "--software", "26.02", *PIN, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert not [f for f in plan_context(doc).flags if "edited by hand" in f], plan_context(doc).flags
    doc["inputs"]["software"] = "25.11"
    new = [f for f in plan_context(doc).flags if "inputs.software='25.11'" in f]
    assert len(new) == 1 and "'E'" in new[0] and "edited by hand" in new[0], plan_context(doc).flags


def test_the_library_rule_names_the_release_its_core_and_the_missing_feature():
    nano = load_model("nemotron-3-nano-30b-a3b")
    for release in releases():
        why = release_cannot_build(nano, release)
        assert (why is not None) == (release in ("25.09", "25.11")), (release, why)
    with pytest.raises(CommbenchError, match=r"--software='25.11' is invalid: .*megatron-core 0.16.0rc0.*'E'"):
        check_model_in_release(nano, "25.11", "25.11")
    check_model_in_release(nano, "26.02", "26.02")


def test_the_data_records_each_release_s_hybrid_symbols_from_its_tree():
    from commbench.data.reference import megatron_release_flags_json
    data = megatron_release_flags_json()["releases"]
    for release in releases():
        symbols = set(data[release]["hybrid_symbols"])
        assert {"M", "*", "-"} <= symbols, release
        assert ("E" in symbols) == (release not in ("25.09", "25.11")), release
