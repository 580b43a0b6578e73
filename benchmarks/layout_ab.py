"""Several layouts of one run, MEASURED by one team on one stack, against the step model (PREDICTED, never fitted; no
calibration row, none folded into commbench/data/calibration-runs.json). What a ratio between two of them checks is
the model's ranking of layouts, the question vendor_layouts.py asks of the published layouts NVIDIA did not pick.

- NVIDIA's Megatron MoE team, Megatron-MoE-ModelZoo (github.com/yanring/Megatron-MoE-ModelZoo) commit 8017e11
  (2025-05-27, "Update perf results."), examples/qwen3/readme.md (kept at best_practice/qwen3/readme.md to 798dfb5):
  Qwen3-235B-A22B on 256 H100 (NVLink 4, InfiniBand 8 x 50 GB/s), BF16, seq 4096, gbs 2048, forced load balancing
  (examples/qwen3/run_235b.sh --moe-router-force-load-balancing), step time in seconds; megatron-core main of
  2025-05-24 (1e057005) and moe_dev f3e6c5, older than every release in the recipe table. The launch flags are
  model_configs/benchmarking/Qwen3-235B-A22B.yaml at 8017e11 (sequence parallel, distributed optimizer, overlapped
  gradient reduce and parameter gather, no TP comm overlap, no CUDA graphs) and run_235b.sh; "norm, act" is
  --recompute-modules moe_act layernorm, "+1f1b overlap" --combined-1f1b --combined-1f1b-recipe ep_a2a (EP overlap),
  the FSDP row --use-custom-fsdp --data-parallel-sharding-strategy optim_grads_params with full recompute (method
  uniform, 1 layer). The table gives that row TP2 (DP 128, GA 4, consistent at 256 GPUs and gbs 2048) where
  run_235b.sh writes TP=1: the table's is used.

The first layout is the cross-node EP32 one NVIDIA's Megatron-Bridge recipe runs on H100 (TP2 PP8 VP4 EP32); the
others are the team's "intra-node EP strategy" tries, EP8 inside one node, each at a size that fits BF16.

Read against the steps, not only the ratios (session 46, fix-F9): the reference itself is predicted +19% (EP32
DeepEP, 23.5 s against 19.7 s MEASURED), so the TP4 EP8 layout's -18% ratio error is mostly the reference's (its own
step -2.6%); the PP32 EP8 alltoall layout is predicted +33% and the FSDP one +79%. No EP8 layout here is predicted
faster than it ran. TP2 PP8 EP8, the structure vendor_layouts.py row 97 ranks first at FP8, is absent: at BF16 it is
predicted at 98.7% of HBM (vendor_layouts.py docstring, fix-F9).

    python benchmarks/layout_ab.py
"""

from __future__ import annotations

from commbench.planner.calibrate.published import _preset
from commbench.planner.layout.spec import Layout, LayoutArrays
from commbench.planner.models.zoo import load_model
from commbench.planner.step.evaluate import evaluate_layouts
from commbench.planner.step.loss_memory import run_loss

MODELZOO_H100 = dict(precision="bf16", gbs=2048, cp=1, etp=1, sequence_parallel=True, distributed_optimizer=True,
                     dp_overlap=True, tp_comm_overlap=False, cuda_graph="none", fsdp_double_buffer=False)
NORM_ACT = "layernorm+moe_act"


def runs() -> list[tuple[str, str, str, int, list[tuple[str, Layout, float]]]]:
    """(run, model, preset, GPUs, [(layout label, layout, MEASURED step s)]); the first layout is the reference."""
    def lay(**kw) -> Layout:
        return Layout(**MODELZOO_H100, **kw)
    return [("Qwen3-235B-A22B 256x H100 BF16 gbs2048 (Megatron-MoE-ModelZoo 8017e11)", "qwen3-235b-a22b", "h100-hgx", 256, [
        ("TP2 PP8 VP4 EP32 DeepEP, norm+act recompute", lay(tp=2, pp=8, vp=4, ep=32, dp=16, mbs=1, recompute=NORM_ACT,
                                                            dispatcher="flex"), 19.7),
        ("  the same + EP overlap (combined 1F1B)", lay(tp=2, pp=8, vp=4, ep=32, dp=16, mbs=1, recompute=NORM_ACT,
                                                        dispatcher="flex", moe_a2a_overlap=True), 17.6),
        ("TP2 PP1 EP8 Megatron-FSDP mbs4, full recompute", lay(tp=2, pp=1, vp=1, ep=8, dp=128, mbs=4, recompute="full",
                                                               dispatcher="flex", fsdp=True), 17.6),
        ("TP2 PP32 VP3 EP8 alltoall, norm+act recompute", lay(tp=2, pp=32, vp=3, ep=8, dp=4, mbs=1, recompute=NORM_ACT,
                                                              dispatcher="alltoall"), 24.2),
        ("TP4 PP8 VP4 EP8 DeepEP", lay(tp=4, pp=8, vp=4, ep=8, dp=8, mbs=1, recompute="none", dispatcher="flex"), 29.0),
    ])]


def main(argv: list[str] | None = None) -> None:
    import argparse
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    print("layouts of one run: predicted step s vs MEASURED (never fitted); ratios to the run's first layout")
    errors = []
    for run, model, preset, gpus, layouts in runs():
        bd = evaluate_layouts(load_model(model), _preset(preset, gpus),
                              LayoutArrays.from_layouts([layout for _, layout, _ in layouts]), seq_len=4096,
                              loss=run_loss("megatron"))
        print(run)
        print(f"  {'layout':48s} {'pred':>7s} {'meas':>7s} {'err%':>6s}  {'ratio':>6s} {'meas':>6s} {'err%':>6s}  "
              f"{'memory':>6s}")
        for i, (label, _, measured) in enumerate(layouts):
            step = float(bd.step_s[i])
            ratio, meas_ratio = step / float(bd.step_s[0]), measured / layouts[0][2]
            err = 100 * (ratio / meas_ratio - 1)
            if i:
                errors.append(abs(err))
            memory = float(bd.mem_total_bytes[i]) / float(bd.mem_capacity_bytes[i])
            print(f"  {label:48s} {step:7.2f} {measured:7.2f} {100 * (step / measured - 1):+6.1f}  {ratio:6.3f} "
                  f"{meas_ratio:6.3f} {err:+6.1f}  {100 * memory:5.1f}%")
    print(f"mean |error| of the ratio to the first layout {sum(errors) / len(errors):.1f}% over {len(errors)} layouts "
          "(memory: PREDICTED share of HBM)")


if __name__ == "__main__":
    main()
