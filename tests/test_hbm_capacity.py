"""A GPU's capacity is the bytes CUDA exposes on it (torch.cuda.get_device_properties(i).total_memory, the "total
capacity of N GiB" in PyTorch's out-of-memory message), GiB x 2^30, each from a cited public log; the marketing
figure (hbm_gb: "80GB", "141GB") is only a label. It was hbm_usable_gb x 1e9 (80e9 B for an H100 that exposes
79.11 GiB = 84.9e9 B): every GPU ~6% smaller than it is."""

from __future__ import annotations

import pytest

from commbench.costmodel import load_preset
from commbench.data.reference import gpu_names, gpu_spec, hardware_toml
from commbench.planner.layout.spec import Layout, LayoutArrays
from commbench.planner.models.zoo import load_model
from commbench.planner.step.evaluate import evaluate_layouts

GIB = 2 ** 30


@pytest.mark.parametrize("name", gpu_names())
def test_every_gpu_states_the_cuda_capacity_with_a_source(name):
    row = hardware_toml()["gpu"][name]
    assert "hbm_usable_gb" not in row                       # one figure, not two
    gpu = gpu_spec(name)
    assert gpu.usable_hbm_bytes == row["hbm_cuda_gib"] * GIB
    assert "capacity of" in row["hbm_cuda_source"] or "Total Global Memory" in row["hbm_cuda_source"]
    # what CUDA exposes is below the label's number (HBM the driver and ECC keep, GB vs GiB)
    assert row["hbm_cuda_gib"] < row["hbm_gb"]


@pytest.mark.parametrize("name, gib", [("h100", 79.11), ("h200", 139.72), ("b200", 178.35), ("gb200", 184.00),
                                       ("b300", 267.69), ("gb300", 276.50)])
def test_sourced_capacities(name, gib):
    assert gpu_spec(name).usable_hbm_bytes == pytest.approx(gib * GIB, abs=1.0)


def test_the_plan_charges_the_exposed_bytes():
    bd = evaluate_layouts(load_model("llama3-8b"), load_preset("h100-hgx", num_gpus=8),
                          LayoutArrays.from_layouts([Layout(tp=1, dp=8, mbs=1, gbs=64)]))
    assert bd.mem_capacity_bytes[0] == pytest.approx(79.11 * GIB)
    assert bd.mem_capacity_bytes[0] > 84.9e9


def test_a_gpu_row_without_its_cuda_capacity_is_refused_not_read_as_the_label(monkeypatch):
    import copy

    from commbench.data import reference
    from commbench.errors import CommbenchError
    table = copy.deepcopy(hardware_toml())
    del table["gpu"]["h100"]["hbm_cuda_gib"]
    monkeypatch.setattr(reference, "hardware_toml", lambda: table)
    with pytest.raises(CommbenchError, match="hbm_cuda_gib") as err:
        reference.gpu_spec("h100")
    assert "\n" not in str(err.value)
