"""MoE dispatch through commbench vs a bare all_to_all_single with the identical split sizes, same run.

For each point, one `measure_point` makes the record (size, imbalance; data checked; "record µs" is its
dispatch median), then paired samples alternate between (a) one iteration of the harness's timed loop
(`time_stages`: each stage behind a world barrier) on the prepared, filled moe_all_to_all point (count
exchange, dispatch, combine; we read the dispatch stage) and (b) one iteration of
`dist.all_to_all_single(out, inp, out_splits, in_splits)` on tensors of the same dtype and split sizes
(recomputed here from the same routing), each call timed by the host clock; the bare loop also runs the
untimed count exchange before and the combine after each dispatch, so both dispatches start from the
same state (ranks lined up by the count exchange) and only the timing machinery differs. Both sides take, per
iteration, the slowest rank's time (MAX over ranks) and then the median over iterations, as the harness
does. "ratio" = median harness / median bare; "paired" = median of the per-pair ratios. Goal: within 5%
(0.95..1.05) for "ratio". Adjacent pairs cancel most of a shared machine's drift; "A/A" is the same
comparison between two bare loops (ratio of medians), the noise floor of this machine.

    python benchmarks/moe_dispatch_overhead.py [--ranks 2] [--samples 200]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time

# (label, MoE params, tokens per rank); hidden 1024 keeps a gloo-on-CPU run to a minute or two
POINTS = [
    ("uniform per-expert bf16", {"routing": "uniform", "dispatch_mode": "per-expert", "dispatch_dtype": "bf16"}, 512),
    ("uniform per-expert bf16", {"routing": "uniform", "dispatch_mode": "per-expert", "dispatch_dtype": "bf16"}, 2048),
    ("zipf:1.2 per-rank fp8", {"routing": "zipf:1.2", "dispatch_mode": "per-rank", "dispatch_dtype": "fp8"}, 2048),
    ("group-limited per-rank fp8", {"routing": "group-limited:8:4", "dispatch_mode": "per-rank", "dispatch_dtype": "fp8"}, 2048),
]
SHAPE = {"hidden": 1024, "num_experts": 64, "top_k": 8, "combine_dtype": "bf16", "seed": 0}


def bare_layer(backend, spec):
    """(count exchange, dispatch, combine) closures calling torch.distributed directly, on fresh tensors
    with the point's split sizes; only the dispatch is timed, but its neighbours run as in the layer
    (the count exchange lines the ranks up before the dispatch, in both loops)."""
    import torch
    import torch.distributed as dist

    from collectives.moe_all_to_all import wire_format
    from commbench.moe.accounting import split_rows
    from commbench.moe.params import MoeParams
    from commbench.moe.routing import parse_routing, route

    p = MoeParams(**{k: v for k, v in spec.params.items() if k in MoeParams.__dataclass_fields__})
    n, rank = backend.world_size, backend.rank
    ids = route(parse_routing(p.routing), num_ranks=n, tokens_per_rank=p.tokens_per_rank,
                num_experts=p.num_experts, top_k=p.top_k, seed=p.seed)
    rows = split_rows(ids, p.num_experts, p.dispatch_mode)
    d_dtype, d_width = wire_format(p.dispatch_dtype, p.hidden)
    c_dtype, c_width = wire_format(p.combine_dtype, p.hidden)
    d_in_splits, d_out_splits = [int(v) * d_width for v in rows[rank]], [int(v) * d_width for v in rows[:, rank]]
    c_in_splits, c_out_splits = [int(v) * c_width for v in rows[:, rank]], [int(v) * c_width for v in rows[rank]]
    d_in, d_out = backend.empty(sum(d_in_splits), d_dtype), backend.empty(sum(d_out_splits), d_dtype)
    c_in, c_out = backend.empty(sum(c_in_splits), c_dtype), backend.empty(sum(c_out_splits), c_dtype)
    counts_in = torch.zeros(n * (1 + p.num_experts // n), dtype=torch.int64)
    counts_out = torch.empty_like(counts_in)
    for buf in (d_in, c_in):
        buf.fill_(1)
    return (lambda: dist.all_to_all_single(counts_out, counts_in),
            lambda: dist.all_to_all_single(d_out, d_in, d_out_splits, d_in_splits),
            lambda: dist.all_to_all_single(c_out, c_in, c_out_splits, c_in_splits))


def bare_once_us(layer) -> float:
    """One layer iteration with the dispatch timed by the host clock; the slowest rank's time."""
    import torch
    import torch.distributed as dist

    count_exchange, dispatch, combine = layer
    dist.barrier()  # as the harness's loop starts
    count_exchange()
    start = time.perf_counter()
    dispatch()
    elapsed = torch.tensor([(time.perf_counter() - start) * 1e6], dtype=torch.float64)
    combine()
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed[0])


def rank_main(rank: int, world: int, port: int, args, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    from collectives import REGISTRY
    from commbench.comm.torch_backend import TorchBackend
    from commbench.measure.harness import LoopOptions, check_point, measure_point, ready_stages, run_once, time_stages

    backend = TorchBackend("gloo", rank=rank, world_size=world, local_rank=rank, timeout_s=300)
    moe = REGISTRY["moe_all_to_all"]
    rows = []
    for label, params, tokens in POINTS:
        spec, _ = moe.plan_specs({**SHAPE, **params, "tokens_per_rank": [tokens]}, world)[0]
        # the record of the point, as `commbench bench` measures it (prepare, fill + check, time)
        record = measure_point(backend, backend.world, moe, spec, LoopOptions(iters=args.samples // 10, warmup_iters=3),
                               run_id="bench")
        assert record.num_wrong == 0
        # then paired samples on one prepared, filled point (never-written pages would read as the zero
        # page and flatter one side): one harness iteration, one bare iteration, alternating which goes first
        prepared = moe.prepare(backend.world, backend, spec)
        assert check_point(backend, prepared) == 0
        dispatch_column = [name for name, _ in prepared.stages].index("dispatch")
        layer = bare_layer(backend, spec)
        stages = ready_stages(backend, prepared, warmup_iters=0)
        for _ in range(3):
            run_once(prepared), bare_once_us(layer)
        ours, theirs = [], []
        for index in range(args.samples):
            def harness_once() -> float:
                return float(time_stages(backend, stages, 1)[0, dispatch_column])

            if index % 2:
                theirs.append(bare_once_us(layer))
                ours.append(harness_once())
            else:
                ours.append(harness_once())
                theirs.append(bare_once_us(layer))
        paired = statistics.median(a / b for a, b in zip(ours, theirs))
        # control (A/A): a second bare layer on its own tensors against the first, paired the same way;
        # how far its ratio strays from 1 is this machine's noise floor for the comparison above
        other = bare_layer(backend, spec)
        control_a, control_b = [], []
        for index in range(args.samples if args.control else 0):
            first, second = (layer, other) if index % 2 else (other, layer)
            a, b = bare_once_us(first), bare_once_us(second)
            control_a.append(a if first is other else b)
            control_b.append(b if first is other else a)
        control = statistics.median(control_a) / statistics.median(control_b) if control_a else float("nan")
        rows.append((label, tokens, record.size_bytes, record.metrics["imbalance_rank"],
                     record.stages_us_median["dispatch"], statistics.median(ours), statistics.median(theirs), paired,
                     control))
    backend.shutdown()
    if rank == 0:
        queue.put(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--samples", type=int, default=200, help="paired iterations per point")
    parser.add_argument("--no-control", dest="control", action="store_false", help="skip the bare-vs-bare control")
    args = parser.parse_args()
    from commbench.comm.job import free_port

    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(r, args.ranks, port, args, queue)) for r in range(args.ranks)]
    for proc in procs:
        proc.start()
    rows = queue.get(timeout=1800)
    for proc in procs:
        proc.join()
    print(f"moe_all_to_all dispatch vs bare all_to_all_single (same splits, same run), gloo, {args.ranks} ranks, "
          f"hidden {SHAPE['hidden']}, {SHAPE['num_experts']} experts, top-{SHAPE['top_k']}; {args.samples} paired "
          f"iterations per point (measured; slowest rank per iteration, medians)")
    print(f"{'point':<27} {'tok/rank':>8} {'size (B)':>9} {'imb.rank':>8} {'record µs':>9} {'harness µs':>10} "
          f"{'bare µs':>9} {'ratio':>6} {'paired':>6} {'A/A':>6}  goal 0.95..1.05")
    for label, tokens, size, imb, record_us, ours_us, bare_us, paired, control in rows:
        ratio = ours_us / bare_us
        verdict = "ok" if 0.95 <= ratio <= 1.05 else "MISSED"
        print(f"{label:<27} {tokens:>8} {size:>9} {imb:>8.3f} {record_us:>9.1f} {ours_us:>10.1f} {bare_us:>9.1f} "
              f"{ratio:>6.3f} {paired:>6.3f} {control:>6.3f}  {verdict}")
    print(f"median over points of harness/bare (ratio of medians): {statistics.median(r[5] / r[6] for r in rows):.4f}")


if __name__ == "__main__":
    main()
