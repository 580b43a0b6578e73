"""A hybrid (Mamba) model's pipeline split at the releases whose Megatron-LM builds it only evenly.

Found from outside (probe PB): at --software 26.02 the Nemotron-3-Nano plan pinned to pp=8 wrote
--decoder-first-pipeline-num-layers 8 --decoder-last-pipeline-num-layers 2 (and the unpinned plan pp=2 with
--decoder-last-pipeline-num-layers 23). 26.02's validate_args takes them, but its MambaStack
(b0cc2706 megatron/core/ssm/mamba_block.py:172-183 _select_layers_for_pipeline_parallel) takes num_layers // pp layers
per rank whatever they say: at pp=8 it built 48 of the 52 layers, at pp=2 26/26, not the 29/23 the step model priced.
25.09 and 25.11 slice so too; 26.02.01 (55ac7082) and every later release honour the counts
(release_flags.HYBRID_EVEN_SPLIT_ONLY; the last test reads each release's tree)."""

from __future__ import annotations

import re
import subprocess

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.errors import CommbenchError
from commbench.planner import load_model
from commbench.planner.layout.recipes import releases
from commbench.planner.layout.split import best_split, choose_split
from commbench.planner.search.space import SearchRequest, search
from tests.megatron_releases import SKIP_REASON, git_dir, release_ref

NANO = "nemotron-3-nano-30b-a3b"   # 52 layers


def _request(software: str, gpus: int = 64, **pins) -> SearchRequest:
    return SearchRequest(model=load_model(NANO), fabric=load_preset("h100-hgx", num_gpus=gpus), num_gpus=gpus,
                         gbs=256, precision="fp8", keep=50, software=software, pins=pins)


@pytest.mark.parametrize("release", ["25.09", "25.11", "26.02"])
def test_a_pinned_uneven_hybrid_split_is_refused_where_megatron_builds_it_evenly(release):
    if release != "26.02":   # 25.09 and 25.11 cannot build Nemotron-3-Nano's MoE layers at all: refused before
        with pytest.raises(CommbenchError):
            _request(release, pp=8)
        return
    with pytest.raises(CommbenchError, match=r"pp=8 is invalid .* release 26\.02 .*52 layers do not divide by 8.*"
                                             r"--software 26\.02\.01 or newer"):
        _request(release, pp=8)


def test_the_plan_cli_refuses_the_uneven_pin_in_one_line(tmp_path):
    result = CliRunner().invoke(app, ["plan", "--model", NANO, "--system", "h100-hgx", "--gpus", "64",
                                      "--software", "26.02", "--layout", "pp=8", "-O", str(tmp_path / "x")])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and not (tmp_path / "x" / "plan.json").exists()
    assert "26.02" in result.output and "26.02.01" in result.output


def test_the_search_at_26_02_proposes_only_even_hybrid_splits():
    req = _request("26.02")
    res = search(req)
    pps = set(res.layouts.pp.tolist())
    assert pps and all(52 % p == 0 for p in pps), pps
    for p in pps:
        split = choose_split(req.model, p, 1)
        assert split.method in ("single", "even") and split.megatron_args() == []


def test_a_pinned_even_hybrid_split_at_26_02_is_what_mamba_stack_builds():
    req = _request("26.02", pp=2)
    split = choose_split(req.model, 2, 1)
    assert split.decoder_layers() == [26, 26] and split.megatron_args() == []   # not 29/23 with first/last flags


def test_releases_that_honour_first_last_still_plan_uneven_hybrid_splits():
    for release in ("26.02.01", "26.04", "26.08"):
        req = _request(release, pp=8)
        split = best_split(req.model, 8, 1)
        assert split is not None and split.method == "uneven" and sum(split.decoder_layers()) == 52


def test_the_plan_document_says_the_even_split_and_verify_reads_it_back(tmp_path):
    out = tmp_path / "p"
    result = CliRunner().invoke(app, ["plan", "--model", NANO, "--system", "h100-hgx", "--gpus", "64",
                                      "--software", "26.02", "--layout", "pp=4", "-O", str(out)])
    assert result.exit_code == 0, result.output
    args = (out / "megatron_args.txt").read_text()
    assert "--decoder-first-pipeline-num-layers" not in args and "--decoder-last-pipeline-num-layers" not in args
    import json
    from commbench.planner.emit.plan import plan_model
    doc = json.loads((out / "plan.json").read_text())
    assert doc["megatron"]["layer_split"]["decoder_layers_per_stage"] == [13, 13, 13, 13]
    assert "hybrid_uneven_split" not in doc["inputs"]["model_spec"]
    assert best_split(plan_model(doc), 4, 1).decoder_layers() == [13, 13, 13, 13]   # verify-plan's model splits so


def _builds_uneven_hybrid_splits(tree_ref: str) -> bool:
    """Whether the Megatron-LM at `tree_ref` selects a hybrid stack's layers per pipeline rank from the first/last
    stage counts (num_layers_in_first_pipeline_stage, read where its MambaStack / hybrid model picks its segment)."""
    def show(path: str) -> str | None:
        done = subprocess.run(["git", "--git-dir", git_dir(), "show", f"{tree_ref}:{path}"], capture_output=True,
                              text=True)
        return done.stdout if done.returncode == 0 else None

    block = show("megatron/core/ssm/mamba_block.py") or ""
    select = re.search(r"def _select_layers_for_pipeline_parallel.*?(?=\n    def |\Z)", block, re.S)
    if select is not None:
        return "num_layers_in_first_pipeline_stage" in select.group(0)
    for path in ("megatron/core/ssm/mamba_hybrid_layer_allocation.py",
                 "megatron/core/models/hybrid/hybrid_layer_allocation.py"):
        text = show(path)
        segment = re.search(r"def select_pipeline_segment.*?(?=\ndef |\Z)", text or "", re.S)
        if segment is not None:
            return "first_stage_layers" in segment.group(0)
    raise AssertionError(f"no hybrid layer selection found at {tree_ref}")


@pytest.mark.skipif(git_dir() is None, reason=SKIP_REASON)
@pytest.mark.parametrize("release", releases())
def test_the_even_only_releases_are_those_whose_tree_ignores_first_last(release):
    from commbench.planner.layout.release_flags import HYBRID_EVEN_SPLIT_ONLY
    assert (release in HYBRID_EVEN_SPLIT_ONLY) == (not _builds_uneven_hybrid_splits(release_ref(release)))
