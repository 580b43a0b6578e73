"""What a plan says a framework's log prints beside its model TFLOP/s and MFU (emit/logged_mfu.py; probe AV
finding 2): TorchTitan 0.3.0 logs `mfu: N/A` for a quantized model (components/metrics.py:486-487) and divides by
its own bf16 table (tools/utils.py get_peak_flops) when it logs one, which has no H800; Megatron-LM logs no MFU."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.data.reference import gpu_names, gpu_spec
from commbench.planner.emit.logged_mfu import TITAN_FALLBACK_TFLOPS, TITAN_PEAK_FLOPS

runner = CliRunner()
PIN = ["--layout", "tp=1,pp=1,vp=1,ep=1,mbs=1"]


def _said(system: str, gpus: int, precision: str, framework: str) -> tuple[str, dict]:
    res = runner.invoke(app, ["plan", "--model", "llama3-8b", "--system", system, "--gpus", str(gpus), *PIN,
                              "--precision", precision, "--framework", framework, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    said = [a for a in doc["assumptions"] if a.startswith("model TFLOP/s and MFU: ")]
    assert len(said) == 1, doc["assumptions"]
    return said[0], doc


@pytest.mark.parametrize("precision,peak", [("fp8", "5,000"), ("mxfp8", "5,000"), ("nvfp4", "10,000")])
def test_a_quantized_torchtitan_plan_says_its_log_reads_no_mfu_and_names_the_peak_its_own_is_of(precision, peak):
    said, doc = _said("gb200-nvl72", 8, precision, "torchtitan")
    assert "tflops and mfu read" not in said, said
    assert "its mfu reads N/A" in said and "components/metrics.py:486-487" in said, said
    assert f"the plan's MFU is of the gb200's {precision} dense peak, {peak} TFLOP/s" in said, said
    assert doc["predicted"]["mfu"] == pytest.approx(doc["predicted"]["model_tflops_per_gpu"] / float(peak.replace(",", "")))


def test_a_bf16_torchtitan_plan_reads_the_same_mfu_where_torchtitan_s_peak_is_the_plan_s():
    said, _ = _said("gb300-nvl72", 8, "bf16", "torchtitan")
    assert "its mfu reads the plan's MFU: get_peak_flops('NVIDIA GB300') is 2,500 TFLOP/s" in said, said


def test_an_h800_bf16_torchtitan_plan_says_torchtitan_divides_by_the_a100_fallback():
    said, _ = _said("h800-hgx", 8, "bf16", "torchtitan")
    assert "its mfu reads 3.170x the plan's MFU: get_peak_flops('NVIDIA H800') is 312 TFLOP/s" in said, said
    assert "A100 fallback" in said and "lspci" in said and "Peak FLOPS used for computing MFU" in said, said


def test_a_megatron_plan_says_its_log_prints_no_mfu_and_its_torchtitan_note_says_what_that_log_reads():
    said, doc = _said("gb300-nvl72", 8, "bf16", "megatron")
    assert "Megatron-LM core_v0.16.1's log prints no MFU" in said and "the plan's MFU is of the gb300's bf16 dense peak" in said
    note = next(n for n in doc["torchtitan"]["notes"] if "GFLOP/token" in n)
    assert "its tflops read 1.125x the plan's model TFLOP/s" in note and "its mfu reads 1.125x the plan's MFU" in note
    _, fp8 = _said("gb300-nvl72", 8, "fp8", "megatron")
    note = next(n for n in fp8["torchtitan"]["notes"] if "GFLOP/token" in n)
    assert "its tflops read 1.125x" in note and "its mfu reads N/A" in note and "tflops and mfu" not in note, note


def test_the_peak_table_is_the_installed_torchtitan_s(monkeypatch):
    """Every GPU of hardware.toml has a row, and each row is what TorchTitan 0.3.0's get_peak_flops returns for the
    device name (lspci absent, as in most containers); the H800 is its A100 fallback."""
    utils = pytest.importorskip("torchtitan.tools.utils")

    def no_lspci(*args, **kwargs):
        raise FileNotFoundError("lspci")
    monkeypatch.setattr(utils.subprocess, "run", no_lspci)
    assert set(TITAN_PEAK_FLOPS) == set(gpu_names())
    for name, (device, peak, _) in TITAN_PEAK_FLOPS.items():
        assert utils.get_peak_flops(device) / 1e12 == peak, name
        assert gpu_spec(name).bf16_tflops == peak or peak == TITAN_FALLBACK_TFLOPS, name
    assert utils.get_peak_flops("an unknown GPU") / 1e12 == TITAN_FALLBACK_TFLOPS

    class Lspci:
        stdout = "01:00.0 3D controller: NVIDIA Corporation GH100 [H800] (rev a1)\n"
    monkeypatch.setattr(utils.subprocess, "run", lambda *a, **k: Lspci())
    assert utils.get_peak_flops("NVIDIA H800") / 1e12 == 989.0   # what the H800 note says lspci changes


@pytest.mark.parametrize("precision", ["bf16", "fp8", "mxfp8", "nvfp4"])
def test_the_launch_s_note_says_n_a_exactly_where_torchtitan_s_own_check_finds_quantization(precision, tmp_path,
                                                                                            monkeypatch):
    """The emitted launch through TorchTitan 0.3.0's configuration path: trainer.py:383's
    has_quantization(model_config) on its model is what the plan's note says the log's mfu reads."""
    pytest.importorskip("torchtitan")
    pytest.importorskip("torchao")
    from tests.test_emit_torchtitan_real import run_titan
    from torchtitan.components.quantization.utils import has_quantization

    from commbench.planner.emit.torchtitan import torchtitan_plan
    from commbench.planner.layout.spec import Layout
    from commbench.planner.models.zoo import load_model
    doc = torchtitan_plan(Layout(tp=1, pp=1, dp=8, mbs=1, gbs=64, precision=precision), load_model("llama3-8b"),
                          gpu=gpu_spec("gb200"))
    note = next(n for n in doc["notes"] if "GFLOP/token" in n)
    config, _, _ = run_titan(doc, 8, "gb200-nvl72", tmp_path, monkeypatch)
    assert has_quantization(config.model_spec.model) == ("its mfu reads N/A" in note), note
