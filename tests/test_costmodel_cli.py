"""`commbench systems`, `commbench predict`, `commbench fit`: output, JSON, and one-line user errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import Fabric, collective_time_s, load_preset
from commbench.results.records import JsonlWriter, Measurement, RunHeader
from commbench.nccl_tests_counts import CHUNKED_COLLECTIVES

WIDE = {"COLUMNS": "200"}


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args), env=WIDE)


def test_systems_lists_every_preset_with_checks():
    result = _invoke("systems", "--checks")
    assert result.exit_code == 0, result.output
    for name in ("gb300-nvl72", "gb200-nvl72", "b200-hgx", "b300-hgx", "h100-hgx", "h200-hgx", "h800-hgx"):
        assert name in result.output
    assert "nccl-tests" in result.output and "published" in result.output
    out = json.loads(_invoke("systems", "--checks", "--json").output)
    assert len(out["presets"]) == 7
    assert all(abs(row["relative_error"]) <= 0.10 for row in out["checks"])
    h100 = next(r for r in out["presets"] if r["preset"] == "h100-hgx")
    # NCCL's NVLS-tree across 2 nodes: algbw 5/6 x min(NVLS 0.7314 x 450, the node's 8 NICs x 47 GB/s)
    assert h100["all_reduce_2_domains_busbw_gbps"] == pytest.approx(0.7314 * 450 * 5 / 6 * 2 * 15 / 16, rel=0.02)


def test_predict_table_is_labelled_predicted_and_json_matches_the_api():
    result = _invoke("predict", "--system", "gb300-nvl72", "--racks", "2", "-c", "all_reduce", "-g", "144",
                     "-b", "1M", "-e", "1G", "-f", "4")
    assert result.exit_code == 0, result.output
    assert "predicted" in result.output and "2 domains of 72" in result.output and "256 MiB" in result.output
    out = json.loads(_invoke("predict", "--system", "h100-hgx", "--nodes", "4", "-c", "all_to_all", "-g", "4",
                             "--layout", "strided", "-b", "1K", "-e", "1M", "--json").output)
    assert out["num_domains"] == 4 and all(row["predicted"] for row in out["rows"])
    fabric = load_preset("h100-hgx", num_nodes=4)
    sizes = np.array([row["size_bytes"] for row in out["rows"]])
    expected = collective_time_s(fabric, "all_to_all", sizes, 4, 4) * 1e6
    np.testing.assert_allclose([row["time_us"] for row in out["rows"]], expected)
    times = [row["time_us"] for row in out["rows"]]
    assert times == sorted(times)


@pytest.mark.parametrize("args, message", [
    (["--system", "dgx-9000", "-c", "all_reduce", "-g", "8"], "known presets"),
    (["--system", "h100-hgx", "-c", "all_reduce", "-g", "64"], "at most the 8 GPUs"),
    (["--system", "h100-hgx", "-c", "gather", "-g", "8"], "--collective='gather'"),
    (["--system", "h100-hgx", "-c", "all_reduce", "-g", "8", "--layout", "diagonal"], "--layout"),
    (["-c", "all_reduce", "-g", "8"], "--fabric/--system"),
    (["--fabric", "missing.json", "-c", "all_reduce", "-g", "8"], "cannot be read"),
    (["--system", "gb300-nvl72", "-c", "all_reduce", "-g", "8", "--protocol", "ll256"], "--protocol='ll256'"),
    (["--system", "gb300-nvl72", "-c", "moe_all_to_all", "-g", "8", "--algorithm", "ring"], "--algorithm='ring'"),
    (["--system", "gb300-nvl72", "-c", "all_reduce", "-g", "8", "--algorithm", "foo"], "--algorithm='foo'"),
    (["--system", "h100-hgx", "-c", "all_to_all", "-g", "8", "--algorithm", "nvls"], "--algorithm='nvls'"),
])
def test_predict_user_errors_are_one_line_exit_2(args, message):
    result = _invoke("predict", *args)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def _write_sweep(path, collective: str, group: int, latency_s: float, busbw: float, *, backend: str = "gloo",
                 device: str = "cpu") -> None:
    rng = np.random.default_rng(0)
    with JsonlWriter(path) as writer:
        writer.write(RunHeader(run_id="cli", started_at="t", argv=[], commbench_version="0", python_version="3",
                               torch_version=None, nccl_version=None, cuda_version=None, cupy_version=None,
                               backend=backend, world_size=group, hostnames=["h"], devices=[device] * group,
                               nccl_env={}, launcher="local"))
        for p in range(10, 25):
            size = 1 << p
            time_s = (latency_s + 2 * (group - 1) / group * size / busbw) * float(np.exp(rng.normal(0, 0.02)))
            writer.write(Measurement(run_id="cli", collective=collective, backend=backend, size_bytes=size,
                                     # nccl-tests' count: one rank's chunk for the chunked collectives
                                     count=size // (4 * (group if collective in CHUNKED_COLLECTIVES else 1)),
                                     dtype="float32", op="sum", in_place=False, world_size=group,
                                     group_size=group, iters=10, warmup_iters=2, time_us_median=time_s * 1e6))


def test_fit_writes_a_profile_that_predict_reads(tmp_path):
    results = tmp_path / "ar.jsonl"
    _write_sweep(results, "all_reduce", 4, 200e-6, 2e9)
    profile = tmp_path / "fabric.json"
    result = _invoke("fit", str(results), "-O", str(profile))
    assert result.exit_code == 0, result.output
    assert "held-out" in result.output and "all_reduce gloo n=4" in result.output
    fabric = Fabric.from_json(profile)
    assert fabric.source.startswith("fitted:") and fabric.fit_report[0]["heldout_median_rel_error"] < 0.05
    assert any("one group size" in w for w in fabric.warnings)
    predicted = _invoke("predict", "--fabric", str(profile), "-c", "all_reduce", "-g", "4", "-b", "1M", "-e", "1M")
    assert predicted.exit_code == 0 and "predicted" in predicted.output
    uncovered = _invoke("predict", "--fabric", str(profile), "-c", "all_gather", "-g", "4")
    assert uncovered.exit_code == 2 and "not covered" in uncovered.output


def test_fit_on_a_preset_keeps_unmeasured_curves_and_bad_input_is_one_line(tmp_path):
    results = tmp_path / "ar.jsonl"
    _write_sweep(results, "all_reduce", 8, 30e-6, 300e9, backend="nccl", device="NVIDIA H100 80GB HBM3")
    profile = tmp_path / "h100.json"
    assert _invoke("fit", str(results), "--system", "h100-hgx", "--nodes", "2", "-O", str(profile)).exit_code == 0
    fabric = Fabric.from_json(profile)
    assert fabric.gpu.name == "h100" and fabric.num_gpus == 16 and "all_to_all" in fabric.collectives
    assert {c.algorithm for c in fabric.curves_for("all_reduce", "scale_up")} == {"fitted"}
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = _invoke("fit", str(empty))
    assert result.exit_code == 2 and "no usable points" in result.output
    result = _invoke("fit", str(results), "--backend", "gloo")
    assert result.exit_code == 2 and "--backend" in result.output


def test_fit_on_a_preset_refuses_results_not_measured_with_nccl_on_its_gpu(tmp_path):
    """gloo on CPU ranks replaced gb300-nvl72's NVLink 5 all-reduce with ~3 GB/s of loopback copies, and a
    256-GPU plan ran on it; an H100's curves replaced a GB300's. Now refused in one line naming --system."""
    cpu = tmp_path / "cpu.jsonl"
    _write_sweep(cpu, "all_reduce", 2, 200e-6, 3e9)
    result = _invoke("fit", str(cpu), "--system", "gb300-nvl72", "-O", str(tmp_path / "f.json"))
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "--system='gb300-nvl72' is invalid" in result.output and "gloo on cpu" in result.output
    h100 = tmp_path / "h100.jsonl"
    _write_sweep(h100, "all_reduce", 8, 30e-6, 300e9, backend="nccl", device="NVIDIA H100 80GB HBM3")
    result = _invoke("fit", str(h100), "--system", "gb300-nvl72")
    assert result.exit_code == 2 and "nccl on NVIDIA H100 80GB HBM3" in result.output
    assert not (tmp_path / "f.json").exists()


@pytest.mark.parametrize("device, system", [("NVIDIA GB200", "b200-hgx"), ("NVIDIA GH200 480GB", "h200-hgx"),
                                            ("NVIDIA GB300", "b300-hgx")])
def test_fit_on_a_preset_refuses_a_gpu_whose_name_only_contains_the_presets(tmp_path, device, system):
    """'b200' is a substring of 'NVIDIA GB200' (and 'h200' of GH200, 'b300' of GB300): GB200 NVL72 curves replaced
    b200-hgx's (and tune planned on them as measured). The preset's GPU must be the device's model, not a part
    of another model's name."""
    from commbench.costmodel.profile import device_is_gpu

    results = tmp_path / "r.jsonl"
    _write_sweep(results, "all_reduce", 8, 30e-6, 300e9, backend="nccl", device=device)
    result = _invoke("fit", str(results), "--system", system, "-O", str(tmp_path / "f.json"))
    assert result.exit_code == 2 and f"--system='{system}' is invalid" in result.output, result.output
    assert not (tmp_path / "f.json").exists()
    assert device_is_gpu("NVIDIA B200", "b200") and device_is_gpu("NVIDIA H100 80GB HBM3", "h100")
    assert device_is_gpu("NVIDIA GB200", "gb200") and not device_is_gpu("NVIDIA H1000", "h100")


def test_predict_names_nccls_algorithm_and_protocol_per_size_and_can_force_them():
    result = _invoke("predict", "--system", "h200-hgx", "-c", "all_reduce", "-g", "8", "-b", "1K", "-e", "8G", "-f", "64")
    assert result.exit_code == 0, result.output
    assert "NCCL algo/proto" in result.output and "ring/LL" in result.output and "nvls/Simple" in result.output
    out = json.loads(_invoke("predict", "--system", "h200-hgx", "-c", "all_reduce", "-g", "8", "-b", "1K", "-e", "1G",
                             "-f", "32", "--algorithm", "ring", "--protocol", "LL128", "--json").output)
    assert {(r["algorithm"], r["protocol"]) for r in out["rows"]} == {("ring", "LL128")}
    bad = _invoke("predict", "--system", "h200-hgx", "-c", "all_reduce", "-g", "8", "--protocol", "LL64")
    assert bad.exit_code == 2 and "protocol='LL64'" in bad.output
    checks = json.loads(_invoke("systems", "--checks", "--json").output)["checks"]
    assert any(r["regime"] == "latency" and r["nccl_choice"] == "nvls/Simple" for r in checks)


@pytest.mark.parametrize("algorithm, protocol", [("RING", "ll128"), ("Ring", "Ll128"), ("ring", "LL128")])
def test_predict_reads_nccl_names_in_any_case_as_nccl_does(algorithm, protocol):
    """Probe Q: --protocol ll / --algorithm RING were refused, though NCCL matches NCCL_ALGO / NCCL_PROTO with
    strcasecmp (NVIDIA/nccl src/graph/tuning.cc parseList) and bench/sweep take them lower-case."""
    args = ["predict", "--system", "h200-hgx", "-c", "all_reduce", "-g", "8", "-b", "1K", "-e", "1G", "-f", "32", "--json"]
    out = _invoke(*args, "--algorithm", algorithm, "--protocol", protocol)
    assert out.exit_code == 0, out.output
    want = json.loads(_invoke(*args, "--algorithm", "ring", "--protocol", "LL128").output)["rows"]
    assert json.loads(out.output)["rows"] == want and {(r["algorithm"], r["protocol"]) for r in want} == {("ring", "LL128")}
    nvls = _invoke(*args, "--algorithm", "NVLS", "--protocol", "simple")
    assert nvls.exit_code == 0 and {(r["algorithm"], r["protocol"]) for r in json.loads(nvls.output)["rows"]} == \
        {("nvls", "Simple")}


def test_the_cost_model_reads_algorithm_names_in_any_case():
    from commbench.costmodel import collective_time_s, load_preset
    from commbench.costmodel.nccl_model import combos
    from commbench.costmodel.nccl_tables import ALGORITHMS, canonical_name
    assert combos("all_reduce", "TREE", "simple") == combos("all_reduce", "tree", "Simple") == [("tree", "Simple")]
    assert canonical_name("NVLSTree", ALGORITHMS) == "nvls_tree"   # NCCL_ALGO's own spelling (ncclAlgoStr)
    assert canonical_name("bogus", ALGORITHMS) == "bogus"          # unchanged: the caller refuses it
    fabric = load_preset("h100-hgx")   # all_to_all: alpha-beta curves (pairwise)
    sizes = np.array([1 << 20, 1 << 26], dtype=np.float64)
    assert np.array_equal(collective_time_s(fabric, "all_to_all", sizes, 8, algorithm="PAIRWISE"),
                          collective_time_s(fabric, "all_to_all", sizes, 8, algorithm="pairwise"))


def test_a_fabric_without_a_tier_a_plan_needs_says_what_to_measure(tmp_path):
    """The README's `fit results/*.jsonl -O fabric.json` on ci-small (racks of 2) and then `plan --system
    fabric.json` ended in "collective='all_gather' has no scale_up curve in fabric 'fitted'": no word of what
    the fabric has or what to do."""
    import dataclasses

    preset = load_preset("h100-hgx", num_gpus=8)
    cut = dataclasses.replace(preset, nccl=None, curves=tuple(
        c for c in preset.curves if not (c.collective == "all_gather" and c.tier == "scale_up")))
    path = tmp_path / "fabric.json"
    path.write_text(cut.to_json())
    for args in (["predict", "--fabric", str(path), "-c", "all_gather", "-g", "8"],
                 ["plan", "--model", "llama3-8b", "--system", str(path), "--gpus", "8"]):
        result = _invoke(*args)
        assert result.exit_code == 2, result.output
        line = " ".join(result.output.split())
        assert ("collective='all_gather' has no scale_up curve in fabric 'h100-hgx' (it has all_gather on scale_out): "
                "measure all_gather inside one scale-up domain and fit again") in line, line


@pytest.mark.parametrize("device, system, form", [
    ("NVIDIA H100 PCIe", "h100-hgx", "a PCIe card"), ("NVIDIA H100 NVL", "h100-hgx", "a PCIe NVL card"),
    ("NVIDIA H200 NVL", "h200-hgx", "a PCIe NVL card"), ("NVIDIA H800 PCIe", "h800-hgx", "a PCIe card")])
def test_fit_on_a_preset_refuses_a_pcie_or_nvl_card_of_its_gpu(tmp_path, device, system, form):
    """A PCIe H100 (no NVLink switch) passed as h100-hgx's GPU: its numbers replaced HGX H100's NVLink 4 curves.
    torch's names for the PCIe and NVL cards are refused in one line naming the device, the preset and what it
    expects; the SXM names still fit."""
    results = tmp_path / "r.jsonl"
    _write_sweep(results, "all_reduce", 8, 30e-6, 30e9, backend="nccl", device=device)
    result = _invoke("fit", str(results), "--system", system, "-O", str(tmp_path / "f.json"))
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert f"--system='{system}' is invalid" in result.output and f"measured on {device} (run cli)" in result.output
    assert form in result.output and "expects SXM" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "f.json").exists()


@pytest.mark.parametrize("device, gpu", [("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"),
                                         ("NVIDIA B200", "b200"), ("NVIDIA GB200", "gb200"),
                                         ("NVIDIA GB300 NVL", "gb300"), ("NVIDIA H800", "h800")])
def test_sxm_device_names_are_the_presets_gpu(device, gpu):
    from commbench.costmodel.profile import device_form_factor, device_is_gpu

    assert device_is_gpu(device, gpu) and device_form_factor(device, gpu) is None
    assert device_form_factor("NVIDIA A100-PCIE-40GB", "a100") == "a PCIe card (no NVLink switch)"
    assert not device_is_gpu("NVIDIA A100-PCIE-40GB", "a100") and device_is_gpu("NVIDIA A100-SXM4-80GB", "a100")


def test_fit_on_gb300_accepts_its_nvl_device_name(tmp_path):
    results = tmp_path / "r.jsonl"
    _write_sweep(results, "all_reduce", 8, 30e-6, 600e9, backend="nccl", device="NVIDIA GB300 NVL")
    result = _invoke("fit", str(results), "--system", "gb300-nvl72", "-O", str(tmp_path / "f.json"))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "f.json").exists()
