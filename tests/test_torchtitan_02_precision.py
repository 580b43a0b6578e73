"""The TorchTitan 0.2 TOML trains the precision the plan priced, compiled (probe PB, session 42).

The TOMLs listed quantize.linear.float8 / quantize.linear.mx with no filter_fqns, so TorchTitan 0.2.2's own converter
selection (its Float8Linear filter_fqns defaults to [], MXLinear's to ["output"]) made `output` and every
`layers.N.moe.router.gate` Float8Linear, and a MoE model's router gate MXFP8, where the prediction prices both in BF16;
and they had no [compile] (0.2.2 default enable=False): the launch ran eager where the prediction charges compiled
kernels. torchtitan 0.2.2 cannot be installed beside the 0.3.0 the tests use, so its selection is reproduced here.
"""

from __future__ import annotations

import dataclasses
import json

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner import Layout, load_model
from commbench.planner.emit.torchtitan import torchtitan_plan, torchtitan_toml
from commbench.planner.layout.spec import PRECISIONS
from commbench.planner.step.module_precision import output_layer_quantized
from tests.test_hf_launch_fidelity import _variant

# torchtitan v0.2.2 config/job_config.py:741 Float8Linear.filter_fqns = [], :784 MXLinear.filter_fqns = ["output"]
DEFAULT_FILTER_022 = {"float8": [], "mx": ["output"]}
COMPILE_FIELDS_022 = {"enable", "components", "backend"}   # job_config.py:721 Compile


def converted_022(fqn: str, filter_fqns: list[str]) -> bool:
    """torchtitan v0.2.2 components/quantization/utils.py module_filter_fn for an nn.Linear whose dims are multiples of
    16 (every one named below): converted unless a filter FQN is a substring of its FQN."""
    return not any(f in fqn for f in filter_fqns)


# Linear FQNs of the v0.2.2 models (models/*/model/model.py, models/moe/moe.py: MoE.router.gate, shared_experts)
FQNS_022 = {"qwen3": ["output", "layers.3.moe.router.gate", "layers.3.attention.wq", "layers.3.attention.wo"],
            "llama3": ["output", "layers.3.attention.wq", "layers.3.feed_forward.w1"],
            "deepseek_v3": ["output", "layers.3.moe.router.gate", "layers.3.attention.wkv_a",
                            "layers.3.moe.shared_experts.w1", "layers.0.feed_forward.w2"]}

# DeepSeek-V3's RMSNorms are eps 1e-6, 0.2.2's deepseek_v3 671B's 1e-5 (a 0.2 plan of it is refused): the cases build
# the flavor itself. fp8 runs pp=1 (0.2.2's Float8GroupedMMConverter refuses pipeline parallelism).
DSV3_FLAVOR_02 = "deepseek-v3 (norm eps 1e-5)"
CASES = [("qwen3-30b-a3b", "fp8", dict(ep=8, etp=1, dp=24, gbs=384)),
         ("llama3.1-70b", "fp8", dict(dp=64, gbs=256)),
         ("llama3.1-70b", "mxfp8", dict(dp=64, gbs=256)),
         (DSV3_FLAVOR_02, "mxfp8", dict(pp=2, vp=8, ep=64, etp=1, dp=128, gbs=4096)),
         (DSV3_FLAVOR_02, "fp8", dict(ep=64, etp=1, dp=256, gbs=4096))]


def _model(name: str):
    if name != DSV3_FLAVOR_02:
        return load_model(name)
    model = load_model("deepseek-v3")
    return dataclasses.replace(model, architecture=dataclasses.replace(model.architecture, norm_epsilon=1e-5))


def _toml(name: str, precision: str, dims: dict) -> dict:
    lay = Layout(tp=1, mbs=1, precision=precision, recompute="full", **dims)
    doc = torchtitan_plan(lay, _model(name), version="0.2", framework="torchtitan")
    assert "refused" not in doc, doc
    return tomllib.loads(torchtitan_toml(doc))


@pytest.mark.parametrize("name, precision, dims", CASES)
def test_the_02_launch_converts_the_linears_the_prediction_prices_in_the_precision(name, precision, dims):
    parsed = _toml(name, precision, dims)
    model = _model(name)
    kind = {"fp8": "float8", "mxfp8": "mx"}[precision]
    assert parsed["model"]["converters"][0] == f"quantize.linear.{kind}"
    filters = parsed.get("quantize", {}).get("linear", {}).get(kind, {}).get("filter_fqns", DEFAULT_FILTER_022[kind])
    head_priced = bool(output_layer_quantized(PRECISIONS.index(precision), "torchtitan", model.is_moe))
    for fqn in FQNS_022[parsed["model"]["name"]]:
        want = head_priced if fqn == "output" else "router.gate" not in fqn
        assert converted_022(fqn, filters) == want, (fqn, filters)


@pytest.mark.parametrize("name, precision, dims", CASES + [("qwen3-30b-a3b", "bf16", dict(ep=8, etp=1, dp=24, gbs=384))])
def test_the_02_launch_compiles_the_model_as_the_prediction_charges(name, precision, dims):
    parsed = _toml(name, precision, dims)
    assert set(parsed["compile"]) <= COMPILE_FIELDS_022
    assert parsed["compile"]["enable"] is True and "model" in parsed["compile"]["components"]


def test_an_mxfp8_02_launch_with_tp_is_refused_as_0_2_2_cannot_compile_it():
    """components/quantization/mx.py (v0.2.2): assert not (model compiled and tensor_parallel_degree > 1)."""
    doc = torchtitan_plan(Layout(tp=2, mbs=1, dp=32, gbs=256, precision="mxfp8"), load_model("llama3.1-70b"),
                          version="0.2")
    assert "TP not yet supported with torch.compile for mxfp8" in doc["refused"] and "tp=1" in doc["refused"]
    assert "refused" not in torchtitan_plan(Layout(tp=2, mbs=1, dp=32, gbs=256, precision="mxfp8"),
                                            load_model("llama3.1-70b"), version="0.3")


def test_the_02_toml_says_to_set_the_tokenizer_and_data_or_sets_an_hf_model_s_folder(tmp_path):
    """0.2.2 defaults hf_assets_path ./tests/assets/tokenizer and dataset c4_test (job_config.py:107, :244)."""
    parsed = _toml("qwen3-30b-a3b", "bf16", dict(ep=8, etp=1, dp=24, gbs=384))
    assert "hf_assets_path" not in parsed["model"] and "dataset" not in parsed["training"]
    doc = torchtitan_plan(Layout(tp=1, mbs=1, ep=8, etp=1, dp=24, gbs=384), load_model("qwen3-30b-a3b"), version="0.2")
    said = [n for n in doc["notes"] if "hf_assets_path" in n and "dataset" in n]
    assert len(said) == 1 and "c4_test" in said[0]
    _variant(tmp_path, "Qwen3-30B-A3B")
    (tmp_path / "tokenizer.json").write_text("{}")
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["plan", "--model", f"hf:{tmp_path}", "--system", "h100-hgx", "--gpus", "16",
                                   "--top", "1", "--framework", "torchtitan", "--torchtitan-version", "0.2",
                                   "--layout", "tp=1,pp=1", "-O", str(out), "--force"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    toml = tomllib.loads((out / "torchtitan.toml").read_text())
    assert toml["model"]["hf_assets_path"] == str(tmp_path.resolve())
    notes = json.loads((out / "plan.json").read_text())["torchtitan"]["notes"]
    assert any("[training] dataset" in n and "hf_assets_path" not in n for n in notes)


def test_an_fp8_02_launch_says_the_recipes_it_trains():
    """The 0.3 launch said its rowwise recipe; the 0.2 TOML (recipe_name unset: 0.2.2 trains tensorwise, its experts
    rowwise) said nothing, where the plan's precision reads "TorchTitan's launch: torchao float8 rowwise scales"."""
    for name, dims, moe in (("llama3.1-70b", dict(dp=64, gbs=256), False),
                            ("qwen3-30b-a3b", dict(ep=8, etp=1, dp=24, gbs=384), True)):
        parsed = _toml(name, "fp8", dims)
        assert "recipe_name" not in parsed["quantize"]["linear"]["float8"]
        doc = torchtitan_plan(Layout(tp=1, mbs=1, precision="fp8", recompute="full", **dims), load_model(name),
                              version="0.2", framework="torchtitan")
        said = [n for n in doc["notes"] if n.startswith("fp8 recipe: TorchTitan 0.2.2")]
        assert len(said) == 1 and "tensorwise" in said[0] and ("grouped GEMMs rowwise" in said[0]) == moe, said
