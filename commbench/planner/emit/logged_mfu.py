"""What a framework's log prints beside the plan's model TFLOP/s and MFU, for the launch the plan writes.

The plan's MFU is its model TFLOP/s over the GPU's datasheet dense peak in the plan's precision (hardware.toml,
step/evaluate.peak_tflops): fp8 and mxfp8 plans over the fp8 peak, nvfp4 over the fp4 peak.

Megatron-LM core_v0.16.1 (training.py training_log) prints throughput per GPU (TFLOP/s/GPU) and no MFU.

TorchTitan 0.3.0 (the installed source; components/metrics.py MetricsProcessor.log) prints `tflops` and `mfu`:
- no MFU ("mfu: N/A", metrics.py:486-487 and :522) for a model with a Float8, MXFP8 or NVFP4 Linear or grouped
  experts (components/quantization/utils.py:67-96 has_quantization, trainer.py:383): every fp8, mxfp8 and nvfp4
  launch commbench writes converts its layers;
- otherwise 100 x its tflops over tools/utils.py:141-259 get_peak_flops(device name), a bf16 table ("hardcoded BF16
  type peak flops", utils.py:139), which trainer.py:540 logs as "Peak FLOPS used for computing MFU".
"""

from __future__ import annotations

# TorchTitan 0.3.0 get_peak_flops per commbench GPU: the device name torch reports (torch.cuda.get_device_name),
# the TFLOP/s it returns for that name and the lines that return it. Before the name, get_peak_flops runs `lspci`
# and, where lspci is installed, uses its lines that hold both "NVIDIA" and "H100" instead (utils.py:142-154).
# tests/test_logged_mfu.py checks every figure against the installed torchtitan.
TITAN_PEAK_FLOPS = {
    "h100": ("NVIDIA H100 80GB HBM3", 989.0, "tools/utils.py:163-171"),
    "h200": ("NVIDIA H200", 989.0, "tools/utils.py:172-174"),
    "b200": ("NVIDIA B200", 2250.0, "tools/utils.py:190-193"),
    "b300": ("NVIDIA B300 SXM6 AC", 2250.0, "tools/utils.py:190-193"),
    "gb200": ("NVIDIA GB200", 2500.0, "tools/utils.py:184-189"),
    "gb300": ("NVIDIA GB300", 2500.0, "tools/utils.py:184-189"),
    # No H800 entry: the A100 fallback. pci.ids names the H800 "GH100 [H800]", so an lspci line of it passes the
    # H100 test and get_peak_flops returns 989 where lspci is installed.
    "h800": ("NVIDIA H800", 312.0, "tools/utils.py:257-259, the A100 fallback: it has no H800 entry"),
}
TITAN_FALLBACK_TFLOPS = 312.0   # tools/utils.py:257-259 ("Peak flops undefined for: ..., fallback to A100")
# TorchTitan 0.2.2 (torchtitan v0.2.2 components/metrics.py:428) logs `mfu` for every launch, quantized or not:
# 100 x its tflops over tools/utils.py:77-144 get_peak_flops(device name), a smaller bf16 table (lspci's H100 test at
# :79-90) that train.py:265-266 logs as "Peak FLOPS used for computing MFU". It has no GB200, GB300, B300 or H800
# entry: "NVIDIA GB200" holds "B200" and takes B200's 2.25 PFLOP/s, the others the A100 fallback.
TITAN_PEAK_FLOPS_022 = {
    "h100": ("NVIDIA H100 80GB HBM3", 989.0, "tools/utils.py:94-102"),
    "h200": ("NVIDIA H200", 989.0, "tools/utils.py:103-105"),
    "b200": ("NVIDIA B200", 2250.0, "tools/utils.py:115-117"),
    "gb200": ("NVIDIA GB200", 2250.0, "tools/utils.py:115-117, the B200 entry: 'B200' is in 'NVIDIA GB200'"),
    "b300": ("NVIDIA B300 SXM6 AC", 312.0, "tools/utils.py:142-144, the A100 fallback: it has no B300 entry"),
    "gb300": ("NVIDIA GB300", 312.0, "tools/utils.py:142-144, the A100 fallback: it has no GB300 entry"),
    "h800": ("NVIDIA H800", 312.0, "tools/utils.py:142-144, the A100 fallback: it has no H800 entry"),
}
QUANTIZED = ("fp8", "mxfp8", "nvfp4")


def plan_mfu_peak(gpu_name: str, precision: str, peak_tflops: float) -> str:
    """What the plan's own MFU is of."""
    return f"the plan's MFU is of the {gpu_name}'s {precision} dense peak, {peak_tflops:,.0f} TFLOP/s (hardware.toml)"


def titan_mfu_logged(gpu, precision: str, tflops_ratio: float = 1.0, version: str = "0.3") -> str:
    """What TorchTitan 0.3.0's log (`version` "0.2": 0.2.2's) prints as `mfu` for this plan's launch on `gpu` (a
    GpuSpec, or None where the GPU is not known) at `precision`, beside the plan's MFU; `tflops_ratio`: its tflops
    over the plan's model TFLOP/s (1 for a --framework torchtitan plan, whose count is TorchTitan's)."""
    if version == "0.2":
        return _titan_022_mfu_logged(gpu, precision, tflops_ratio)
    if precision in QUANTIZED:
        return (f"its mfu reads N/A: TorchTitan 0.3.0 logs no MFU for a model with {precision} Linear or "
                "grouped-experts converters (components/metrics.py:486-487, components/quantization/utils.py:67-96 "
                "has_quantization)")
    source = "tools/utils.py:141-259 get_peak_flops, a bf16 table"
    if gpu is None or gpu.name not in TITAN_PEAK_FLOPS:
        what = f"a {gpu.name}" if gpu is not None else "the GPU"
        return (f"its mfu is of the peak {source} gives {what}'s device name, {TITAN_FALLBACK_TFLOPS:.0f} TFLOP/s "
                "(the A100 fallback) where no entry matches; its log's \"Peak FLOPS used for computing MFU\" line "
                "(trainer.py:540) says which")
    device, peak, lines = TITAN_PEAK_FLOPS[gpu.name]
    ratio = tflops_ratio * gpu.bf16_tflops / peak
    reads = "the plan's MFU" if abs(ratio - 1) < 5e-4 else f"{ratio:.3f}x the plan's MFU"
    said = (f"its mfu reads {reads}: get_peak_flops({device!r}) is {peak:,.0f} TFLOP/s ({lines})"
            + ("" if peak == gpu.bf16_tflops else f", where the {gpu.name}'s bf16 dense peak is "
               f"{gpu.bf16_tflops:,.0f}"))
    if gpu.name == "h800":
        said += (f"; with lspci installed its \"GH100 [H800]\" line passes the H100 test (tools/utils.py:143-152) "
                 f"and the peak is 989 TFLOP/s ({tflops_ratio * gpu.bf16_tflops / 989.0:.3f}x); its log's \"Peak "
                 "FLOPS used for computing MFU\" line (trainer.py:540) says which")
    return said


def _titan_022_mfu_logged(gpu, precision: str, tflops_ratio: float) -> str:
    """titan_mfu_logged for TorchTitan 0.2.2 (TITAN_PEAK_FLOPS_022): an mfu at every precision, of its bf16 table,
    where the plan's MFU is of the `precision` dense peak (plan_mfu_peak)."""
    from commbench.planner.step.evaluate import dense_peak_tflops

    if gpu is None or gpu.name not in TITAN_PEAK_FLOPS_022:
        return ("its mfu is of the peak TorchTitan 0.2.2's tools/utils.py:77-144 get_peak_flops (a bf16 table) gives "
                f"the device name, {TITAN_FALLBACK_TFLOPS:.0f} TFLOP/s (the A100 fallback) where no entry matches; its "
                "log's \"Peak FLOPS used for computing MFU\" line (train.py:266) says which")
    device, peak, lines = TITAN_PEAK_FLOPS_022[gpu.name]
    plan_peak = float(dense_peak_tflops(gpu, precision))
    ratio = tflops_ratio * plan_peak / peak
    reads = "the plan's MFU" if abs(ratio - 1) < 5e-4 else f"{ratio:.3f}x the plan's MFU"
    return (f"its mfu reads {reads} (TorchTitan 0.2.2 logs one at every precision, components/metrics.py:428, "
            f"of a bf16 peak): get_peak_flops({device!r}) is {peak:,.0f} TFLOP/s ({lines})"
            + ("" if peak == plan_peak else f", where the plan's MFU is of the {gpu.name}'s {precision} dense peak, "
               f"{plan_peak:,.0f}"))
