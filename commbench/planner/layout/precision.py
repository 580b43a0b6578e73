"""Which training precisions a GPU runs, and the default the planner trains in.

Precision is a fact of the GPU (commbench/data/hardware.toml `precisions`): Hopper's Tensor Cores run
BF16 and FP8 with per-tensor scales; Blackwell's add the block-scaled MXFP8 and NVFP4 formats
(Transformer Engine: MXFP8 and NVFP4 recipes need compute capability 10.x).

The default for `plan` and `tune` is the best precision the GPU runs that both frameworks' recipes
pre-train whole models with: MXFP8 on Blackwell (Megatron-Bridge's Blackwell recipes; TorchTitan 0.3's
`llama3_8b_mxfp8`), FP8 on Hopper (Megatron-Bridge's FP8 current-scaling recipes; TorchTitan 0.3's
`llama3_405b` / `deepseek_v3_671b_float8`), BF16 elsewhere. NVFP4 is never the default: Megatron-Bridge
publishes NVFP4 pre-training runs (calibration-runs.json), but TorchTitan 0.3's NVFP4 recipes keep part
of the model in BF16 (`*_first_85_pct_layers_nvfp4`) and it has no NVFP4 converter for MoE experts.
"""

from __future__ import annotations

from commbench.errors import invalid

DEFAULT_ORDER = ("mxfp8", "fp8", "bf16")  # best first; nvfp4 is only ever asked for
DEFAULT_HELP = ("training precision; default: the best the GPU runs that the frameworks' recipes train whole "
                "models in: mxfp8 on Blackwell (GB300, GB200, B300, B200), fp8 on Hopper (H100, H200, H800); fp8 "
                "on Blackwell for a model whose experts TorchTitan cannot train in mxfp8 (gpt-oss), said in a note. "
                "The GPU must support it (hardware.toml precisions): bf16, fp8, mxfp8, nvfp4")


def default_precision(gpu, *, model=None, framework: str = "megatron",
                      torchtitan_version: str = "0.3") -> tuple[str, str]:
    """(the default training precision on `gpu` (a GpuSpec; None: bf16), why a better one the GPU runs was passed
    over or ""): the best in DEFAULT_ORDER the GPU runs and `framework` trains `model` in whole; TorchTitan 0.3.0
    cannot train experts whose GEMM K is not a multiple of 128 in MXFP8 (mxfp8_experts_refusal: gpt-oss)."""
    supported = gpu.precisions if gpu is not None else ("bf16",)
    passed_over = []
    for p in DEFAULT_ORDER:
        if not (p in supported or p == "bf16"):
            continue
        reason = mxfp8_experts_refusal(model, torchtitan_version) \
            if (p == "mxfp8" and str(framework).lower() == "torchtitan" and model) else None
        if reason is None:
            return p, "; ".join(passed_over)
        passed_over.append(f"{p} ({reason})")
    return "bf16", "; ".join(passed_over)


def check_precision(precision: str, gpu, option: str = "--precision") -> str:
    """`precision` lower-cased, refused in one line when `gpu` does not run it."""
    from commbench.planner.layout.spec import PRECISIONS
    value = precision.lower()
    if value not in PRECISIONS:
        raise invalid(option, precision, f"one of {', '.join(PRECISIONS)}")
    if gpu is not None and value not in gpu.precisions:
        raise invalid(option, precision, f"{gpu.name.upper()} supports {', '.join(gpu.precisions)} "
                      "(commbench/data/hardware.toml)")
    return value


# TorchTitan 0.3.0's MXFP8 grouped-experts converter pads each expert's tokens to this multiple on Blackwell (its
# deepseek_v3 MoE MXFP8 recipe; the sm_100 CuTeDSL quantizer needs multiples of 128): emit/torchtitan_config.py.
MXFP8_PAD_MULTIPLE = 128


# torchtitan 0.2.2 (2026-02-20; docs/mxfp8.md:27: "TorchAO v0.14.0 or newer") predates torchao's CuTeDSL MXFP8
# quantizer (pytorch/ao 02105d46c, 2026-03-25, first in torchao 0.17.0): torchao 0.16.0's MXFP8 grouped GEMM
# (prototype/moe_training/scaled_grouped_mm.py) casts with its Triton and CUDA kernels, which need multiples of 32
# (prototype/mx_formats/kernels.py:1209-1210; csrc/cuda/mx_kernels/mxfp8_extension.cpp:174-175: "K must be a multiple
# of 32").
MXFP8_K_MULTIPLE_02 = 32


def mxfp8_experts_refusal(model, torchtitan_version: str = "0.3") -> str | None:
    """Why TorchTitan 0.3.0 cannot train `model`'s experts in MXFP8, or None. Its MXFP8 grouped GEMM quantizes the
    activations with torchao's CuTeDSL kernel on sm_100 (torchao 0.18 prototype/moe_training/mxfp8_grouped_mm.py ->
    kernels/mxfp8/cutedsl_quantize_2d_1x32.py: `assert K % 128 == 0`), and an expert GEMM's K is the hidden size (w1/w3)
    or the expert FFN size (w2): gpt-oss's 2880 is not a multiple of 128, and no token padding changes K.
    torchtitan_version "0.2": TorchTitan 0.2.2's torchao kernels need K a multiple of 32 (MXFP8_K_MULTIPLE_02), which
    2880 is."""
    if not model.is_moe:
        return None
    multiple = MXFP8_K_MULTIPLE_02 if torchtitan_version == "0.2" else MXFP8_PAD_MULTIPLE
    off = [f"{name} {value}" for name, value in (("hidden", model.hidden), ("expert_ffn", model.expert_ffn))
           if value % multiple]
    if not off:
        return None
    kernel = ("torchao 0.16.0's Triton and CUDA MXFP8 casts (mxfp8_extension.cpp:174-175)" if torchtitan_version == "0.2"
              else "torchao's sm_100 CuTeDSL kernel")
    return (f"{model.name}'s expert GEMMs cannot train in mxfp8 with TorchTitan "
            f"{'0.2.2' if torchtitan_version == '0.2' else '0.3.0'}: its MXFP8 grouped GEMM "
            f"quantizes along K with {kernel}, which needs K a multiple of "
            f"{multiple} ({' and '.join(off)} {'is' if len(off) == 1 else 'are'} not)")


# What a plan at each precision trains (emit/megatron.PRECISION_ARGS; TorchTitan 0.3.0's converters, emit/torchtitan.py)
TRAINED_FORMATS = {
    "bf16": "bf16 (no quantized GEMM)",
    "fp8": "fp8 with per-tensor current scaling (Megatron-LM --fp8-format hybrid --fp8-recipe tensorwise; "
           "TorchTitan 0.3.0's launch: torchao float8 rowwise scales; 0.2.2's: tensorwise Linear layers)",
    "mxfp8": "MXFP8: e4m3 with one e8m0 scale per 32 elements (--fp8-recipe mxfp8)",
    "nvfp4": "NVFP4: e2m1 with one e4m3 scale per 16 elements and a per-tensor scale (--fp4-recipe nvfp4)",
}


def _checkpoint_format(q: dict) -> tuple[str, str | None]:
    """(what a config.json quantization_config says the checkpoint's weights are, the training precision with the
    same format or None)."""
    method = str(q.get("quant_method", "")).lower()
    if method == "fp8":
        fmt, block = q.get("fmt", "e4m3"), q.get("weight_block_size")
        if block:
            return f"fp8 ({fmt}) with one scale per {'x'.join(str(b) for b in block)} weight block", None
        return f"fp8 ({fmt}) with per-tensor scales", "fp8"
    if method == "mxfp4":
        return "MXFP4: e2m1 with one e8m0 scale per 32 elements", None
    return f"quant_method {method or 'unnamed'}", None


def checkpoint_note(model, precision: str) -> str | None:
    """Where an hf: config.json names its checkpoint's quantization (quantization_config), how that meets the
    precision the plan trains in (None without one). DeepSeek-V3's checkpoint is fp8 in 128x128 weight blocks, which
    Megatron-Bridge's DeepSeek-V3 H100 FP8_SC recipes train (fp8_recipe "blockwise": v0.6.0
    src/megatron/bridge/perf_recipes/deepseek/h100/deepseek_v3.py:126-129); commbench plans no blockwise fp8
    (--precision: bf16, fp8, mxfp8, nvfp4), so a plan at fp8 trains per-tensor scales."""
    import json

    from commbench.planner.layout.spec import PRECISIONS
    text = model.extra.get("checkpoint_quantization")
    if text is None:
        return None
    q = json.loads(text)
    q = q if isinstance(q, dict) else {"quant_method": q}
    shown = ", ".join(f"{k} {json.dumps(v)}" for k, v in sorted(q.items()) if k != "modules_to_not_convert")
    kept = (" (not converted: " + ", ".join(map(str, q["modules_to_not_convert"])) + ")"
            if q.get("modules_to_not_convert") else "")
    ckpt, same = _checkpoint_format(q)
    head = (f"{model.name}'s config.json has quantization_config {{{shown}}}: its checkpoint's weights are {ckpt}"
            f"{kept}; the plan trains in {precision}: {TRAINED_FORMATS[precision]}")
    if same == precision:
        return head + ": the same per-tensor fp8 format as the Megatron-LM launch's"
    blockwise = (" commbench plans no blockwise fp8 (--precision: " + ", ".join(PRECISIONS) + "; Megatron-Bridge's "
                 "DeepSeek-V3 H100 FP8_SC recipes train fp8_recipe \"blockwise\")."
                 if str(q.get("quant_method", "")).lower() == "fp8" and q.get("weight_block_size") else "")
    return (head + ". The two differ: the prediction and the launches are for the training precision, a pre-training "
            "run from scratch that neither loads the checkpoint nor trains in its format." + blockwise)
