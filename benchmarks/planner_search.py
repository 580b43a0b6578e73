"""Full layout search of DeepSeek-V3 on GB300 NVL72 (goals on 2 CPU cores: 1,024 GPUs <= 1 s (issue 24), 16,384 < 10 s).

    python benchmarks/planner_search.py

Prints layouts enumerated per second (search time: enumeration, rules, placement, chunked evaluation,
top-K and Pareto; model loading and imports excluded). gbs is 4096 on 1,024 GPUs and 16,384 on
16,384 GPUs (one sequence per GPU per step at least).
"""

from __future__ import annotations

import sys
import time

from cli_args import parser_for
from commbench.costmodel import load_preset
from commbench.planner import load_model
from commbench.planner import Layout, LayoutArrays, evaluate_layouts
from commbench.planner.search.space import SearchRequest, best_for_pins, parse_pins, rank_of, search

CASES = ((256, 4096, None), (1024, 4096, 1.0), (16384, 16384, 10.0))


def main(argv: list[str]) -> int:
    parser_for(__doc__).parse_args(argv)   # --help; no options
    model = load_model("deepseek-v3")
    search(SearchRequest(model=model, fabric=load_preset("gb300-nvl72", num_gpus=64), num_gpus=64, gbs=512,
                         precision="mxfp8"))  # warm caches
    worst = 0
    for gpus, gbs, goal_s in CASES:
        fabric = load_preset("gb300-nvl72", num_gpus=gpus)
        start, cpu_start = time.perf_counter(), time.process_time()
        res = search(SearchRequest(model=model, fabric=fabric, num_gpus=gpus, gbs=gbs, precision="mxfp8"))
        elapsed, cpu_s = time.perf_counter() - start, time.process_time() - cpu_start
        verdict = "" if goal_s is None else (f"goal < {goal_s:g} s: " + ("met" if elapsed < goal_s else "MISSED"))
        worst |= goal_s is not None and elapsed >= goal_s
        print(f"deepseek-v3 on {gpus:>6,} GB300: {res.num_enumerated:>9,} layouts ({res.num_valid:,} valid, "
              f"{res.num_fit:,} fit) in {elapsed:.2f} s ({cpu_s:.2f} s CPU: wall > CPU when the cores are shared) = {res.num_enumerated / elapsed:,.0f} layouts/s  {verdict}")
        if gpus == 256:
            record_ranking(model, fabric, res)
    return int(worst)


# The mission's headline run: DeepSeek-V3 on 256 GB300, TP1 PP2 VP8 EP32 MXFP8, 1,648 model TFLOP/s/GPU
# (~6,300 tokens/s/GPU), with the Megatron-Bridge GB300 FP8_MX recipe features (deepseek_workload_base_configs.py
# at NVIDIA-NeMo/Megatron-Bridge@0426418: full-iteration CUDA graph, EP overlap, fused grouped MLP, FP8 attention,
# no recompute, HybridEP).
RECORD = Layout(tp=1, pp=2, vp=8, ep=32, etp=1, dp=128, mbs=1, gbs=4096, precision="mxfp8", recompute="none",
                dispatcher="flex", moe_a2a_overlap=True, cuda_graph="full", fp8_attention=True, fused_moe=True,
                tp_comm_overlap=False)
RECORD_TOKENS = 6300


def record_ranking(model, fabric, res) -> None:
    bd = evaluate_layouts(model, fabric, LayoutArrays.from_layouts([RECORD]))
    tok = float(bd.tokens_per_s_per_gpu[0])
    best = float(res.breakdown.tokens_per_s_per_gpu[0])
    print(f"  record layout TP1 PP2 VP8 EP32 (recipe flags): predicted {tok:,.0f} tokens/s/GPU "
          f"(published ~{RECORD_TOKENS:,}: {100 * (tok / RECORD_TOKENS - 1):+.1f}%), rank {rank_of(res, tok)} "
          f"of {len(res.fitting_tokens_desc):,} fitting, {100 * (tok / best - 1):+.1f}% vs the planner's best "
          f"({best:,.0f}: "
          f"TP{res.layouts.tp[0]} PP{res.layouts.pp[0]} VP{res.layouts.vp[0]} EP{res.layouts.ep[0]} "
          f"mbs{res.layouts.mbs[0]})")
    pinned = SearchRequest(model=model, fabric=fabric, num_gpus=256, gbs=4096, precision="mxfp8",
                           pins=parse_pins("tp=1,pp=2,vp=8,ep=32,etp=1,cp=1,mbs=1"))
    _, bd = best_for_pins(pinned)
    tok = float(bd.tokens_per_s_per_gpu[0])
    print(f"  same structure, flags as the search chooses them (no FP8 attention unless pinned): {tok:,.0f} "
          f"tokens/s/GPU, rank {rank_of(res, tok)}, {100 * (tok / best - 1):+.1f}% vs the best")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
