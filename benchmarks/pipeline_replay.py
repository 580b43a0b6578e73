"""Does the step model's pipeline charge match Megatron's interleaved 1F1B schedule? A replay, PREDICTED only.

The step model (step/evaluate.py) charges a pipelined step as n_mb x t_mb + (pp - 1) / vp x t_mb, t_mb the busiest
pipeline rank's time per micro-batch (its virtual stages' layers, the loss stage included: layout/split.py
stage_imbalance), plus pp_exposed_s of the per-chunk send/recv. This replays the order megatron-core runs instead
(core_v0.16.1 megatron/core/pipeline_parallel/schedules.py: get_schedule_table, chunks taken in groups of
microbatch_group_size_per_vp_stage = pp micro-batches; get_pp_rank_microbatches, rank r's warm-up
(pp - r - 1) x 2 + (vp - 1) x pp forwards (pp - r - 1 without interleaving), then one forward and one backward each,
then the cool-down backwards): each rank runs its ops in that order, each op as soon as the rank is free and its
input has arrived (forward of chunk c on rank r after rank r - 1's, rank 0's after rank pp - 1's of chunk c - 1;
backward mirrored; the last virtual stage's backward after its own forward). Megatron-Bridge runs interleaved
schedules with overlap_p2p_comm=True, batch_p2p_comm=False (src/megatron/bridge/training/comm_overlap.py
_get_model_comm_overlap_cfgs at 9c9dd84, 26.02.01), so a send/recv delays only the op that waits for it: the replay
puts one send/recv on each cross-rank edge and nothing on the sending rank.

Per row: the published layout and the search's best layouts, each with its virtual stages' costs from
layout/split.py best_split (FLOPs weights, as the step model charges) scaled so the busiest rank's sum is the model's
t_mb without p2p, backward 2x forward. Printed: the model's pipelined time (n_mb x t + bubble) and the replay's
(their ratio checks the (pp - 1)/vp bubble and the busiest-rank pace), the model's exposed p2p and what the replay
puts on the critical path with the model's own per-message time.

    python benchmarks/pipeline_replay.py                  # rows 0, 1, 7, 73 of the calibration table, top 5 each
    python benchmarks/pipeline_replay.py --rows 7 --top 10

With vp = 1 Megatron-Bridge sets batch_p2p_comm=True and overlap_p2p_comm=False (same file): the sends block every
op, which the step model charges whole; the replay's p2p column is the overlapped (vp > 1) reading only.

Checked (session 42, fix-FC; STEP_MODEL 2026-12-06.14), rows 0, 1, 7, 73, 96 with their top 5: replay / model 0.989 to
1.001 (the bubble and the busiest-rank pace are Megatron's; the model is at most 1.1% slow, row 73's published pp4 vp5
0.989 against 0.995 for its pp2 vp20: not what ranks it 19th). With equal chunks an overlapped send/recv delays the
step by exactly 2 (pp vp - 1) messages (the fill and drain chains), for any micro-batch count, where the step model
charges (1 - overlap_efficiency) x 2 vp n_mb of them (6-12x more: row 7 pp4 vp4 0.461 s against 0.038 s; row 96 vp24
0.793 s against 0.091 s). Charging only those (evaluate.py, patch kept out of the code): row 96 rank 18 -> 3, but
rows 7 / 73 / 76 / 45 / 18 19 -> 25, 19 -> 22, 20 -> 40, 95 -> 183, 167 -> 339 (their best layouts interleave
deeper); calibration rows median rank 11 -> 13, top 10 48 -> 43, within the band 68% -> 63%; newer releases 4.6% ->
4.4% (26.02 GB300 table 4.3% -> 4.5%); planner_calibration in-sample 3.7% -> 3.7%, held-out GB300 6.3% -> 6.1%,
leave-one-release-out 26.02 5.2% -> 5.7%, 25.11 6.6% -> 7.0%, overlap_efficiency still at its 0.3 bound (as
fix-BE found: the rows want more exposed time than the sources give). Not kept: held out worse.
"""

from __future__ import annotations

import sys

import numpy as np


def schedule_table(num_microbatches: int, vp: int, group: int) -> list[tuple[int, int]]:
    """(micro-batch, chunk) of each virtual micro-batch, megatron-core get_schedule_table."""
    table: list[tuple[int, int]] = []
    for low in range(0, num_microbatches, group):
        high = num_microbatches if low + group >= num_microbatches else low + group
        table += [(m, c) for c in range(vp) for m in range(low, high)]
    return table


def rank_order(pp: int, vp: int, num_microbatches: int, rank: int, group: int) -> list[tuple[str, int]]:
    """Rank `rank`'s ops in megatron-core's order: ("F"|"B", virtual micro-batch index)."""
    total = num_microbatches * vp
    warmup = pp - rank - 1 if vp == 1 else (pp - rank - 1) * 2 + (vp - 1) * group
    warmup = min(warmup, total)
    ops = [("F", k) for k in range(warmup)]
    for k in range(total - warmup):
        ops += [("F", warmup + k), ("B", k)]
    return ops + [("B", k) for k in range(total - warmup, total)]


def replay_s(fwd_s: np.ndarray, num_microbatches: int, *, bwd_ratio: float = 2.0, p2p_s: float = 0.0,
             group: int | None = None) -> float:
    """Makespan of one step's pipelined part. `fwd_s[r, c]`: forward time of chunk c on pipeline rank r (backward
    bwd_ratio x it); `p2p_s`: one send/recv, on every edge between ranks."""
    pp, vp = fwd_s.shape
    group = group or pp
    table = schedule_table(num_microbatches, vp, group)
    orders = [rank_order(pp, vp, num_microbatches, r, group) for r in range(pp)]
    done: dict[tuple[int, str, int, int], float] = {}
    free, at = [0.0] * pp, [0] * pp
    moved = True
    while moved:
        moved = False
        for r in range(pp):
            while at[r] < len(orders[r]):
                kind, k = orders[r][at[r]]
                m, c = table[k]
                if kind == "B":
                    c = vp - 1 - c
                    dep = (r + 1, "B", m, c) if r < pp - 1 else (0, "B", m, c + 1) if c < vp - 1 else (r, "F", m, c)
                    cost = bwd_ratio * fwd_s[r, c]
                else:
                    dep = (r - 1, "F", m, c) if r > 0 else (pp - 1, "F", m, c - 1) if c > 0 else None
                    cost = fwd_s[r, c]
                if dep is not None and dep not in done:
                    break
                ready = 0.0 if dep is None else done[dep] + (p2p_s if dep[0] != r else 0.0)
                free[r] = max(free[r], ready) + cost
                done[(r, kind, m, c)] = free[r]
                at[r] += 1
                moved = True
    if any(at[r] < len(orders[r]) for r in range(pp)):
        raise AssertionError("replay stalled: the order has a cycle")
    return max(free)


def chunk_costs(model, pp: int, vp: int, vocab: float) -> np.ndarray:
    """[rank, chunk] costs of best_split's virtual stages (mean-decoder-layer units), what the step model charges."""
    from commbench.planner.layout.split import best_split, stage_weights
    costs = stage_weights(model, vocab).stage_costs(best_split(model, pp, vp, vocab).stages)
    return np.array([[costs[c * pp + r] for c in range(vp)] for r in range(pp)])


def compare(model, bd, k: int, layout, vocab: float) -> dict[str, float]:
    """Model vs replay for row `k` of breakdown `bd` (seconds per step)."""
    pp, vp, n_mb = layout.pp, layout.vp, int(bd.num_microbatches[k])
    t_mb = float(bd.bubble_s[k]) * vp / (pp - 1)
    p2p_exposed_mb = float(bd.pp_exposed_s[k]) / n_mb
    one_p2p = float(bd.pp_total_s[k]) / (n_mb * 2 * vp)
    t = t_mb - p2p_exposed_mb
    costs = chunk_costs(model, pp, vp, vocab)
    fwd = costs / costs.sum(axis=1).max() * t / 3.0
    bare = replay_s(fwd, n_mb)
    return dict(model=n_mb * t + (pp - 1) / vp * t, replay=bare,
                model_p2p=n_mb * p2p_exposed_mb + (pp - 1) / vp * p2p_exposed_mb,
                replay_p2p=replay_s(fwd, n_mb, p2p_s=one_p2p) - bare)


def main(argv: list[str]) -> int:
    from cli_args import parser_for
    parser = parser_for(__doc__)
    parser.add_argument("--rows", default="0,1,7,73", help="calibration rows (benchmarks/vendor_layouts.py numbers)")
    parser.add_argument("--top", type=int, default=5, help="the search's best layouts shown per row")
    args = parser.parse_args(argv)
    if args.top < 0:
        parser.error(f"--top {args.top}: allowed: 0 or more")
    try:
        rows = [int(x) for x in args.rows.split(",")]
    except ValueError:
        parser.error(f"--rows {args.rows!r}: comma-separated row numbers")
    from commbench.planner.calibrate.published import (_preset, predict_runs, published_runs, run_megatron_core,
                                                       step_framework)
    from commbench.planner.layout.recipes import releases
    from commbench.planner.layout.spec import LayoutArrays
    from commbench.planner.models.counts import step_vocab
    from commbench.planner.search.space import SearchRequest, search
    from commbench.planner.step.evaluate import evaluate_layouts
    from commbench.planner.step.loss_memory import run_loss
    runs = {run.index: run for run in predict_runs(published_runs()).runs}   # vendor_layouts.py's row numbers
    for i in rows:
        if i not in runs:
            parser.error(f"--rows {i}: not a modelled calibration row (0 to {max(runs)})")
        run = runs[i]
        fabric, framework = _preset(run.preset, int(run.row["num_gpus"])), step_framework(run.row)
        release = str(run.row.get("release") or "")
        res = search(SearchRequest(model=run.model, fabric=fabric, num_gpus=int(run.row["num_gpus"]),
                                   gbs=run.layout.gbs, precision=run.layout.precision, seq_len=int(run.row["seq_len"]),
                                   software=release if release in releases() else None, target="published"))
        published = evaluate_layouts(run.model, fabric, LayoutArrays.from_layouts([run.layout]),
                                     seq_len=int(run.row["seq_len"]), framework=framework,
                                     megatron_core=run_megatron_core(run.row), loss=run_loss(framework))
        print(f"row {i}: {run.row.get('model')} {run.row['num_gpus']}x {run.preset} {run.layout.precision} {release}"
              f" (PREDICTED seconds per step)")
        print(f"  {'layout':34s} {'model':>8s} {'replay':>8s} {'ratio':>7s} {'p2p model':>10s} {'p2p replay':>10s}")
        shown = [("published", published, 0, run.layout)] + [
            (f"#{k + 1}", res.breakdown, k, res.layouts.layout(k)) for k in range(min(args.top, len(res.layouts)))]
        for name, bd, k, lay in shown:
            if lay.pp == 1:
                continue
            vocab = float(step_vocab(run.model, np.array([lay.tp]), framework)[0])
            got = compare(run.model, bd, k, lay, vocab)
            label = f"{name} tp{lay.tp} pp{lay.pp} vp{lay.vp} ep{lay.ep} cp{lay.cp} mbs{lay.mbs}"
            print(f"  {label:34s} {got['model']:8.3f} {got['replay']:8.3f} {got['replay'] / got['model']:7.4f} "
                  f"{got['model_p2p']:10.3f} {got['replay_p2p']:10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
