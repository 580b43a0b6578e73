"""A small Megatron-LM training log for tests (after probe P4's generator): the arguments block of a real core_v0.16.1
parse (tests/data/megatron_qwen3_30b_a3b_pp4_args.txt: Qwen3-30B-A3B on 16 H100, pp4 ep4, the arguments the readers
read) with `args` overriding its values, then training_log's iteration lines (the first one warm-up), and the end of
training, or an out-of-memory traceback at `crash_at`."""

from __future__ import annotations

import re
from pathlib import Path

ARGS = Path(__file__).parent / "data" / "megatron_qwen3_30b_a3b_pp4_args.txt"
# Megatron-LM core_v0.16.1 training.py num_floating_point_operations for the block (256 x 4096 tokens over 16 GPUs):
# 23.006 GFLOP a token, as models/counts.py flops_breakdown counts it
FLOP_PER_GPU_STEP = 1507.74e12


# A hybrid run's block, printed by Megatron-LM core_v0.16.1's own parse_args/validate_args (probe P6's generator):
# Nemotron-3-Nano-30B-A3B (pretrain_mamba.py) on 16 H100, tp2 ep8, the flex dispatcher on HybridEP
HYBRID_ARGS = Path(__file__).parent / "data" / "megatron_nemotron3_nano_h100_args.txt"


def arguments_block(base: Path = ARGS, **args) -> str:
    text = base.read_text()
    for key, value in args.items():
        line = f"  {key} {'.' * max(48 - len(key), 3)} {value}"
        text, found = re.subn(rf"^  {key} \.+ .*$", line, text, flags=re.M)
        if not found:
            text = text.replace("-------------------- end of arguments", line + "\n-------------------- end of "
                                "arguments", 1)
    return text


def megatron_log(*, iterations: int = 50, first_ms: float = 38000.0, steady_ms: float = 9600.0,
                 flop_per_gpu_step: float | None = FLOP_PER_GPU_STEP, crash_at: int | None = None, base: Path = ARGS,
                 gbs: int = 256, **args) -> str:
    """`flop_per_gpu_step` None: lines without training_log's throughput figure."""
    lines = [arguments_block(base, **args).rstrip("\n"), "training ..."]
    for it in range(1, iterations + 1):
        if it == crash_at:
            lines += ["Traceback (most recent call last):",
                      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]
            break
        ms = first_ms if it == 1 else steady_ms * (1 + 0.01 * ((it * 7) % 5 - 2) / 2)
        lines.append(f" [2026-12-01 10:01:02] iteration {it:8d}/{iterations:8d} | consumed samples: {gbs * it:12d} | "
                     f"elapsed time per iteration (ms): {ms:.1f} | " + (
                         f"throughput per GPU (TFLOP/s/GPU): {flop_per_gpu_step / (ms / 1000) / 1e12:.1f} | "
                         if flop_per_gpu_step else "") + f"learning rate: 3.000000E-04 | global batch "
                     f"size: {gbs:5d} | lm loss: 9.000000E+00 | loss scale: 1.0 | grad norm: 2.500 | number of skipped "
                     "iterations:   0 | number of nan iterations:   0 |")
    else:
        lines.append("[after training is done] datetime: 2026-12-01 10:12:40 ")
    return "\n".join(lines) + "\n"
