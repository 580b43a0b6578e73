"""The Transformer Engine each release's container runs (recipes.json releases transformer_engine), and what the plan
does with it where a per-layer CUDA graph with --delay-wgrad-compute needs one (search/wgrad_graph.py).

Found from outside (probe EJ): 38 plans (31 default searched: Mixtral, DeepSeek-V3, Qwen3 MoE on GB200 / GB300 / B200
at 26.04 to 26.08) were refused by their release's validate_args, "CUDA graph with delay_wgrad_compute requires TE
version >= 2.12.0", with TE answered as 2.10; the plan's note said "needs TE 2.12 ... the container's TE version is not
in the plan" while saying launch true. Each container's TE is Megatron-Bridge's uv.lock at the release tag (the
container's locked environment), and the release notes (docs/releases/software-versions.md at v0.6.0) agree for each
container they list."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner import Layout, load_model
from commbench.planner.emit.megatron import precision_notes
from commbench.planner.layout import recipes
from commbench.planner.layout.graph_scope import scope_mask
from commbench.planner.layout.spec import CODE_FIELDS
from commbench.planner.search.wgrad_graph import container_te, wgrad_graph_pin_refusal, wgrad_graph_te_short

# Megatron-Bridge uv.lock `transformer-engine` at each release's tag (line of its version), and the release notes' TE
# where docs/releases/software-versions.md at v0.6.0 lists the container.
CONTAINER_TE = {
    "25.09": ("2.7.0", "uv.lock:4722", "Transformer Engine 2.7.0"),
    "25.11": ("2.9.0+70f53666", "uv.lock:5750", "Transformer Engine 2.9"),
    "26.02": ("2.12.0+5671fd36", "uv.lock:7210", "Transformer Engine 2.12"),
    "26.02.01": ("2.12.0+5671fd36", "uv.lock:7164", None),
    "26.04": ("2.14.0+71bbefbf", "uv.lock:4881", "Transformer Engine 2.14+71bbefb"),
    "26.04.01": ("2.14.1+366798ef", "uv.lock:4553", None),
    "26.06": ("2.16.0+4220403e", "uv.lock:4872", "Transformer Engine 2.16"),
    "26.06.01": ("2.16.0+b9d690e0", "uv.lock:4854", None),
    "26.08": ("2.17.1+4329ff84", "uv.lock:4866", None),
}
LAYER = CODE_FIELDS["cuda_graph"].index("layer")


def test_every_release_names_its_containers_transformer_engine_with_its_source():
    table = recipes.recipes_json_releases()
    assert set(table) == set(CONTAINER_TE)
    for release, (version, lock, notes) in CONTAINER_TE.items():
        te = table[release]["transformer_engine"]
        assert te["version"] == version and te["source"].startswith(f"{lock} transformer-engine {version} at "
                                                                    f"{table[release]['megatron_bridge']}"), te
        assert (notes is None) == ("lists no" in te["source"]) and (notes is None or notes in te["source"]), te


def test_the_plan_names_the_containers_te_and_says_it_meets_the_need():
    """DeepSeek-V3 on GB300 (the tree tests' pinned recipe): a per-layer graph over attn with the EP overlap's delayed
    wgrad and --overlap-grad-reduce needs TE >= 2.12 from 26.04 on (validate_args), >= 2.10 at 26.02 / 26.02.01
    (TransformerConfig); each container ships more, so the note says met, naming the version and its source."""
    model = load_model("deepseek-v3")
    layout = Layout.for_world(256, tp=1, pp=4, vp=16, ep=32, etp=1, mbs=1, gbs=4096, dispatcher="flex",
                              moe_a2a_overlap=True, cuda_graph="layer", cuda_graph_scope="attn")
    for release, need in (("26.04", ">= 2.12"), ("26.08", ">= 2.12"), ("26.02.01", ">= 2.10")):
        (te,) = [n for n in precision_notes(layout, model, release) if "Transformer Engine >=" in n]
        version = CONTAINER_TE[release][0]
        assert need in te and f"container ships Transformer Engine {version} (uv.lock:" in te and te.endswith(": met")
        assert "not in the plan" not in te, te
    (te,) = [n for n in precision_notes(layout, model) if "Transformer Engine >=" in n]   # the target: no container
    assert ">= 2.10" in te and "names no container" in te, te
    # 25.11's Megatron-LM (0d8e0714, megatron-core 0.16.0rc0) has neither check: no note
    assert not [n for n in precision_notes(layout, model, "25.11") if "Transformer Engine >=" in n]


def test_a_default_26_08_mixtral_plan_launches_with_the_te_note_met(tmp_path):
    result = CliRunner().invoke(app, ["plan", "--model", "mixtral-8x7b", "--system", "gb200-nvl72", "--gpus", "64",
                                      "--software", "26.08", "-O", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    section = json.loads((tmp_path / "p" / "plan.json").read_text())["megatron"]
    assert section["launch"]
    te = [n for n in section["notes"] if "Transformer Engine >=" in n]
    assert te and all("container ships Transformer Engine 2.17.1+4329ff84" in n and n.endswith(": met") for n in te), te


def _short(model, release, scope="attn"):
    refused, _ = wgrad_graph_te_short(model, release, np.array([LAYER]), np.array([scope_mask(scope)]),
                                      np.array([True]), np.array([8]), np.array([True]))
    return bool(refused[0])


@pytest.mark.parametrize("version, refused_at_26_08, refused_at_26_02", [
    ("2.12.0", False, False), ("2.11.0", True, False), ("2.9.0", True, True), (None, True, True)])
def test_a_container_below_the_need_or_unknown_refuses_the_combination(monkeypatch, version, refused_at_26_08,
                                                                        refused_at_26_02):
    """Every table container meets both needs, so the refusal is exercised on an edited table: a container below 2.12
    (26.08: the block) or below 2.10 (26.02: TransformerConfig), or one the table has no TE for, is refused in the
    search and, pinned, in one line; the scope without attn is not (26.08 at 2.11: the block does not fire)."""
    table = json.loads(json.dumps(recipes.recipes_json_releases()))
    for release in ("26.08", "26.02"):
        if version is None:
            del table[release]["transformer_engine"]
        else:
            table[release]["transformer_engine"] = {"version": version, "source": "edited"}
    monkeypatch.setattr(recipes, "recipes_json_releases", lambda: table)
    model = load_model("qwen3-30b-a3b")
    assert _short(model, "26.08") is refused_at_26_08 and _short(model, "26.02") is refused_at_26_02
    assert _short(model, "26.08", scope="moe_router+moe_preprocess") is (version in ("2.9.0", None))
    assert not _short(model, "25.11") and not _short(model, None)   # no check there; the target names no container
    why = wgrad_graph_pin_refusal(model, "26.08", {"moe_a2a_overlap": True, "cuda_graph": "layer",
                                                  "cuda_graph_scope": "attn"})
    assert (why is not None) is refused_at_26_08
    if why:
        assert "\n" not in why and "Transformer Engine >=" in why and "moe_a2a_overlap=false" in why, why
        assert (f"ships Transformer Engine {version}" if version else "no Transformer Engine version") in why, why


def test_the_table_container_te_is_what_the_tree_tests_answer():
    from tests.test_megatron_release_trees import KNOWN
    assert not any("TE version" in k for k in KNOWN)
    assert container_te("26.04")[0] == "2.14.0+71bbefbf" and container_te(None) is None


def test_the_search_offers_no_layout_the_container_could_not_run(monkeypatch, tmp_path):
    """With 26.08's container edited to TE 2.11, the default Mixtral plan (a per-layer graph over attn with the EP
    overlap's delayed wgrad and --overlap-grad-reduce at 2.17.1: test above) writes no such graph over attn, and its
    note, if any, says met."""
    table = json.loads(json.dumps(recipes.recipes_json_releases()))
    table["26.08"]["transformer_engine"] = {"version": "2.11.0", "source": "edited"}
    monkeypatch.setattr(recipes, "recipes_json_releases", lambda: table)
    result = CliRunner().invoke(app, ["plan", "--model", "mixtral-8x7b", "--system", "gb200-nvl72", "--gpus", "64",
                                      "--software", "26.08", "-O", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    section = json.loads((tmp_path / "p" / "plan.json").read_text())["megatron"]
    argv = section["args"]
    scope = argv[argv.index("--cuda-graph-scope") + 1:] if "--cuda-graph-scope" in argv else []
    graphed_attn = "--cuda-graph-impl" in argv and "attn" in scope[:3]
    assert not ("--delay-wgrad-compute" in argv and "--overlap-grad-reduce" in argv and graphed_attn), argv
    assert all(n.endswith(": met") for n in section["notes"] if "Transformer Engine >=" in n), section["notes"]
