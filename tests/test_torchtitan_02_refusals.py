"""TorchTitan 0.2 launches that torchtitan 0.2.2's own code refuses are refused in one line, never written (probe P7).

Found from outside (session 44, probe P7: emitted launches run through torchtitan 0.2.2 `git archive v0.2.2` on
CPU/meta): with --precision fp8 a MoE model's TOML lists quantize.grouped_mm.float8, whose Float8GroupedMMConverter
asserts pipeline_parallel_degree == 1 and context_parallel_degree == 1 (v0.2.2 components/quantization/float8.py:193-198)
where the search proposed PP 8 (DeepSeek-V3) and a pin cp=2 (Qwen3-30B-A3B) was written; gpt_oss's model args raise on
any CP (v0.2.2 models/gpt_oss/model/args.py:89-92); DeepSeek-V3's TOML trained the 671B flavor's RMSNorm eps 1e-5
(v0.2.2 models/deepseek_v3/model/args.py:62), not the model's 1e-6, with a note, where another RoPE is refused; a
--framework torchtitan layout Megatron's schedule refuses still got megatron_args.txt; --torchtitan-version 0.3.0 /
0.2.2, the names plan.json gives, were refused. torchtitan 0.2.2 cannot be installed beside the 0.3.0 the tests use:
its assertions are reproduced here with their lines; 0.3.0's converters are read from the installed wheel.
"""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.planner import Layout, load_model
from commbench.planner.emit.plan import megatron_section
from commbench.planner.emit.torchtitan import titan_02_pins, torchtitan_plan

# v0.2.2 components/quantization/float8.py:193-198, Float8GroupedMMConverter.__init__
FP8_MOE_ASSERTS_022 = {"pp": "Float8 MoE training prototype does not yet support pipeline parallelism",
                       "cp": "Float8 MoE training prototype does not yet support context parallelism"}
GPT_OSS_CP_022 = "CP support for gpt-oss model is still in progress."   # v0.2.2 models/gpt_oss/model/args.py:90-92
DSV3 = load_model("deepseek-v3")
# the 671B flavor as 0.2.2 builds it (eps 1e-5): a model 0.2 trains, to reach the layout checks
DSV3_FLAVOR = dataclasses.replace(DSV3, architecture=dataclasses.replace(DSV3.architecture, norm_epsilon=1e-5))


def _plan(*args):
    return CliRunner().invoke(app, ["plan", *args], env={"COLUMNS": "400"})


def _one_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip() and not line.startswith("note:")]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    return lines[0]


def test_an_fp8_moe_02_layout_with_pp_or_cp_is_refused_as_0_2_2_asserts():
    piped = Layout(tp=1, pp=2, vp=8, ep=64, etp=1, dp=128, mbs=1, gbs=4096, precision="fp8")
    refused = torchtitan_plan(piped, DSV3_FLAVOR, version="0.2")["refused"]
    assert FP8_MOE_ASSERTS_022["pp"] in refused and "pp=1" in refused and "\n" not in refused, refused
    split = Layout(tp=1, cp=2, ep=8, etp=1, dp=8, mbs=1, gbs=64, precision="fp8")
    refused = torchtitan_plan(split, load_model("qwen3-30b-a3b"), version="0.2")["refused"]
    assert FP8_MOE_ASSERTS_022["cp"] in refused and "cp=1" in refused, refused
    # mxfp8's MXGroupedMMConverter (v0.2.2 mx.py:99-136) asserts neither, nor does 0.3.0's fp8 converter
    assert "refused" not in torchtitan_plan(dataclasses.replace(piped, precision="mxfp8"), DSV3_FLAVOR, version="0.2")
    assert "refused" not in torchtitan_plan(dataclasses.replace(split, precision="mxfp8"), load_model("qwen3-30b-a3b"),
                                            version="0.2")
    assert "refused" not in torchtitan_plan(split, load_model("qwen3-30b-a3b"), version="0.3")
    # a dense model's fp8 has no experts converter
    dense = Layout(tp=1, pp=2, cp=2, dp=8, mbs=1, gbs=64, precision="fp8")
    assert "refused" not in torchtitan_plan(dense, load_model("llama3.1-70b"), version="0.2")


def test_the_02_search_fixes_pp_and_cp_for_fp8_moe_and_refuses_a_pin_against_it(tmp_path):
    assert titan_02_pins(DSV3_FLAVOR, {}, "fp8")["pp"] == 1 and titan_02_pins(DSV3_FLAVOR, {}, "fp8")["cp"] == 1
    assert "pp" not in titan_02_pins(DSV3_FLAVOR, {}, "mxfp8") and "cp" not in titan_02_pins(DSV3_FLAVOR, {}, "mxfp8")
    with pytest.raises(CommbenchError, match="pp=8 is invalid with --torchtitan-version 0.2"):
        titan_02_pins(DSV3_FLAVOR, {"pp": 8}, "fp8")
    base = ["--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "16", "--framework", "torchtitan",
            "--torchtitan-version", "0.2", "--precision", "fp8"]
    line = _one_line(_plan(*base, "--layout", "cp=2"))
    assert "cp=2 is invalid with --torchtitan-version 0.2 for qwen3-30b-a3b" in line and FP8_MOE_ASSERTS_022["cp"] in line
    result = _plan(*base, "--top", "1", "-O", str(tmp_path))
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert doc["layout"]["cp"] == 1 and doc["layout"]["pp"] == 1 and "refused" not in doc["torchtitan"]


def test_gpt_oss_02_cp_is_refused_naming_0_2_2_and_not_offering_0_3():
    line = _one_line(_plan("--model", "gpt-oss-120b", "--system", "h100-hgx", "--gpus", "64", "--framework",
                           "torchtitan", "--torchtitan-version", "0.2", "--layout", "cp=2"))
    assert GPT_OSS_CP_022 in line and "0.3.0" not in line and "--torchtitan-version 0.3" not in line, line
    lay = Layout(tp=1, cp=2, ep=8, etp=1, dp=32, mbs=1, gbs=256)
    refused = torchtitan_plan(lay, load_model("gpt-oss-120b"), version="0.2")["refused"]
    assert GPT_OSS_CP_022 in refused and "cp=1" in refused, refused


def test_a_02_flavor_with_another_norm_epsilon_is_refused_as_another_rope_is():
    lay = Layout(tp=1, pp=1, dp=8, mbs=1, gbs=64, ep=8, etp=1)
    refused = torchtitan_plan(lay, DSV3, version="0.2")["refused"]
    assert refused.startswith("TorchTitan 0.2.2's deepseek_v3 671B builds norm epsilon 1e-05 (the model: 1e-06)")
    assert "--torchtitan-version 0.3" in refused and "\n" not in refused, refused
    assert "refused" not in torchtitan_plan(lay, DSV3, version="0.3")
    line = _one_line(_plan("--model", "deepseek-v3", "--system", "gb200-nvl72", "--gpus", "256", "--framework",
                           "torchtitan", "--torchtitan-version", "0.2", "--precision", "fp8"))
    assert "norm epsilon 1e-05 (the model: 1e-06)" in line and "--torchtitan-version 0.3" in line, line


@pytest.mark.parametrize("version, full", [("0.3.0", "0.3.0"), ("0.2.2", "0.2.2"), ("0.3", "0.3.0")])
def test_the_full_torchtitan_versions_plan_json_names_are_accepted(version, full):
    result = _plan("--model", "llama3.1-70b", "--system", "h100-hgx", "--gpus", "32", "--gbs", "64", "--layout",
                   "tp=8,pp=1,mbs=1", "--torchtitan-version", version, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["torchtitan"]["version"] == full


def test_another_torchtitan_version_is_refused_in_one_line():
    line = _one_line(_plan("--model", "llama3.1-70b", "--system", "h100-hgx", "--gpus", "32", "--torchtitan-version",
                           "0.3.1"))
    assert "--torchtitan-version" in line and "0.3.1" in line and "0.3.0" in line and "0.2.2" in line, line


def test_a_torchtitan_layout_megatron_refuses_writes_no_megatron_args(tmp_path):
    """PP 8 x VP 4 with 4 micro-batches: TorchTitan's interleaved 1F1B runs it, megatron-core 0.16.1's schedule
    groups pp micro-batches per virtual stage and raises (the layout rules' "schedule")."""
    result = _plan("--model", "deepseek-v3", "--system", "gb200-nvl72", "--gpus", "256", "--framework", "torchtitan",
                   "--layout", "tp=1,pp=8,vp=4,ep=32,mbs=1", "--gbs", "128", "-O", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "megatron_args.txt").exists() and not (tmp_path / "launch.env").exists()
    assert (tmp_path / "torchtitan_args.txt").exists()
    meg = json.loads((tmp_path / "plan.json").read_text())["megatron"]
    assert "schedule rule broken" in meg["refused"] and not meg["launch"] and "args" not in meg
    said = [line for line in result.output.splitlines() if line.startswith("Megatron-LM: ")]
    assert len(said) == 1 and "schedule rule broken" in said[0], result.output
    ok = megatron_section(Layout(tp=1, pp=8, vp=4, ep=32, etp=1, dp=32, mbs=1, gbs=256), DSV3, gpu_name="gb200",
                          fabric_name="gb200-nvl72")
    assert "refused" not in ok and ok["launch"]


def test_0_3_0_s_grouped_gemm_converters_refuse_neither_pp_nor_cp():
    """The 0.3 search keeps PP and CP for fp8 / mxfp8 MoE: the installed 0.3.0 converters assert neither."""
    pytest.importorskip("torchtitan")
    pytest.importorskip("torchao")
    from tests.torchtitan_train import install_stand_ins
    install_stand_ins()
    from torchtitan.components.quantization import float8, mx
    for converter in (float8.Float8GroupedExpertsConverter, mx.MXFP8GroupedExpertsConverter):
        source = inspect.getsource(converter)
        assert "pipeline_parallel" not in source and "context_parallel" not in source, converter
