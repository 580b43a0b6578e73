"""Reference facts shipped with the package: GPU datasheets, model architectures, published runs.

Copies of ../shared/reference (hardware.toml, models.toml, calibration-runs.json, FLOPS.md), so an
installed commbench can plan without the source tree.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from commbench.errors import invalid


def _data_text(name: str) -> str:
    return resources.files("commbench.data").joinpath(name).read_text(encoding="utf-8")


@functools.cache
def hardware_toml() -> dict[str, Any]:
    return tomllib.loads(_data_text("hardware.toml"))


@functools.cache
def models_toml() -> dict[str, Any]:
    return tomllib.loads(_data_text("models.toml"))


@functools.cache
def recipes_json() -> dict[str, Any]:
    """Megatron-Bridge performance recipes per release (recipes.json; planner/layout/recipes.py reads it)."""
    return json.loads(_data_text("recipes.json"))


@functools.cache
def megatron_release_flags_json() -> dict[str, Any]:
    """How each table release's Megatron-LM parse_args differs from core_v0.16.1's (megatron-release-flags.json,
    tools/megatron_release_flags.py; planner/layout/release_flags.py reads it)."""
    return json.loads(_data_text("megatron-release-flags.json"))


@functools.cache
def calibration_runs() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(_data_text("calibration-runs.json")))


@dataclass(frozen=True, kw_only=True)
class GpuSpec:
    """Datasheet figures of one GPU (dense TFLOP/s; GB/s with GB = 1e9 B)."""

    name: str
    bf16_tflops: float
    fp8_tflops: float
    fp4_tflops: float | None
    hbm_gb: float                        # the marketing figure ("80GB"), a label only: see usable_hbm_bytes
    hbm_tbps: float
    nvlink_gbps_per_dir: float
    scale_up_domain: int
    scale_out_gbit_per_gpu: float
    source: str
    hbm_cuda_gib: float = 0.0            # what CUDA exposes to a process, GiB (hardware.toml hbm_cuda_gib, cited)
    hbm_cuda_source: str = ""
    sms: int | None = None
    sfu_texp_per_s: float | None = None  # exponentials (MUFU.EX2) per second, 1e12
    tdp_w: float | None = None           # power limit (W)
    clock_reference: str | None = None   # family member whose datasheet rate holds at its power limit
    sustained_tensor_fraction: float | None = None  # see sustained_tensor_fraction()
    precisions: tuple[str, ...] = ("bf16",)  # training precisions its Tensor Cores run (hardware.toml)
    compute_capability: tuple[int, int] | None = None
    host_link_gbps_per_dir: float | None = None  # GPU <-> host memory (PCIe or NVLink-C2C), one direction
    host_memory_gb_per_gpu: float | None = None  # host (CPU) memory per GPU

    @property
    def usable_hbm_bytes(self) -> float:
        """The HBM a training process can allocate: what CUDA exposes (torch.cuda.get_device_properties(i).
        total_memory, PyTorch's "total capacity of N GiB"), hbm_cuda_gib x 2^30 bytes. hbm_gb, the marketing
        figure, is a label only (an "80GB" H100 exposes 79.11 GiB = 84.9e9 B)."""
        return self.hbm_cuda_gib * GIB

    @property
    def scale_out_gbps(self) -> float:
        """NIC bandwidth per GPU in GB/s (800 Gb/s -> 100 GB/s)."""
        return self.scale_out_gbit_per_gpu / 8.0


def gpu_names() -> list[str]:
    return sorted(hardware_toml()["gpu"])


def gpu_spec(name: str) -> GpuSpec:
    """The datasheet of GPU `name` (gb300, gb200, b200, b300, h100, h200, h800)."""
    table = hardware_toml()["gpu"]
    key = name.lower()
    if key not in table:
        raise invalid("gpu", name, f"known GPUs: {', '.join(gpu_names())}")
    row = table[key]
    return GpuSpec(
        name=key,
        bf16_tflops=float(row["bf16_tflops"]),
        fp8_tflops=float(row["fp8_tflops"]),
        fp4_tflops=float(row["fp4_tflops"]) if "fp4_tflops" in row else None,
        hbm_gb=float(row["hbm_gb"]),
        hbm_tbps=float(row["hbm_tbps"]),
        nvlink_gbps_per_dir=float(row["nvlink_gbps_per_dir"]),
        scale_up_domain=int(row["scale_up_domain"]),
        scale_out_gbit_per_gpu=float(row["scale_out_gbit_per_gpu"]),
        source=str(row.get("source", "")),
        hbm_cuda_gib=_cuda_gib(key, row),
        hbm_cuda_source=str(row["hbm_cuda_source"]),
        sms=int(row["sms"]) if "sms" in row else None,
        sfu_texp_per_s=float(row["sfu_texp_per_s"]) if "sfu_texp_per_s" in row else None,
        tdp_w=float(row["tdp_w"]) if "tdp_w" in row else None,
        clock_reference=str(row["clock_reference"]) if "clock_reference" in row else None,
        sustained_tensor_fraction=sustained_tensor_fraction(key),
        precisions=tuple(str(p) for p in row.get("precisions", ("bf16",))),
        compute_capability=(tuple(int(x) for x in str(row["compute_capability"]).split("."))
                            if "compute_capability" in row else None),
        host_link_gbps_per_dir=float(row["host_link_gbps_per_dir"]) if "host_link_gbps_per_dir" in row else None,
        host_memory_gb_per_gpu=float(row["host_memory_gb_per_gpu"]) if "host_memory_gb_per_gpu" in row else None,
    )


GIB = 2 ** 30   # bytes per GiB: CUDA's and PyTorch's memory figures


def _cuda_gib(name: str, row: dict) -> float:
    """hardware.toml's hbm_cuda_gib for GPU `name`, with its source; a row without both is refused in one line (the
    marketing hbm_gb is not a capacity: no fallback to it)."""
    if not isinstance(row.get("hbm_cuda_gib"), (int, float)) or not row.get("hbm_cuda_source"):
        raise invalid("hbm_cuda_gib", row.get("hbm_cuda_gib"),
                      f"for gpu {name!r}: the GiB CUDA exposes (torch.cuda.get_device_properties total_memory / 2^30) "
                      "with its hbm_cuda_source")
    return float(row["hbm_cuda_gib"])


POWER_CLOCK_EXPONENT = 1.0 / 3.0


def sustained_tensor_fraction(name: str) -> float | None:
    """Tensor-core rate a GPU sustains at its power limit, as a fraction of its datasheet rate.

    Dense GEMMs run a GPU at its power cap, so the clock is set by power, not by the datasheet's
    boost clock. Dynamic power is P ~ C V^2 f with the voltage scaled along with the clock (V ~ f),
    so P ~ SMs x f^3 (Hennessy & Patterson, Computer Architecture 6th ed., sec. 1.5): at a power
    limit the clock goes as (TDP / SMs)^(1/3) and the tensor rate as SMs^(2/3) x TDP^(1/3). Each GPU
    is compared with its family's reference (clock_reference: the base SKU, whose datasheet rate is
    taken to hold at its own TDP) on the dense FP8 rate, whose per-SM-per-clock width is the same
    across a family. E.g. B300 (160 SMs, 1.1 kW, the same 4.5 PF FP8 datasheet as B200's 148 SMs at
    1 kW) sustains 1.087x its datasheet; GB200 (148 SMs, 1.2 kW, datasheet +11% over B200) 0.956x.
    The same fraction serves NVFP4, whose per-SM width is 1.5x on Blackwell Ultra: charging that width's
    power too ((SMs x width)^(2/3), GB300 0.926x of its NVFP4 datasheet; session 21) made the newer
    releases' dense NVFP4 rows worse (Llama3-70B GB300/GB200 published x1.51, predicted x1.47 -> x1.39;
    dense 5.1% -> 7.5%), so it is not charged.
    None when hardware.toml lacks the GPU's TDP or reference (the step model then refuses).
    """
    table = hardware_toml()["gpu"]
    row = table[name]
    ref_name = row.get("clock_reference")
    if "tdp_w" not in row or "sms" not in row or ref_name not in table:
        return None
    ref = table[ref_name]
    law = (row["sms"] / ref["sms"]) ** (1.0 - POWER_CLOCK_EXPONENT) * (row["tdp_w"] / ref["tdp_w"]) ** POWER_CLOCK_EXPONENT
    return law / (row["fp8_tflops"] / ref["fp8_tflops"])


def published_measurements() -> list[dict[str, Any]]:
    """The [[measured]] rows of hardware.toml: published collective bandwidths with sources."""
    return list(hardware_toml().get("measured", []))
