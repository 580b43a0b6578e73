"""Harness overhead: commbench's timed loop vs a bare torch.distributed loop, same processes, same buffer.

For each size, many short rounds interleave (a) `harness.time_loop` on the prepared all_reduce point
(wall clock around the whole call: marks, loop clock, the reductions after it) and (b) a bare
`for _ in range(n): dist.all_reduce(t)` loop, the order alternating by round; a third loop, the bare
loop again, gives an A/A ratio (bare / bare) per round: what this host's noise alone does to a ratio.
Printed per size: the median over rounds of harness / bare with its 95% distribution-free interval
(order statistics, as `commbench compare`), and the A/A median and interval beside it. Goal (gloo,
2 ranks): <= 1.05 at 8 B and <= 1.01 from 1 MiB. Verdict: `within goal` when the interval's upper
end is under the goal, `missed` when its lower end is above it, else `unresolvable on this host`
(the interval straddles the goal: the A/A interval shows how wide noise alone makes it).

    python benchmarks/harness_overhead.py [--ranks 2] [--rounds 41] [--round-ms 50]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time

import numpy as np

SIZES_BYTES = [8, 1024, 64 * 1024, 1 << 20, 16 << 20]


def rank_main(rank: int, world: int, port: int, rounds: int, round_ms: float, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch.distributed as dist

    from collectives import PreparedPoint
    from commbench.comm.torch_backend import TorchBackend
    from commbench.dtypes import get_dtype
    from commbench.measure.harness import ready_stages, time_loop

    backend = TorchBackend("gloo", rank=rank, world_size=world, local_rank=rank, timeout_s=300)
    out = {}
    for size in SIZES_BYTES:
        dtype = get_dtype("float32")
        buf = backend.empty(max(1, size // dtype.itemsize), dtype)
        buf.fill_(1.0)
        prepared = PreparedPoint(size_bytes=size, count=buf.numel(), busbw_factor=1.0,
                                 stages=[("all_reduce", lambda: backend.world.all_reduce(buf, "sum"))],
                                 fill=lambda *_: None, check=lambda *_: 0)
        stages = ready_stages(backend, prepared, warmup_iters=3)
        # iterations per round: about round_ms of bare loop, agreed by all ranks (rank 0's estimate)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(5):
            dist.all_reduce(buf)
        per_iter = np.array([(time.perf_counter() - start) / 5])
        estimate = backend.upload(per_iter, get_dtype("float64"))
        dist.broadcast(estimate, 0)
        iters = int(max(10, min(5000, round_ms * 1e-3 / max(float(estimate[0]), 1e-7))))

        def harness() -> float:
            dist.barrier()
            start = time.perf_counter()
            time_loop(backend, stages, iters)
            return time.perf_counter() - start

        def bare() -> float:
            dist.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(buf)
            return time.perf_counter() - start

        ratios, controls = [], []
        for index in range(rounds):
            if index % 2:
                bare_s, harness_s, again_s = bare(), harness(), bare()
            else:
                harness_s, bare_s, again_s = harness(), bare(), bare()
            ratios.append(harness_s / bare_s)
            controls.append(again_s / bare_s)
        out[size] = (np.array(ratios), np.array(controls), iters)
    backend.shutdown()
    if rank == 0:
        queue.put(out)


def verdict(low: float, high: float, goal: float) -> str:
    if high <= goal:
        return "within goal"
    if low > goal:
        return "missed"
    return "unresolvable on this host"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--round-ms", type=float, default=50.0, help="bare-loop time per round (ms)")
    args = parser.parse_args()
    from commbench.comm.job import free_port
    from commbench.results.compare import median_interval

    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(r, args.ranks, port, args.rounds, args.round_ms, queue))
             for r in range(args.ranks)]
    for proc in procs:
        proc.start()
    results = queue.get(timeout=3600)
    for proc in procs:
        proc.join()
    print(f"harness overhead, gloo all_reduce float32, {args.ranks} ranks, {args.rounds} interleaved rounds of "
          f"~{args.round_ms:g} ms; ratios are medians over rounds with their 95% interval")
    print(f"{'size (B)':>10} {'iters':>6} {'harness/bare':>13} {'95% interval':>16} {'A/A bare/bare':>14} "
          f"{'A/A interval':>16}  goal")
    for size, (ratios, controls, iters) in results.items():
        goal = 1.05 if size < (1 << 20) else 1.01
        low, high = median_interval(ratios)
        a_low, a_high = median_interval(controls)
        print(f"{size:>10} {iters:>6} {np.median(ratios):>13.4f} {f'{low:.4f}..{high:.4f}':>16} "
              f"{np.median(controls):>14.4f} {f'{a_low:.4f}..{a_high:.4f}':>16}  <= {goal:.2f} "
              f"{verdict(low, high, goal)}")


if __name__ == "__main__":
    main()
