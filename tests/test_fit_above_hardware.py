"""A fitted curve faster than the hardware it claims is said, in one WARNING line, from fit to tune's plan to
verify-plan (costmodel/plausibility.py).

Found from outside (probe EN): results with times divided by 1000 got `commbench tune --system h100-hgx` to plan on
a scale-out sendrecv fitted at 756 GB/s per GPU against the preset's 50 GB/s NIC, with no word: a results file from
another fabric, a mislabeled one or a timing fault silently made every plan wrong. It is warned of, not refused (a
new fabric can be faster than a preset)."""

from __future__ import annotations

import json

from commbench.costmodel import Fabric
from commbench.costmodel.plausibility import ABOVE_HARDWARE
from tests.results_files import invoke, write_nccl_hosts_run

ACROSS_HOSTS = ["n1", "n1", "n2", "n2"]   # 2 ranks per domain: the scale-out rate per NIC is busbw / 2


def _warning(lines) -> str:
    found = [line for line in lines if line.startswith(ABOVE_HARDWARE)]
    assert len(found) == 1, lines
    return found[0]


def test_fit_names_the_curve_its_fitted_rate_and_the_nic_it_exceeds(tmp_path):
    results = write_nccl_hosts_run(tmp_path / "fast.jsonl", ACROSS_HOSTS, {"sendrecv": 1500.0, "all_reduce": 40.0})
    for system in ([], ["--system", "h100-hgx", "--racks", "2"]):   # the headers' GPU (hardware.toml), the preset
        out = tmp_path / f"fabric{len(system)}.json"
        fitted = invoke("fit", results, *system, "-O", str(out))
        assert fitted.exit_code == 0, fitted.output   # warned, not refused
        line = _warning(Fabric.from_json(out).warnings)
        assert line in " ".join(fitted.output.split()), fitted.output   # printed whole (wrapped on a terminal)
        assert "sendrecv/scale_out at 7" in line and "GB/s busbw" in line and "the 50 GB/s per GPU of" in line, line
        assert "all_reduce" not in line.split(" (allowed")[0], line   # 20 GB/s per NIC: within the hardware


def test_rates_within_the_hardware_say_nothing(tmp_path):
    # 40 GB/s across hosts (20 per NIC); on one host NVLS all_reduce at 480 GB/s busbw (the preset's own 475/450)
    for hosts, rates in ((ACROSS_HOSTS, {"sendrecv": 40.0, "all_reduce": 40.0}), (["n1"] * 4, {"all_reduce": 480.0})):
        results = write_nccl_hosts_run(tmp_path / f"ok{len(set(hosts))}.jsonl", hosts, rates)
        fitted = invoke("fit", results, "--system", "h100-hgx", "--json")
        assert fitted.exit_code == 0, fitted.output
        assert not any(w.startswith(ABOVE_HARDWARE) for w in json.loads(fitted.output)["warnings"])


def test_tune_plan_and_verify_plan_carry_the_warning(tmp_path):
    results = write_nccl_hosts_run(tmp_path / "fast.jsonl", ACROSS_HOSTS, {"sendrecv": 1500.0, "all_reduce": 40.0})
    plan_dir = tmp_path / "tuned"
    tuned = invoke("tune", "--results", results, "-O", str(plan_dir), "--model", "llama3-8b", "--system", "h100-hgx",
                   "--gpus", "16", "--layout", "tp=1,pp=1,vp=1,ep=1,mbs=1")
    assert tuned.exit_code == 0, tuned.output
    line = _warning(json.loads((plan_dir / "plan.json").read_text())["assumptions"])
    assert "sendrecv/scale_out" in line and "h100-hgx scale_out (ConnectX-7 400G)" in line, line
    verified = invoke("verify-plan", str(plan_dir), "--nproc", "2", "--backend", "gloo", "-e", "64K", "--iters", "1",
                      "--timeout", "60", "--json")
    assert verified.exit_code == 0, verified.output
    flags = json.loads(verified.output)["unmet_assumptions"]
    assert any(f.endswith(line) for f in flags), flags
