"""EP overlap on and off, one layout each, NVIDIA's own A/B measurements against the step model (PREDICTED, never
fitted; none of these is a calibration row and none is folded into commbench/data/calibration-runs.json).

- Megatron-Bridge PR #1760 (a6e92de5f; the fix of issue #1705, "Disable moe_a2a_overlap due to CPU overhead"):
  Qwen3-235B-A22B 64 x B200 BF16, TP1 PP8 VP4 EP8 mbs1 gbs1024 (a6e92de5f^
  scripts/performance/configs/qwen/qwen3_workload_base_configs.py QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_BF16; the rest
  from the 25.11 recipe), the EP group inside one node: step 16.0 s off, 17.2 s on. (Row 63 of the calibration is
  the same recipe at MXFP8, VP2, on; this BF16 pair is in no table.)
- Megatron-Bridge 7ded17dae skills/nemo-mbridge-perf-moe-comm-overlap/SKILL.md "Measured Evidence": Qwen3-30B-A3B
  16 x H100 TP1 PP1 EP16 mbs1 gbs1024 BF16 seq 4096 (EP across two nodes): HybridEP with moe_router + moe_preprocess
  graphs 24.7138 -> 20.9920 s; the alltoall dispatcher, eager, 41.25 -> 31.31 s.

What the on/off ratio checks is the EP overlap's price alone (the rest of the step is the same on both sides), so
it separates terms.py ep_overlap_efficiency from the other terms; that note records what these pairs showed
(session 41, fix-EG).

    python benchmarks/ep_overlap_ab.py
"""

from __future__ import annotations

import dataclasses

from commbench.planner.calibrate.published import _preset, published_runs
from commbench.planner.layout.spec import Layout, LayoutArrays
from commbench.planner.models.zoo import load_model
from commbench.planner.step.evaluate import evaluate_layouts
from commbench.planner.step.loss_memory import run_loss

SKILL = dict(tp=1, pp=1, vp=1, ep=16, etp=1, cp=1, dp=16, mbs=1, gbs=1024, precision="bf16", recompute="none")
PR_1760_ROW = dict(model="Qwen3-235B-A22B", gpu="B200", num_gpus=64, precision="BF16", seq_len=4096, gbs=1024, mbs=1,
                   tp=1, pp=8, cp=1, vp=4, ep=8, etp=1, tokens_per_s_per_gpu=1, release="25.11", notes="")


def pairs() -> list[tuple[str, str, str, int, Layout, tuple[float, float]]]:
    """(name, model, preset, GPUs, the layout with EP overlap off, MEASURED step s (off, on))."""
    pr = published_runs((PR_1760_ROW,))[0]
    return [
        ("Qwen3-235B-A22B 64x B200 BF16 EP8 in a node, alltoall (PR #1760)", "qwen3-235b-a22b", pr.preset, 64,
         dataclasses.replace(pr.layout, moe_a2a_overlap=False), (16.0, 17.2)),
        ("Qwen3-30B-A3B 16x H100 BF16 EP16, HybridEP + router graphs (SKILL)", "qwen3-30b-a3b", "h100-hgx", 16,
         Layout(**SKILL, dispatcher="flex", cuda_graph="layer", cuda_graph_scope="moe_router+moe_preprocess"),
         (24.7138, 20.9920)),
        ("Qwen3-30B-A3B 16x H100 BF16 EP16, alltoall eager (SKILL)", "qwen3-30b-a3b", "h100-hgx", 16,
         Layout(**SKILL, dispatcher="alltoall"), (41.25, 31.31)),
    ]


def main() -> None:
    import argparse
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    print("EP overlap on vs off, one layout each: predicted step s vs NVIDIA's MEASURED (never fitted)")
    print(f"  {'pair':70s} {'off':>7s} {'meas':>7s} {'on':>7s} {'meas':>7s}  {'off/on':>6s} {'meas':>6s}  {'err%':>6s}")
    errors = []
    for name, model, preset, gpus, off, measured in pairs():
        on = dataclasses.replace(off, moe_a2a_overlap=True)
        bd = evaluate_layouts(load_model(model), _preset(preset, gpus), LayoutArrays.from_layouts([off, on]),
                              seq_len=4096, loss=run_loss("megatron"))
        ratio, meas = bd.step_s[0] / bd.step_s[1], measured[0] / measured[1]
        err = 100 * (ratio / meas - 1)
        errors.append(abs(err))
        print(f"  {name:70s} {bd.step_s[0]:7.2f} {measured[0]:7.2f} {bd.step_s[1]:7.2f} {measured[1]:7.2f}  "
              f"{ratio:6.3f} {meas:6.3f}  {err:+6.1f}")
    print(f"mean |error| of the on/off ratio {sum(errors) / len(errors):.1f}% over {len(errors)} pairs")


if __name__ == "__main__":
    main()
