"""Harness overhead: commbench's timed loop vs a bare torch.distributed loop, same processes, same-size buffers.

For each size, rounds alternate between (a) `harness.time_iterations` on commbench's prepared
all_reduce point and (b) a bare `for _ in range(n): dist.all_reduce(t)` loop; each is timed by wall
clock around the whole loop (so everything the harness does per iteration counts). The printed
ratio is the median over rounds of harness / bare time per iteration. Goal (gloo, 2 ranks):
<= 1.05 at 8 B and <= 1.01 from 1 MiB.

    python benchmarks/harness_overhead.py [--ranks 2] [--rounds 7]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time

SIZES_BYTES = [8, 1024, 64 * 1024, 1 << 20, 16 << 20]


def iters_for(size_bytes: int) -> int:
    return max(50, min(2000, int(2e8 // max(size_bytes, 1) // 10)))


def rank_main(rank: int, world: int, port: int, rounds: int, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch.distributed as dist

    from collectives import PreparedPoint
    from commbench.comm.torch_backend import TorchBackend
    from commbench.dtypes import get_dtype
    from commbench.measure.harness import time_iterations

    backend = TorchBackend("gloo", rank=rank, world_size=world, local_rank=rank, timeout_s=120)
    ratios = {}
    for size in SIZES_BYTES:
        dtype = get_dtype("float32")
        buf = backend.empty(size // dtype.itemsize, dtype)
        # The same point commbench's all_reduce workload builds, around a buffer both loops share.
        prepared = PreparedPoint(size_bytes=size, count=buf.numel(), busbw_factor=1.0,
                                 stages=[("all_reduce", lambda: backend.world.all_reduce(buf, "sum"))],
                                 fill=lambda: None, check=lambda: 0)
        iters = iters_for(size)

        def harness_loop() -> float:
            buf.fill_(1.0)
            dist.barrier()
            start = time.perf_counter()
            time_iterations(backend, prepared, iters, warmup_iters=0)
            return time.perf_counter() - start

        def bare_loop() -> float:
            buf.fill_(1.0)
            dist.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(buf)
            return time.perf_counter() - start

        harness_times, bare_times, control_ratios = [], [], []
        for index in range(rounds):
            if index % 2:
                bare_s, harness_s = bare_loop(), harness_loop()
            else:
                harness_s, bare_s = harness_loop(), bare_loop()
            harness_times.append(harness_s)
            bare_times.append(bare_s)
            control_ratios.append(bare_loop() / bare_s)  # A/A: the same bare loop again (noise floor)
        ratios[size] = (statistics.median(h / b for h, b in zip(harness_times, bare_times)),
                        min(harness_times) / min(bare_times), statistics.median(control_ratios), iters)
    backend.shutdown()
    if rank == 0:
        queue.put(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    from commbench.comm.job import free_port

    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(r, args.ranks, port, args.rounds, queue)) for r in range(args.ranks)]
    for proc in procs:
        proc.start()
    ratios = queue.get(timeout=1200)
    for proc in procs:
        proc.join()
    print(f"harness overhead, gloo all_reduce float32, {args.ranks} ranks, median of {args.rounds} alternating rounds")
    print("harness/bare: median over rounds of the per-round ratio; best/best: fastest harness round over")
    print("fastest bare round; bare/bare: the same bare loop run twice (the machine's noise floor)")
    print(f"{'size (B)':>10} {'iters':>6} {'harness/bare':>13} {'best/best':>10} {'bare/bare':>10}  goal")
    for size, (ratio, best_ratio, control, iters) in ratios.items():
        goal = 1.05 if size < (1 << 20) else 1.01
        verdict = "ok" if ratio <= goal else "MISSED"
        print(f"{size:>10} {iters:>6} {ratio:>13.4f} {best_ratio:>10.4f} {control:>10.4f}  <= {goal:.2f} {verdict}")


if __name__ == "__main__":
    main()
