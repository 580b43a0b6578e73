"""One recipe flag switched, NVIDIA's own matched measurements against the step model (PREDICTED, never fitted; none
is a calibration row and none is folded into commbench/data/calibration-runs.json). What the search credits a flag
with (benchmarks/vendor_layouts.py --why) is checked here where a source measured that flag alone.

- Per-layer CUDA graphs, step time: Megatron-Bridge 067f987 skills/nemo-mbridge-perf-cuda-graphs/SKILL.md item 13
  (PR #3868, 2026-05-18): Qwen3-30B-A3B 16 x H100 BF16, TP1 PP1 EP16 mbs1 gbs1024 seq 4096, alltoall dispatcher, no EP
  overlap: eager 41.36 s, Transformer Engine graphs of attn + moe_router + moe_preprocess 42.00 s (iterations 5-8).
  The same layout eager is 41.25 s in skills/nemo-mbridge-perf-moe-comm-overlap (benchmarks/ep_overlap_ab.py).
- Selective recompute, peak memory: Megatron-Bridge 067f987 skills/nemo-mbridge-perf-activation-recompute/SKILL.md
  "Matched H100 Evidence: Nemotron 3 Nano" (PR #5570, 2026-08-12): 16 x H100 BF16, seq 8192, TP1 PP1 EP8 mbs1 gbs16,
  HybridEP, TE graphs of attn + mamba: no recompute and moe_act OOM (80 GB), moe_act 4.194 GB below no recompute at
  the same point; layernorm + moe_act OOM. (Its passing sets recompute whole MoE blocks, which the step model does
  not price; its Moonlight 16B rows are of a model not in the zoo.)

    python benchmarks/flag_ab.py
"""

from __future__ import annotations

import dataclasses

from commbench.planner.calibrate.published import _preset
from commbench.planner.layout.spec import Layout, LayoutArrays
from commbench.planner.models.zoo import load_model
from commbench.planner.step.evaluate import evaluate_layouts
from commbench.planner.step.loss_memory import run_loss

GRAPH_AB = dict(model="qwen3-30b-a3b", preset="h100-hgx", gpus=16, seq_len=4096,
                layout=Layout(tp=1, pp=1, vp=1, ep=16, etp=1, cp=1, dp=16, mbs=1, gbs=1024, precision="bf16",
                              recompute="none", dispatcher="alltoall"),
                on=dict(cuda_graph="layer", cuda_graph_scope="attn+moe_router+moe_preprocess"),
                measured_s=(41.36, 42.00))
NANO_MEMORY = dict(model="nemotron-3-nano-30b-a3b", preset="h100-hgx", gpus=16, seq_len=8192,
                   layout=Layout(tp=1, pp=1, vp=1, ep=8, etp=1, cp=1, dp=16, mbs=1, gbs=16, precision="bf16",
                                 dispatcher="flex", cuda_graph="layer", cuda_graph_scope="attn+mamba"),
                   # the step model's selective on Nano runs core_attn + layernorm + moe_act; core_attn frees nothing
                   # it counts (layout/recompute.py), the source measured layernorm + moe_act (and core_attn alone)
                   measured=(("none", "OOM"), ("moe_act", "OOM"), ("selective", "OOM (layernorm + moe_act)")),
                   moe_act_saving_gb=4.194)


def _evaluate(case: dict, layouts: list[Layout]):
    return evaluate_layouts(load_model(case["model"]), _preset(case["preset"], case["gpus"]),
                            LayoutArrays.from_layouts(layouts), seq_len=case["seq_len"], loss=run_loss("megatron"))


def graph_ab() -> dict[str, float]:
    """PREDICTED step s eager and with the graphs, their ratio, the MEASURED ones and the error of the ratio."""
    off = GRAPH_AB["layout"]
    bd = _evaluate(GRAPH_AB, [off, dataclasses.replace(off, **GRAPH_AB["on"])])
    measured = GRAPH_AB["measured_s"]
    ratio, meas = float(bd.step_s[0] / bd.step_s[1]), measured[0] / measured[1]
    return dict(off=float(bd.step_s[0]), on=float(bd.step_s[1]), host_off=float(bd.overhead_s[0]),
                host_on=float(bd.overhead_s[1]), ratio=ratio, measured_ratio=meas, error=ratio / meas - 1.0)


def nano_memory() -> dict[str, tuple[float, bool]]:
    """Recompute mode -> (PREDICTED GB per GPU, fits) for the Nemotron 3 Nano H100 layout."""
    modes = [mode for mode, _ in NANO_MEMORY["measured"]]
    base = NANO_MEMORY["layout"]
    bd = _evaluate(NANO_MEMORY, [dataclasses.replace(base, recompute=m) for m in modes])
    return {m: (float(bd.mem_total_bytes[i]) / 1e9, bool(bd.fits[i])) for i, m in enumerate(modes)}


def main(argv: list[str] | None = None) -> None:
    import argparse
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    g = graph_ab()
    print("per-layer CUDA graphs, Qwen3-30B-A3B 16x H100 BF16 EP16 alltoall (PREDICTED vs MEASURED step s):")
    print(f"  eager {g['off']:.2f} (MEASURED {GRAPH_AB['measured_s'][0]:.2f}; exposed host launches {g['host_off']:.2f})"
          f"  graphs {g['on']:.2f} (MEASURED {GRAPH_AB['measured_s'][1]:.2f}; {g['host_on']:.2f})")
    print(f"  eager/graphs {g['ratio']:.3f}, MEASURED {g['measured_ratio']:.3f}: the graphs' worth is over-predicted "
          f"by {g['error'] * 100:+.1f}%" if g["error"] > 0 else
          f"  eager/graphs {g['ratio']:.3f}, MEASURED {g['measured_ratio']:.3f} ({g['error'] * 100:+.1f}%)")
    mem = nano_memory()
    print("selective recompute, Nemotron 3 Nano 16x H100 BF16 mbs1 seq 8192 (PREDICTED GB per GPU vs MEASURED):")
    for mode, outcome in NANO_MEMORY["measured"]:
        gb, fits = mem[mode]
        print(f"  {mode:10s} {gb:6.1f} GB {'fits' if fits else 'OOM':4s}  MEASURED {outcome}")
    saving = mem["none"][0] - mem["moe_act"][0]
    print(f"  moe_act frees {saving:.2f} GB, MEASURED {NANO_MEMORY['moe_act_saving_gb']:.3f} GB")


if __name__ == "__main__":
    main()
