"""The few efficiency terms of the step model, each a physical quantity, fitted on published runs.

Fitted by benchmarks/planner_calibration.py on commbench/data/calibration-runs.json (Megatron-
Bridge / NeMo performance tables) by minimising the median |log(predicted / published)| of
tokens/s/GPU over every row whose model is in the zoo. The same values serve every model, GPU
and layout: there is no per-row or per-model term. Re-run the benchmark with `--fit` to refit.

Terms (why each exists):
- gemm_efficiency_{hopper,blackwell}: achieved fraction of the datasheet dense peak for large
  transformer GEMMs in the training precision (cuBLAS/TE kernels reach 60-80% of peak; the
  rest is tile quantisation, wave tails and clock throttling under power cap).
- fp4_gemm_ratio: NVFP4 GEMMs reach a smaller fraction of their (4x bf16) peak than 8/16-bit
  GEMMs: scale-factor handling and the Hadamard/stochastic-rounding recipe cost extra passes.
- grouped_gemm_ratio: expert GEMMs run as grouped GEMMs with small per-expert M; they reach a
  lower fraction of peak than one large GEMM.
- attention_efficiency: flash-attention core (always bf16 in these recipes) as a fraction of
  the bf16 peak.
- hbm_efficiency: achieved fraction of HBM bandwidth by the memory-bound kernels (norms,
  activations, residual adds, permute/unpermute, fp8 casts, the optimizer step).
- layer_overhead_s: fixed host/launch cost per transformer layer per micro-batch (forward +
  backward) that no bandwidth hides — kernel launch latency, Python, stream syncs.
- moe_layer_overhead_s: extra fixed cost per MoE layer per micro-batch: token-dropless routing
  syncs the per-expert token counts to the host before the grouped GEMM, stalling the launch
  queue, plus the router's many small kernels.
- all_to_all_efficiency: achieved fraction of the fabric model's all-to-all bandwidth for
  MoE dispatch/combine (permutation kernels, SM contention with compute, uneven chunking).
- gemm_traffic_factor: how many times each GEMM's compulsory operand traffic (mk + kn + mn
  elements) costs at HBM bandwidth on top of its compute time (gemm_shape.py). It is what makes
  narrow GEMMs (large TP/ETP shards) and grouped GEMMs with few tokens per expert run below peak:
  tile re-reads and imperfect compute/load overlap raise it, L2 reuse lowers it (roofline,
  Williams et al. 2009).
- overlap_efficiency: fraction of an overlap window that actually hides communication (the
  overlapped kernels slow each other down; streams do not overlap perfectly).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

HOPPER = ("h100", "h200", "h800")


@dataclass(frozen=True, kw_only=True)
class Calibration:
    # Defaults = the values fitted by `python benchmarks/planner_calibration.py --fit` (89 published rows,
    # 11 terms, after the EP dispatcher physics of step.py: NCCL vs DeepEP/HybridEP curves, 8-bit
    # dispatch, flex on NVL72 in published.py; all_to_all_efficiency sits at its bound 1 = the curves as
    # measured; gemm_traffic_factor started at 2 — the rows constrain it only weakly, 0..4 all fit within
    # 0.5 points of median error, and physics says >= 1 since the compulsory traffic is a lower bound).
    gemm_efficiency_hopper: float = 0.6409
    gemm_efficiency_blackwell: float = 0.6
    fp4_gemm_ratio: float = 0.6896
    grouped_gemm_ratio: float = 0.3956
    attention_efficiency: float = 0.4307
    hbm_efficiency: float = 0.7539
    layer_overhead_s: float = 1.262e-4
    moe_layer_overhead_s: float = 1.524e-4
    all_to_all_efficiency: float = 1.0
    overlap_efficiency: float = 0.5829
    gemm_traffic_factor: float = 2.0

    # Not fitted: stated assumptions.
    reserve_fixed_bytes: float = 4e9       # CUDA context, NCCL buffers, cuBLAS/TE workspaces
    reserve_fraction: float = 0.05         # allocator fragmentation, as a fraction of HBM
    dp_bucket_params: float = 40e6         # Megatron's default DDP bucket size (parameters)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value < 0:
                raise ValueError(f"calibration {f.name}={value} must be >= 0")
        for name in ("gemm_efficiency_hopper", "gemm_efficiency_blackwell", "fp4_gemm_ratio", "grouped_gemm_ratio",
                     "attention_efficiency", "hbm_efficiency", "all_to_all_efficiency", "overlap_efficiency"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"calibration {name}={getattr(self, name)} must be in (0, 1]")

    def gemm_efficiency(self, gpu_name: str) -> float:
        return self.gemm_efficiency_hopper if gpu_name.lower() in HOPPER else self.gemm_efficiency_blackwell

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def with_values(self, **values: float) -> "Calibration":
        return replace(self, **values)


FITTED_TERMS = ("gemm_efficiency_hopper", "gemm_efficiency_blackwell", "fp4_gemm_ratio", "grouped_gemm_ratio",
                "attention_efficiency", "hbm_efficiency", "layer_overhead_s", "moe_layer_overhead_s",
                "all_to_all_efficiency", "overlap_efficiency", "gemm_traffic_factor")

# The values in use; replaced by the fitted ones (see the module docstring).
CALIBRATED = Calibration()
