"""What a TorchTitan 0.3.0 launch trains, against what the plan predicts (probe G of session 31):
the MoE MXFP8 recipe (router gate and lm_head in BF16, token groups padded to 128 for sm_100), gpt-oss's expert K
(2880) that the MXFP8 grouped GEMM cannot take, the MTP layers a --framework torchtitan prediction charged though
the launch trains none, and the fp8 rowwise recipe; and a recompute_layers pin above a model chunk's layers."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.planner import Layout, load_model
from commbench.planner.emit.torchtitan import torchtitan_plan

MOE_MXFP8 = [("qwen3-30b-a3b", "b200-hgx"), ("deepseek-v3", "gb300-nvl72")]


@pytest.mark.parametrize("name, system", MOE_MXFP8)
def test_a_moe_mxfp8_launch_keeps_router_gate_and_lm_head_bf16_and_pads_groups_to_128(name, system, tmp_path,
                                                                                     monkeypatch):
    """MXFP8LinearConverter.Config() with no fqns converted every Linear, the MoE router gate and lm_head too, and
    MXFP8GroupedExpertsConverter padded token groups to its default 32, where sm_100's CuTeDSL kernel needs 128:
    TorchTitan's own MoE recipe (deepseek_v3_debugmodel_mxfp8) names the Linears to convert and pads to 128.
    Walked on the model config TorchTitan's configuration path builds from the emitted launch."""
    pytest.importorskip("torchtitan")
    pytest.importorskip("torchao")
    from tests.test_emit_torchtitan_real import run_titan
    from torchtitan.config.configurable import Configurable
    model = load_model(name)
    lay = Layout(tp=1, pp=1, dp=8, ep=8, etp=1, mbs=1, gbs=64, precision="mxfp8")
    doc = torchtitan_plan(lay, model)
    assert "refused" not in doc, doc
    config, _, _ = run_titan(doc, 8, system, tmp_path, monkeypatch)
    kinds: dict[str, set[str]] = {}
    pads = set()
    for fqn, conf, _, _ in config.model_spec.model.traverse(Configurable.Config, recurse=True):
        kind = type(conf).__qualname__
        if "token_dispatcher" in fqn:
            pads.add(getattr(conf, "pad_multiple", None))
        if kind.endswith("Linear.Config") and "FusedQKV" not in kind:
            kinds.setdefault(re.sub(r"layers\.\d+", "layers.N", fqn), set()).add(kind)
    assert kinds["lm_head"] == {"Linear.Config"} and kinds["layers.N.moe.router.gate"] == {"Linear.Config"}, kinds
    others = {fqn: k for fqn, k in kinds.items() if fqn not in ("lm_head", "layers.N.moe.router.gate")}
    assert others and all(k == {"MXFP8Linear.Config"} for k in others.values()), others
    if model.num_shared_experts:
        assert any("shared_experts" in fqn for fqn in others) and any("feed_forward" in fqn for fqn in others)
    assert pads == {128}


def test_gpt_oss_in_mxfp8_is_refused_naming_its_expert_k(tmp_path):
    """gpt-oss's expert GEMMs have K = 2880 (hidden and expert FFN), not a multiple of 128, which torchao's sm_100
    MXFP8 quantization kernel asserts: the launch was emitted with MXFP8 grouped experts anyway."""
    model = load_model("gpt-oss-20b")
    doc = torchtitan_plan(Layout(tp=1, pp=1, dp=8, ep=8, etp=1, mbs=1, gbs=64, precision="mxfp8"), model)
    assert "K a multiple of 128 (hidden 2880 and expert_ffn 2880 are not)" in doc.get("refused", ""), doc
    assert "refused" not in torchtitan_plan(Layout(tp=1, pp=1, dp=8, ep=8, etp=1, mbs=1, gbs=64, precision="fp8"), model)
    base = ["plan", "--model", "gpt-oss-20b", "--system", "b200-hgx", "--gpus", "8", "--framework", "torchtitan",
            "--top", "1"]
    res = CliRunner().invoke(app, base + ["--precision", "mxfp8", "-O", str(tmp_path / "mx")], env={"COLUMNS": "200"})
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert res.output.startswith("error: --precision mxfp8") and "--precision fp8 or bf16" in res.output
    assert not (tmp_path / "mx" / "plan.json").exists()
    ok = CliRunner().invoke(app, base + ["--precision", "fp8", "-O", str(tmp_path / "f8")], env={"COLUMNS": "200"})
    assert ok.exit_code == 0, ok.output


def test_the_default_precision_is_one_torchtitan_trains_the_model_in_whole(tmp_path):
    """--precision not given: the default is the best the GPU runs that the framework trains the model in whole
    (--precision help). On Blackwell that is mxfp8, which TorchTitan 0.3.0 cannot train gpt-oss's experts in, so the
    default refused the plan it had chosen for the user; now it is fp8, said in a note. Megatron and other models keep
    mxfp8."""
    import json

    from commbench.planner.layout.precision import default_precision
    from commbench.costmodel import load_preset

    b200 = load_preset("b200-hgx", num_gpus=8).gpu
    oss = load_model("gpt-oss-20b")
    assert default_precision(b200, model=oss, framework="torchtitan")[0] == "fp8"
    assert default_precision(b200, model=oss, framework="megatron") == ("mxfp8", "")
    assert default_precision(b200, model=load_model("qwen3-30b-a3b"), framework="torchtitan") == ("mxfp8", "")
    base = ["plan", "--model", "gpt-oss-20b", "--system", "b200-hgx", "--gpus", "8", "--framework", "torchtitan",
            "--top", "1"]
    res = CliRunner().invoke(app, base + ["-O", str(tmp_path / "d")], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert "note: --precision not given: fp8, not mxfp8" in " ".join(res.output.split()), res.output
    assert json.loads((tmp_path / "d" / "plan.json").read_text())["layout"]["precision"] == "fp8"


def _dsv3_prediction(framework: str, mtp: int, tmp_path) -> dict:
    """plan --layout (one pinned layout) of deepseek-v3 on 256 H100, from a model file whose entry has `mtp` MTP
    layers (the probe's reproduction)."""
    from importlib.resources import files
    text = files("commbench.data").joinpath("models.toml").read_text()
    blocks = re.split(r"(?m)^(?=\[)", text)
    keep = [b.replace("[model.deepseek-v3", "[model.dsv3-mtp", 1) for b in blocks if b.startswith("[model.deepseek-v3")]
    keep += [b for b in blocks if b.startswith("[source.")]
    path = tmp_path / f"m{mtp}.toml"
    path.write_text(re.sub(r"(?m)^mtp_layers = \d+", f"mtp_layers = {mtp}", "".join(keep)))
    res = CliRunner().invoke(app, ["plan", "--model", "dsv3-mtp", "--model-file", str(path), "--system", "h100-hgx",
                                   "--gpus", "256", "--framework", framework, "--layout",
                                   "tp=4,pp=16,vp=1,ep=16,etp=1,mbs=1,recompute=selective", "--json"],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_framework_torchtitan_predicts_without_the_mtp_layer_its_launch_does_not_train(tmp_path):
    """--framework torchtitan charged DeepSeek-V3's MTP layer (79.5 s a step, 824 tokens/s/GPU) though TorchTitan
    0.3.0's launch trains none (65.9 s, 994 without it): the prediction is now the model without MTP, said in the
    assumptions and the TorchTitan notes; --framework megatron still charges it (its arguments train it)."""
    titan, titan_no_mtp = _dsv3_prediction("torchtitan", 1, tmp_path), _dsv3_prediction("torchtitan", 0, tmp_path)
    assert titan["predicted"]["step_s"] == titan_no_mtp["predicted"]["step_s"]
    assert titan["predicted"]["tokens_per_s_per_gpu"] == titan_no_mtp["predicted"]["tokens_per_s_per_gpu"]
    assert any("leaves out dsv3-mtp's 1 MTP layer(s)" in a for a in titan["assumptions"]), titan["assumptions"]
    assert any("the prediction leaves them out too" in n for n in titan["torchtitan"]["notes"])
    assert "--mtp-num-layers" in titan["megatron_args"]
    mega, mega_no_mtp = _dsv3_prediction("megatron", 1, tmp_path), _dsv3_prediction("megatron", 0, tmp_path)
    assert mega["predicted"]["step_s"] > mega_no_mtp["predicted"]["step_s"]
    assert any("the prediction includes" in n for n in mega["torchtitan"]["notes"])


def test_a_torchtitan_fp8_launch_names_the_rowwise_recipe_it_runs():
    """TorchTitan 0.3.0's Float8LinearConverter runs torchao's rowwise recipe (its only ones: rowwise and
    rowwise_with_gw_hp) while the plan's Megatron arguments say --fp8-recipe tensorwise; no note said so."""
    for name in ("qwen3-30b-a3b", "llama3.1-405b"):
        model = load_model(name)
        moe = {"ep": 8, "etp": 1} if model.is_moe else {}
        doc = torchtitan_plan(Layout(tp=1, pp=1, dp=8, mbs=1, gbs=64, precision="fp8", **moe), model)
        said = [n for n in doc.get("notes", []) if "rowwise" in n]
        assert len(said) == 1 and "--fp8-recipe tensorwise" in said[0], doc
        assert ("grouped GEMMs" in said[0]) == model.is_moe
    doc = torchtitan_plan(Layout(tp=1, pp=1, dp=8, ep=8, etp=1, mbs=1, gbs=64, precision="bf16"),
                          load_model("qwen3-30b-a3b"))
    assert not any("rowwise" in n for n in doc["notes"])


@pytest.mark.parametrize("layout, says", [
    ("recompute=full,recompute_layers=99", "recompute_layers=99 is invalid: 1..32:"),
    ("tp=1,pp=2,vp=16,mbs=1,recompute=full,recompute_layers=3", "recompute_layers=3 is invalid: 1..2:"),
])
def test_recompute_layers_above_a_model_chunk_s_layers_is_refused_in_one_line(layout, says, tmp_path):
    """recompute_layers=99 was planned and emitted as --recompute-num-layers 99 for Llama 3 8B (32 layers; PP2 VP16
    chunks of 2): megatron-core documents 1..the layers per pipeline rank. Refused in one line naming the range."""
    res = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8", "--top", "1",
                                   "--layout", layout, "-O", str(tmp_path)], env={"COLUMNS": "200"})
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert res.output.startswith(f"error: {says}") and "num_layers_per_pipeline_rank" in res.output, res.output
    assert not (tmp_path / "plan.json").exists()


def test_each_searched_layout_holds_recompute_layers_to_its_own_largest_chunk():
    """Searched layouts with a pinned recompute_layers: only those whose largest model chunk holds that many layers
    (a PP2 VP8 layout's chunks of 2 to 3 layers do not take 4); the layout rule names the allowed range."""
    import numpy as np

    from commbench.costmodel import load_preset
    from commbench.planner.layout.spec import LayoutArrays, check_layout, layout_violations, RULE_BITS
    from commbench.planner.layout.split import most_chunk_layers
    from commbench.planner.search.space import SearchRequest, search
    model = load_model("llama3-8b")
    lays = [Layout(tp=1, pp=2, vp=v, dp=4, mbs=1, gbs=64, recompute="full", recompute_layers=4) for v in (1, 4, 8)]
    bits = layout_violations(model, LayoutArrays.from_layouts(lays), 8)
    assert [bool(b & RULE_BITS["recompute_layers"]) for b in bits] == [False, False, True]
    with pytest.raises(CommbenchError, match=r"allowed 1\.\.3 \(the largest model chunk's layers: 32 layers over pp = 2 x vp = 8\)"):
        check_layout(model, lays[2], 8)
    req = SearchRequest(model=model, fabric=load_preset("h100-hgx", num_gpus=8), num_gpus=8, gbs=64,
                        pins={"recompute": "full", "recompute_layers": 4})
    result = search(req)
    arr = result.layouts
    assert len(result) and np.all(most_chunk_layers(model, arr.pp, arr.vp) >= 4)


@pytest.mark.parametrize("tp, sequence_parallel, emitted", [(1, True, False), (1, False, False), (2, True, True),
                                                             (2, False, False)])
def test_a_0_3_launch_turns_sequence_parallel_on_only_with_tp(tp, sequence_parallel, emitted):
    """TorchTitan 0.3.0 shards the sequence over the TP axis (decoder_sharding.py dense_sequence_parallel_placement):
    at tp=1 enable_sequence_parallel does nothing; the launch wrote --parallelism.enable_sequence_parallel at tp=1
    (the layout's default sequence_parallel=true), where the Megatron arguments leave --sequence-parallel out."""
    doc = torchtitan_plan(Layout(tp=tp, pp=1, dp=8 // tp, ep=8 // tp, etp=1, mbs=1, gbs=64,
                                 sequence_parallel=sequence_parallel), load_model("qwen3-30b-a3b"))
    assert "refused" not in doc, doc
    assert doc["sections"]["parallelism"]["enable_sequence_parallel"] is emitted
